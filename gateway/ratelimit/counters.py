"""Window counters behind one seam: count a hit and report what is left, in one call.

`LimitsCounter` is the general path: any `limits` strategy over any `limits` storage. It needs
two storage calls per limit (`hit`, then `get_window_stats` for the headers), which against
Redis costs two round trips through redis-py (about 150 µs of CPU each on this machine kind;
bench/README.md). `RedisSlidingWindow` does the same sliding-window-counter arithmetic in one
Lua script, one round trip, for every Redis URL (`gateway.redis_url`: one server, a cluster, or
through Sentinel); the keys it touches share one hash tag, so one cluster slot.
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

from gateway.redis_url import hash_tagged

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


# Sliding window counter: the previous window's count, weighted by how much of it still
# overlaps the sliding window, plus the current window's count. Redis's clock is the only one
# used, so replicas with skewed clocks still agree. Returns {allowed, used, ms to window end}.
_SLIDING_WINDOW = """
local limit = tonumber(ARGV[1])
local window_ms = tonumber(ARGV[2]) * 1000
local cost = tonumber(ARGV[3])
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local index = math.floor(now_ms / window_ms)
local elapsed = now_ms - index * window_ms
local current_key = KEYS[1] .. ':' .. index
local previous = tonumber(redis.call('GET', KEYS[1] .. ':' .. (index - 1))) or 0
local current = tonumber(redis.call('GET', current_key)) or 0
local used = math.floor(previous * (window_ms - elapsed) / window_ms) + current
if used + cost > limit then
  return {0, used, window_ms - elapsed}
end
redis.call('INCRBY', current_key, cost)
redis.call('PEXPIRE', current_key, window_ms * 2)
return {1, used + cost, window_ms - elapsed}
"""


class RedisSlidingWindow:
    def __init__(self, url: str, key_prefix: str, timeout: float) -> None:
        from gateway.redis_url import connect

        self._client = connect(url, timeout)
        self._script = self._client.register_script(_SLIDING_WINDOW)
        self._prefix = key_prefix

    async def aclose(self) -> None:
        await self._client.aclose()

    async def hit(self, item: limits.RateLimitItem, *identity: str) -> Count:
        import redis.exceptions

        # The hash tag keeps both windows of one counter on one cluster slot.
        key = hash_tagged(self._prefix + ":" + item.key_for(*identity))
        try:
            allowed, used, reset_ms = await self._script(
                keys=[key], args=[item.amount, item.get_expiry(), 1])
        except (redis.exceptions.RedisError, OSError) as exc:
            raise StoreUnavailable(type(exc).__name__) from exc
        return Count(bool(allowed), max(item.amount - int(used), 0),
                     math.ceil(int(reset_ms) / 1000))


def create_counter(strategy: str, storage_url: str, key_prefix: str, timeout: float) -> Any:
    """The counter for a store: one-round-trip Redis where it applies, else `limits`."""
    from urllib.parse import urlsplit

    if strategy == "sliding-window-counter" and urlsplit(storage_url).scheme != "memory":
        return RedisSlidingWindow(storage_url, key_prefix, timeout)
    return LimitsCounter(strategy, limits_storage(storage_url, key_prefix, timeout))


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
