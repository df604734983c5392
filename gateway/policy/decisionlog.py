"""The decision log: one JSON line per request that took policy decisions, written by a
background task so a request never waits for it.

Lines wait in a bounded buffer; when it is full a line is dropped and counted, never waited
for. The writer lingers briefly after the first line of a batch, so a busy gateway writes many
lines at a time rather than one system call per request. Sinks: stderr (the default, apart
from the access log), stdout, a file (appended in a worker thread, readable by its owner only)
or a Redis stream (XADD, trimmed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import sys
from pathlib import Path
from typing import Any, TextIO

import orjson

from gateway.context import RequestContext
from gateway.observability import POLICY_LOG_DROPPED
from gateway.personal_data import SubjectRule
from gateway.policy.decisions import log_record
from gateway.private_files import open_private, private_folder
from gateway.settings import DecisionLog as Settings

log = logging.getLogger("aigw.policy")
_BATCH = 256
_LINGER = 0.01  # seconds a batch waits for more lines after its first


class DecisionLog:
    def __init__(self, settings: Settings, base: Path = Path(),
                 subjects: SubjectRule = "hash") -> None:
        """`subjects` is the config's one rule for subjects in logs (`logging.subjects`)."""
        self.settings = settings
        self.subjects = subjects
        self._path = base / settings.path if settings.path else None  # relative to the config
        self._lines: list[bytes] = []  # waiting for the writer; at most settings.queue_size
        self._writer: asyncio.Task[None] | None = None
        self._redis: Any = None

    def submit(self, ctx: RequestContext, revision: str) -> None:
        """Queue the request's line (sampled); drop and count it when the queue is full."""
        if not ctx.decisions or self.settings.sink == "none" or not self._sampled(ctx):
            return
        if len(self._lines) >= self.settings.queue_size:
            POLICY_LOG_DROPPED.labels("queue_full").inc()
            return
        self._lines.append(orjson.dumps(log_record(ctx, revision, self.subjects)))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._drain())

    def _sampled(self, ctx: RequestContext) -> bool:
        if self.settings.sample >= 1:
            return True
        keep = any(d.outcome.effect == "deny" or d.shadow_differs for d in ctx.decisions)
        return keep or random.random() < self.settings.sample  # sampling, not security

    async def _drain(self) -> None:
        """Write every queued line, _BATCH at a time, after lingering for more to come."""
        await asyncio.sleep(_LINGER)
        while self._lines:
            batch, self._lines = self._lines[:_BATCH], self._lines[_BATCH:]
            try:
                await self._write(batch)
            except Exception as exc:  # a sink failure loses lines, never requests
                POLICY_LOG_DROPPED.labels("sink_error").inc(len(batch))
                log.warning("decision log sink failed",
                            extra={"fields": {"error": type(exc).__name__}})

    async def _write(self, lines: list[bytes]) -> None:
        sink = self.settings.sink
        if sink in ("stderr", "stdout"):
            _emit(sys.stderr if sink == "stderr" else sys.stdout, lines)
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
        if self._writer is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._writer), 5)
            self._writer.cancel()
        if self._redis is not None:
            await self._redis.aclose()


def _emit(stream: TextIO, lines: list[bytes]) -> None:
    stream.buffer.write(b"\n".join(lines) + b"\n")
    stream.flush()


def _append(path: Path, lines: list[bytes]) -> None:
    """Append to `path`; a folder or file made here is its owner's alone (0700, 0600), one
    that exists keeps its mode (an operator's choice, for a log shipper)."""
    private_folder(path.parent, own=False)
    descriptor = open_private(path, os.O_WRONLY | os.O_APPEND, own=False)
    with os.fdopen(descriptor, "ab") as file:
        file.write(b"\n".join(lines) + b"\n")
