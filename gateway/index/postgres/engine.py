"""`PostgresIndex`: the `SearchIndex` of one stream on a PostgreSQL server, which several
gateway replicas read and one at a time refreshes (the one holding the lease)."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC
from typing import Any

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from gateway.index.base import (
    FieldScores,
    IndexedRecord,
    IndexState,
    IndexStats,
    IndexUnavailable,
    SearchIndex,
)
from gateway.index.postgres import lease, lexical, semantic
from gateway.index.postgres.guard import Guard
from gateway.index.postgres.layout import Layout, drop_schema, open_schema, table
from gateway.index.postgres.pool import open_pool
from gateway.index.postgres.writes import fit, insert, rows


class LeaseLost(RuntimeError):
    """A write by a replica that took the refresh lease, after another replica took it over
    (or it released it): nothing of the write was committed."""


class PostgresIndex:
    """One index, as the schema `schema` on the server. Every method blocks: callers run them
    in worker threads, which may call at once (each takes its own pooled connection)."""

    def __init__(self, pool: ConnectionPool[Any] | Guard, name: str, *, texts: Sequence[str],
                 vectors: Sequence[str] = (), dimensions: int | None = None,
                 text_config: str = "english", max_bytes: int | None = None,
                 use_pgvector: bool | None = None, owns_pool: bool = False) -> None:
        """Open the index `name` with these searchable and vector fields, creating it on
        first open. `text_config` is the text search configuration both texts and query
        words go through ("english" stems and drops stopwords, "simple" only lowercases);
        `max_bytes` bounds what the index holds (writes.fit); `use_pgvector` None uses
        pgvector when the database has it, False never, True or fail."""
        self.name = name
        self.layout = Layout(tuple(texts), tuple(vectors), dimensions, text_config)
        self.max_bytes = max_bytes
        # Every connection through the breaker: an unreachable server costs its callers
        # IndexUnavailable at once, never the pool's wait (guard.py).
        self._pool = pool if isinstance(pool, Guard) else Guard(pool)
        self._owns_pool = owns_pool
        self._holder: str | None = None
        with self._pool.connection() as conn:
            # vector_kind, for the index's metadata: vectors scored by "pgvector" or "exact"
            self.schema, self.vector_kind = open_schema(conn, name, self.layout, use_pgvector)

    @classmethod
    def connect(cls, conninfo: str, name: str, *, max_connections: int = 4,
                **options: Any) -> PostgresIndex:
        """The index `name` with a pool of its own, closed with it."""
        try:
            pool = open_pool(conninfo, max_connections)
        except psycopg.OperationalError as exc:
            raise IndexUnavailable("the index's database cannot be reached") from exc
        guard = Guard(pool, conninfo, max_connections)
        try:
            return cls(guard, name, owns_pool=True, **options)
        except BaseException:
            guard.close()
            raise

    @property
    def available(self) -> bool:
        """Whether its server was reachable at the last attempt (no I/O)."""
        return self._pool.up

    def check(self) -> bool:
        """Whether its server is reachable (a probe, when the breaker lets one through)."""
        return self._pool.check()

    # Writes (by the replica holding the lease)

    def replace(self, records: Sequence[IndexedRecord], *, truncated: bool) -> None:
        kept, cut = fit(rows(records, self.layout), self.max_bytes)
        with self._writing() as conn:
            conn.execute(sql.SQL("DELETE FROM {}").format(self._table("records")))
            insert(conn, self.schema, self.layout, self.vector_kind, kept)
            conn.execute(sql.SQL(
                "UPDATE {} SET state = 'ready', built_at = clock_timestamp(),"
                " source_truncated = %s, budget_truncated = %s").format(self._table("meta")),
                [truncated, cut])

    def apply(self, upserts: Sequence[IndexedRecord], deletions: Collection[str]) -> None:
        """Upserts that no longer fit the byte budget are left out, their older versions too
        (a later refresh offers them again); the index then stays marked truncated until
        the next `replace`."""
        candidates = rows(upserts, self.layout)
        gone = list({*deletions, *(row.key for row in candidates)})
        with self._writing() as conn:
            conn.execute(sql.SQL("DELETE FROM {} WHERE key IN (SELECT unnest(%s::text[]))"
                                 ).format(self._table("records")), [gone])
            budget = None
            if self.max_bytes is not None:
                row = conn.execute(sql.SQL("SELECT coalesce(sum(size), 0) FROM {}").format(
                    self._table("records"))).fetchone()
                budget = self.max_bytes - (int(row[0]) if row else 0)
            kept, cut = fit(candidates, budget)
            insert(conn, self.schema, self.layout, self.vector_kind, kept)
            conn.execute(sql.SQL(
                "UPDATE {} SET state = 'ready', built_at = clock_timestamp(),"
                " budget_truncated = budget_truncated OR %s").format(self._table("meta")),
                [cut])

    def mark(self, state: IndexState) -> None:
        with self._writing() as conn:
            conn.execute(sql.SQL("UPDATE {} SET state = %s").format(self._table("meta")),
                         [state])

    @contextmanager
    def _writing(self) -> Iterator[psycopg.Connection[Any]]:
        """A transaction that commits only while this replica still holds the lease, if it
        took one (lease.still_held)."""
        with self._pool.connection() as conn:
            yield conn
            holder = self._holder
            if holder is not None and not lease.still_held(conn, self.schema, holder):
                raise LeaseLost(f"another replica holds the refresh lease of {self.name!r}")

    # The lease

    def try_lease(self, holder: str, seconds: float) -> bool:
        """Take or renew the refresh lease for `seconds`; False while another holder has it
        and it has not expired. This index's writes are then fenced by it."""
        with self._pool.connection() as conn:
            taken = lease.take(conn, self.schema, holder, seconds)
        if taken:
            self._holder = holder
        return taken

    def release(self, holder: str) -> None:
        with self._pool.connection() as conn:
            lease.give_up(conn, self.schema, holder)
        if self._holder == holder:
            self._holder = None

    # Reads (by every replica)

    def versions(self) -> dict[str, str]:
        with self._pool.connection() as conn:
            found = conn.execute(sql.SQL("SELECT key, version FROM {}").format(
                self._table("records"))).fetchall()
        return dict(found)

    def records(self, keys: Collection[str] | None = None) -> list[tuple[str, dict[str, Any]]]:
        if keys is not None and not keys:
            return []
        where = (sql.SQL("WHERE key IN (SELECT unnest(%s::text[]))") if keys is not None
                 else sql.SQL(""))
        with self._pool.connection() as conn:
            found = conn.execute(sql.SQL("SELECT key, data FROM {} {} ORDER BY key").format(
                self._table("records"), where), [list(keys)] if keys is not None else None)
            return [(key, data) for key, data in found.fetchall()]

    def lexical(self, terms: Sequence[str], fields: Sequence[str],
                only: Collection[str] | None, limit: int) -> list[FieldScores]:
        with self._pool.connection() as conn:
            return lexical.search(conn, self.schema, self.layout, terms, fields, only, limit)

    def semantic(self, vector: Sequence[float], fields: Sequence[str],
                 only: Collection[str] | None, limit: int) -> list[FieldScores]:
        with self._pool.connection() as conn:
            return semantic.search(conn, self.schema, self.layout, self.vector_kind, vector,
                                   fields, only, limit)

    def stats(self) -> IndexStats:
        """`bytes` is what the schema's tables take on the server, their indexes and TOAST
        included (pg_total_relation_size)."""
        with self._pool.connection() as conn:
            row = conn.execute(sql.SQL(
                "SELECT (SELECT count(*) FROM {records}),"
                " (SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
                "  WHERE c.relnamespace = %s::regnamespace AND c.relkind = 'r'),"
                " built_at, state, source_truncated OR budget_truncated FROM {meta}").format(
                records=self._table("records"), meta=self._table("meta")),
                [self.schema]).fetchone()
        if row is None:
            raise RuntimeError(f"the index {self.name!r} has lost its metadata")
        count, size, built_at, state, truncated = row
        built = built_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if built_at else None
        return IndexStats(int(count), int(size), built, state, bool(truncated))

    # Life

    def close(self) -> None:
        if self._owns_pool:
            self._pool.close()

    def drop(self) -> None:
        """Remove the index from the server (its records, metadata and lease)."""
        with self._pool.connection() as conn:
            drop_schema(conn, self.schema)

    def _table(self, name: str) -> sql.Identifier:
        return table(self.schema, name)


_IMPLEMENTS: type[SearchIndex] = PostgresIndex  # mypy checks it against the protocol
