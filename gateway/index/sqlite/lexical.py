"""BM25 per field over an index's FTS5 table, with its statistics taken over the records a
caller may see.

FTS5 finds the records: one query per query word, `{c0 c2} : "word"`, the granted columns as
its column filter and the word as a quoted FTS5 string (words come from FTS5's own tokenizer,
so no caller text is ever FTS5 syntax). FTS5's bm25() cannot rank them here: it scores a row as
one document (one length for all its columns) with an IDF and average length over the whole
table, where a grant needs each field scored on its own and `only` needs statistics over the
visible records. So each record's occurrence count per column is read back from bm25() itself
(`term_counts`), and the BM25 of each field is computed from those counts with the document
frequencies and average lengths of the `only` records (`lengths` holds each record's token
count per field)."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Collection, Sequence

import orjson

from gateway.index.base import FieldScores
from gateway.index.query import bounded

K1 = 1.5  # BM25 as bm25s and Lucene compute it (with Lucene's IDF, never negative)
B = 0.75
FTS5_K1 = 1.2  # the constants of FTS5's bm25(), inverted below
FTS5_B = 0.75


def fill_only(conn: sqlite3.Connection, only: Collection[str] | None) -> int:
    """Put the ids of the `only` records held into `temp.only_ids`; how many records the
    statistics then range over (every record's when `only` is None)."""
    conn.execute("DELETE FROM temp.only_ids")
    if only is None:
        count: int = conn.execute("SELECT count(*) FROM records").fetchone()[0]
        return count
    conn.execute("INSERT OR IGNORE INTO temp.only_ids(id) SELECT r.id FROM json_each(?) AS j "
                 "JOIN records AS r ON r.key = j.value", (orjson.dumps(list(only)).decode(),))
    held: int = conn.execute("SELECT count(*) FROM temp.only_ids").fetchone()[0]
    return held


def query_words(conn: sqlite3.Connection, terms: Sequence[str]) -> dict[str, str]:
    """Each distinct token of `terms` (at most MAX_QUERY_TERMS of them) as the index stems it,
    with one word it came from (the unstemmed token: an FTS5 query stems it again, to that
    token). The two vocabularies are matched by (term, offset) here, not joined in SQL: a join
    of two fts5vocab tables has no index and compares every pair."""
    rows = list(enumerate(bounded(terms)))
    for table in ("query_stems", "query_words"):
        conn.execute(f"DELETE FROM temp.{table}")
        conn.executemany(f"INSERT INTO temp.{table}(rowid, t) VALUES (?, ?)", rows)
    try:
        words = {(doc, offset): word for word, doc, offset in conn.execute(
            "SELECT term, doc, offset FROM temp.query_words_at")}
        found: dict[str, str] = {}
        for stem, doc, offset in conn.execute(
                "SELECT term, doc, offset FROM temp.query_stems_at"):
            word = words.get((doc, offset))
            if word is not None and (stem not in found or word < found[stem]):
                found[stem] = word
        return found
    finally:
        for table in ("query_stems", "query_words"):
            conn.execute(f"DELETE FROM temp.{table}")


def search(conn: sqlite3.Connection, words: dict[str, str], columns: dict[str, int],
           width: int, restricted: bool, count: int, limit: int) -> list[FieldScores]:
    """The `limit` best records for `words` (stem -> word) in `columns` (field -> FTS5 column
    number, of `width`), among `temp.only_ids` when `restricted`; `count` records make up the
    statistics."""
    try:
        # Over every record, as FTS5's bm25() takes them (term_counts): once per query.
        rows, tokens = conn.execute(f"SELECT count(*), total({_plus('n', width)}) "
                                    "FROM lengths").fetchone()
        for stem, word in words.items():
            term_counts(conn, stem, word, sorted(columns.values()), width, restricted,
                        (rows, tokens))
        averages = _weigh(conn, sorted(columns.values()), restricted, count)
        return _best(conn, columns, averages, limit)
    finally:
        conn.execute("DELETE FROM temp.tfs")
        conn.execute("DELETE FROM temp.weights")


def term_counts(conn: sqlite3.Connection, stem: str, word: str, cols: list[int], width: int,
                restricted: bool, table: tuple[int, float]) -> None:
    """Add to `temp.tfs` how often `word` occurs in each of `cols` of each record that holds
    it there (and is in `only_ids` when `restricted`); `table` is (N, total length of all
    rows), what bm25() takes its statistics from.

    With a one-column weight vector and a one-phrase query, FTS5's bm25() is
    -idf * f * (k1 + 1) / (f + K), with K = k1 * (1 - b + b * D / avgdl): D is the row's
    length over all columns, avgdl the table's, idf = ln((N - n + 0.5) / (n + 0.5)) (1e-6 when
    not positive) for N rows of which n match; f, the word's count in that column, is then
    -bm25 * K / ((k1 + 1) * idf + bm25). Every term of it but f is known here, and f is a
    whole number: rounding gives it exactly (fts5 documents the formula)."""
    phrase = "{" + " ".join(f"c{c}" for c in cols) + "} : " + _quoted(word)
    rows, tokens = table
    matched = conn.execute("SELECT count(*) FROM fts WHERE fts MATCH ?", (phrase,)).fetchone()[0]
    if not matched:
        return
    idf = math.log((rows - matched + 0.5) / (matched + 0.5))
    factor = f"{FTS5_K1} * (1 - {FTS5_B} + {FTS5_B} * ({_plus('l.n', width)}) / :avgdl)"
    counts = ", ".join(
        f"CAST(round(-bm25(fts, {_one_hot(c, width)}) * ({factor}) / "
        f"({FTS5_K1 + 1} * :idf + bm25(fts, {_one_hot(c, width)}))) AS INTEGER)"
        for c in cols)
    among = " AND +f.rowid IN (SELECT id FROM temp.only_ids)" if restricted else ""
    conn.execute(
        f"INSERT INTO temp.tfs(doc, term, {', '.join(f't{c}' for c in cols)}) "
        f"SELECT f.rowid, :stem, {counts} FROM fts AS f CROSS JOIN lengths AS l "
        f"ON l.id = f.rowid WHERE fts MATCH :phrase{among}",
        {"stem": stem, "phrase": phrase, "idf": idf if idf > 0 else 1e-6,
         "avgdl": tokens / rows})


def _quoted(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


def _plus(prefix: str, width: int) -> str:
    return " + ".join(f"{prefix}{i}" for i in range(width))


def _one_hot(column: int, width: int) -> str:
    return ", ".join("1" if i == column else "0" for i in range(width))


def _weigh(conn: sqlite3.Connection, cols: list[int], restricted: bool,
           count: int) -> dict[int, float]:
    """Each term's IDF per column into `temp.weights`, and each column's average length: over
    the records counted."""
    among = " WHERE id IN (SELECT id FROM temp.only_ids)" if restricted else ""
    sums = conn.execute(f"SELECT {', '.join(f'total(n{c})' for c in cols)} "
                        f"FROM lengths{among}").fetchone()
    averages = {c: max(total / count, 1e-9) for c, total in zip(cols, sums, strict=True)}
    frequencies = conn.execute(f"SELECT term, {', '.join(f'count(nullif(t{c}, 0))' for c in cols)}"
                               " FROM temp.tfs GROUP BY term").fetchall()
    conn.executemany(
        f"INSERT INTO temp.weights(term, {', '.join(f'w{c}' for c in cols)}) "
        f"VALUES (?{', ?' * len(cols)})",
        [(term, *(math.log(1 + (count - df + 0.5) / (df + 0.5)) for df in dfs))
         for term, *dfs in frequencies])
    return averages


def _best(conn: sqlite3.Connection, columns: dict[str, int], averages: dict[int, float],
          limit: int) -> list[FieldScores]:
    """The records with the highest sum of their fields' BM25, with each field's score. The
    records come in `temp.tfs` order (by id): their sums need no sort, only the top does."""
    sums = ", ".join(
        f"total(w.w{c} * h.t{c} * {K1 + 1} / (h.t{c} + {K1} * (1 - {B} + {B} * l.n{c} / "
        f"{averages[c]!r}))) AS s{c}" for c in columns.values())
    names = [f"s{c}" for c in columns.values()]
    rows = conn.execute(
        f"SELECT r.key, {', '.join(names)} FROM (SELECT h.doc AS doc, {sums} "
        f"FROM temp.tfs AS h JOIN temp.weights AS w ON w.term = h.term "
        f"JOIN lengths AS l ON l.id = h.doc GROUP BY h.doc "
        f"ORDER BY {' + '.join(names)} DESC, h.doc LIMIT ?) JOIN records AS r ON r.id = doc",
        (limit,)).fetchall()
    found = [FieldScores(key, {field: score for field, score in zip(columns, scores,
                                                                   strict=True) if score > 0})
             for key, *scores in rows]
    return sorted(found, key=lambda hit: (-sum(hit.scores.values()), hit.key))
