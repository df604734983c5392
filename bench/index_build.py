"""The embedded search index (gateway/index/sqlite) at the size issue 22 names: the time to build
an index of 60,000 records of ~1 KB of text in 3 searchable fields, its size on disk, and the
time of lexical queries (rare, common and several terms; over every record and over `only`
sets of several sizes) and, with --dimensions, of vector queries.

Texts are words drawn from a synthetic Zipf-distributed vocabulary (a seeded generator, so two
runs index the same corpus). Not part of the tests.

    .venv/bin/python bench/index_build.py [--records 60000] [--dimensions 256] [--pysqlite3]
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from gateway.index.base import IndexedRecord
from gateway.index.sqlite import SqliteIndex, schema

FIELDS = ["title", "body", "tags"]
VOCABULARY = 30_000


def vocabulary(seed: int = 7) -> list[str]:
    """Distinct made-up words, most frequent first."""
    generator = random.Random(seed)
    words: dict[str, None] = {}
    while len(words) < VOCABULARY:
        words["".join(generator.choices("abcdefghijklmnopqrstuvwxyz",
                                        k=generator.randint(3, 9)))] = None
    return list(words)


def corpus(count: int, dimensions: int, seed: int = 7) -> list[IndexedRecord]:
    generator = random.Random(seed)
    numbers = np.random.default_rng(seed)
    words = vocabulary()
    weights = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(VOCABULARY)))

    def text(length: int) -> str:
        return " ".join(generator.choices(words, cum_weights=weights, k=length))

    records = []
    for i in range(count):
        texts = {"title": text(8), "body": text(140), "tags": text(12)}
        vectors = {"body": numbers.normal(size=dimensions).tolist()} if dimensions else {}
        records.append(IndexedRecord(f"rec-{i:06}", "1", {"id": i, **texts}, texts, vectors))
    return records


def timed(job: Callable[[], object], repeat: int = 5) -> tuple[float, object]:
    """The median wall time of `job` over `repeat` runs, and its last result."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = job()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=60_000)
    parser.add_argument("--dimensions", type=int, default=0)
    parser.add_argument("--pysqlite3", action="store_true",
                        help="open the file with pysqlite3 (which loads sqlite-vec) where this "
                             "Python's sqlite3 cannot load extensions")
    args = parser.parse_args()
    if args.pysqlite3:
        from pysqlite3 import dbapi2

        schema.sqlite3 = dbapi2  # type: ignore[assignment]
    start = time.perf_counter()
    records = corpus(args.records, args.dimensions)
    text_bytes = sum(len(t.encode()) for r in records for t in r.texts.values())
    print(f"corpus: {len(records)} records, {text_bytes / len(records):.0f} bytes of text "
          f"each, made in {time.perf_counter() - start:.1f} s")
    with tempfile.TemporaryDirectory() as folder:
        index = SqliteIndex(Path(folder) / "bench.db", fields=FIELDS, max_bytes=1 << 40)
        print(f"vector search: {index.vector_kind}")
        start = time.perf_counter()
        index.replace(records, truncated=False)
        built = time.perf_counter() - start
        stats = index.stats()
        print(f"build (replace): {built:.1f} s, {stats.records} records, "
              f"{stats.bytes / 1e6:.1f} MB on disk")
        _queries(index, records)
        if args.dimensions:
            _vector_queries(index, records, args.dimensions)
        start = time.perf_counter()
        index.apply(corpus(500, args.dimensions, seed=8), [r.key for r in records[:500]])
        print(f"apply (500 upserts, 500 deletions): {time.perf_counter() - start:.2f} s")
        index.close()


def _queries(index: SqliteIndex, records: list[IndexedRecord]) -> None:
    words = vocabulary()
    keys = [r.key for r in records]
    onlies: dict[str, list[str] | None] = {
        "every record": None, "only: every key": keys, "only: half": keys[::2],
        "only: 1,000": keys[::len(keys) // 1000]}
    for label, terms in (("rare word", [words[20_000]]), ("mid word", [words[300]]),
                         ("top word", [words[0]]),
                         ("3 words", [words[20_000], words[300], words[0]])):
        for scope, only in onlies.items():
            for fields in (FIELDS, ["body"]):
                seconds, _ = timed(lambda t=terms, f=fields, o=only:
                                   index.lexical(t, f, o, 10))
                matched = len(index.lexical(terms, fields, only, 1_000_000))
                print(f"lexical {label:9} {'+'.join(fields):15} {scope:15}: "
                      f"{seconds * 1000:7.1f} ms ({matched} matching)")


def _vector_queries(index: SqliteIndex, records: list[IndexedRecord], dimensions: int) -> None:
    query = records[1].vectors["body"]
    keys = [r.key for r in records]
    for scope, only in (("every record", None), ("only: half", keys[::2]),
                        ("only: 1,000", keys[::len(keys) // 1000])):
        seconds, _ = timed(lambda o=only: index.semantic(query, ["body"], o, 10))
        print(f"semantic {dimensions} dims {scope:14}: {seconds * 1000:7.1f} ms")


if __name__ == "__main__":
    main()
