"""Semantic search: the cosine similarity of the query vector to each record's vector of
each field, best field first, computed on the server. Vectors are stored at unit length, so a
cosine is a dot product: pgvector's inner product (`<#>`, negated) when the index was created
with pgvector, else a sum over the two float4 arrays. Both are exact (every record in `only`
is scored; no approximate index), and a cosine is one record's own: `only` only says which
records compete."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import psycopg
from psycopg import sql

from gateway.index.base import FieldScores
from gateway.index.postgres.layout import Layout, VectorKind, column, table
from gateway.index.postgres.writes import unit


def search(conn: psycopg.Connection[Any], schema: str, layout: Layout, kind: VectorKind,
           vector: Sequence[float], fields: Sequence[str], only: Collection[str] | None,
           limit: int) -> list[FieldScores]:
    positions = sorted({layout.vector_column(f) for f in fields})
    query = unit(vector, layout.dimensions)
    if not positions or query is None or limit <= 0 or (only is not None and not only):
        return []
    params = {"query": query, "limit": limit,
              "only": list(only) if only is not None else None}
    found = conn.execute(_sql(schema, layout, kind, positions, only is not None),
                         params).fetchall()
    return [FieldScores(key, {layout.vectors[j]: s for j, s in zip(positions, scores,
                                                                    strict=True)
                              if s is not None})
            for key, *scores in found]


def _sql(schema: str, layout: Layout, kind: VectorKind, positions: list[int],
         restricted: bool) -> sql.Composed:
    scores = [_similarity(column("v", j), layout, kind) for j in positions]
    named = sql.SQL(", ").join(sql.SQL("{} AS {}").format(s, column("s", j))
                               for s, j in zip(scores, positions, strict=True))
    present = sql.SQL(" OR ").join(sql.SQL("r.{} IS NOT NULL").format(column("v", j))
                                   for j in positions)
    visible = (sql.SQL("r.key IN (SELECT unnest(%(only)s::text[]))") if restricted
               else sql.SQL("true"))
    best = sql.SQL("greatest({})").format(
        sql.SQL(", ").join(column("s", j) for j in positions))
    return sql.SQL(
        "SELECT key, {columns} FROM (SELECT r.key, {named} FROM {records} r"
        " WHERE ({present}) AND {visible}) AS scored"
        " ORDER BY {best} DESC, key LIMIT %(limit)s").format(
        columns=sql.SQL(", ").join(column("s", j) for j in positions), named=named,
        records=table(schema, "records"), present=present, visible=visible, best=best)


def _similarity(vector: sql.Identifier, layout: Layout, kind: VectorKind) -> sql.Composed:
    if kind == "pgvector":
        return sql.SQL("-(r.{} <#> %(query)s::float4[]::vector({}))").format(
            vector, sql.Literal(layout.dimensions))
    return sql.SQL("(SELECT sum(a::float8 * b) FROM unnest(r.{}, %(query)s::float4[])"
                   " AS u(a, b))").format(vector)
