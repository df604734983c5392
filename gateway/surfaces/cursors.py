"""Opaque pagination cursors: signed, bound to the query they continue, and short-lived.

A cursor is base64url(JSON {offset, query digest, expiry}) + "." + HMAC-SHA256 over it. A
forged or altered cursor fails the signature; one replayed against another query fails the
digest; an old one fails the expiry.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import time
from typing import Any

import orjson

# One key per process when none is configured: cursors then survive reloads, not restarts.
_PROCESS_KEY = os.urandom(32)


class InvalidCursor(ValueError):
    pass


class CursorSigner:
    def __init__(self, secret: bytes | None, ttl: int) -> None:
        self._key = secret or _PROCESS_KEY
        self._ttl = ttl

    def issue(self, query: Any, offset: Any) -> str:
        """A cursor continuing `query` from `offset` (an int, or any JSON position)."""
        payload = {"o": offset, "q": query_digest(query), "e": int(time.time()) + self._ttl}
        body = _b64(orjson.dumps(payload))
        return f"{body}.{self._sign(body)}"

    def offset(self, cursor: str, query: Any) -> int:
        """The offset a cursor continues from; `InvalidCursor` unless it is ours and fits."""
        try:
            return int(self.position(cursor, query))
        except (TypeError, ValueError):
            raise InvalidCursor("The cursor is not valid.") from None

    def position(self, cursor: str, query: Any) -> Any:
        """The position a cursor continues from, as issued; `InvalidCursor` unless it fits."""
        body, _, signature = cursor.partition(".")
        if not body or not hmac.compare_digest(signature.encode(), self._sign(body).encode()):
            raise InvalidCursor("The cursor is not valid.")
        try:
            payload = orjson.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        except (ValueError, orjson.JSONDecodeError):
            raise InvalidCursor("The cursor is not valid.") from None
        if payload.get("q") != query_digest(query):
            raise InvalidCursor("The cursor belongs to another query.")
        if payload.get("e", 0) < time.time():
            raise InvalidCursor("The cursor has expired.")
        return payload.get("o")

    def _sign(self, body: str) -> str:
        return _b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())


def query_digest(query: Any) -> str:
    return _b64(hashlib.sha256(orjson.dumps(query, option=orjson.OPT_SORT_KEYS)).digest()[:16])


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
