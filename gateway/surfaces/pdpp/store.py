"""Records read from the legacy API, kept per stream (and subject, for streams of each
subject's own records) for `refresh_seconds`, with the search indexes built from them (one per
field, built when first needed).

A copy older than `refresh_seconds` keeps serving while one refresh reads the upstream again
in the background; a refresh that fails keeps the last good copy, marked stale (a log line,
`aigw_index_refreshes_total{outcome="failed"}`). Only a first read makes a request wait.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from gateway.observability import INDEX_REFRESHES
from gateway.surfaces.pdpp.index import FieldIndex
from gateway.surfaces.pdpp.records import sort_records
from gateway.surfaces.pdpp.streams import CompiledStream, Record, Snapshot

Loader = Callable[[], Awaitable[tuple[list[Record], bool]]]
MAX_ENTRIES = 512
log = logging.getLogger("aigw.pdpp")
MAX_SUBSET_INDEXES = 4  # per entry: indexes over the records some narrower grant may see


class Entry:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.taken = time.monotonic()
        self.stale = False  # the last refresh failed: this is the last good copy
        self.by_key = {record.key: record for record in snapshot.records}
        self._indexes: dict[str, FieldIndex] = {}
        self._subsets: OrderedDict[tuple[str, tuple[int, ...]], FieldIndex] = OrderedDict()
        self._orders: dict[tuple[str | None, str], list[Record]] = {}
        self._building = threading.Lock()  # indexes and orders are built in PDPP threads

    def ordered(self, field: str | None, order: str) -> list[Record]:
        """Every record in the list order (records.py), sorted once per field and direction:
        the records a caller may see keep their places in it, as a view orders as its record."""
        key = (field, order)
        with self._building:
            if key not in self._orders:
                self._orders[key] = sort_records(self.snapshot.records, field, order)
            return self._orders[key]

    def index(self, field: str, positions: tuple[int, ...] | None = None) -> FieldIndex:
        """The index of one field over every record, or over the records at `positions`
        (its scores then go by `positions`, in that order). Only fields a search may match
        are ever asked for."""
        records = self.snapshot.records
        whole = positions is None or len(positions) == len(records)
        with self._building:
            if field not in self._indexes:
                self._indexes[field] = FieldIndex([r.data.get(field) for r in records])
            if whole:
                return self._indexes[field]
            assert positions is not None
            key = (field, positions)
            found = self._subsets.get(key)
            if found is None:
                found = self._subsets[key] = self._indexes[field].subset(positions)
                while len(self._subsets) > MAX_SUBSET_INDEXES:
                    self._subsets.popitem(last=False)
            self._subsets.move_to_end(key)
            return found


class Store:
    def __init__(self, refresh_seconds: float) -> None:
        self.refresh_seconds = refresh_seconds
        self._entries: OrderedDict[tuple[str, str], Entry] = OrderedDict()
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._refreshing: dict[tuple[str, str], asyncio.Task[None]] = {}

    async def entry(self, stream: CompiledStream, subject: str, load: Loader) -> Entry:
        """The records of a stream for a subject ("" for a stream of everyone's): a copy
        older than `refresh_seconds` is returned while a refresh runs in the background."""
        key = (stream.name, subject)
        found = self._entries.get(key)
        if found is None:
            async with self._locks.setdefault(key, asyncio.Lock()):
                found = self._entries.get(key)
                if found is None:
                    found = self._keep(key, await _read(load))
        self._entries.move_to_end(key)
        if time.monotonic() - found.taken >= self.refresh_seconds \
                and key not in self._refreshing:
            task = asyncio.create_task(self._refresh(key, found, load))
            self._refreshing[key] = task
            task.add_done_callback(lambda _: self._refreshing.pop(key, None))
        return found

    async def _refresh(self, key: tuple[str, str], old: Entry, load: Loader) -> None:
        try:
            fresh = await _read(load)
        except Exception as exc:  # any failure: the last good copy keeps serving
            old.stale = True
            old.taken = time.monotonic()  # try again after refresh_seconds, not at once
            INDEX_REFRESHES.labels("pdpp", key[0], "failed").inc()
            log.warning("stream refresh failed; serving the last good copy", extra={
                "fields": {"stream": key[0], "error": type(exc).__name__}})
            return
        INDEX_REFRESHES.labels("pdpp", key[0], "ok").inc()
        if self._entries.get(key) is old:
            self._keep(key, fresh)

    def _keep(self, key: tuple[str, str], entry: Entry) -> Entry:
        self._entries[key] = entry
        while len(self._entries) > MAX_ENTRIES:
            dropped, _ = self._entries.popitem(last=False)
            self._locks.pop(dropped, None)
        return entry

    async def aclose(self) -> None:
        """Stop the refreshes running (a reload or shutdown): the copies they would replace
        go with this store."""
        for task in list(self._refreshing.values()):
            task.cancel()
        await asyncio.gather(*self._refreshing.values(), return_exceptions=True)


async def _read(load: Loader) -> Entry:
    records, truncated = await load()
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Entry(Snapshot(records, now, truncated))
