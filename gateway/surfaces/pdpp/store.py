"""Records read from the legacy API, kept per stream and subject for `refresh_seconds`,
with the search indexes built from them (one per field, built when first needed)."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from gateway.surfaces.pdpp.index import FieldIndex
from gateway.surfaces.pdpp.records import sort_records
from gateway.surfaces.pdpp.streams import CompiledStream, Record, Snapshot

Loader = Callable[[], Awaitable[tuple[list[Record], bool]]]
MAX_ENTRIES = 512
MAX_SUBSET_INDEXES = 4  # per entry: indexes over the records some narrower grant may see


class Entry:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.taken = time.monotonic()
        self.by_key = {record.key: record for record in snapshot.records}
        self._indexes: dict[str, FieldIndex] = {}
        self._subsets: OrderedDict[tuple[str, tuple[int, ...]], FieldIndex] = OrderedDict()
        self._orders: dict[tuple[str | None, str], list[Record]] = {}

    def ordered(self, field: str | None, order: str) -> list[Record]:
        """Every record in the list order (records.py), sorted once per field and direction:
        the records a caller may see keep their places in it, as a view orders as its record."""
        key = (field, order)
        if key not in self._orders:
            self._orders[key] = sort_records(self.snapshot.records, field, order)
        return self._orders[key]

    def index(self, field: str, positions: tuple[int, ...] | None = None) -> FieldIndex:
        """The index of one field over every record, or over the records at `positions`
        (its scores then go by `positions`, in that order). Only fields a search may match
        are ever asked for."""
        records = self.snapshot.records
        if positions is None or len(positions) == len(records):
            if field not in self._indexes:
                self._indexes[field] = FieldIndex([r.data.get(field) for r in records])
            return self._indexes[field]
        key = (field, positions)
        found = self._subsets.get(key)
        if found is None:
            found = self._subsets[key] = self.index(field).subset(positions)
            while len(self._subsets) > MAX_SUBSET_INDEXES:
                self._subsets.popitem(last=False)
        self._subsets.move_to_end(key)
        return found


class Store:
    def __init__(self, refresh_seconds: float) -> None:
        self.refresh_seconds = refresh_seconds
        self._entries: OrderedDict[tuple[str, str], Entry] = OrderedDict()
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    async def entry(self, stream: CompiledStream, subject: str, load: Loader) -> Entry:
        """The current records of a stream for a subject, read again once too old."""
        key = (stream.name, subject)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            found = self._entries.get(key)
            if found is not None and time.monotonic() - found.taken < self.refresh_seconds:
                self._entries.move_to_end(key)
                return found
            records, truncated = await load()
            now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            found = Entry(Snapshot(records, now, truncated))
            self._entries[key] = found
            while len(self._entries) > MAX_ENTRIES:
                old, _ = self._entries.popitem(last=False)
                self._locks.pop(old, None)
            return found
