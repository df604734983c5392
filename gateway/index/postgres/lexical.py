"""Lexical search: BM25 per field, computed in one SQL statement from the tsvector columns.

Query words are parameters: the server turns each into a tsquery (`plainto_tsquery`, which
reads no operators) and ORs them with the index's `any_of` aggregate, so no caller text is
ever read as SQL or tsquery syntax. A record matches when one of the words (all of its
lexemes, if the configuration splits it) is in one of the fields searched.

Scores are BM25 as bm25s computes it by default (Lucene's variant, k1 = 1.5, b = 0.75):
idf = ln(1 + (N - df + 0.5) / (df + 0.5)), times tf / (tf + k1 (1 - b + b len / avglen)),
summed over the query's lexemes, per field. N, df and avglen are taken over the records in
`only` when it is given (all records otherwise), so a record a caller may not see never
changes a score it is shown. tf is a lexeme's number of positions in the field's tsvector,
len the field's number of lexeme occurrences (stopwords of the configuration excluded);
PostgreSQL keeps at most 256 positions of one lexeme, and none past word 16,383, so the
counts of very long texts saturate there."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import psycopg
from psycopg import sql

from gateway.index.base import FieldScores
from gateway.index.postgres.layout import Layout, column, table
from gateway.index.query import bounded

K1 = 1.5
B = 0.75


def search(conn: psycopg.Connection[Any], schema: str, layout: Layout, terms: Sequence[str],
           fields: Sequence[str], only: Collection[str] | None,
           limit: int) -> list[FieldScores]:
    positions = sorted({layout.text_column(f) for f in fields})
    words = bounded(word for t in terms if (word := t.replace("\x00", "")).strip())
    if not positions or not words or limit <= 0 or (only is not None and not only):
        return []
    params: dict[str, Any] = {"terms": words, "config": layout.text_config, "limit": limit,
                              "only": list(only) if only is not None else None,
                              "k1": K1, "b": B}
    found = conn.execute(_sql(schema, positions, only is not None), params).fetchall()
    return [FieldScores(key, {layout.texts[f]: score for f, score in zip(ids, scores,
                                                                          strict=True)})
            for key, ids, scores in found]


def _sql(schema: str, positions: list[int], restricted: bool) -> sql.Composed:
    records = table(schema, "records")
    visible = (sql.SQL("r.key IN (SELECT key FROM visible)") if restricted
               else sql.SQL("true"))
    averages = sql.SQL(", ").join(sql.SQL("avg(r.{})::float8 AS {}").format(
        column("n", i), column("avg", i)) for i in positions)
    ctes = [
        sql.SQL("visible AS (SELECT unnest(%(only)s::text[]) AS key)"),
        sql.SQL("words AS (SELECT unnest(%(terms)s::text[]) AS word)"),
        sql.SQL("query AS (SELECT {}(plainto_tsquery(%(config)s::regconfig, word)) AS tsq"
                " FROM words)").format(table(schema, "any_of")),
        sql.SQL("lexemes AS (SELECT array_agg(DISTINCT v.lexeme) AS list FROM words,"
                " unnest(to_tsvector(%(config)s::regconfig, word)) AS v)"),
        sql.SQL("totals AS (SELECT count(*)::float8 AS n, {} FROM {} r WHERE {})").format(
            averages, records, visible),
    ]
    for i in positions:
        ctes += _field_ctes(records, i, visible)
    scored = sql.SQL(" UNION ALL ").join(
        sql.SQL("SELECT * FROM {}").format(column("s", i)) for i in positions)
    return sql.SQL(
        "WITH {} SELECT key, array_agg(field), array_agg(score) FROM ({}) AS scored"
        " GROUP BY key ORDER BY sum(score) DESC, key LIMIT %(limit)s").format(
        sql.SQL(", ").join(ctes), scored)


def _field_ctes(records: sql.Identifier, i: int, visible: sql.Composable) -> list[sql.Composed]:
    """tf<i>: each matching record's count of each query lexeme in field i (the tsvector cut
    to those lexemes first: setweight marks them, ts_filter keeps them); s<i>: its BM25."""
    t, n, tf, avg = column("t", i), column("n", i), column("tf", i), column("avg", i)
    return [
        sql.SQL(
            "{tf} AS (SELECT r.key, r.{n} AS len, u.lexeme,"
            " coalesce(array_length(u.positions, 1), 1) AS tf FROM {records} r,"
            " unnest(ts_filter(setweight(r.{t}, 'A', (SELECT list FROM lexemes)), '{{a}}')) AS u"
            " WHERE r.{t} @@ (SELECT tsq FROM query) AND {visible})").format(
            tf=tf, n=n, t=t, records=records, visible=visible),
        sql.SQL(
            "{s} AS (SELECT {i} AS field, f.key, sum("
            "ln(1 + (totals.n - d.df + 0.5) / (d.df + 0.5)) * f.tf"
            " / (f.tf + %(k1)s * (1 - %(b)s + %(b)s * f.len / nullif(totals.{avg}, 0))))"
            " AS score FROM {tf} f JOIN (SELECT lexeme, count(*)::float8 AS df FROM {tf}"
            " GROUP BY lexeme) d USING (lexeme), totals GROUP BY f.key)").format(
            s=column("s", i), i=sql.Literal(i), tf=tf, avg=avg),
    ]
