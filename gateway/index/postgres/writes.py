"""Writing records: each as a row the server takes (JSON data, texts, unit vectors, its size),
what the byte budget lets in, and one COPY into a staging table from which the server makes
the records' rows (tsvectors and their lengths, vectors) in the same transaction."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import psycopg
from psycopg import sql

from gateway.index.base import IndexedRecord
from gateway.index.postgres.layout import Layout, VectorKind, column, table

_STAGE = sql.Identifier("aigw_index_stage")
# Of a field's text, what is indexed: PostgreSQL refuses a tsvector over 1 MB (~400 KB of
# distinct words), and counts every word past the 16,383rd as at that position anyway.
MAX_TEXT_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class Row:
    key: str
    version: str
    data: str  # JSON
    # What the byte budget counts: key, version, JSON data, texts, 4 bytes a dimension. The
    # server takes ~1.7-2.4 times as much (tsvectors, GIN, row headers), and until autovacuum
    # a `replace` leaves the old rows' space behind too (stats().bytes counts it).
    size: int
    texts: tuple[str | None, ...]  # per searchable field of the layout
    vectors: tuple[list[float] | None, ...]  # unit length, per vector field of the layout


def rows(records: Iterable[IndexedRecord], layout: Layout) -> list[Row]:
    """Each key once (the last record given for it wins), in the order first given."""
    latest = {record.key: record for record in records}
    return [_row(record, layout) for record in latest.values()]


def _row(record: IndexedRecord, layout: Layout) -> Row:
    data = orjson.dumps(record.data)
    if b"\\u0000" in data:  # jsonb refuses NUL characters in strings
        data = orjson.dumps(_without_nul(record.data))
    texts = tuple(_text(record.texts.get(f)) for f in layout.texts)
    vectors = tuple(unit(record.vectors.get(f), layout.dimensions) for f in layout.vectors)
    size = (len(record.key.encode()) + len(record.version.encode()) + len(data)
            + sum(len(t.encode()) for t in texts if t)
            + 4 * sum(len(v) for v in vectors if v))
    return Row(record.key, record.version, data.decode(), size, texts, vectors)


def _text(value: str | None) -> str | None:
    """The text without NUL characters (PostgreSQL's text refuses them), cut to
    MAX_TEXT_BYTES of UTF-8."""
    if not value:
        return None
    value = value.replace("\x00", "")
    if len(value) > MAX_TEXT_BYTES // 4:
        value = value.encode()[:MAX_TEXT_BYTES].decode(errors="ignore")
    return value


def _without_nul(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, dict):
        return {_without_nul(k): _without_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_nul(v) for v in value]
    return value


def unit(vector: Sequence[float] | None, dimensions: int | None) -> list[float] | None:
    """The vector scaled to length 1 (a cosine is then a dot product); None for a zero one,
    which is near nothing."""
    if vector is None:
        return None
    if len(vector) != dimensions:
        raise ValueError(f"a vector has {len(vector)} dimensions, the index {dimensions}")
    norm = math.hypot(*vector)
    if not norm or not math.isfinite(norm):
        return None
    return [x / norm for x in vector]


def fit(candidates: list[Row], budget: int | None) -> tuple[list[Row], bool]:
    """The rows that fit in `budget` bytes, taken in order (one too large is left out and
    later smaller ones still taken), and whether any was left out."""
    if budget is None:
        return candidates, False
    kept: list[Row] = []
    used = 0
    for row in candidates:
        if used + row.size <= budget:
            kept.append(row)
            used += row.size
    return kept, len(kept) < len(candidates)


def insert(conn: psycopg.Connection[Any], schema: str, layout: Layout, kind: VectorKind,
           new: list[Row]) -> None:
    """Add these rows (their keys must not be in the index) in the caller's transaction."""
    if not new:
        return
    types = (["text", "text", "text", "int8"] + ["text"] * len(layout.texts)
             + ["float4[]"] * len(layout.vectors))
    names = (["key", "version", "data", "size"] + [f"x{i}" for i in range(len(layout.texts))]
             + [f"w{j}" for j in range(len(layout.vectors))])
    conn.execute(sql.SQL("CREATE TEMP TABLE {} ({}) ON COMMIT DROP").format(
        _STAGE, sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(n), sql.SQL(t))
                                   for n, t in zip(names, types, strict=True))))
    # Binary: psycopg's text dumping of float lists took ~13 s for 10,000 records of two
    # 256-dimension vectors, this ~2 s.
    with conn.cursor().copy(sql.SQL("COPY {} FROM STDIN (FORMAT BINARY)").format(
            _STAGE)) as copy:
        copy.set_types(types)
        for row in new:
            copy.write_row((row.key, row.version, row.data, row.size, *row.texts,
                            *row.vectors))
    conn.execute(_insert_sql(schema, layout, kind), {"config": layout.text_config})


def _insert_sql(schema: str, layout: Layout, kind: VectorKind) -> sql.Composed:
    """The records' rows from the staging table: each text's tsvector and its length in
    lexeme occurrences (BM25's document length), each vector as the column's type."""
    targets: list[sql.Composable] = [sql.SQL("key, version, data, size")]
    values: list[sql.Composable] = [sql.SQL("s.key, s.version, s.data::jsonb, s.size")]
    lateral: list[sql.Composable] = []
    for i in range(len(layout.texts)):
        targets.append(sql.SQL("{}, {}").format(column("t", i), column("n", i)))
        values.append(sql.SQL("{l}.tsv, {l}.n").format(l=column("l", i)))
        lateral.append(sql.SQL(
            "LATERAL (SELECT tsv, (SELECT coalesce(sum(array_length(positions, 1)), 0)"
            " FROM unnest(tsv)) AS n FROM to_tsvector(%(config)s::regconfig, s.{x}) AS tsv) {l}"
        ).format(x=column("x", i), l=column("l", i)))
    cast = (sql.SQL("::vector({})").format(sql.Literal(layout.dimensions))
            if kind == "pgvector" else sql.SQL(""))
    for j in range(len(layout.vectors)):
        targets.append(column("v", j))
        values.append(sql.SQL("s.{}{}").format(column("w", j), cast))
    sources = sql.SQL(", ").join([sql.SQL("{} s").format(_STAGE), *lateral])
    return sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {}").format(
        table(schema, "records"), sql.SQL(", ").join(targets), sql.SQL(", ").join(values),
        sources)
