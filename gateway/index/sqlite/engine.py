"""`SqliteIndex`: the embedded engine, one SQLite file per index (FTS5 for words, float32
vectors searched by sqlite-vec or numpy).

Threads: each thread that calls an index gets a connection of its own (made on its first
call), so readers never wait for each other nor for the writer: the file is in WAL mode, and a
read sees the last transaction committed before it began. Writes are transactions that take
SQLite's write lock (`BEGIN IMMEDIATE`): one at a time, across threads and across the
processes of a host sharing the file, each waiting for the other up to `BUSY_SECONDS`.
Everything the index holds (records, versions, state, when it was built, whether it was cut)
is in the file: opening it again after a restart reads nothing from elsewhere."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from gateway.index.base import FieldScores, IndexedRecord, IndexState, IndexStats
from gateway.index.sqlite import lexical, schema, vectors, writes
from gateway.index.sqlite.vectors import VectorKind

# How long `close` waits for a transaction under way (a refresh's write) to end.
CLOSE_WAIT_SECONDS = 30.0


class SqliteIndex:
    """A `SearchIndex` in the SQLite file at `path` (made when absent), holding the texts of
    `fields` (the searchable ones, in a fixed order: a file made for other fields is emptied)
    within `max_bytes` of pages."""

    def __init__(self, path: str | Path, *, fields: Sequence[str], max_bytes: int) -> None:
        self.path = Path(path)
        self.fields = tuple(dict.fromkeys(fields))
        self.max_bytes = max_bytes
        self._columns = {field: number for number, field in enumerate(self.fields)}
        self._local = threading.local()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # notified when a transaction ends
        self._busy = 0  # transactions under way, in any thread
        self._connections: list[sqlite3.Connection] = []
        self._closed = False
        # for the index's metadata: vectors scored by "sqlite-vec" (this sqlite3 loads it) or
        # "numpy" (it cannot), as PostgresIndex.vector_kind says "pgvector" or "exact"
        self.vector_kind: VectorKind = "numpy"
        schema.ensure(self._connection(), self.fields)

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None and not self._closed:
            return conn
        with self._lock:
            if self._closed:
                raise RuntimeError(f"index {self.path} is closed")
            conn = schema.connect(self.path, len(self.fields))
            self._connections.append(conn)
            self.vector_kind = "sqlite-vec" if vectors.load_sqlite_vec(conn) else "numpy"
        self._local.conn = conn
        return conn

    @contextmanager
    def _transaction(self, kind: str) -> Iterator[sqlite3.Connection]:
        """`BEGIN IMMEDIATE` (a write) or `BEGIN` (reads that see one state of the file),
        counted, so `close` waits for it rather than closing its connection under it."""
        with self._lock:
            if self._closed:
                raise RuntimeError(f"index {self.path} is closed")
            self._busy += 1
        try:
            conn = self._connection()
            conn.execute(kind)
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            with self._lock:
                self._busy -= 1
                self._idle.notify_all()

    # Writes

    def replace(self, records: Sequence[IndexedRecord], *, truncated: bool) -> None:
        """Every record (the first ones that fit in `max_bytes`, when not all do), replacing
        what the index held, in one transaction: readers see the old index until it commits."""
        dimensions: dict[str, int] = {}
        batch = writes.rows(records, self.fields, dimensions)
        with self._transaction("BEGIN IMMEDIATE") as conn:
            conn.execute("DROP TABLE fts")
            for table in ("lengths", "vectors", "records"):
                conn.execute(f"DELETE FROM {table}")
            schema.create_fts(conn, len(self.fields))
            written = writes.write(conn, batch, 1, self.max_bytes)
            self._finish(conn, dimensions, cut=written < len(batch), truncated=truncated)

    def apply(self, upserts: Sequence[IndexedRecord], deletions: Collection[str]) -> None:
        """These records added or replaced (those that fit), those keys removed, in one
        transaction. `truncated` then says whether this refresh had to leave records out (a
        refresh brings back, as upserts, the records an earlier one left out) or the last
        `replace` was told its records were."""
        with self._transaction("BEGIN IMMEDIATE") as conn:
            dimensions = writes.dimensions(self._meta(conn)["dimensions"])
            batch = writes.rows(upserts, self.fields, dimensions)
            writes.delete(conn, [*deletions, *(row.key for row in batch)])
            first = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM records").fetchone()[0]
            written = writes.write(conn, batch, first, self.max_bytes)
            self._finish(conn, dimensions, cut=written < len(batch), truncated=None)

    def _finish(self, conn: sqlite3.Connection, dimensions: dict[str, int], *, cut: bool,
                truncated: bool | None) -> None:
        values = {"state": "ready", "built_at": _now(), "cut": str(int(cut)),
                  "dimensions": orjson.dumps(dimensions).decode()}
        if truncated is not None:
            values["truncated"] = str(int(truncated))
        conn.executemany("UPDATE meta SET value = ? WHERE name = ?",
                         [(value, name) for name, value in values.items()])

    def mark(self, state: IndexState) -> None:
        """Record that a build started (`building`) or a refresh failed (`stale`)."""
        with self._transaction("BEGIN IMMEDIATE") as conn:
            conn.execute("UPDATE meta SET value = ? WHERE name = 'state'", (state,))

    # Reads

    def versions(self) -> dict[str, str]:
        with self._transaction("BEGIN") as conn:
            return dict(conn.execute("SELECT key, version FROM records").fetchall())

    def records(self, keys: Collection[str] | None = None) -> list[tuple[str, dict[str, Any]]]:
        """(key, data) of the records with these keys (all when None), in key order."""
        with self._transaction("BEGIN") as conn:
            if keys is None:
                rows = conn.execute("SELECT key, data FROM records ORDER BY key")
            else:
                rows = conn.execute(
                    "SELECT key, data FROM records WHERE key IN "
                    "(SELECT value FROM json_each(?)) ORDER BY key",
                    (orjson.dumps(list(keys)).decode(),))
            return [(key, orjson.loads(data)) for key, data in rows]

    def lexical(self, terms: Sequence[str], fields: Sequence[str],
                only: Collection[str] | None, limit: int) -> list[FieldScores]:
        """The records matching any of `terms` in any of `fields` (those the index holds),
        best first by the sum of their fields' BM25 scores, at most `limit`; the statistics
        (IDF, average field lengths) over the `only` records when given."""
        columns = {f: self._columns[f] for f in dict.fromkeys(fields) if f in self._columns}
        if not columns or limit <= 0:
            return []
        with self._transaction("BEGIN") as conn:
            words = lexical.query_words(conn, terms)
            count = lexical.fill_only(conn, only) if words else 0
            if count == 0:
                return []
            return lexical.search(conn, words, columns, len(self.fields), only is not None,
                                  count, limit)

    def semantic(self, vector: Sequence[float], fields: Sequence[str],
                 only: Collection[str] | None, limit: int) -> list[FieldScores]:
        """The records nearest `vector` in any of `fields` (cosine similarity), best first by
        their best field, at most `limit`; among `only` when given. A field whose vectors have
        other dimensions than `vector` is an error."""
        query = vectors.unit(vector)
        asked = list(dict.fromkeys(fields))
        if query is None or not asked or limit <= 0:
            return []
        with self._transaction("BEGIN") as conn:
            held = writes.dimensions(self._meta(conn)["dimensions"])
            for field in asked:
                if held.get(field, len(query)) != len(query):
                    raise ValueError(f"field {field!r} holds vectors of {held[field]} "
                                     f"dimensions, not {len(query)}")
            if lexical.fill_only(conn, only) == 0:
                return []
            return vectors.search(conn, self.vector_kind, query, asked, only is not None,
                                  limit)

    def stats(self) -> IndexStats:
        with self._transaction("BEGIN") as conn:
            meta = self._meta(conn)
            count = conn.execute("SELECT count(*) FROM records").fetchone()[0]
            size = conn.execute("PRAGMA page_count").fetchone()[0] * \
                conn.execute("PRAGMA page_size").fetchone()[0]
        state: IndexState = meta["state"]  # type: ignore[assignment]
        return IndexStats(records=count, bytes=size, built_at=meta["built_at"] or None,
                          state=state, truncated=meta["truncated"] == "1" or meta["cut"] == "1")

    @staticmethod
    def _meta(conn: sqlite3.Connection) -> dict[str, str]:
        return dict(conn.execute("SELECT name, value FROM meta").fetchall())

    def close(self, wait: float = CLOSE_WAIT_SECONDS) -> None:
        """Close every thread's connection once the transactions under way have ended (a
        connection closed under another thread's statement crashes the process); new ones are
        refused. Past `wait` seconds the connections are left open, never closed under use."""
        with self._lock:
            self._closed = True
            if not self._idle.wait_for(lambda: self._busy == 0, wait):
                return
            for conn in self._connections:
                conn.close()
            self._connections.clear()


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
