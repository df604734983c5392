"""`rate_limits.sync: batched`: the sliding-window counter answered in this process, kept in
step with Redis in batches.

A key's first hit in a process is counted in Redis exactly (`RedisSlidingWindow.count`), which
also reads the key's two window counts back. Its next hits are answered here, from those counts
and the hits admitted here since, with the same sliding-window arithmetic; every
`sync_interval` seconds one round trip adds the hits admitted here to every key in Redis and
reads all their counts back (other processes' hits included). A key hit by nobody here since
the last sync is forgotten, so its next hit asks Redis again: only busy keys are kept.

A process admits at most `allowance` hits of a key between two syncs (the limit times
`local_share`, at least 1): half way it starts a sync, and at the allowance a hit waits for one.
What is given up against `sync: exact`, with N processes (replicas times workers) sharing Redis:

- Over-admission: a key may be admitted up to (N - 1) x allowance hits beyond its limit in a
  window, since each other process may hold that many admitted hits Redis has not seen yet.
  One process alone never goes over.
- Staleness: other processes' hits are seen at the next sync, so a caller refused here may be
  refused up to `sync_interval` after its quota came free, and RateLimit-Remaining and -Reset
  are this process's estimate.
- Timing: hits reach Redis up to `sync_interval` after they happened; one admitted just before
  a window ends is counted in the next window (counted later, never forgotten).
- Store failures are noticed by the next sync (within `sync_interval`; hits are answered here
  meanwhile, within the allowance). From then on every hit asks Redis as in exact mode, so the
  rule's on_store_error decides each one (deny by default), until Redis answers again. Hits
  admitted here but not yet sent are sent by the next sync that succeeds; a sync whose answer
  was lost may be repeated, which counts its hits twice (the over-counting side).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from dataclasses import dataclass

import limits

from gateway.ratelimit.counters import Count, StoreUnavailable
from gateway.ratelimit.redis_window import RedisSlidingWindow

_MAX_KEYS = 100_000  # keys answered here; beyond, a new key is counted in Redis, exactly
_KEYS_PER_CALL = 1_000  # a sync of more keys is split, so no one script holds Redis long


@dataclass(slots=True)
class _Local:
    """One key as this process knows it."""

    limit: int
    window: int  # seconds
    allowance: int  # hits admitted here between two syncs, at most
    previous: int = 0  # the previous window's count in Redis, at the last sync
    current: int = 0  # the current window's count in Redis (our sent hits included)
    start: float = 0.0  # when the current window began (monotonic seconds)
    pending: int = 0  # hits admitted here that Redis has not seen yet
    touched: bool = True  # hit since the last sync

    def learn(self, elapsed_ms: int, previous: int, current: int, now: float) -> None:
        self.previous, self.current = previous, current
        self.start = now - elapsed_ms / 1000

    def estimate(self, now: float) -> tuple[int, float]:
        """The sliding window's count (as Redis counts it, plus our unsent hits) and the
        seconds left in the current window."""
        elapsed = now - self.start
        if elapsed >= self.window:  # a window ended since the last sync: roll on
            windows = int(elapsed // self.window)
            self.previous = self.current if windows == 1 else 0
            self.current = 0
            self.start += windows * self.window
            elapsed -= windows * self.window
        window_ms = self.window * 1000
        weighted = self.previous * (window_ms - int(elapsed * 1000)) // window_ms
        return weighted + self.current + self.pending, self.window - elapsed


class BatchedWindow:
    def __init__(self, window: RedisSlidingWindow, interval: float, share: float) -> None:
        self._window = window
        self._interval = interval
        self._share = share
        self._local: dict[str, _Local] = {}
        self._syncing: asyncio.Task[None] | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._down = False  # the last round trip failed: every hit asks Redis until one works

    async def aclose(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        with contextlib.suppress(StoreUnavailable):
            await self._synced()  # what was admitted here reaches Redis
        await self._window.aclose()

    async def hit(self, item: limits.RateLimitItem, *identity: str) -> Count:
        if self._ticker is None:
            self._ticker = asyncio.get_running_loop().create_task(self._tick())
        key = self._window.key(item, identity)
        local = self._local.get(key)
        while local is not None and not self._down and local.pending >= local.allowance:
            await self._synced()  # the allowance is used up: wait for Redis's counts
            local = self._local.get(key)
        if local is None or self._down:
            return await self._first(key, item)
        if local.pending * 2 >= local.allowance:
            self._start_sync()
        used, left = local.estimate(time.monotonic())
        local.touched = True
        if used >= local.limit:
            return Count(False, 0, math.ceil(left))
        local.pending += 1
        return Count(True, local.limit - used - 1, math.ceil(left))

    async def _first(self, key: str, item: limits.RateLimitItem) -> Count:
        """Count in Redis, exactly, and keep what it says of the key."""
        window = item.get_expiry()
        tally = await self._window.count(key, item.amount, window)
        self._down = False
        local = self._local.get(key)
        if local is None and len(self._local) < _MAX_KEYS:
            allowance = max(1, math.floor(item.amount * self._share))
            local = self._local[key] = _Local(item.amount, window, allowance)
        if local is not None:
            local.learn(window * 1000 - tally.ms_left, tally.previous, tally.current,
                        time.monotonic())
        return tally.count(item.amount)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            if not self._local:  # nothing kept here: nothing to send or read back
                continue
            with contextlib.suppress(StoreUnavailable):
                await self._synced()

    def _start_sync(self) -> asyncio.Task[None]:
        if self._syncing is None or self._syncing.done():
            self._syncing = asyncio.get_running_loop().create_task(self._sync())
            self._syncing.add_done_callback(_retrieved)
        return self._syncing

    async def _synced(self) -> None:
        """Wait for a sync (the one under way, else a new one); raises `StoreUnavailable`."""
        await asyncio.shield(self._start_sync())

    async def _sync(self) -> None:
        """Send the hits admitted here and read every busy key's counts back."""
        busy: list[tuple[str, _Local, int]] = []
        for key, local in list(self._local.items()):
            if local.pending == 0 and not local.touched:
                del self._local[key]  # idle since the last sync: its next hit asks Redis
                continue
            busy.append((key, local, local.pending))
            local.touched = False
        for start in range(0, len(busy), _KEYS_PER_CALL):
            part = busy[start:start + _KEYS_PER_CALL]
            try:
                counts = await self._window.sync([(key, local.window, sent)
                                                  for key, local, sent in part])
            except StoreUnavailable:
                self._down = True
                for _, local, _ in busy[start:]:
                    local.touched = True  # kept, and their hits sent by the next sync
                raise
            now = time.monotonic()
            for (_, local, sent), counted in zip(part, counts, strict=True):
                local.pending -= sent
                local.learn(counted.elapsed_ms, counted.previous, counted.current, now)
        if busy:
            self._down = False


def _retrieved(task: asyncio.Task[None]) -> None:
    """A failed sync is reported to those waiting for it; no one else needs its error."""
    if not task.cancelled():
        task.exception()
