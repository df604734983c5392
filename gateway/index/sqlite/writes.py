"""Writing records into an index's tables, inside the caller's transaction, within a byte
budget: the longest prefix of the records (in the order given) whose pages fit is written,
measured on the file's own pages (SQLite's, not an estimate)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import orjson

from gateway.index.base import IndexedRecord

CHUNK = 512  # records written (and measured) at a time


@dataclass(frozen=True, slots=True)
class Row:
    """One record as its tables hold it."""

    key: str
    version: str
    data: str  # JSON
    texts: tuple[str, ...]  # one per FTS5 column, "" where the record has none
    vectors: tuple[tuple[str, bytes], ...]  # (semantic field, unit float32 vector)


def rows(records: Sequence[IndexedRecord], fields: Sequence[str],
         dimensions: dict[str, int]) -> list[Row]:
    """The records as rows, one per key (the last record given with it, where the first
    was); texts of fields the index does not hold are left out. Each semantic field's vectors
    must all have one dimension count, recorded in `dimensions` (which an index that already
    holds vectors passes in filled)."""
    last = {record.key: record for record in records}
    return [Row(record.key, record.version, _json(record.data),
                tuple(record.texts.get(field) or "" for field in fields),
                _vectors(record, dimensions))
            for record in last.values()]


def _json(data: Mapping[str, object]) -> str:
    try:
        return orjson.dumps(data).decode()
    except TypeError:  # an integer past 64 bits, which orjson refuses
        return json.dumps(data, ensure_ascii=False)


def _vectors(record: IndexedRecord, dimensions: dict[str, int]) -> tuple[tuple[str, bytes], ...]:
    found = []
    for field, values in record.vectors.items():
        vector = np.asarray(values, dtype=np.float32)
        expected = dimensions.setdefault(field, len(vector))
        if vector.ndim != 1 or len(vector) != expected:
            raise ValueError(f"record {record.key!r}: field {field!r} has a vector of "
                             f"{len(vector)} dimensions, the index holds {expected}")
        norm = float(np.linalg.norm(vector))
        if norm > 0 and np.isfinite(norm):  # a zero vector is like none: it is near nothing
            found.append((field, (vector / norm).astype("<f4").tobytes()))
    return tuple(found)


def used_bytes(conn: sqlite3.Connection) -> int:
    """The bytes of the file's pages in use, as the current transaction leaves them."""
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    size: int = conn.execute("PRAGMA page_size").fetchone()[0]
    return int((pages - free) * size)


def write(conn: sqlite3.Connection, batch: Sequence[Row], first_id: int, budget: int) -> int:
    """Write the longest prefix of `batch` that keeps the file within `budget` bytes, with ids
    from `first_id` on; the number written."""
    written = 0
    while written < len(batch):
        chunk = batch[written:written + CHUNK]
        fitted = _fit(conn, chunk, first_id + written, budget)
        written += fitted
        if fitted < len(chunk):
            break
    return written


def _fit(conn: sqlite3.Connection, batch: Sequence[Row], first_id: int, budget: int) -> int:
    """Write `batch` if it fits; else, halving, the longest prefix of it that does."""
    if not batch:
        return 0
    conn.execute("SAVEPOINT fit")
    _insert(conn, batch, first_id)
    # A savepoint makes FTS5 write out the terms it holds in memory, so they are measured.
    conn.execute("SAVEPOINT measure")
    fits = used_bytes(conn) <= budget
    conn.execute("RELEASE measure")
    if fits:
        conn.execute("RELEASE fit")
        return len(batch)
    conn.execute("ROLLBACK TO fit")
    conn.execute("RELEASE fit")
    if len(batch) == 1:
        return 0
    half = len(batch) // 2
    first = _fit(conn, batch[:half], first_id, budget)
    if first < half:
        return first
    return half + _fit(conn, batch[half:], first_id + half, budget)


def _insert(conn: sqlite3.Connection, batch: Sequence[Row], first_id: int) -> None:
    numbered = list(enumerate(batch, start=first_id))
    conn.executemany("INSERT INTO records(id, key, version, data) VALUES (?, ?, ?, ?)",
                     [(i, row.key, row.version, row.data) for i, row in numbered])
    texts = [(i, *row.texts) for i, row in numbered if any(row.texts)]
    if texts:
        width = len(texts[0]) - 1
        names = ", ".join(f"c{c}" for c in range(width))
        marks = ", ".join("?" * (width + 1))
        conn.executemany(f"INSERT INTO fts(rowid, {names}) VALUES ({marks})", texts)
        _copy_lengths(conn, width, first_id, first_id + len(batch) - 1)
    conn.executemany("INSERT INTO vectors(field, id, v) VALUES (?, ?, ?)",
                     [(field, i, blob) for i, row in numbered for field, blob in row.vectors])


def _copy_lengths(conn: sqlite3.Connection, width: int, low: int, high: int) -> None:
    """Each new record's token count per column, as FTS5 counted them (`fts_docsize.sz`: one
    SQLite varint per column), into `lengths`."""
    sizes = conn.execute("SELECT id, sz FROM fts_docsize WHERE id BETWEEN ? AND ?",
                         (low, high)).fetchall()
    names = ", ".join(f"n{c}" for c in range(width))
    marks = ", ".join("?" * (width + 1))
    conn.executemany(f"INSERT INTO lengths(id, {names}) VALUES ({marks})",
                     [(i, *_varints(blob, width)) for i, blob in sizes])


def _varints(blob: bytes, count: int) -> list[int]:
    """The first `count` SQLite varints of `blob` (big-endian, 7 bits a byte but the 9th)."""
    values: list[int] = []
    at = 0
    while len(values) < count:
        value = 0
        for step in range(9):
            byte = blob[at]
            at += 1
            if step == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if byte < 0x80:
                break
        values.append(value)
    return values


def delete(conn: sqlite3.Connection, keys: Sequence[str]) -> None:
    """Remove the records with these keys (absent ones are ignored) from every table."""
    ids = [(i,) for (i,) in conn.execute(
        "SELECT r.id FROM json_each(?) AS j JOIN records AS r ON r.key = j.value",
        (orjson.dumps(list(keys)).decode(),))]
    for table, column in (("fts", "rowid"), ("lengths", "id"), ("vectors", "id"),
                          ("records", "id")):
        conn.executemany(f"DELETE FROM {table} WHERE {column} = ?", ids)


def dimensions(raw: str) -> dict[str, int]:
    found: Mapping[str, int] = orjson.loads(raw)
    return dict(found)
