"""A circuit breaker in front of the index's pool. Once a connection or a query fails for want
of the server, every caller is refused at once (IndexUnavailable) for RETRY_SECONDS; then one
caller probes with a connection of its own (refused logins fail in milliseconds, where the
pool would wait its whole timeout, and a pool backing off from failed reconnects would not
try again for up to a minute): on success a fresh pool replaces the old one."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from gateway.index.base import IndexUnavailable
from gateway.index.postgres.pool import CONNECT_SECONDS, WAIT_SECONDS, new_pool

RETRY_SECONDS = 2.0  # after a failure, callers are refused at once for this long


class Guard:
    """Blocking, like the pool it guards: used from worker threads only."""

    def __init__(self, pool: ConnectionPool[Any], conninfo: str | None = None,
                 max_connections: int = 4) -> None:
        """`conninfo` lets a probe replace the pool; without it, the pool itself is tried."""
        self._pool = pool
        self._conninfo = conninfo
        self._max = max_connections
        self._lock = threading.Lock()
        self._failed_at: float | None = None
        self._probing = False

    @property
    def up(self) -> bool:
        """Whether the last attempt reached the server (no I/O)."""
        return self._failed_at is None

    @property
    def pool(self) -> ConnectionPool[Any]:
        return self._pool

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection; IndexUnavailable when the server cannot be reached (also
        when it is lost during the caller's work)."""
        pool = self._usable()
        try:
            with pool.connection(timeout=WAIT_SECONDS) as conn:
                yield conn
        except psycopg.OperationalError as exc:  # the pool's timeout is one too
            self._failed()
            raise IndexUnavailable("the index's database cannot be reached") from exc
        self._failed_at = None

    def check(self) -> bool:
        """Whether the server is reachable, probing it if the breaker lets a probe through."""
        try:
            self._usable()
        except IndexUnavailable:
            return False
        return True

    def close(self) -> None:
        self._pool.close()

    def _usable(self) -> ConnectionPool[Any]:
        with self._lock:
            if self._failed_at is None or (self._conninfo is None and self._retry_due()):
                return self._pool
            if self._probing or not self._retry_due():
                raise IndexUnavailable("the index's database was unreachable moments ago")
            self._probing = True
        try:
            psycopg.connect(self._conninfo or "", connect_timeout=int(CONNECT_SECONDS)).close()
        except psycopg.Error as exc:
            with self._lock:
                self._failed_at, self._probing = time.monotonic(), False
            raise IndexUnavailable("the index's database cannot be reached") from exc
        fresh = new_pool(self._conninfo or "", self._max)
        fresh.open(wait=False)
        with self._lock:
            old, self._pool, self._failed_at = self._pool, fresh, None
            self._probing = False
        old.close(timeout=0)
        return fresh

    def _retry_due(self) -> bool:
        return self._failed_at is not None and \
            time.monotonic() - self._failed_at >= RETRY_SECONDS

    def _failed(self) -> None:
        with self._lock:
            self._failed_at = time.monotonic()
