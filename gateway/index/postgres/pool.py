"""Connections to the index's server: one small pool per process (several indexes may share
it), safe for a writer thread and reader threads at once; jsonb is read with orjson."""

from __future__ import annotations

from typing import Any

import orjson
import psycopg
from psycopg.types.json import set_json_loads
from psycopg_pool import ConnectionPool

CONNECT_SECONDS = 10.0


def open_pool(conninfo: str, max_connections: int = 4) -> ConnectionPool[Any]:
    """A pool connected to `conninfo` (libpq's string or URL); raises if no connection can
    be made within CONNECT_SECONDS."""
    pool: ConnectionPool[Any] = ConnectionPool(
        conninfo, min_size=1, max_size=max_connections, open=False, configure=_configure,
        kwargs={"application_name": "aigw-index", "connect_timeout": int(CONNECT_SECONDS)},
        timeout=CONNECT_SECONDS, name="aigw-index")
    try:
        pool.open(wait=True, timeout=CONNECT_SECONDS)
    except BaseException:
        pool.close()
        raise
    return pool


def _configure(conn: psycopg.Connection[Any]) -> None:
    set_json_loads(orjson.loads, conn)
