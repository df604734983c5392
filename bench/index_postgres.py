"""Timings of the shared index engine (gateway/index/postgres) on a synthetic stream: build
(`replace`), an incremental refresh, and lexical and semantic queries over every record and
over the half a caller may see (`only`). Records: a title of 8 words and a body of 150 from a
Zipf-like 20,000-word vocabulary, one 256-dimension vector per field; the index is dropped
after.

Usage: .venv/bin/python bench/index_postgres.py [--records N] [--conninfo DSN] [--rounds N]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from gateway.index.base import IndexedRecord
from gateway.index.postgres import PostgresIndex

DIMENSIONS = 256


def records(count: int, seed: int = 7) -> list[IndexedRecord]:
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(20_000)]
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]

    def words(n: int) -> str:
        return " ".join(rng.choices(vocabulary, weights, k=n))

    def vector() -> list[float]:
        return [rng.gauss(0, 1) for _ in range(DIMENSIONS)]

    made = []
    for i in range(count):
        title, body = words(8), words(150)
        made.append(IndexedRecord(f"r{i:06d}", "1", {"id": i, "title": title, "body": body},
                                  {"title": title, "body": body},
                                  {"title": vector(), "body": vector()}))
    return made


def timed(job: Callable[[], Any], rounds: int) -> float:
    """The median of `rounds` runs of `job`, in milliseconds."""
    spent = []
    for _ in range(rounds):
        start = time.perf_counter()
        job()
        spent.append((time.perf_counter() - start) * 1000)
    return statistics.median(spent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--conninfo", default="host=127.0.0.1 port=5432 user=postgres dbname=test")
    options = parser.parse_args()
    stream = records(options.records)
    half = {r.key for r in stream[::2]}
    index = PostgresIndex.connect(options.conninfo, f"bench {uuid.uuid4().hex[:8]}",
                                  texts=("title", "body"), vectors=("title", "body"),
                                  dimensions=DIMENSIONS)
    query = stream[0].vectors["body"]
    rows: list[tuple[str, float]] = []
    try:
        rows.append(("replace (build)", timed(lambda: index.replace(stream, truncated=False), 1)))
        changed = [IndexedRecord(r.key, "2", r.data, r.texts, r.vectors) for r in stream[:100]]
        rows.append(("apply 100 upserts + 100 deletions",
                     timed(lambda: index.apply(changed, [r.key for r in stream[-100:]]), 1)))
        index.replace(stream, truncated=False)
        n = options.rounds
        rows += [
            ("versions()", timed(index.versions, n)),
            ("records() all", timed(index.records, n)),
            ("records(100 keys)", timed(lambda: index.records([r.key for r in stream[:100]]), n)),
            ("stats()", timed(index.stats, n)),
            ("lexical rare word, 2 fields", timed(
                lambda: index.lexical(["w15000"], ["title", "body"], None, 10), n)),
            ("lexical 3 common words, 2 fields", timed(
                lambda: index.lexical(["w1", "w5", "w20"], ["title", "body"], None, 10), n)),
            ("lexical 3 common words, only half", timed(
                lambda: index.lexical(["w1", "w5", "w20"], ["title", "body"], half, 10), n)),
            ("semantic 2 fields", timed(
                lambda: index.semantic(query, ["title", "body"], None, 10), n)),
            ("semantic 2 fields, only half", timed(
                lambda: index.semantic(query, ["title", "body"], half, 10), n)),
        ]
        stats = index.stats()
    finally:
        index.drop()
        index.close()
    print(f"{options.records} records, vectors: {index.vector_kind}, "
          f"{stats.bytes / 1e6:.1f} MB on the server")
    print("| operation | ms |\n|---|---:|")
    for name, ms in rows:
        print(f"| {name} | {ms:,.1f} |")


if __name__ == "__main__":
    main()
