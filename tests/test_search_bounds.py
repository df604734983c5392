"""A search's cost is bounded before it runs (issue 33, item 1): a query is refused past
MAX_QUERY_CHARS characters or MAX_QUERY_TERMS distinct terms, the engines and the upstream
expressions hold to the same bounds whoever calls them, no per-term statement reads a whole
table, and an index search runs in a worker thread whatever the stream's size, so one hostile
query never holds the gateway's other requests."""

from __future__ import annotations

import asyncio
import random
import statistics
import string
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult
from pdpp_config import CLIENT_KEY, OWNER_KEY, config
from processes import Gateway

from gateway.index.base import IndexedRecord
from gateway.index.query import (
    MAX_QUERY_CHARS,
    MAX_QUERY_TERMS,
    QueryTooLarge,
    query_terms,
    query_words,
)
from gateway.index.sqlite import SqliteIndex
from gateway.surfaces.pdpp.streams import fts5_match

DISCOVERY = "/.well-known/oauth-protected-resource"


def distinct_words(count: int, seed: int = 33) -> list[str]:
    """`count` distinct six-letter words no record holds (none a stopword)."""
    rnd = random.Random(seed)
    words: dict[str, None] = {}
    while len(words) < count:
        words["q" + "".join(rnd.choice(string.ascii_lowercase) for _ in range(5))] = None
    return list(words)


@pytest.fixture(scope="module")
def gateway(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """`aigw run` as its own process: its event loop is what a hostile query must not hold."""
    started = Gateway({**config(backend), "mcp": {"allowed_hosts": ["127.0.0.1:*"]}},
                      tmp_path_factory.mktemp("search-bounds"))
    yield started
    started.stop()


def search(gateway: Gateway, key: str, q: str, path: str = "/v1/search") -> httpx.Response:
    return httpx.get(gateway.url + path, params={"q": q, "limit": 5},
                     headers={"X-API-Key": key}, timeout=120)


@pytest.mark.parametrize("key", [CLIENT_KEY, OWNER_KEY], ids=["client", "owner"])
def test_a_hostile_search_never_holds_a_discovery_request(gateway: Gateway, key: str) -> None:
    """4,000 distinct words (the issue's query): refused at once, and the discovery requests
    sent while it is under way answer as they do alone. Before, it was searched on the event
    loop for seconds, and every other request waited for it."""
    assert search(gateway, key, "refund").status_code == 200  # the indexes are built
    with httpx.Client(base_url=gateway.url, timeout=120) as client:
        def discovery() -> float:
            started = time.perf_counter()
            assert client.get(DISCOVERY).status_code == 200
            return time.perf_counter() - started

        alone = statistics.median(discovery() for _ in range(5))
        answer: list[httpx.Response] = []
        hostile = threading.Thread(target=lambda: answer.append(
            search(gateway, key, " ".join(distinct_words(4000)))))
        hostile.start()
        beside = [discovery()]
        while hostile.is_alive() or len(beside) < 3:
            beside.append(discovery())
        hostile.join()
    # Relative to the same request alone, with room for a machine whose cores are both busy.
    assert max(beside) < max(0.5, 10 * alone), (alone, beside)
    refused = answer[0]
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["code"] == "query_too_long"


def test_more_distinct_terms_than_the_bound_are_refused_naming_it(gateway: Gateway) -> None:
    words = distinct_words(MAX_QUERY_TERMS + 1)
    q = " ".join(words)
    assert len(q) <= MAX_QUERY_CHARS
    refused = search(gateway, CLIENT_KEY, q)
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == "q"
    assert error["code"] == "too_many_query_terms" and str(MAX_QUERY_TERMS) in error["message"]
    assert error["request_id"] == refused.headers["request-id"]
    # Repeats, stopwords and case are not terms of their own.
    within = " ".join(words[:MAX_QUERY_TERMS - 1] + [w.upper() for w in words[:5]]
                      + ["the", "and", "of", "refund"])
    assert search(gateway, CLIENT_KEY, within).status_code == 200
    # A semantic search embeds the text, whatever its words: only its length is bounded.
    assert search(gateway, CLIENT_KEY, q, "/v1/search/semantic").status_code == 200


def test_the_mcp_search_tool_meets_the_same_bound(gateway: Gateway) -> None:
    """The official MCP client calling `pdpp_search` (which calls the same search)."""
    async def called() -> CallToolResult:
        async with httpx2.AsyncClient(headers={"X-API-Key": CLIENT_KEY}, timeout=60) as http, \
                Client(streamable_http_client(gateway.url + "/mcp", http_client=http)) as client:
            return await client.call_tool(
                "pdpp_search", {"q": " ".join(distinct_words(MAX_QUERY_TERMS + 8))})

    result = asyncio.run(called())
    assert result.is_error
    assert result.structured_content is not None
    assert result.structured_content["error"]["code"] == "too_many_query_terms"


@pytest.mark.parametrize("path", ["/v1/search", "/v1/search/semantic"])
def test_a_query_longer_than_the_bound_is_refused_naming_it(gateway: Gateway, path: str) -> None:
    refused = search(gateway, OWNER_KEY, "refund " * (MAX_QUERY_CHARS // 7 + 2), path)
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["code"] == "query_too_long" and error["param"] == "q"
    assert str(MAX_QUERY_CHARS) in error["message"]


def test_the_openapi_document_states_the_bounds(gateway: Gateway) -> None:
    paths = httpx.get(gateway.url + "/.well-known/aigw/openapi.json", timeout=30).json()["paths"]
    for path in ("/v1/search", "/v1/search/semantic"):
        q = next(p for p in paths[path]["get"]["parameters"] if p["name"] == "q")
        assert q["schema"]["maxLength"] == MAX_QUERY_CHARS
        assert str(MAX_QUERY_CHARS) in q["description"]
    lexical = next(p for p in paths["/v1/search"]["get"]["parameters"] if p["name"] == "q")
    assert f"{MAX_QUERY_TERMS} distinct search terms" in lexical["description"]


def test_query_terms_are_distinct_and_bounded() -> None:
    assert query_terms("Refund refunds REFUND the card") == ["refund", "card"]
    assert len(query_terms(" ".join(distinct_words(MAX_QUERY_TERMS)))) == MAX_QUERY_TERMS
    with pytest.raises(QueryTooLarge) as terms:
        query_terms(" ".join(distinct_words(MAX_QUERY_TERMS + 1)))
    assert (terms.value.bound, terms.value.limit) == ("terms", MAX_QUERY_TERMS)
    with pytest.raises(QueryTooLarge) as chars:
        query_terms("a" * (MAX_QUERY_CHARS + 1))
    assert (chars.value.bound, chars.value.limit) == ("chars", MAX_QUERY_CHARS)


def test_an_upstream_fts5_expression_holds_the_same_bound() -> None:
    words = distinct_words(4000)
    expression = fts5_match(" ".join(w for word in words for w in (word, word)), ("subject",))
    quoted = " ".join(f'"{word}"' for word in words[:MAX_QUERY_TERMS])
    assert expression == "{subject} : (" + quoted + ")"  # each word once, the first ones


def test_other_cases_of_a_word_take_no_place_of_another_in_an_upstream_search() -> None:
    """What an upstream is sent holds each word once whatever its case, so 32 distinct words
    typed twice over in two cases all get there."""
    words = distinct_words(MAX_QUERY_TERMS)
    typed = " ".join(f"{word} {word.upper()}" for word in words)
    assert len(query_terms(typed)) == MAX_QUERY_TERMS  # the surfaces accept it
    assert query_words(typed) == words


@pytest.fixture
def index(tmp_path: Path) -> Iterator[SqliteIndex]:
    common = distinct_words(40, seed=1)
    made = SqliteIndex(tmp_path / "bounds.db", fields=["title", "body"], max_bytes=1 << 26)
    made.replace([IndexedRecord(str(i), "1", {}, {"title": " ".join(common[i % 40:][:3]),
                                                  "body": " ".join(common)})
                  for i in range(200)], truncated=False)
    yield made
    made.close()


def test_the_index_searches_at_most_the_bound_of_terms_whoever_asks(index: SqliteIndex) -> None:
    """The engine's own guard: the terms past the bound are not searched at all."""
    common = distinct_words(40, seed=1)
    unknown = distinct_words(4000)
    assert index.lexical([*unknown[:MAX_QUERY_TERMS - 1], common[0]], ["body"], None, 5)
    assert index.lexical([*unknown, common[0]], ["body"], None, 5) == []


def test_no_statement_per_term_reads_every_record_length(index: SqliteIndex) -> None:
    """The lengths table is read whole as often for one query word as for the most."""
    common = distinct_words(40, seed=1)
    statements: list[str] = []
    index.lexical(["warm"], ["title", "body"], None, 5)  # this thread's connection, made
    index._connection().set_trace_callback(statements.append)
    scans = []
    try:
        for terms in (common[:1], common[:MAX_QUERY_TERMS]):
            statements.clear()
            assert index.lexical(terms, ["title", "body"], None, 5)
            scans.append(sum(1 for s in statements if "FROM lengths" in s
                             and "WHERE" not in s and "JOIN" not in s))
    finally:
        index._connection().set_trace_callback(None)
    assert scans[0] == scans[1] <= 2, scans


async def test_an_index_search_of_a_small_stream_runs_off_the_event_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A search's cost grows with its query, not only with the stream: however few records,
    the index is searched in a worker thread, never on the loop."""
    from gateway.surfaces.pdpp import search as pdpp_search
    from gateway.surfaces.pdpp.config import Pdpp
    from gateway.surfaces.pdpp.indexing import indexed
    from gateway.surfaces.pdpp.projection import Access
    from gateway.surfaces.pdpp.store import Entry
    from gateway.surfaces.pdpp.streams import Record, Snapshot, compile_streams

    stream = compile_streams(Pdpp.model_validate({"streams": {"notes": {
        "connector_id": "c", "primary_key": "id", "cursor_field": "id",
        "fields": {"id": {"path": "id", "required": True}, "text": {"path": "text"}},
        "records": {"upstream": "u", "path": "/notes", "mapping": {"id": "id"}},
        "search": {"lexical_fields": ["text"]}}}}), {"u"})["notes"]
    records = [Record("a", {"id": "a", "text": "refund card"})]
    index = SqliteIndex(tmp_path / "small.db", fields=["text"], max_bytes=1 << 24)
    index.replace(indexed(stream, records, None), truncated=False)
    entry = Entry(Snapshot(records, "2026-01-01T00:00:00Z", False), index, 0.0)
    threads: list[threading.Thread] = []
    searched = index.lexical

    def watched(*args, **kwargs):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread())
        return searched(*args, **kwargs)

    monkeypatch.setattr(index, "lexical", watched)

    async def entry_for(_: object) -> Entry:
        return entry

    ranked = await pdpp_search.lexical("refund", [Access(stream, frozenset({"id", "text"}))],
                                       [], entry_for, None, False, 10)  # type: ignore[arg-type]
    assert [found.record.key for found in ranked.hits] == ["a"]
    loop_thread = threading.current_thread()
    assert threads and all(thread is not loop_thread for thread in threads)
    assert asyncio.get_running_loop().is_running()
    index.close()
