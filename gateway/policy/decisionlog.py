"""The decision log: one JSON line per request that took policy decisions, written by a
background task so a request never waits for it.

Lines go through a bounded queue; when it is full a line is dropped and counted, never waited
for. The writer lingers briefly after the first line of a batch, so a busy gateway writes many
lines at a time rather than one system call per request. Sinks: stdout, a file (appended in a
worker thread) or a Redis stream (XADD, trimmed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import sys
from pathlib import Path
from typing import Any

import orjson

from gateway.context import RequestContext
from gateway.observability import POLICY_LOG_DROPPED
from gateway.policy.decisions import log_record
from gateway.settings import DecisionLog as Settings

log = logging.getLogger("aigw.policy")
_BATCH = 256
_LINGER = 0.01  # seconds a batch waits for more lines after its first


class DecisionLog:
    def __init__(self, settings: Settings, base: Path = Path()) -> None:
        self.settings = settings
        self._path = base / settings.path if settings.path else None  # relative to the config
        self._queue: asyncio.Queue[bytes] = asyncio.Queue(settings.queue_size)
        self._task: asyncio.Task[None] | None = None
        self._redis: Any = None

    def submit(self, ctx: RequestContext, revision: str) -> None:
        """Queue the request's line (sampled); drop and count it when the queue is full."""
        if not ctx.decisions or self.settings.sink == "none" or not self._sampled(ctx):
            return
        line = orjson.dumps(log_record(ctx, revision, self.settings.subjects))
        try:
            self._queue.put_nowait(line)
        except asyncio.QueueFull:
            POLICY_LOG_DROPPED.labels("queue_full").inc()
            return
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._drain())

    def _sampled(self, ctx: RequestContext) -> bool:
        if self.settings.sample >= 1:
            return True
        keep = any(d.outcome.effect == "deny" or d.shadow_differs for d in ctx.decisions)
        return keep or random.random() < self.settings.sample  # sampling, not security

    async def _drain(self) -> None:
        while True:
            batch = [await self._queue.get()]
            if self._queue.qsize() < _BATCH:
                await asyncio.sleep(_LINGER)
            while len(batch) < _BATCH and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                await self._write(batch)
            except Exception as exc:  # a sink failure loses lines, never requests
                POLICY_LOG_DROPPED.labels("sink_error").inc(len(batch))
                log.warning("decision log sink failed",
                            extra={"fields": {"error": type(exc).__name__}})
            finally:
                for _ in batch:
                    self._queue.task_done()

    async def _write(self, lines: list[bytes]) -> None:
        sink = self.settings.sink
        if sink == "stdout":
            sys.stdout.buffer.write(b"\n".join(lines) + b"\n")
            sys.stdout.flush()
        elif sink == "file":
            await asyncio.to_thread(_append, self._path or Path(), lines)
        elif sink == "redis":
            await self._xadd(lines)

    async def _xadd(self, lines: list[bytes]) -> None:
        if self._redis is None:
            import redis.asyncio

            self._redis = redis.asyncio.Redis.from_url(self.settings.redis_url or "",
                                                       socket_timeout=2)
        async with self._redis.pipeline(transaction=False) as pipe:
            for line in lines:
                pipe.xadd(self.settings.stream, {"line": line},
                          maxlen=self.settings.stream_max_len, approximate=True)
            await pipe.execute()

    async def aclose(self) -> None:
        """Write what is queued (briefly), then stop."""
        if self._task is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._queue.join(), 5)
            self._task.cancel()
        if self._redis is not None:
            await self._redis.aclose()


def _append(path: Path, lines: list[bytes]) -> None:
    with path.open("ab") as file:
        file.write(b"\n".join(lines) + b"\n")
