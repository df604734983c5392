"""Single-use keys with a time to live, in memory for one process or in Redis across replicas:
signing nonces per key, and (ledger.py) the request ids issued and the event ids stored.

Each entry is a (space, name) pair holding a small value; `add` writes it only when absent, so
the first writer wins. A nonce must be remembered for as long as a request carrying it could
still pass the timestamp check, which is until its timestamp plus the window; the caller passes
that remaining time. Stores fail closed: one that cannot answer raises `NonceStoreUnavailable`
rather than letting a possible replay through. The memory store is bounded: when full it either
refuses (nonces: a replay must never pass) or drops the entry closest to expiry (`evict`).
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from typing import Any, Protocol

from gateway import redis_url
from gateway.surfaces.aip.signing_config import Signing


class NonceStoreUnavailable(Exception):
    """The store could not record the nonce; the request must be refused (503)."""


class NonceStore(Protocol):
    async def add(self, key_id: str, nonce: str, ttl: float, value: bytes = b"1") -> bool:
        """Record the pair for `ttl` seconds; False when it is already there (a replay)."""
        ...

    async def get(self, key_id: str, nonce: str) -> bytes | None:
        """The pair's value while it lives, else None."""
        ...

    async def discard(self, key_id: str, nonce: str) -> None: ...

    async def aclose(self) -> None: ...


Pair = tuple[str, str]


class MemoryNonceStore:
    """A dict of pair -> (expiry, value), with a heap of expiries to drop pairs oldest first."""

    def __init__(self, max_entries: int, clock: Callable[[], float] = time.monotonic,
                 evict: bool = False) -> None:
        self._max = max_entries
        self._clock = clock
        self._evict = evict
        self._entries: dict[Pair, tuple[float, bytes]] = {}
        self._heap: list[tuple[float, Pair]] = []

    async def add(self, key_id: str, nonce: str, ttl: float, value: bytes = b"1") -> bool:
        now = self._clock()
        self._purge(lambda expiry: expiry <= now)
        pair = (key_id, nonce)
        if pair in self._entries:
            return False
        if len(self._entries) >= self._max:
            if not self._evict:
                raise NonceStoreUnavailable("memory nonce store is full")
            self._purge(lambda expiry: len(self._entries) >= self._max)
        expiry = now + max(ttl, 0.0)
        self._entries[pair] = (expiry, value)
        heapq.heappush(self._heap, (expiry, pair))
        if len(self._heap) > 2 * self._max:  # discarded pairs left behind: rebuild
            self._heap = [(expiry, pair) for pair, (expiry, _) in self._entries.items()]
            heapq.heapify(self._heap)
        return True

    async def get(self, key_id: str, nonce: str) -> bytes | None:
        expiry, value = self._entries.get((key_id, nonce), (0.0, None))
        return value if expiry > self._clock() else None

    async def discard(self, key_id: str, nonce: str) -> None:
        self._entries.pop((key_id, nonce), None)

    def __len__(self) -> int:
        return len(self._entries)

    def _purge(self, drop: Callable[[float], bool]) -> None:
        """Pop heap entries while `drop(their expiry)` holds; a heap entry outlived by a newer
        write of its pair (after a discard) leaves that write alone."""
        while self._heap and drop(self._heap[0][0]):
            expiry, pair = heapq.heappop(self._heap)
            if self._entries.get(pair, (None,))[0] == expiry:
                del self._entries[pair]

    async def aclose(self) -> None:
        self._entries.clear()
        self._heap.clear()


class RedisNonceStore:
    """One `SET key value NX PX ttl` per pair: the first replica to write it wins."""

    def __init__(self, url: str, key_prefix: str, timeout: float) -> None:
        self._client = redis_url.connect(url, timeout)
        self._prefix = key_prefix

    async def add(self, key_id: str, nonce: str, ttl: float, value: bytes = b"1") -> bool:
        # A single-key command, so Redis Cluster needs no hash tag here.
        created = await self._call(self._client.set(
            self._key(key_id, nonce), value, nx=True, px=max(math.ceil(ttl * 1000), 1)))
        return bool(created)

    async def get(self, key_id: str, nonce: str) -> bytes | None:
        return await self._call(self._client.get(self._key(key_id, nonce)))

    async def discard(self, key_id: str, nonce: str) -> None:
        await self._call(self._client.delete(self._key(key_id, nonce)))

    def _key(self, key_id: str, nonce: str) -> str:
        return f"{self._prefix}:{key_id}:{nonce}"

    @staticmethod
    async def _call(command: Any) -> Any:
        import redis.exceptions

        try:
            return await command
        except (redis.exceptions.RedisError, OSError) as exc:
            raise NonceStoreUnavailable(type(exc).__name__) from exc

    async def aclose(self) -> None:
        await self._client.aclose()


def create_nonce_store(signing: Signing) -> NonceStore:
    return create_store(signing.nonce_store, signing.nonce_key_prefix,
                        signing.nonce_store_timeout, signing.max_memory_nonces)


def create_store(url: str, key_prefix: str, timeout: float, max_memory_entries: int,
                 evict: bool = False) -> NonceStore:
    if url.startswith("memory:"):
        return MemoryNonceStore(max_memory_entries, evict=evict)
    return RedisNonceStore(url, key_prefix, timeout)
