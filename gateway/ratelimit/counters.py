"""Window counters behind one seam: count a hit and report what is left, in one call.

`LimitsCounter` is the general path: any `limits` strategy over any `limits` storage. It needs
two storage calls per limit (`hit`, then `get_window_stats` for the headers), which against
Redis costs two round trips through redis-py (about 150 µs of CPU each on this machine kind;
bench/README.md). For the sliding-window counter in Redis, `RedisSlidingWindow`
(gateway.ratelimit.redis_window) does the same arithmetic in one Lua script, the hits of one
turn of the event loop in one round trip, for every Redis URL (`gateway.redis_url`: one server,
a cluster, or through Sentinel; a single server without TLS through the lean client of
gateway.ratelimit.resp, a quarter of redis-py's CPU per call); `rate_limits.sync: batched` answers from a local count kept in
step with Redis in batches instead (gateway.ratelimit.batched). gateway.ratelimit.stores picks
one for a config.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import limits
from limits.aio import strategies
from limits.errors import StorageError

_STRATEGIES: dict[str, Callable[[Any], strategies.RateLimiter]] = {
    "moving-window": strategies.MovingWindowRateLimiter,
    "sliding-window-counter": strategies.SlidingWindowCounterRateLimiter,
    "fixed-window": strategies.FixedWindowRateLimiter,
}


class StoreUnavailable(Exception):
    """The counting store failed; the rule's on_store_error decides."""


@dataclass(frozen=True, slots=True)
class Count:
    allowed: bool
    remaining: int
    reset: int  # whole seconds until quota frees up


class WindowCounter(Protocol):
    async def hit(self, item: limits.RateLimitItem, *identity: str) -> Count: ...


class LimitsCounter:
    def __init__(self, strategy: str, storage: Any) -> None:
        self._storage = storage
        self._strategy = _STRATEGIES[strategy](storage)

    async def aclose(self) -> None:
        await close_limits_storage(self._storage)

    async def hit(self, item: limits.RateLimitItem, *identity: str) -> Count:
        try:
            allowed = await self._strategy.hit(item, *identity)
            stats = await self._strategy.get_window_stats(item, *identity)
        except StorageError as exc:
            raise StoreUnavailable(type(exc.storage_error).__name__) from exc
        reset = max(0, math.ceil(stats.reset_time - time.time()))
        return Count(allowed, max(stats.remaining, 0), reset)


def limits_storage(storage_url: str, key_prefix: str, timeout: float) -> Any:
    """A `limits` async storage for memory:// or any Redis URL, its errors wrapped as
    `StorageError`."""
    from urllib.parse import urlsplit

    from limits.storage import storage_from_string

    if urlsplit(storage_url).scheme == "memory":
        return storage_from_string("async+memory://", wrap_exceptions=True)
    return storage_from_string(
        "async+" + storage_url, implementation="redispy", wrap_exceptions=True,
        key_prefix=key_prefix, socket_timeout=timeout, socket_connect_timeout=timeout,
    )


async def close_limits_storage(storage: Any) -> None:
    """Close what a `limits` async storage opened. `limits` (5.x) offers no close: its Redis
    storage keeps a redis-py client at `bridge.storage` and its memory storage an expiry task
    at `timer`; both are released here when present."""
    client = getattr(getattr(storage, "bridge", None), "storage", None)
    if client is not None and hasattr(client, "aclose"):
        await client.aclose()
    timer = getattr(storage, "timer", None)
    if timer is not None and hasattr(timer, "cancel"):
        timer.cancel()
