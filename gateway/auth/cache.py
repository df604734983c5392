"""A small bounded cache with per-entry expiry, keyed by a digest of the credential."""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from typing import Generic, TypeVar

V = TypeVar("V")


def digest(token: str) -> bytes:
    """What stands for a credential wherever one is remembered: its SHA-256, never itself."""
    return hashlib.sha256(token.encode()).digest()


class TtlCache(Generic[V]):
    """Least-recently-used eviction at `size`; a token is never kept as a key, only its hash."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[bytes, tuple[float, V]] = OrderedDict()

    def get(self, token: str) -> tuple[bool, V | None]:
        key = digest(token)
        entry = self._entries.get(key)
        if entry is None:
            return False, None
        expires_at, value = entry
        if time.monotonic() >= expires_at:
            del self._entries[key]
            return False, None
        self._entries.move_to_end(key)
        return True, value

    def put(self, token: str, value: V, ttl: float) -> None:
        if self._size == 0 or ttl <= 0:
            return
        key = digest(token)
        self._entries[key] = (time.monotonic() + ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)
