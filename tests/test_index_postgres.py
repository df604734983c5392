"""The shared index engine (gateway/index/postgres) against the real PostgreSQL at
127.0.0.1:5432 (AIGW_TEST_POSTGRES to use another): each test opens indexes of its own name
and drops them. Two replicas are two engines with pools of their own on one index."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import bm25s
import psycopg
import pytest

from gateway.index.base import IndexedRecord
from gateway.index.postgres import LeaseLost, PostgresIndex, open_pool
from gateway.index.postgres.layout import Layout
from gateway.index.postgres.writes import rows

CONNINFO = os.environ.get("AIGW_TEST_POSTGRES",
                          "host=127.0.0.1 port=5432 user=postgres dbname=test")


def _unreachable() -> str | None:
    try:
        psycopg.connect(CONNINFO, connect_timeout=3).close()
    except psycopg.Error as error:
        return f"PostgreSQL at {CONNINFO!r} is unreachable: {error}".strip()
    return None


_WHY = _unreachable()
pytestmark = pytest.mark.skipif(_WHY is not None, reason=_WHY or "")

Opener = Callable[..., PostgresIndex]


@pytest.fixture(scope="module")
def pool() -> Iterator[Any]:
    shared = open_pool(CONNINFO)
    yield shared
    shared.close()


@pytest.fixture
def open_index(pool: Any) -> Iterator[Opener]:
    """Opens indexes named for this test (on the module's pool, or with a pool of their own
    when `replica=True`), dropped and closed after it."""
    name = f"test {uuid.uuid4().hex[:10]}"
    opened: list[PostgresIndex] = []

    def opener(*, replica: bool = False, **options: Any) -> PostgresIndex:
        options.setdefault("texts", ("title", "body"))
        index = (PostgresIndex.connect(CONNINFO, name, **options) if replica
                 else PostgresIndex(pool, name, **options))
        opened.append(index)
        return index

    yield opener
    with pool.connection() as conn:
        for schema in {index.schema for index in opened}:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    for index in opened:
        index.close()


def rec(key: str, title: str = "", body: str = "", version: str = "1",
        vectors: dict[str, list[float]] | None = None) -> IndexedRecord:
    return IndexedRecord(key, version, {"id": key, "title": title, "body": body},
                         {"title": title, "body": body}, vectors or {})


def test_a_new_index_is_empty_and_building(open_index: Opener) -> None:
    stats = open_index().stats()
    assert (stats.records, stats.built_at, stats.state, stats.truncated) == (
        0, None, "building", False)


def test_replace_then_read_records_versions_and_stats(open_index: Opener) -> None:
    index = open_index()
    index.replace([rec("b", "Beta"), rec("a", "Alpha", version="7"), rec("B", "Upper")],
                  truncated=True)
    assert index.versions() == {"a": "7", "b": "1", "B": "1"}
    # key order is code point order, as Python sorts
    assert [key for key, _ in index.records()] == ["B", "a", "b"]
    assert index.records(["b", "zz", "a"]) == [
        ("a", {"id": "a", "title": "Alpha", "body": ""}),
        ("b", {"id": "b", "title": "Beta", "body": ""})]
    assert index.records([]) == []
    stats = index.stats()
    assert (stats.records, stats.state, stats.truncated) == (3, "ready", True)
    assert stats.bytes > 0 and stats.built_at and stats.built_at.endswith("Z")
    index.replace([rec("c", "Gamma")], truncated=False)
    assert index.versions() == {"c": "1"} and not index.stats().truncated


def test_apply_upserts_and_deletes(open_index: Opener) -> None:
    index = open_index()
    index.replace([rec("a", "refund policy"), rec("b", "shipping")], truncated=False)
    index.apply([rec("b", "refund of shipping", version="2"), rec("c", "refund")], {"a", "x"})
    assert index.versions() == {"b": "2", "c": "1"}
    assert {hit.key for hit in index.lexical(["refund"], ["title"], None, 10)} == {"b", "c"}


def test_mark_records_the_state(open_index: Opener) -> None:
    index = open_index()
    index.replace([rec("a", "x")], truncated=False)
    index.mark("stale")
    assert index.stats().state == "stale"
    index.apply([], ())
    assert index.stats().state == "ready"


CORPUS = ["refund policy for damaged goods", "shipping times and shipping costs",
          "refund refund refund", "how to ask for a refund of shipping costs",
          "gift cards never expire", "policy on returns"]


def _bm25s_scores(texts: list[str], query: list[str]) -> list[float]:
    model = bm25s.BM25()  # Lucene's BM25, k1 1.5, b 0.75: what the engine computes
    model.index([text.split() for text in texts], show_progress=False)
    scores: list[float] = model.get_scores(query).tolist()
    return scores


def test_lexical_is_bm25_per_field(open_index: Opener) -> None:
    index = open_index(text_config="simple")  # no stemming, no stopwords: bm25s's tokens
    index.replace([rec(str(i), body=text) for i, text in enumerate(CORPUS)], truncated=False)
    hits = index.lexical(["refund", "costs"], ["body", "title"], None, 10)
    expected = _bm25s_scores(CORPUS, ["refund", "costs"])
    assert [hit.key for hit in hits] == sorted(
        (str(i) for i, s in enumerate(expected) if s > 0), key=lambda k: -expected[int(k)])
    for hit in hits:
        assert list(hit.scores) == ["body"]  # title matched nothing
        assert hit.scores["body"] == pytest.approx(expected[int(hit.key)], rel=1e-6)
    assert [h.key for h in index.lexical(["refund", "costs"], ["body"], None, 2)] == [
        h.key for h in hits[:2]]


def test_scores_come_from_the_records_in_only(open_index: Opener) -> None:
    index = open_index(text_config="simple")
    index.replace([rec(str(i), body=text) for i, text in enumerate(CORPUS)], truncated=False)
    only = {"0", "1", "3", "5"}
    before = index.lexical(["refund", "shipping"], ["body"], only, 10)
    expected = _bm25s_scores([CORPUS[int(k)] for k in sorted(only)], ["refund", "shipping"])
    by_key = dict(zip(sorted(only), expected, strict=True))
    assert {h.key: h.scores["body"] for h in before} == pytest.approx(
        {k: s for k, s in by_key.items() if s > 0}, rel=1e-6)
    assert "2" not in {h.key for h in before}  # "refund refund refund", not in `only`
    # a record outside `only` full of the query's words changes nothing inside it
    index.apply([rec("9", body="refund shipping refund shipping refund")], ())
    assert index.lexical(["refund", "shipping"], ["body"], only, 10) == before
    assert index.lexical(["refund"], ["body"], set(), 10) == []


def test_a_search_matches_only_the_fields_asked(open_index: Opener) -> None:
    index = open_index()
    index.replace([rec("a", title="Refunds", body="nothing here"),
                   rec("b", title="Other", body="refunds within 30 days")], truncated=False)
    assert [h.key for h in index.lexical(["refund"], ["title"], None, 10)] == ["a"]
    assert [h.key for h in index.lexical(["refund"], ["body"], None, 10)] == ["b"]
    both = index.lexical(["refunds"], ["title", "body"], None, 10)  # english stems both sides
    assert {h.key: list(h.scores) for h in both} == {"a": ["title"], "b": ["body"]}
    with pytest.raises(ValueError, match="searchable field"):
        index.lexical(["refund"], ["secret"], None, 10)


@pytest.mark.parametrize("word", [
    "refund & !policy", "policy:*", "'); DROP TABLE x; --", "\\", "it''s", "a|b", "(", ":",
    "<->", "o'brien", "\x00", " ", ""])
def test_query_words_are_never_syntax(open_index: Opener, word: str) -> None:
    index = open_index(text_config="simple")
    index.replace([rec("a", body="refund policy by o'brien"), rec("b", body="a b")],
                  truncated=False)
    hits = index.lexical([word], ["body"], None, 10)
    assert all(hit.key in {"a", "b"} for hit in hits)
    assert index.stats().records == 2


def test_quotes_and_punctuation_match_as_words(open_index: Opener) -> None:
    index = open_index(text_config="simple")
    index.replace([rec("a", body="o'brien wrote it"), rec("b", body="brien")], truncated=False)
    assert [h.key for h in index.lexical(["o'brien"], ["body"], None, 10)] == ["a"]


def _vector(*values: float) -> list[float]:
    return list(values)


def test_semantic_is_exact_cosine_by_best_field(open_index: Opener) -> None:
    index = open_index(vectors=("title", "body"), dimensions=3, use_pgvector=False)
    assert index.vector_kind == "exact"
    index.replace([
        rec("a", vectors={"title": _vector(1, 0, 0), "body": _vector(0, 1, 0)}),
        rec("b", vectors={"title": _vector(0, 0, 1), "body": _vector(2, 2, 0)}),
        rec("c", vectors={"body": _vector(0, 0, -5)}),
        rec("z", vectors={"title": _vector(0, 0, 0)}),  # near nothing
    ], truncated=False)
    hits = index.semantic([3, 0, 0], ["title", "body"], None, 10)
    assert [h.key for h in hits] == ["a", "b", "c"]
    assert hits[0].scores == pytest.approx({"title": 1.0, "body": 0.0}, abs=1e-6)
    assert hits[1].scores == pytest.approx({"title": 0.0, "body": 2 ** -0.5}, abs=1e-6)
    assert hits[2].scores == pytest.approx({"body": 0.0}, abs=1e-6)
    assert [h.key for h in index.semantic([0, 0, 1], ["body"], None, 1)] == ["a"]
    assert [h.key for h in index.semantic([0, 0, -1], ["title", "body"], {"a", "c"}, 10)] == [
        "c", "a"]
    assert index.semantic([0, 0, 0], ["title"], None, 10) == []
    with pytest.raises(ValueError, match="dimensions"):
        index.semantic([1, 0], ["title"], None, 10)
    with pytest.raises(ValueError, match="dimensions"):
        index.replace([rec("d", vectors={"title": _vector(1, 2)})], truncated=False)


def test_pgvector_when_the_database_has_it(open_index: Opener) -> None:
    with psycopg.connect(CONNINFO) as conn:
        row = conn.execute("SELECT count(*) FROM pg_available_extensions"
                           " WHERE name = 'vector'").fetchone()
    if not row or not row[0]:
        with pytest.raises(ValueError, match="pgvector"):
            open_index(vectors=("body",), dimensions=2, use_pgvector=True)
        assert open_index(vectors=("body",), dimensions=2).vector_kind == "exact"
        return
    index = open_index(vectors=("body",), dimensions=2)
    assert index.vector_kind == "pgvector"
    index.replace([rec("a", vectors={"body": [1, 0]}), rec("b", vectors={"body": [1, 1]})],
                  truncated=False)
    hits = index.semantic([0, 1], ["body"], None, 10)
    assert [(h.key, round(h.scores["body"], 5)) for h in hits] == [("b", 0.70711), ("a", 0.0)]


def test_the_byte_budget_keeps_what_fits_and_says_so(open_index: Opener) -> None:
    records = [rec(f"k{i}", body="x" * 100) for i in range(10)]
    size = rows(records[:1], Layout(("title", "body"), (), None, "english"))[0].size
    index = open_index(max_bytes=int(size * 3.5))
    index.replace(records, truncated=False)
    kept = len(index.versions())
    assert kept == 3 and index.stats().truncated
    index.replace(records[:1], truncated=False)
    assert not index.stats().truncated
    index.apply(records[1:], ())
    assert len(index.versions()) == kept and index.stats().truncated


def test_nul_characters_are_dropped_not_refused(open_index: Opener) -> None:
    index = open_index()
    index.replace([IndexedRecord("a", "1", {"t": "x\x00y", "k\x00": ["\x00"]},
                                 {"body": "re\x00fund"})], truncated=False)
    assert index.records() == [("a", {"t": "xy", "k": [""]})]
    assert [h.key for h in index.lexical(["refund"], ["body"], None, 10)] == ["a"]


def test_a_huge_text_is_indexed_up_to_a_cut(open_index: Opener) -> None:
    index = open_index(text_config="simple")
    words = " ".join(f"w{i:07d}" for i in range(250_000))  # 2 MB of distinct words
    index.replace([rec("a", body=words)], truncated=False)
    assert [h.key for h in index.lexical(["w0000001"], ["body"], None, 5)] == ["a"]
    assert index.lexical(["w0249999"], ["body"], None, 5) == []


def test_another_layout_is_another_index(open_index: Opener) -> None:
    old = open_index(texts=("title",))
    old.replace([rec("a", "refund")], truncated=False)
    new = open_index(texts=("title", "body"))
    assert new.schema != old.schema and new.stats().records == 0
    assert old.versions() == {"a": "1"}


def test_two_replicas_share_one_index_with_one_refresher(open_index: Opener) -> None:
    first = open_index(replica=True)
    second = open_index(replica=True)
    assert first.try_lease("first", 30)
    assert not second.try_lease("second", 30)
    assert first.try_lease("first", 30)  # renewed
    first.replace([rec("a", "refund"), rec("b", "shipping")], truncated=False)
    assert second.versions() == first.versions() == {"a": "1", "b": "1"}
    assert second.lexical(["refund"], ["title"], None, 5) == first.lexical(
        ["refund"], ["title"], None, 5)
    first.release("first")
    assert second.try_lease("second", 30)
    assert not first.try_lease("first", 30)
    second.apply([rec("c", "refund")], ())
    assert first.versions() == {"a": "1", "b": "1", "c": "1"}


def test_a_dead_holders_lease_expires(open_index: Opener) -> None:
    first = open_index(replica=True)
    second = open_index(replica=True)
    assert first.try_lease("first", 0.2)
    first.close()  # died without releasing
    assert not second.try_lease("second", 30)
    time.sleep(0.3)
    assert second.try_lease("second", 30)


def test_a_holder_that_lost_its_lease_cannot_commit(open_index: Opener) -> None:
    first = open_index(replica=True)
    second = open_index(replica=True)
    assert first.try_lease("first", 0.1)
    time.sleep(0.2)
    first.replace([rec("a", "mine")], truncated=False)  # expired, but no one took it over
    assert second.try_lease("second", 30)
    second.replace([rec("b", "theirs")], truncated=False)
    with pytest.raises(LeaseLost):
        first.replace([rec("a", "stale")], truncated=False)
    with pytest.raises(LeaseLost):
        first.mark("stale")
    assert second.versions() == {"b": "1"} and second.stats().state == "ready"


def test_readers_see_the_old_index_until_a_replace_commits(open_index: Opener) -> None:
    writer = open_index(replica=True)
    reader = open_index(replica=True)
    writer.replace([rec("old", "refund")], truncated=False)
    assert writer.try_lease("writer", 30)
    with psycopg.connect(CONNINFO) as blocker, psycopg.connect(CONNINFO,
                                                                 autocommit=True) as watcher:
        # Hold the lease row: the replace waits on it just before it commits.
        blocker.execute(f'SELECT 1 FROM "{writer.schema}".lease FOR UPDATE')
        done = threading.Event()
        thread = threading.Thread(target=lambda: (writer.replace(
            [rec("new", "refund")], truncated=False), done.set()))
        thread.start()
        _wait_for_lock_wait(watcher)
        assert reader.versions() == {"old": "1"}
        assert [h.key for h in reader.lexical(["refund"], ["title"], None, 5)] == ["old"]
        blocker.rollback()
        thread.join(10)
    assert done.is_set() and reader.versions() == {"new": "1"}


def _wait_for_lock_wait(conn: psycopg.Connection[Any]) -> None:
    for _ in range(200):
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                           " AND application_name = 'aigw-index'").fetchone()
        if row and row[0]:
            return
        time.sleep(0.02)
    raise AssertionError("the replace never reached its commit")


def test_replicas_opening_a_new_index_at_once(open_index: Opener) -> None:
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            open_index(replica=True)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=open_one) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
