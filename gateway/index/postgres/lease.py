"""The refresh lease: one row per index naming the replica that may refresh it and until when,
by the server's clock (replicas' clocks never compare). A replica takes the lease when no one
holds it, when it is past its expiry (its holder died or stalled), or to renew its own; the
others are refused. A write by a holder checks, just before it commits and with the row
locked, that the lease is still its own, so a holder that stalled past its expiry and lost the
lease to another replica cannot commit over that replica's refresh."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from gateway.index.postgres.layout import table


def take(conn: psycopg.Connection[Any], schema: str, holder: str, seconds: float) -> bool:
    """Whether `holder` now holds the lease, for `seconds` from now."""
    if not seconds > 0:
        raise ValueError("a lease lasts a positive number of seconds")
    row = conn.execute(sql.SQL(
        "UPDATE {} SET holder = %(holder)s,"
        " expires = clock_timestamp() + make_interval(secs => %(seconds)s)"
        " WHERE id = 1 AND (holder = %(holder)s OR holder IS NULL"
        " OR expires <= clock_timestamp()) RETURNING 1").format(table(schema, "lease")),
        {"holder": holder, "seconds": float(seconds)}).fetchone()
    return row is not None


def give_up(conn: psycopg.Connection[Any], schema: str, holder: str) -> None:
    """Release the lease if `holder` holds it (another replica may take it at once)."""
    conn.execute(sql.SQL("UPDATE {} SET holder = NULL, expires = '-infinity'"
                         " WHERE id = 1 AND holder = %s").format(table(schema, "lease")),
                 [holder])


def still_held(conn: psycopg.Connection[Any], schema: str, holder: str) -> bool:
    """Whether `holder` still holds the lease, locking its row until the transaction ends
    so that no one takes it before this transaction commits. An expired lease no one took
    is still its holder's: no other replica is writing."""
    row = conn.execute(sql.SQL("SELECT 1 FROM {} WHERE id = 1 AND holder = %s FOR UPDATE"
                               ).format(table(schema, "lease")), [holder]).fetchone()
    return row is not None
