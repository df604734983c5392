"""The embedded search index (gateway/index/sqlite): BM25 per field with a grant as a column
filter, statistics over the records a caller may see, cosine search, incremental refresh, a
restart, a byte budget, and readers (threads and another process) while a build commits."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.index.base import IndexedRecord
from gateway.index.sqlite import SqliteIndex, schema, writes

ROOT = Path(__file__).resolve().parent.parent
FIELDS = ["title", "body", "tags"]
BIG = 1 << 30


def record(key: str, title: str = "", body: str = "", tags: str = "", version: str = "1",
           vectors: dict[str, list[float]] | None = None) -> IndexedRecord:
    texts = {name: text for name, text in (("title", title), ("body", body), ("tags", tags))
             if text}
    return IndexedRecord(key, version, {"key": key, "title": title}, texts, vectors or {})


ARTICLES = [
    record("a1", "Refund policy", "How refunds work for a damaged item.", "billing refund"),
    record("a2", "Shipping times", "Parcels ship in two days; refunds are separate.", "shipping"),
    record("a3", "Reset your password", "Use the reset link we send by email.", "account"),
    record("a4", "Refunds for gift cards", "Gift cards are refunded as store credit.",
           "billing"),
    record("a5", "Contact us", "Write to support at any time.", ""),
]


@pytest.fixture
def index(tmp_path: Path) -> Iterator[SqliteIndex]:
    found = SqliteIndex(tmp_path / "index.db", fields=FIELDS, max_bytes=BIG)
    found.replace(ARTICLES, truncated=False)
    yield found
    found.close()


def keys(hits: list) -> list[str]:
    return [hit.key for hit in hits]


def test_a_new_index_is_empty_and_building(tmp_path: Path) -> None:
    fresh = SqliteIndex(tmp_path / "new.db", fields=FIELDS, max_bytes=BIG)
    stats = fresh.stats()
    assert (stats.records, stats.built_at, stats.state, stats.truncated) == \
        (0, None, "building", False)
    assert fresh.lexical(["refund"], FIELDS, None, 10) == []
    assert fresh.records() == [] and fresh.versions() == {}
    fresh.close()


def test_build_then_search_across_fields_best_first(index: SqliteIndex) -> None:
    stats = index.stats()
    assert (stats.records, stats.state, stats.truncated) == (5, "ready", False)
    assert stats.built_at is not None and stats.bytes > 0
    hits = index.lexical(["refunds"], FIELDS, None, 10)  # stemmed: refund, refunded, refunds
    assert set(keys(hits)) == {"a1", "a2", "a4"}
    totals = [sum(hit.scores.values()) for hit in hits]
    assert totals == sorted(totals, reverse=True)
    by_key = {hit.key: hit.scores for hit in hits}
    assert set(by_key["a1"]) == {"title", "body", "tags"}  # every field that matched
    assert set(by_key["a2"]) == {"body"}
    assert all(score > 0 for scores in by_key.values() for score in scores.values())
    assert keys(index.lexical(["refunds"], FIELDS, None, 2)) == keys(hits)[:2]


def test_search_one_field_alone(index: SqliteIndex) -> None:
    assert keys(index.lexical(["password"], ["title"], None, 10)) == ["a3"]
    assert index.lexical(["password"], ["body"], None, 10) == []
    hits = index.lexical(["email", "reset"], ["body"], None, 10)
    assert keys(hits) == ["a3"] and set(hits[0].scores) == {"body"}


def test_a_grant_is_a_column_filter(index: SqliteIndex) -> None:
    """Words in a field the caller may not match neither find a record nor add to its score."""
    assert index.lexical(["billing"], ["title", "body"], None, 10) == []  # only in tags
    granted = index.lexical(["refund", "billing"], ["title"], None, 10)
    assert set(keys(granted)) == {"a1", "a4"}
    assert all(set(hit.scores) == {"title"} for hit in granted)
    assert index.lexical(["refund"], ["not-indexed"], None, 10) == []
    assert index.lexical(["refund"], [], None, 10) == []


def test_query_terms_are_words_never_query_syntax(index: SqliteIndex) -> None:
    for hostile in ['"', "refund*", "NEAR(refund policy)", "{title}: refund", "title:refund",
                    "refund OR", "AND", "(", "^refund", "-", "'; DROP TABLE records; --"]:
        hits = index.lexical([hostile], FIELDS, None, 10)
        assert set(keys(hits)) <= {"a1", "a2", "a4", "a5"}, hostile
    assert index.lexical(["", "   ", "!!"], FIELDS, None, 10) == []
    assert index.stats().records == 5


def _reference_bm25(records: list[IndexedRecord], terms: list[str], fields: list[str],
                    only: set[str]) -> list[tuple[str, dict[str, float]]]:
    """BM25 per field (k1 1.5, b 0.75, Lucene's IDF) over the `only` records, from scratch;
    texts are words of two letters, which the index's tokenizer keeps as they are."""
    seen = [r for r in records if r.key in only]
    words = {r.key: {f: r.texts.get(f, "").split() for f in fields} for r in seen}
    found = []
    for r in seen:
        scores = {}
        for f in fields:
            average = sum(len(words[o.key][f]) for o in seen) / len(seen)
            score = 0.0
            for term in terms:
                df = sum(term in words[o.key][f] for o in seen)
                tf = words[r.key][f].count(term)
                if tf:
                    idf = math.log(1 + (len(seen) - df + 0.5) / (df + 0.5))
                    length = len(words[r.key][f])
                    score += idf * tf * 2.5 / (tf + 1.5 * (0.25 + 0.75 * length / average))
            if score:
                scores[f] = score
        if scores:
            found.append((r.key, scores))
    return sorted(found, key=lambda hit: (-sum(hit[1].values()), hit[0]))


def test_scores_are_bm25_per_field_over_only(tmp_path: Path) -> None:
    """Occurrence counts from 1 to 60, a word in nearly every record (FTS5's own IDF for it is
    not positive), words in fields not asked for, records not in `only`."""
    generator = random.Random(5)
    vocabulary = ["ab", "cd", "ef", "gh", "ij", "kl"]
    records = []
    for i in range(80):
        texts = {f: " ".join(generator.choices(vocabulary, weights=[30, 5, 3, 2, 1, 1],
                                               k=generator.randint(1, 90)))
                 for f in FIELDS if generator.random() < 0.8}
        records.append(IndexedRecord(f"r{i:02}", "1", {}, texts, {}))
    records.append(IndexedRecord("many", "1", {}, {"body": "ef " * 60 + "ab"}, {}))
    index = SqliteIndex(tmp_path / "ref.db", fields=FIELDS, max_bytes=BIG)
    index.replace(records, truncated=False)
    everyone = {r.key for r in records}
    for terms, fields, only in ((["ab"], FIELDS, everyone),
                                (["ef", "cd", "zz"], ["body", "tags"], everyone),
                                (["ef", "ij", "ab"], FIELDS, {f"r{i:02}" for i in range(0, 80, 3)}
                                 | {"many"})):
        expected = _reference_bm25(records, terms, fields, only)
        got = index.lexical(terms, fields, None if only == everyone else only, 1000)
        assert [hit.key for hit in got] == [key for key, _ in expected]
        for hit, (_, scores) in zip(got, expected, strict=True):
            assert hit.scores == pytest.approx(scores, rel=1e-9)
    index.close()


def _corpus() -> tuple[list[IndexedRecord], list[IndexedRecord]]:
    """Visible records, and hidden ones that would sway the statistics: they hold the query
    terms often (lowering IDF) and are long (raising average lengths)."""
    visible = [record(f"v{i}", f"refund note {i}", "refund " * (i % 3 + 1) + "shipping policy",
                      "billing" if i % 2 else "") for i in range(12)]
    hidden = [record(f"h{i}", "refund refund shipping", "refund shipping " * 40,
                     "billing refund") for i in range(30)]
    return visible, hidden


def test_scores_over_only_ignore_every_hidden_record(tmp_path: Path) -> None:
    visible, hidden = _corpus()
    everything = SqliteIndex(tmp_path / "all.db", fields=FIELDS, max_bytes=BIG)
    everything.replace([*hidden[:15], *visible, *hidden[15:]], truncated=False)
    alone = SqliteIndex(tmp_path / "visible.db", fields=FIELDS, max_bytes=BIG)
    alone.replace(visible, truncated=False)
    only = {r.key for r in visible} | {"absent"}
    for terms, fields in ((["refund"], FIELDS), (["refund", "shipping"], ["title", "body"]),
                          (["billing", "policy"], FIELDS)):
        seen = everything.lexical(terms, fields, only, 100)
        expected = alone.lexical(terms, fields, None, 100)
        assert keys(seen) == keys(expected)
        for got, want in zip(seen, expected, strict=True):
            assert got.scores == pytest.approx(want.scores, rel=1e-9)
    # ...where the hidden records would change them if they counted
    unrestricted = {h.key: h.scores for h in everything.lexical(["refund"], FIELDS, None, 100)}
    restricted = {h.key: h.scores for h in alone.lexical(["refund"], FIELDS, None, 100)}
    assert unrestricted["v0"] != pytest.approx(restricted["v0"])
    assert everything.lexical(["refund"], FIELDS, set(), 10) == []
    assert everything.lexical(["refund"], FIELDS, {"nobody"}, 10) == []
    everything.close()
    alone.close()


def test_vectors_nearest_first_by_best_field_among_only(tmp_path: Path) -> None:
    index = SqliteIndex(tmp_path / "v.db", fields=FIELDS, max_bytes=BIG)
    index.replace([
        record("x", vectors={"body": [1.0, 0.0, 0.0], "title": [0.0, 1.0, 0.0]}),
        record("y", vectors={"body": [0.6, 0.8, 0.0]}),
        record("z", vectors={"body": [0.0, 0.0, 5.0]}),
        record("zero", vectors={"body": [0.0, 0.0, 0.0]}),  # near nothing
        record("none"),
    ], truncated=False)
    hits = index.semantic([2.0, 0.1, 0.0], ["body", "title"], None, 10)
    assert keys(hits) == ["x", "y", "z"]
    assert hits[0].scores["body"] == pytest.approx(0.99875, abs=1e-4)
    assert hits[0].scores["title"] == pytest.approx(0.0499, abs=1e-3)
    assert hits[2].scores == {"body": pytest.approx(0.0, abs=1e-6)}
    assert keys(index.semantic([0.0, 1.0, 0.0], ["title", "body"], None, 1)) == ["x"]
    assert keys(index.semantic([0.0, 1.0, 0.0], ["body"], None, 1)) == ["y"]
    assert keys(index.semantic([2.0, 0.1, 0.0], ["body"], {"y", "z"}, 10)) == ["y", "z"]
    assert index.semantic([0.0, 0.0, 0.0], ["body"], None, 10) == []
    with pytest.raises(ValueError, match="3 dimensions"):
        index.semantic([1.0, 0.0], ["body"], None, 10)
    with pytest.raises(ValueError, match="dimensions"):
        index.apply([record("w", vectors={"body": [1.0, 2.0]})], [])
    assert index.vector_kind in {"sqlite-vec", "numpy"}
    index.close()


def test_sqlite_vec_and_numpy_rank_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same file searched by sqlite-vec (through a sqlite3 that can load extensions) and by
    numpy gives the same records, order and similarities."""
    dbapi2 = pytest.importorskip("pysqlite3.dbapi2")
    numbers = [[((i * 7 + j * 3) % 11) - 5.0 for j in range(16)] for i in range(40)]
    records = [record(f"r{i:02}", vectors={"body": v, "title": v[::-1]})
               for i, v in enumerate(numbers)]
    query = [float(j % 5) - 2 for j in range(16)]
    only = {f"r{i:02}" for i in range(0, 40, 3)}
    plain = SqliteIndex(tmp_path / "v.db", fields=FIELDS, max_bytes=BIG)
    plain.replace(records, truncated=False)
    by_numpy = [plain.semantic(query, ["body", "title"], scope, 7) for scope in (None, only)]
    plain.close()
    monkeypatch.setattr(schema, "sqlite3", dbapi2)
    loaded = SqliteIndex(tmp_path / "v.db", fields=FIELDS, max_bytes=BIG)
    assert loaded.vector_kind == "sqlite-vec"
    by_vec = [loaded.semantic(query, ["body", "title"], scope, 7) for scope in (None, only)]
    loaded.close()
    for vec_hits, numpy_hits in zip(by_vec, by_numpy, strict=True):
        assert keys(vec_hits) == keys(numpy_hits)
        for a, b in zip(vec_hits, numpy_hits, strict=True):
            assert a.scores == pytest.approx(b.scores, abs=1e-5)


def test_apply_upserts_and_deletes(index: SqliteIndex) -> None:
    index.mark("building")
    index.apply([record("a3", "Reset a lost password", "Ask support to refund nothing.",
                        version="2"),
                 record("a6", "Refund times", "Refunds take five days.")], ["a1", "missing"])
    assert index.versions() == {"a2": "1", "a3": "2", "a4": "1", "a5": "1", "a6": "1"}
    assert set(keys(index.lexical(["refund"], FIELDS, None, 10))) == {"a2", "a3", "a4", "a6"}
    assert keys(index.lexical(["email"], FIELDS, None, 10)) == []  # a3's old text is gone
    assert index.records(["a3", "a1", "a6"]) == [
        ("a3", {"key": "a3", "title": "Reset a lost password"}),
        ("a6", {"key": "a6", "title": "Refund times"})]
    stats = index.stats()
    assert (stats.records, stats.state, stats.truncated) == (5, "ready", False)


def test_a_key_given_twice_is_held_once_as_last_given(index: SqliteIndex) -> None:
    index.apply([record("d", "first", version="1"), record("e", "other"),
                 record("d", "second", version="2")], [])
    assert index.versions()["d"] == "2"
    assert keys(index.lexical(["second"], FIELDS, None, 10)) == ["d"]
    assert index.lexical(["first"], FIELDS, None, 10) == []


def test_records_in_key_order(index: SqliteIndex) -> None:
    assert [key for key, _ in index.records()] == ["a1", "a2", "a3", "a4", "a5"]
    assert index.records(["a5", "a2"]) == [("a2", {"key": "a2", "title": "Shipping times"}),
                                           ("a5", {"key": "a5", "title": "Contact us"})]
    assert index.records([]) == []


def test_states_are_kept(index: SqliteIndex) -> None:
    index.mark("stale")
    assert index.stats().state == "stale"
    index.apply([], [])
    assert index.stats().state == "ready"


def test_a_restart_finds_everything_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "kept.db"
    first = SqliteIndex(path, fields=FIELDS, max_bytes=BIG)
    first.replace([*ARTICLES, record("v", vectors={"body": [1.0, 0.0]})], truncated=True)
    first.mark("stale")
    before = (first.stats(), first.versions(), first.records(),
              first.lexical(["refund"], FIELDS, None, 10), first.semantic([1, 0], ["body"],
                                                                          None, 10))
    first.close()
    again = SqliteIndex(path, fields=FIELDS, max_bytes=BIG)
    after = (again.stats(), again.versions(), again.records(),
             again.lexical(["refund"], FIELDS, None, 10), again.semantic([1, 0], ["body"],
                                                                          None, 10))
    assert after == before
    assert after[0].truncated and after[0].state == "stale"
    again.close()
    # A file made for other fields holds nothing the new ones could use: it starts over.
    other = SqliteIndex(path, fields=["title"], max_bytes=BIG)
    assert (other.stats().records, other.stats().built_at) == (0, None)
    other.close()


def test_a_closed_index_refuses_calls(tmp_path: Path) -> None:
    index = SqliteIndex(tmp_path / "c.db", fields=FIELDS, max_bytes=BIG)
    index.close()
    with pytest.raises(RuntimeError, match="closed"):
        index.versions()


def _padded(count: int, start: int = 0) -> list[IndexedRecord]:
    return [record(f"p{i:04}", f"title {i}", f"body text number {i} " + "lorem ipsum " * 60,
                   vectors={"body": [float(i % 7), 1.0, 2.0]}) for i in range(start, count)]


def test_a_byte_budget_keeps_the_first_records_that_fit_and_says_so(tmp_path: Path) -> None:
    budget = 400_000
    index = SqliteIndex(tmp_path / "b.db", fields=FIELDS, max_bytes=budget)
    records = _padded(1000)
    index.replace(records, truncated=False)
    stats = index.stats()
    kept = sorted(index.versions())
    assert 0 < stats.records < 1000 and stats.truncated
    assert kept == [r.key for r in records[:stats.records]]  # a prefix, in the order given
    assert stats.bytes <= budget
    index.replace(records[:20], truncated=False)
    assert (index.stats().records, index.stats().truncated) == (20, False)
    index.apply(_padded(1000, start=20), [])
    stats = index.stats()
    assert 20 < stats.records < 1000 and stats.truncated and stats.bytes <= budget
    assert sorted(index.versions()) == [f"p{i:04}" for i in range(stats.records)]
    index.apply([], [f"p{i:04}" for i in range(20, 1000)])
    assert (index.stats().records, index.stats().truncated) == (20, False)
    index.close()


def test_a_budget_smaller_than_an_empty_file_keeps_nothing(tmp_path: Path) -> None:
    index = SqliteIndex(tmp_path / "t.db", fields=FIELDS, max_bytes=1000)
    index.replace(ARTICLES, truncated=False)
    assert (index.stats().records, index.stats().truncated) == (0, True)
    index.close()


def test_readers_see_the_old_index_until_a_replace_commits(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    index = SqliteIndex(tmp_path / "r.db", fields=FIELDS, max_bytes=BIG)
    index.replace(ARTICLES, truncated=False)
    written, go_on = threading.Event(), threading.Event()
    real_write = writes.write

    def paused(*args: object, **kwargs: object) -> int:
        count = real_write(*args, **kwargs)  # type: ignore[arg-type]
        written.set()
        assert go_on.wait(10)
        return count

    monkeypatch.setattr(writes, "write", paused)
    writer = threading.Thread(target=index.replace, args=([record("n1", "Novel title")],),
                              kwargs={"truncated": False})
    writer.start()
    assert written.wait(10)
    assert len(index.versions()) == 5  # this thread's connection: the last commit
    assert keys(index.lexical(["refund"], FIELDS, None, 10))
    assert index.lexical(["novel"], FIELDS, None, 10) == []
    opened = SqliteIndex(tmp_path / "r.db", fields=FIELDS, max_bytes=BIG)  # waits for nothing
    assert opened.stats().records == 5
    go_on.set()
    writer.join(10)
    assert index.versions() == {"n1": "1"} == opened.versions()
    assert keys(index.lexical(["novel"], FIELDS, None, 10)) == ["n1"]
    opened.close()
    index.close()


READER = """
import json, sys
from pathlib import Path
from gateway.index.sqlite import SqliteIndex
index = SqliteIndex(sys.argv[1], fields=["title", "body", "tags"], max_bytes=1 << 30)
stop, reads, seen, bad = Path(sys.argv[2]), 0, set(), []
whole = {"a": {f"k{i:03}" for i in range(200)}, "b": {f"k{i:03}" for i in range(150)}}
print("ready", flush=True)
while not stop.exists() or reads < 20:
    versions = index.versions()  # each call is one transaction: one whole index
    kinds = set(versions.values())
    if len(kinds) != 1 or set(versions) != whole[min(kinds)]:
        bad.append(["versions", len(versions), sorted(kinds)])
    seen |= kinds
    hits = {h.key for h in index.lexical(["alpha", "beta"], ["body"], None, 1000)}
    if hits not in whole.values():
        bad.append(["hits", len(hits)])
    reads += 1
print(json.dumps({"reads": reads, "seen": sorted(seen), "bad": bad[:5]}), flush=True)
"""


def _generation(kind: str) -> list[IndexedRecord]:
    word, count = ("alpha", 200) if kind == "a" else ("beta", 150)
    return [record(f"k{i:03}", body=f"{word} record {i}", version=kind) for i in range(count)]


def test_another_process_reads_whole_indexes_while_one_replaces(tmp_path: Path) -> None:
    path, stop = tmp_path / "shared.db", tmp_path / "stop"
    index = SqliteIndex(path, fields=FIELDS, max_bytes=BIG)
    index.replace(_generation("a"), truncated=False)
    reader = subprocess.Popen([sys.executable, "-c", READER, str(path), str(stop)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "ready"
        for round_ in range(12):
            index.replace(_generation("ba"[round_ % 2]), truncated=False)
            time.sleep(0.02)
        stop.touch()
        out, _ = reader.communicate(timeout=60)
    finally:
        reader.kill()
    summary = json.loads(out)
    assert summary["bad"] == [] and summary["reads"] >= 20
    assert summary["seen"] == ["a", "b"]  # it read both while they alternated
    index.close()


def test_close_waits_for_a_transaction_under_way_and_refuses_new_ones(tmp_path: Path) -> None:
    """A connection closed under another thread's statement crashes the process (SIGSEGV in
    sqlite3): a shutdown during a refresh's write must wait for it."""
    index = SqliteIndex(tmp_path / "i.db", fields=["title"], max_bytes=10_000_000)
    index.replace([record("a", "alpha")], truncated=False)
    inside, release = threading.Event(), threading.Event()

    def writer() -> None:
        with index._transaction("BEGIN IMMEDIATE") as conn:
            inside.set()
            release.wait(30)
            conn.execute("UPDATE meta SET value = 'x' WHERE name = 'built_at'")

    thread = threading.Thread(target=writer)
    thread.start()
    assert inside.wait(30)
    closing = threading.Thread(target=index.close)
    closing.start()
    closing.join(0.2)
    assert closing.is_alive()  # still waiting: the writer holds its connection
    release.set()
    thread.join(30)
    closing.join(30)
    assert not closing.is_alive() and not thread.is_alive()
    with pytest.raises(RuntimeError, match="closed"):
        index.stats()
