"""Exact cosine search over an index's stored vectors (unit-length float32 blobs in `vectors`):
in SQL by sqlite-vec's `vec_distance_cosine` where this Python's sqlite3 can load the
extension, else by numpy over the same blobs. Both read one table, so a file written by either
is searched by either.

A vec0 virtual table is not used: it keeps its `k` nearest before a join filters them, so a
search among the `only` records would come back short; the exact scan honours `only` first."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Literal

import numpy as np
import orjson

from gateway.index.base import FieldScores

VectorKind = Literal["sqlite-vec", "numpy"]


def load_sqlite_vec(conn: sqlite3.Connection) -> bool:
    """Load sqlite-vec into `conn`; False where this sqlite3 cannot load extensions (built
    without them) or the extension will not load."""
    if not hasattr(conn, "enable_load_extension"):
        return False
    try:
        import sqlite_vec

        conn.enable_load_extension(True)
        try:
            sqlite_vec.load(conn)
        finally:
            conn.enable_load_extension(False)
    except (ImportError, sqlite3.Error):
        return False
    return True


def unit(vector: Sequence[float]) -> np.ndarray | None:
    """`vector` as unit-length float32, or None when it is zero (near nothing)."""
    query = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(query))
    if query.ndim != 1 or norm == 0 or not np.isfinite(norm):
        return None
    return (query / norm).astype("<f4")


def search(conn: sqlite3.Connection, engine: VectorKind, query: np.ndarray,
           fields: Sequence[str], restricted: bool, limit: int) -> list[FieldScores]:
    """The `limit` records whose best field is nearest `query`, among `temp.only_ids` when
    `restricted`, with each of their fields' cosine similarity."""
    if engine == "sqlite-vec":
        rows = _in_sql(conn, query, fields, restricted, limit)
    else:
        rows = _in_numpy(conn, query, fields, restricted, limit)
    found: dict[str, dict[str, float]] = {}
    for key, field, similarity in rows:
        found.setdefault(key, {})[field] = similarity
    ranked = sorted(found, key=lambda key: (-max(found[key].values()), key))
    return [FieldScores(key, found[key]) for key in ranked]


def _where(fields: Sequence[str], restricted: bool) -> str:
    among = " AND v.id IN (SELECT id FROM temp.only_ids)" if restricted else ""
    return f"v.field IN ({', '.join('?' * len(fields))}){among}"


def _in_sql(conn: sqlite3.Connection, query: np.ndarray, fields: Sequence[str],
            restricted: bool, limit: int) -> list[tuple[str, str, float]]:
    rows: list[tuple[str, str, float]] = conn.execute(f"""
        WITH sims AS MATERIALIZED (
            SELECT v.id AS id, v.field AS field, 1.0 - vec_distance_cosine(v.v, ?) AS s
            FROM vectors AS v WHERE {_where(fields, restricted)}),
        top AS (SELECT id, max(s) AS best FROM sims GROUP BY id ORDER BY best DESC, id LIMIT ?)
        SELECT r.key, sims.field, sims.s
        FROM top JOIN sims ON sims.id = top.id JOIN records AS r ON r.id = top.id""",
        (query.tobytes(), *fields, limit)).fetchall()
    return rows


def _in_numpy(conn: sqlite3.Connection, query: np.ndarray, fields: Sequence[str],
              restricted: bool, limit: int) -> list[tuple[str, str, float]]:
    stored = conn.execute(f"SELECT v.id, v.field, v.v FROM vectors AS v "
                          f"WHERE {_where(fields, restricted)}", tuple(fields)).fetchall()
    if not stored:
        return []
    ids = np.fromiter((row[0] for row in stored), dtype=np.int64, count=len(stored))
    matrix = np.frombuffer(b"".join(row[2] for row in stored), dtype="<f4")
    similarities = matrix.reshape(len(stored), -1) @ query
    order = np.argsort(-similarities, kind="stable")
    best: dict[int, None] = {}  # ids by their best similarity, best first
    for position in order:
        best.setdefault(int(ids[position]), None)
        if len(best) == limit:
            break
    keys = dict(conn.execute("SELECT id, key FROM records WHERE id IN "
                             "(SELECT value FROM json_each(?))",
                             (orjson.dumps(list(best)).decode(),)).fetchall())
    return [(keys[int(ids[i])], stored[i][1], float(similarities[i]))
            for i in range(len(stored)) if int(ids[i]) in best]
