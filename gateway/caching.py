"""A bounded in-process cache for values derived from upstream answers: the least recently used
entries go past `max_entries` or `max_bytes` (each entry's size as its owner estimates it), and
an entry older than `ttl` seconds is never returned (0: no expiry of its own, for values that
cannot go stale, such as those keyed by a content hash).

One event loop owns a cache (no locks): callers on the loop only."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    __slots__ = ("_bytes", "_entries", "max_bytes", "max_entries", "ttl")

    def __init__(self, max_entries: int, max_bytes: int, ttl: float = 0.0) -> None:
        self.max_entries, self.max_bytes, self.ttl = max_entries, max_bytes, ttl
        self._entries: OrderedDict[K, tuple[float, int, V]] = OrderedDict()
        self._bytes = 0

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if self.ttl and time.monotonic() - entry[0] >= self.ttl:
            self._drop(key)
            return None
        self._entries.move_to_end(key)
        return entry[2]

    def put(self, key: K, value: V, size: int) -> None:
        """Keep `value` (about `size` bytes, key included); one larger than an eighth of
        `max_bytes` is not kept, so no single answer empties the cache."""
        if size > self.max_bytes // 8 or self.max_entries <= 0:
            return
        if key in self._entries:
            self._drop(key)
        self._entries[key] = (time.monotonic(), size, value)
        self._bytes += size
        while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
            _, (_, dropped, _) = self._entries.popitem(last=False)
            self._bytes -= dropped

    def _drop(self, key: K) -> None:
        _, size, _ = self._entries.pop(key)
        self._bytes -= size

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes(self) -> int:
        return self._bytes
