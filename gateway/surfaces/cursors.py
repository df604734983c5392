"""Opaque pagination cursors: encrypted, bound to the query they continue, and short-lived.

A cursor is base64url(nonce + AES-256-GCM(offset, expiry, query digest)). The offset is the
upstream position the next page starts from; it is encrypted because it counts records the
caller may not see, so a readable one would tell where hidden records rank. Every offset cursor
has the same length whatever it holds. A forged or altered cursor fails authentication, one
replayed against another query fails the digest, an old one the expiry. Keyset positions (any
JSON value, e.g. the last record's sort key) are sealed the same way, tagged apart.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import os
import struct
import time
from typing import Any

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import BaseModel

MAX_OFFSET = 100_000  # deeper than any caller pages; bounds what a forged cursor can ask for
_PAYLOAD = struct.Struct(">IQ16s")  # offset, expiry (unix seconds), query digest
_NONCE_BYTES = 12
_CONTEXT = b"aigw cursor v2"  # authenticated with every cursor; a new format changes it
_POSITION = b"J"  # leads a JSON position; an offset payload starts with a zero byte
_DERIVED: dict[int, tuple[BaseModel, bytes]] = {}  # section id -> (section, key)


class InvalidCursor(ValueError):
    pass


def derived_key(section: BaseModel, public_base_url: str | None) -> bytes:
    """A cursor key derived from configuration, for deployments without `cursor_secret`.

    Every worker and replica serving the same config derives the same key, so a cursor issued
    by one is honoured by the others and after a restart. It is not secret: whoever reads the
    config can derive it, and so read and forge cursors (`aigw validate` warns). Set
    `cursor_secret` to keep cursors unreadable and unforgeable.
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


def seal(key: bytes, plaintext: bytes) -> str:
    """`plaintext` encrypted and authenticated under (a key derived from) `key`."""
    nonce = os.urandom(_NONCE_BYTES)
    return _b64(nonce + _aead(key).encrypt(nonce, plaintext, _CONTEXT))


def unseal(key: bytes, token: str) -> bytes:
    """What `seal` sealed; `InvalidCursor` for anything else."""
    try:
        raw = base64.urlsafe_b64decode(token.encode("ascii") + b"=" * (-len(token) % 4))
        return _aead(key).decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], _CONTEXT)
    except (ValueError, binascii.Error, InvalidTag, UnicodeEncodeError):
        raise InvalidCursor("The cursor is not valid.") from None


class CursorSigner:
    def __init__(self, key: bytes, ttl: int) -> None:
        self._key = key
        self._ttl = ttl

    def issue(self, query: Any, offset: int) -> str | None:
        """A cursor continuing at `offset`, or None past MAX_OFFSET (paging ends there)."""
        if not 0 <= offset <= MAX_OFFSET:
            return None
        expiry = int(time.time()) + self._ttl
        return seal(self._key, _PAYLOAD.pack(offset, expiry, query_digest(query)))

    def offset(self, cursor: str, query: Any) -> int:
        """The offset a cursor continues from; `InvalidCursor` unless it is ours and fits."""
        payload = unseal(self._key, cursor)
        if len(payload) != _PAYLOAD.size:  # whoever knows the key can seal anything at all
            raise InvalidCursor("The cursor is not valid.")
        offset, expiry, digest = _PAYLOAD.unpack(payload)
        if offset > MAX_OFFSET:
            raise InvalidCursor("The cursor is not valid.")
        if not hmac.compare_digest(digest, query_digest(query)):
            raise InvalidCursor("The cursor belongs to another query.")
        if expiry < time.time():
            raise InvalidCursor("The cursor has expired.")
        return offset


    def issue_position(self, query: Any, position: Any) -> str:
        """A cursor continuing `query` after `position`, any JSON value (a keyset position)."""
        payload = {"p": position, "q": query_digest(query).hex(),
                   "e": int(time.time()) + self._ttl}
        return seal(self._key, _POSITION + orjson.dumps(payload))

    def position(self, cursor: str, query: Any) -> Any:
        """What a cursor continues from: an offset (int) or a keyset position, as issued."""
        payload = unseal(self._key, cursor)
        if not payload.startswith(_POSITION):
            return self.offset(cursor, query)
        try:
            found = orjson.loads(payload[1:])
            digest, expiry, position = bytes.fromhex(found["q"]), int(found["e"]), found["p"]
        except (ValueError, TypeError, KeyError, orjson.JSONDecodeError):
            raise InvalidCursor("The cursor is not valid.") from None
        if not hmac.compare_digest(digest, query_digest(query)):
            raise InvalidCursor("The cursor belongs to another query.")
        if expiry < time.time():
            raise InvalidCursor("The cursor has expired.")
        return position


def query_digest(query: Any) -> bytes:
    return hashlib.sha256(orjson.dumps(query, option=orjson.OPT_SORT_KEYS)).digest()[:16]


@functools.lru_cache(maxsize=32)
def _aead(key: bytes) -> AESGCM:
    """The cipher of a cursor key (its derivation and key schedule cost more than a seal):
    one per config generation's key, kept while it is in use."""
    return AESGCM(_aead_key(key))


def _aead_key(key: bytes) -> bytes:
    return hmac.new(key, b"aigw cursor encryption", hashlib.sha256).digest()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
