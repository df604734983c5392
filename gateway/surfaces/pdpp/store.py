"""Records read from the legacy API and the gateway's own index of them (gateway.index), kept
per stream (and per subject, for streams of each subject's own records).

- A first read builds the index in a PDPP thread, in the background (at the normal priority:
  requests wait for it; refreshes run at a lower one, threads.py): a request waits for it
  at most FIRST_READ_WAIT seconds, then is answered 503 `index_building` with a Retry-After
  (never an empty answer that would pass for "nothing matches"). A gateway that restarts
  finds the index on disk (or in the shared database) and serves it without reading the
  upstream.
- A copy older than `refresh_seconds` keeps serving while one refresh reads the upstream again
  in the background and applies what changed (by each record's version); a refresh that fails
  keeps the last good copy, marked stale (a log line, `aigw_index_refreshes_total`).
- With a shared engine, one replica at a time refreshes (its lease); the others read what it
  wrote instead of the upstream.
- Per-subject indexes are bounded together by bytes; the least recently used are dropped.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import os
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from datetime import UTC, datetime
from typing import Any

from gateway.caching import BoundedCache
from gateway.embeddings.config import EmbedderSettings
from gateway.errors import GatewayError
from gateway.index.base import IndexUnavailable, SearchIndex
from gateway.observability import INDEX_REFRESHES
from gateway.surfaces.pdpp.config import SearchIndexSettings
from gateway.surfaces.pdpp.indexing import (
    drop_index,
    engine_reachable,
    indexed,
    open_index,
    restored,
    version,
)
from gateway.surfaces.pdpp.records import sort_records
from gateway.surfaces.pdpp.streams import CompiledStream, Record, Snapshot
from gateway.surfaces.pdpp.threads import in_background, in_thread

Loader = Callable[[], Awaitable[tuple[list[Record], bool]]]
Key = tuple[str, str]  # (stream, subject or "")
MAX_ENTRIES = 512
FIRST_READ_WAIT = 10.0  # seconds a request waits for a stream's first read and index
INDEX_RETRY_AFTER = "5"  # seconds, told to a request the index's engine could not serve
# Search results kept per store (search.py: per copy of a stream and grant shape).
SEARCHES = 2048
SEARCH_BYTES = 16 * 1024 * 1024
log = logging.getLogger("aigw.pdpp")
_SERIALS = itertools.count(1)


class Entry:
    """One copy of a stream's records (built in a PDPP thread) and the index of them."""

    def __init__(self, snapshot: Snapshot, index: SearchIndex, taken: float) -> None:
        self.snapshot = snapshot
        self.index = index
        self.taken = taken
        # This copy among every copy this process makes (never reused, unlike `id`): what
        # is remembered of searching it is keyed by it.
        self.serial = next(_SERIALS)
        self.stale = False  # the last refresh failed: this is the last good copy
        self.by_key = {record.key: record for record in snapshot.records}
        self.positions = {record.key: i for i, record in enumerate(snapshot.records)}
        self.bytes = index.stats().bytes
        self._orders: dict[tuple[str | None, str], list[Record]] = {}
        self._building = threading.Lock()

    def ordered(self, field: str | None, order: str) -> list[Record]:
        """Every record in the list order (records.py), sorted once per field and direction:
        the records a caller may see keep their places in it, as a view orders as its record."""
        key = (field, order)
        with self._building:
            if key not in self._orders:
                self._orders[key] = sort_records(self.snapshot.records, field, order)
            return self._orders[key]


class Store:
    def __init__(self, refresh_seconds: float, settings: SearchIndexSettings,
                 source: str = "", embedder: EmbedderSettings | None = None) -> None:
        self.refresh_seconds = refresh_seconds
        self.settings = settings
        self.embedder = embedder  # of semantic search, when served: records are embedded
        self.source = source  # where the streams are read from (the upstreams' URLs)
        self._entries: OrderedDict[Key, Entry] = OrderedDict()
        # Search results, by copy and grant shape (search.py); a copy replaced is never
        # asked again, and its results leave as the least recently used.
        self.searches: BoundedCache[Hashable, Any] = BoundedCache(SEARCHES, SEARCH_BYTES)
        # Pages of records as rendered, by copy and grant shape (handlers.list_records).
        self.pages: BoundedCache[Hashable, Any] = BoundedCache(SEARCHES, SEARCH_BYTES)
        self._refreshing: dict[Key, asyncio.Task[None]] = {}
        self._first_reads: dict[Key, asyncio.Task[Entry]] = {}
        self._holder = f"{socket.gethostname()}-{os.getpid()}-{id(self):x}"

    async def index_up(self) -> bool:
        """Whether the indexes' storage engine is reachable: probed in a PDPP thread (each
        probe short: gateway.index.postgres.guard) through the indexes open, or with a
        connection of its own before any is (a supervisor of workers opens none)."""
        checks = [check for index in {id(e.index): e.index for e in self._entries.values()
                                      }.values() if (check := getattr(index, "check", None))]
        if not checks:
            return await in_thread(lambda: engine_reachable(self.settings))
        return all([await in_thread(check) for check in checks])

    async def entry(self, stream: CompiledStream, subject: str, load: Loader) -> Entry:
        """The records of a stream for a subject ("" for a stream of everyone's): a copy
        older than `refresh_seconds` is returned while a refresh runs in the background."""
        key = (stream.name, subject)
        found = self._entries.get(key)
        if found is None:
            found = await self._first_read(key, stream, subject, load)
        self._entries.move_to_end(key)
        if time.monotonic() - found.taken >= self.refresh_seconds \
                and key not in self._refreshing:
            task = asyncio.create_task(self._refresh(key, stream, found, load))
            self._refreshing[key] = task
            task.add_done_callback(lambda _: self._refreshing.pop(key, None))
        return found

    async def _first_read(self, key: Key, stream: CompiledStream, subject: str,
                          load: Loader) -> Entry:
        """The stream's first copy, read and indexed by one task every request waits for,
        each at most FIRST_READ_WAIT seconds; a failure reaches every waiter, and the next
        request tries again."""
        task = self._first_reads.get(key)
        if task is None:
            async def first() -> Entry:  # requests wait for it: the normal priority
                return await self._keep(key, await self._first(stream, subject, load))

            task = self._first_reads[key] = asyncio.create_task(first())
            task.add_done_callback(lambda done: self._first_read_done(key, done))
        try:
            entry = await asyncio.wait_for(asyncio.shield(task), FIRST_READ_WAIT)
        except IndexUnavailable:
            raise index_unavailable() from None
        except TimeoutError:
            raise GatewayError(503, "index_building", "The stream is being read and indexed; "
                               "try again shortly.", headers=(("retry-after", "5"),)) from None
        return entry

    def _first_read_done(self, key: Key, task: asyncio.Task[Entry]) -> None:
        self._first_reads.pop(key, None)
        if not task.cancelled() and task.exception() is not None:
            log.warning("stream first read failed", extra={"fields": {
                "stream": key[0], "error": type(task.exception()).__name__}})

    async def _first(self, stream: CompiledStream, subject: str, load: Loader) -> Entry:
        """The index as kept (after a restart, or another replica's), else a first read."""
        index = await in_thread(
            lambda: open_index(self.settings, stream, subject, self.source, self.embedder))
        kept = await in_thread(lambda: _from_index(index))
        if kept is not None:
            return kept
        records, truncated = await load()
        return await in_thread(lambda: self._built(stream, index, records, truncated))

    def _built(self, stream: CompiledStream, index: SearchIndex, records: list[Record],
               truncated: bool) -> Entry:
        if self._may_write(index):
            index.mark("building")
            index.replace(indexed(stream, records, self.embedder), truncated=truncated)
        # An index cut at max_bytes says so as a stream cut at max_records does: never silently.
        cut = truncated or index.stats().truncated
        return Entry(Snapshot(records, _now(), cut), index, time.monotonic())

    async def _refresh(self, key: Key, stream: CompiledStream, old: Entry, load: Loader) -> None:
        in_background()
        try:
            if not await in_thread(lambda: self._may_write(old.index)):
                fresh = await in_thread(lambda: _from_index(old.index, follower=True))
            else:
                records, truncated = await load()
                fresh = await in_thread(
                    lambda: _applied(stream, old, records, truncated, self.embedder))
        except Exception as exc:  # any failure: the last good copy keeps serving
            old.stale = True
            old.taken = time.monotonic()  # try again after refresh_seconds, not at once
            await in_thread(lambda: _mark_stale(old.index))
            INDEX_REFRESHES.labels("pdpp", key[0], "failed").inc()
            log.warning("stream refresh failed; serving the last good copy", extra={
                "fields": {"stream": key[0], "error": type(exc).__name__}})
            return
        INDEX_REFRESHES.labels("pdpp", key[0], "ok").inc()
        if fresh is not None and self._entries.get(key) is old:
            await self._keep(key, fresh)

    def _may_write(self, index: SearchIndex) -> bool:
        """Whether this gateway writes `index`: always for an embedded one; for a shared one,
        while it holds the lease (one replica refreshes at a time)."""
        try_lease = getattr(index, "try_lease", None)
        return try_lease is None or bool(try_lease(self._holder, 2 * self.refresh_seconds))

    async def _keep(self, key: Key, entry: Entry) -> Entry:
        self._entries[key] = entry
        dropped = []
        while len(self._entries) > MAX_ENTRIES or (self._subject_bytes() > \
                self.settings.subjects_max_bytes and self._subjects() > 1):
            old_key = next(k for k in self._entries if k[1] or len(self._entries) > MAX_ENTRIES)
            dropped.append((old_key, self._entries.pop(old_key)))
        for (_, subject), old in dropped:
            if old.index is entry.index:
                continue
            # A subject's index goes with it; a stream's stays on disk for the next read.
            close = functools.partial(drop_index, self.settings, old.index) if subject \
                else old.index.close
            await in_thread(close)
        return entry

    def _subject_bytes(self) -> int:
        return sum(entry.bytes for (_, subject), entry in self._entries.items() if subject)

    def _subjects(self) -> int:
        return sum(1 for _, subject in self._entries if subject)

    async def aclose(self) -> None:
        """Stop the refreshes running and close the indexes (they stay on disk)."""
        running = [*self._refreshing.values(), *self._first_reads.values()]
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        indexes = {id(entry.index): entry.index for entry in self._entries.values()}
        for index in indexes.values():
            await in_thread(index.close)


def index_unavailable() -> GatewayError:
    return GatewayError(503, "index_unavailable", "The search index is unavailable; try again "
                        "shortly.", headers=(("retry-after", INDEX_RETRY_AFTER),))


def _from_index(index: SearchIndex, follower: bool = False) -> Entry | None:
    """The records an index already holds, as a copy to serve; None when it holds none (it
    was never built, or a build did not finish)."""
    stats = index.stats()
    if stats.built_at is None or (stats.state == "building" and not follower):
        return None
    records = [restored(key, data) for key, data in index.records()]
    age = max(0.0, time.time() - datetime.fromisoformat(stats.built_at).timestamp())
    snapshot = Snapshot(records, stats.built_at, stats.truncated)
    return Entry(snapshot, index, time.monotonic() - age)


def _applied(stream: CompiledStream, old: Entry, records: list[Record], truncated: bool,
             embedder: EmbedderSettings | None) -> Entry:
    """`old`'s index brought up to `records`: what changed upserted, what vanished deleted."""
    had = old.index.versions()
    changed = [r for r in records if had.get(r.key) != version(r)]
    gone = had.keys() - {r.key for r in records}
    old.index.apply(indexed(stream, changed, embedder), gone)
    cut = truncated or old.index.stats().truncated
    return Entry(Snapshot(records, _now(), cut), old.index, time.monotonic())


def _mark_stale(index: SearchIndex) -> None:
    try:
        index.mark("stale")
    except Exception:  # the index itself may be what failed
        log.warning("could not mark the index stale", exc_info=False)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
