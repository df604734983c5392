"""Single-use nonces per signing key: in memory for one process, in Redis across replicas.

A nonce must be remembered for as long as a request carrying it could still pass the timestamp
check, which is until its timestamp plus the window; the caller passes that remaining time.
Both stores fail closed: a store that cannot answer, or a memory store that is full, raises
`NonceStoreUnavailable` rather than letting a possible replay through.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from typing import Protocol

from gateway import redis_url
from gateway.surfaces.aip.signing_config import Signing


class NonceStoreUnavailable(Exception):
    """The store could not record the nonce; the request must be refused (503)."""


class NonceStore(Protocol):
    async def add(self, key_id: str, nonce: str, ttl: float) -> bool:
        """Record the pair for `ttl` seconds; False when it is already there (a replay)."""
        ...

    async def aclose(self) -> None: ...


class MemoryNonceStore:
    """A dict of (key id, nonce) -> expiry, with a heap to drop expired pairs oldest first."""

    def __init__(self, max_entries: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._max = max_entries
        self._clock = clock
        self._expiries: dict[tuple[str, str], float] = {}
        self._heap: list[tuple[float, tuple[str, str]]] = []

    async def add(self, key_id: str, nonce: str, ttl: float) -> bool:
        now = self._clock()
        self._purge(now)
        pair = (key_id, nonce)
        if pair in self._expiries:
            return False
        if len(self._expiries) >= self._max:
            raise NonceStoreUnavailable("memory nonce store is full")
        expiry = now + max(ttl, 0.0)
        self._expiries[pair] = expiry
        heapq.heappush(self._heap, (expiry, pair))
        return True

    def __len__(self) -> int:
        return len(self._expiries)

    def _purge(self, now: float) -> None:
        while self._heap and self._heap[0][0] <= now:
            _, pair = heapq.heappop(self._heap)
            self._expiries.pop(pair, None)

    async def aclose(self) -> None:
        self._expiries.clear()
        self._heap.clear()


class RedisNonceStore:
    """One `SET key 1 NX PX ttl` per request: the first replica to write a nonce wins."""

    def __init__(self, url: str, key_prefix: str, timeout: float) -> None:
        self._client = redis_url.connect(url, timeout)
        self._prefix = key_prefix

    async def add(self, key_id: str, nonce: str, ttl: float) -> bool:
        import redis.exceptions

        # A single-key command, so Redis Cluster needs no hash tag here.
        key = f"{self._prefix}:{key_id}:{nonce}"
        try:
            created = await self._client.set(key, b"1", nx=True, px=max(math.ceil(ttl * 1000), 1))
        except (redis.exceptions.RedisError, OSError) as exc:
            raise NonceStoreUnavailable(type(exc).__name__) from exc
        return bool(created)

    async def aclose(self) -> None:
        await self._client.aclose()


def create_nonce_store(signing: Signing) -> NonceStore:
    if signing.nonce_store.startswith("memory:"):
        return MemoryNonceStore(signing.max_memory_nonces)
    return RedisNonceStore(signing.nonce_store, signing.nonce_key_prefix,
                           signing.nonce_store_timeout)
