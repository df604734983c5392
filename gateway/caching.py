"""A bounded in-process cache: the least recently used entries go past `max_entries` or
`max_bytes` (each entry's size as its owner estimates it; None: entries alone bound it, for
small values of one kind), and an entry older than `ttl` seconds is never returned (0: no expiry
of its own, for values that cannot go stale, such as those keyed by a content hash). Dropping
the least recently used keeps one caller who varies what it asks from emptying the entries of
everyone else, as a cache cleared when full would.

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

    def __init__(self, max_entries: int, max_bytes: int | None = None, ttl: float = 0.0) -> None:
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

    def put(self, key: K, value: V, size: int = 0) -> None:
        """Keep `value` (about `size` bytes, key included); one larger than an eighth of
        `max_bytes` is not kept, so no single answer empties the cache."""
        limit = self.max_bytes
        if (limit is not None and size > limit // 8) or self.max_entries <= 0:
            return
        if key in self._entries:
            self._drop(key)
        self._entries[key] = (time.monotonic(), size, value)
        self._bytes += size
        while len(self._entries) > self.max_entries or (limit is not None
                                                        and self._bytes > limit):
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
