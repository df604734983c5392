"""Connections to the index's server: one small pool per index, safe for a writer thread and
reader threads at once; jsonb is read with orjson. Every wait here is short (CONNECT_SECONDS):
an unreachable server is told to the caller in seconds, never after a long pool timeout."""

from __future__ import annotations

from typing import Any

import orjson
import psycopg
from psycopg.types.json import set_json_loads
from psycopg_pool import ConnectionPool

CONNECT_SECONDS = 3.0  # a new connection is waited for at most this long
# A pooled connection, at most: a pool is never short of connections for its threads (as many
# as the worker threads that use it), so this waits only for a connect, which takes
# milliseconds when the server is up; when it refuses, the pool would wait its whole timeout.
WAIT_SECONDS = 1.0


def open_pool(conninfo: str, max_connections: int = 4) -> ConnectionPool[Any]:
    """A pool connected to `conninfo` (libpq's string or URL); raises psycopg.OperationalError
    at once when the server refuses, or after CONNECT_SECONDS when it does not answer."""
    psycopg.connect(conninfo, connect_timeout=int(CONNECT_SECONDS)).close()  # fails fast
    pool = new_pool(conninfo, max_connections)
    try:
        pool.open(wait=True, timeout=CONNECT_SECONDS)
    except BaseException:
        pool.close()
        raise
    return pool


def reachable(conninfo: str) -> bool:
    """Whether a connection to `conninfo` can be made now (within CONNECT_SECONDS)."""
    try:
        psycopg.connect(conninfo, connect_timeout=int(CONNECT_SECONDS)).close()
    except psycopg.Error:
        return False
    return True


def new_pool(conninfo: str, max_connections: int) -> ConnectionPool[Any]:
    """A pool not yet opened; each connection checked before it is handed out (one left
    from before an outage would fail its caller's query)."""
    return ConnectionPool(
        conninfo, min_size=1, max_size=max_connections, open=False, configure=_configure,
        kwargs={"application_name": "aigw-index", "connect_timeout": int(CONNECT_SECONDS)},
        timeout=WAIT_SECONDS, name="aigw-index", check=ConnectionPool.check_connection)


def _configure(conn: psycopg.Connection[Any]) -> None:
    set_json_loads(orjson.loads, conn)
