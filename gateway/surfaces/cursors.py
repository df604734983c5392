"""Opaque pagination cursors: signed, bound to the query they continue, and short-lived.

A cursor is base64url(JSON {offset, query digest, expiry}) + "." + HMAC-SHA256 over it. A
forged or altered cursor fails the signature; one replayed against another query fails the
digest; an old one fails the expiry.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from typing import Any

import orjson
from pydantic import BaseModel

MAX_OFFSET = 100_000  # deeper than any caller pages; bounds what a forged cursor can ask for
_DERIVED: dict[int, tuple[BaseModel, bytes]] = {}  # section id -> (section, key)


class InvalidCursor(ValueError):
    pass


def derived_key(section: BaseModel, public_base_url: str | None) -> bytes:
    """A cursor key derived from configuration, for deployments without `cursor_secret`.

    Every worker and replica serving the same config derives the same key, so a cursor issued
    by one is honoured by the others and after a restart. It is not secret (whoever reads the
    config can derive it): a forged cursor can only name an offset, which paging reaches anyway,
    and the query digest still binds it. Set `cursor_secret` to keep cursors unforgeable.
    """
    cached = _DERIVED.get(id(section))
    if cached is not None and cached[0] is section:
        return cached[1]
    material = section.model_dump_json(exclude={"cursor_secret"}) + (public_base_url or "")
    key = hmac.new(b"aigw cursor key v1", material.encode(), hashlib.sha256).digest()
    if len(_DERIVED) > 16:  # one entry per config generation still referenced
        _DERIVED.clear()
    _DERIVED[id(section)] = (section, key)
    return key


class CursorSigner:
    def __init__(self, key: bytes, ttl: int) -> None:
        self._key = key
        self._ttl = ttl

    def issue(self, query: Any, offset: int) -> str:
        payload = {"o": offset, "q": query_digest(query), "e": int(time.time()) + self._ttl}
        body = _b64(orjson.dumps(payload))
        return f"{body}.{self._sign(body)}"

    def offset(self, cursor: str, query: Any) -> int:
        """The offset a cursor continues from; `InvalidCursor` unless it is ours and fits."""
        body, _, signature = cursor.partition(".")
        if not body or not hmac.compare_digest(signature.encode(), self._sign(body).encode()):
            raise InvalidCursor("The cursor is not valid.")
        try:
            payload = orjson.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        except (ValueError, orjson.JSONDecodeError):
            raise InvalidCursor("The cursor is not valid.") from None
        offset, digest, expiry = _fields(payload)
        if digest != query_digest(query):
            raise InvalidCursor("The cursor belongs to another query.")
        if expiry < time.time():
            raise InvalidCursor("The cursor has expired.")
        return offset

    def _sign(self, body: str) -> str:
        return _b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())


def _fields(payload: Any) -> tuple[int, str, int]:
    """(offset, query digest, expiry) of a payload of the shape `issue` writes, or refused:
    whoever knows the key (the derived one, say) can sign any JSON at all."""
    if not isinstance(payload, dict):
        raise InvalidCursor("The cursor is not valid.")
    offset, digest, expiry = payload.get("o"), payload.get("q"), payload.get("e")
    if type(offset) is not int or not 0 <= offset <= MAX_OFFSET \
            or type(expiry) is not int or not isinstance(digest, str):
        raise InvalidCursor("The cursor is not valid.")
    return offset, digest, expiry


def query_digest(query: Any) -> str:
    return _b64(hashlib.sha256(orjson.dumps(query, option=orjson.OPT_SORT_KEYS)).digest()[:16])


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
