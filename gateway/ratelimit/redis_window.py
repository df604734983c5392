"""The sliding-window counter in Redis: one Lua script counts a hit and reports what is left.

Redis's clock is the only one used, so replicas with skewed clocks still agree. A process
makes one call of the script at a time: the hits that arrive while one is under way go to Redis
together in the next, which counts them one after another exactly as if each had come alone. A
busy gateway pays one round trip per batch instead of one per request (a hit waits at most for
the call under way, then its own), and the counts are those of one-hit calls. On a Redis
Cluster each key lives on its own slot, so there each hit is its own call. Both windows of one
counter share one hash tag, so one slot.

`sync` is the batched mode's round trip (gateway.ratelimit.batched): it adds the hits a
process admitted on its own, whatever the limit, and reads back every key's counts.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import limits

from gateway.caching import BoundedCache
from gateway.ratelimit import resp
from gateway.ratelimit.counters import Count, StoreUnavailable
from gateway.ratelimit.resp import LeanRedis, Script
from gateway.redis_url import connect, hash_tagged

# Per key (KEYS[i]) and its three arguments (limit, window seconds, cost): the previous
# window's count weighted by how much of it the sliding window still covers, plus the current
# window's. Returns five numbers per key: allowed (0/1), used (after this hit), ms to the window's
# end, the previous and the current window's counts (for the batched mode's local estimate).
_COUNT = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local out = {}
for i, key in ipairs(KEYS) do
  local limit = tonumber(ARGV[3 * i - 2])
  local window_ms = tonumber(ARGV[3 * i - 1]) * 1000
  local cost = tonumber(ARGV[3 * i])
  local index = math.floor(now_ms / window_ms)
  local elapsed = now_ms - index * window_ms
  local current_key = key .. ':' .. index
  local previous = tonumber(redis.call('GET', key .. ':' .. (index - 1))) or 0
  local current = tonumber(redis.call('GET', current_key)) or 0
  local used = math.floor(previous * (window_ms - elapsed) / window_ms) + current
  local allowed = 0
  if used + cost <= limit then
    allowed = 1
    used = used + cost
    current = current + cost
    redis.call('INCRBY', current_key, cost)
    redis.call('PEXPIRE', current_key, window_ms * 2)
  end
  local n = #out
  out[n + 1] = allowed
  out[n + 2] = used
  out[n + 3] = window_ms - elapsed
  out[n + 4] = previous
  out[n + 5] = current
end
return out
"""

# Per key and its two arguments (window seconds, hits to add): add the hits (already admitted,
# so whatever the limit) and return ms into the window, the previous and the current count.
_SYNC = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local out = {}
for i, key in ipairs(KEYS) do
  local window_ms = tonumber(ARGV[2 * i - 1]) * 1000
  local added = tonumber(ARGV[2 * i])
  local index = math.floor(now_ms / window_ms)
  local current_key = key .. ':' .. index
  local current
  if added > 0 then
    current = redis.call('INCRBY', current_key, added)
    redis.call('PEXPIRE', current_key, window_ms * 2)
  else
    current = tonumber(redis.call('GET', current_key)) or 0
  end
  local n = #out
  out[n + 1] = now_ms - index * window_ms
  out[n + 2] = tonumber(redis.call('GET', key .. ':' .. (index - 1))) or 0
  out[n + 3] = current
end
return out
"""

_MAX_BATCH = 512  # hits in one script call; more start another
_KEYS_KEPT = 10_000  # Redis keys remembered per (limit, identity), least recently used out


@dataclass(frozen=True, slots=True)
class Tally:
    """One key's state in Redis once a hit was counted (or refused)."""

    allowed: bool
    used: int
    ms_left: int  # to the end of the current window
    previous: int  # the previous window's count
    current: int  # the current window's count

    def count(self, limit: int) -> Count:
        return Count(self.allowed, max(limit - self.used, 0), math.ceil(self.ms_left / 1000))


@dataclass(frozen=True, slots=True)
class Counts:
    """One key's counts as a sync read them back."""

    elapsed_ms: int  # into the current window
    previous: int
    current: int


_Waiting = tuple[str, int, int, int, "asyncio.Future[Tally]"]


class RedisSlidingWindow:
    def __init__(self, url: str, key_prefix: str, timeout: float) -> None:
        # One server: the lean client (gateway.ratelimit.resp); TLS, Cluster, Sentinel: redis-py.
        self._client: Any = LeanRedis(url, timeout) if resp.serves(url) else connect(url, timeout)
        self._count = Script(_COUNT)
        self._sync = Script(_SYNC)
        self._registered = {} if isinstance(self._client, LeanRedis) else {
            script.sha: self._client.register_script(script.source)
            for script in (self._count, self._sync)}
        self._prefix = key_prefix
        self._one_per_call = urlsplit(url).scheme == "redis+cluster"
        self._waiting: list[_Waiting] = []
        self._sending: asyncio.Task[None] | None = None  # the one call under way
        self._keys: BoundedCache[tuple[int, tuple[str, ...]],
                                 tuple[limits.RateLimitItem, str]] = BoundedCache(_KEYS_KEPT)

    async def aclose(self) -> None:
        if self._sending is not None:
            await asyncio.gather(self._sending, return_exceptions=True)
        await self._client.aclose()

    async def hit(self, item: limits.RateLimitItem, *identity: str) -> Count:
        tally = await self.count(self.key(item, identity), item.amount, item.get_expiry())
        return tally.count(item.amount)

    def key(self, item: limits.RateLimitItem, identity: tuple[str, ...]) -> str:
        """The Redis key of a limit for an identity (made once while it is in use)."""
        # By the item's identity (hashing a `limits` item runs Python code); the entry holds
        # the item, so its id cannot be reused by another while the entry exists.
        found = self._keys.get((id(item), identity))
        if found is None or found[0] is not item:
            # The hash tag keeps both windows of one counter on one cluster slot.
            found = (item, hash_tagged(self._prefix + ":" + item.key_for(*identity)))
            self._keys.put((id(item), identity), found)
        return found[1]

    async def count(self, key: str, limit: int, window: int, cost: int = 1) -> Tally:
        """Count `cost` hits on `key` if they fit under `limit` (per `window` seconds)."""
        if self._one_per_call:
            return (await self._call([(key, limit, window, cost)]))[0]
        future: asyncio.Future[Tally] = asyncio.get_running_loop().create_future()
        self._waiting.append((key, limit, window, cost, future))
        if self._sending is None:
            self._sending = asyncio.get_running_loop().create_task(self._send())
        return await future

    async def _send(self) -> None:
        """One call at a time: the hits that came while one was under way (or in the turn
        that started it) go together in the next."""
        await asyncio.sleep(0)  # let the rest of this loop turn add its hits
        try:
            while self._waiting:
                batch = self._waiting[:_MAX_BATCH]
                del self._waiting[:_MAX_BATCH]
                await self._settle(batch)
        finally:
            self._sending = None

    async def _settle(self, batch: list[_Waiting]) -> None:
        try:
            tallies = await self._call([entry[:4] for entry in batch])
        except Exception as exc:  # whatever it was, no waiter may be left hanging
            reason = exc.args[0] if isinstance(exc, StoreUnavailable) else type(exc).__name__
            for *_, future in batch:
                if not future.done():
                    future.set_exception(StoreUnavailable(reason))
            return
        for (*_, future), tally in zip(batch, tallies, strict=True):
            if not future.done():  # a waiter gone (its client left) is not answered
                future.set_result(tally)

    async def _call(self, hits: Sequence[tuple[str, int, int, int]]) -> list[Tally]:
        """One script call for `hits` (on a cluster, `count` sends one hit per call)."""
        args = [value for _, limit, window, cost in hits for value in (limit, window, cost)]
        flat = await self._run(self._count, [key for key, *_ in hits], args)
        numbers = _numbers(flat, 5 * len(hits))
        return [Tally(bool(numbers[i]), *numbers[i + 1:i + 5]) for i in range(0, len(numbers), 5)]

    async def sync(self, changes: Sequence[tuple[str, int, int]]) -> list[Counts]:
        """Add hits to keys (key, window seconds, hits) and read every key's counts back, in
        one round trip (one per key on a cluster)."""
        if self._one_per_call:
            replies = await self._each([([key], [window, added])
                                        for key, window, added in changes], self._sync)
            flat = [value for reply in replies for value in reply]
        else:
            args = [value for _, window, added in changes for value in (window, added)]
            flat = await self._run(self._sync, [key for key, *_ in changes], args)
        numbers = _numbers(flat, 3 * len(changes))
        return [Counts(*numbers[i:i + 3]) for i in range(0, len(numbers), 3)]

    async def _each(self, calls: list[tuple[list[str], list[int]]], script: Script) -> list[Any]:
        """One call per key, concurrently (a cluster's keys are on slots of their own)."""
        return list(await asyncio.gather(*(self._run(script, keys, args)
                                           for keys, args in calls)))

    async def _run(self, script: Script, keys: list[str], args: list[int]) -> Any:
        import redis.exceptions

        try:
            if isinstance(self._client, LeanRedis):
                return await self._client.run(script, keys, args)
            return await self._registered[script.sha](keys=keys, args=args)
        except (redis.exceptions.RedisError, resp.ScriptError, OSError, TimeoutError) as exc:
            raise StoreUnavailable(type(exc).__name__) from exc


def _numbers(reply: Any, expected: int) -> list[int]:
    """The script's reply as integers, or `StoreUnavailable` when it is not what was asked."""
    if not isinstance(reply, list) or len(reply) != expected or \
            not all(isinstance(value, int) for value in reply):
        raise StoreUnavailable("UnexpectedReply")
    return reply
