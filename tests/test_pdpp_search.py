"""PDPP `GET /v1/search` and `/v1/search/semantic` over real HTTP: the WHEN/THEN scenarios
of lexical-retrieval.md and semantic-retrieval-current.md a gateway can meet."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from inprocess import InProcessGateway
from pdpp_config import CLIENT_KEY, OWNER_KEY, SUBJECT_ONLY_KEY, check, config, demo_pdpp
from processes import Gateway

SEARCHES = [("/v1/search", "lexical_search"), ("/v1/search/semantic", "semantic_search")]


@pytest.fixture(scope="module")
def gateway(backend: str, tmp_path_factory) -> Iterator[Gateway]:
    started = InProcessGateway(config(backend), tmp_path_factory.mktemp("pdpp-search"))
    yield started
    started.stop()


@pytest.fixture(scope="module")
def get(gateway: Gateway):
    def request(path: str, key: str | None = OWNER_KEY, **params) -> httpx.Response:
        headers = {"X-API-Key": key} if key else {}
        return httpx.get(gateway.url + path, headers=headers, timeout=30, **params)
    return request


def refused(response: httpx.Response, status: int = 400, code: str = "invalid_request",
            param: str | None = None) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    check(body, "error")
    assert body["error"]["code"] == code
    if status == 400:
        assert body["error"]["type"] == "invalid_request_error"
    if param:
        assert body["error"]["param"] == param
    assert "data" not in body


def records(get, stream: str, key: str = OWNER_KEY) -> dict[str, dict]:
    page = get(f"/v1/streams/{stream}/records?limit=100", key=key).json()
    return {r["id"]: r["data"] for r in page["data"]}


@pytest.mark.parametrize("path,schema", SEARCHES)
def test_results_are_candidate_references_with_verbatim_snippets(get, path, schema):
    response = get(path + "?q=refund%20payment%20card&streams[]=messages")
    assert response.status_code == 200
    page = response.json()
    check(page, schema)
    assert page["data"]
    stored = records(get, "messages")
    for result in page["data"]:
        assert result["object"] == "search_result" and result["stream"] == "messages"
        assert result["connector_id"] == "helpcentre-messages" and result["emitted_at"]
        assert set(result["matched_fields"]) <= {"subject", "body"}
        assert "score" not in result and "data" not in result
        assert not any(k.startswith("_") for k in result)
        assert result["record_url"] == f"/v1/streams/messages/records/{result['record_key']}"
        if "snippet" in result:
            assert result["snippet"]["field"] in result["matched_fields"]
            assert result["snippet"]["text"] in stored[result["record_key"]][
                result["snippet"]["field"]]
        if schema == "semantic_search":
            assert result["retrieval_mode"] == "semantic"


def test_lexical_meta_discloses_count_and_recall(get):
    page = get("/v1/search?q=invoice").json()
    meta = page["meta"]
    assert meta["count_accuracy"] == "exact" and meta["count"] >= len(page["data"]) > 0
    assert meta["recall"] == {"complete": True, "ranking_scope": "all_matches",
                              "truncated": False}
    assert len(page["data"]) == 10  # default_limit
    streams = {r["stream"] for r in get("/v1/search?q=invoice&limit=50").json()["data"]}
    assert streams == {"messages", "articles"}  # owner: every stream, no connector_id needed


@pytest.mark.parametrize("path,schema", SEARCHES)
def test_q_is_required(get, path, schema):
    refused(get(path), param="q")
    refused(get(path + "?q=%20"), param="q")


@pytest.mark.parametrize("path,schema", SEARCHES)
@pytest.mark.parametrize("param", ["vector", "embedding", "embed", "semantic", "model",
                                   "model_id", "model_family", "rank", "boost", "weights",
                                   "blend", "connector_id", "fields", "expand", "expand[]",
                                   "order", "sort", "mode", "view", "_debug"])
def test_forbidden_parameters_are_refused_never_ignored(get, path, schema, param):
    refused(get(f"{path}?q=card&{param}=x"), param=param)
    refused(get(f"{path}?q=card&{param}=x", key=CLIENT_KEY), param=param)


@pytest.mark.parametrize("path,schema", SEARCHES)
def test_filters_need_exactly_one_stream(get, path, schema):
    gte = "filter[sent_at][gte]=2024-01-01T00:00:00Z"
    refused(get(f"{path}?q=card&{gte}"), param="filter[sent_at][gte]")
    refused(get(f"{path}?q=card&streams[]=messages&streams[]=articles&{gte}"))
    refused(get(f"{path}?q=card&streams[]=messages&filter[sent_at][junk]=1"))
    refused(get(f"{path}?q=card&streams[]=articles&filter[updated_at][gt]=2024-01-01"))
    ok = get(f"{path}?q=card%20payment&streams[]=messages&{gte}&limit=50")
    assert ok.status_code == 200
    stored = records(get, "messages")
    assert ok.json()["data"]
    assert all(stored[r["record_key"]]["sent_at"] >= "2024-01-01T00:00:00Z"
               for r in ok.json()["data"])


@pytest.mark.parametrize("path,schema", SEARCHES)
def test_client_filter_on_an_ungranted_field_is_refused(get, path, schema):
    refused(get(f"{path}?q=card&streams[]=messages&filter[body]=x", key=CLIENT_KEY), 403,
            "field_not_granted")


@pytest.mark.parametrize("path,schema", SEARCHES)
def test_ungranted_stream_is_a_permission_error(get, path, schema):
    refused(get(f"{path}?q=card&streams[]=articles", key=SUBJECT_ONLY_KEY), 403,
            "grant_stream_not_allowed")


@pytest.mark.parametrize("path,schema", SEARCHES)
def test_only_granted_fields_match_and_snippet(get, path, schema):
    """Grant `subject` only: `body` never matches, and no snippet comes from it."""
    stored = records(get, "messages")
    page = get(f"{path}?q=payment%20card%20invoice%20password&limit=50",
               key=SUBJECT_ONLY_KEY).json()
    check(page, schema)
    for result in page["data"]:
        assert result["stream"] == "messages" and result["matched_fields"] == ["subject"]
        if "snippet" in result:
            assert result["snippet"]["field"] == "subject"
            assert result["snippet"]["text"] in stored[result["record_key"]]["subject"]
    owner_only_body = get(f"{path}?q=kind%20regards%20team&streams[]=messages&limit=50").json()
    assert any("body" in r["matched_fields"] for r in owner_only_body["data"])
    narrow = get(f"{path}?q=kind%20regards%20team&limit=50", key=SUBJECT_ONLY_KEY).json()
    assert all("body" not in r["matched_fields"] for r in narrow["data"])


@pytest.mark.parametrize("path,schema", SEARCHES)
def test_a_stream_without_matchable_fields_contributes_nothing(get, path, schema):
    """Messages declare subject and body; this client may match only subject."""
    page = get(f"{path}?q=billing&streams[]=articles", key=CLIENT_KEY)
    assert page.status_code == 200  # title granted: searched
    none = get(f"{path}?q=kind%20regards&streams[]=messages&limit=50", key=CLIENT_KEY)
    assert none.status_code == 200
    assert all(r["matched_fields"] == ["subject"] for r in none.json()["data"])


@pytest.mark.parametrize("path,schema", SEARCHES)
def test_pagination_and_cursor_binding(get, path, schema):
    first = get(f"{path}?q=card%20payment&limit=3").json()
    assert first["has_more"] and first["next_cursor"]
    cursor = first["next_cursor"]
    second = get(f"{path}?q=card%20payment&limit=3&cursor={cursor}").json()
    keys = [(r["stream"], r["record_key"]) for r in first["data"] + second["data"]]
    assert len(keys) == len(set(keys)) == 6
    other = "/v1/search" if path.endswith("semantic") else "/v1/search/semantic"
    refused(get(f"{other}?q=card%20payment&cursor={cursor}"), code="invalid_cursor")
    refused(get(f"{path}?q=other&cursor={cursor}"), code="invalid_cursor")
    refused(get(f"{path}?q=card%20payment&cursor={cursor}", key=CLIENT_KEY),
            code="invalid_cursor")
    refused(get(f"/v1/streams/messages/records?cursor={cursor}"), code="invalid_cursor")
    refused(get(f"{path}?q=card%20payment&cursor={cursor}&streams[]=messages"),
            code="invalid_cursor")
    records_cursor = get("/v1/streams/messages/records?limit=1").json()["next_cursor"]
    refused(get(f"{path}?q=card&cursor={records_cursor}"), code="invalid_cursor")


def test_search_limit_above_max_is_clamped_with_a_warning(get):
    page = get("/v1/search?q=card&limit=500").json()
    assert len(page["data"]) <= 50
    assert [w["code"] for w in page["meta"]["warnings"]] == ["limit_clamped"]


def test_ungranted_field_is_never_sent_to_the_upstream_search(backend, echo, inprocess_factory):
    pdpp = demo_pdpp()
    messages = pdpp["streams"]["messages"]
    messages["search"]["lexical"] = {"operation": {
        "upstream": "recorder", "path": "/rec/search",
        "query": {"q": "{query}", "fields": "{fields}", "only": "{fields_csv}"},
        "mapping": {"items": "items", "id": "id"}}}
    started = inprocess_factory(config(backend, pdpp, recorder=echo))
    before = len(httpx.get(echo + "/recorded").json())
    for key in (SUBJECT_ONLY_KEY, OWNER_KEY):
        response = httpx.get(started.url + "/v1/search?q=refund&streams[]=messages",
                             headers={"X-API-Key": key}, timeout=30)
        assert response.status_code == 200
    client_call, owner_call = [c["query"] for c in httpx.get(echo + "/recorded").json()[before:]]
    assert [v for k, v in client_call if k == "fields"] == ["subject"]
    assert ["only", "subject"] in client_call and ["q", "refund"] in client_call
    assert "body" not in str(client_call)
    assert [v for k, v in owner_call if k == "fields"] == ["subject", "body"]
    no_match = httpx.get(started.url + "/v1/search?q=refund&streams[]=messages",
                         headers={"X-API-Key": CLIENT_KEY}, timeout=30)
    assert no_match.status_code == 200


def test_stream_with_no_matchable_field_is_not_asked(backend, echo, inprocess_factory):
    pdpp = demo_pdpp()
    pdpp["streams"]["messages"]["search"] = {"lexical_fields": ["body"], "lexical": {
        "operation": {"upstream": "recorder", "path": "/rec/empty", "query": {"q": "{query}"},
                      "mapping": {"items": "items", "id": "id"}}}}
    started = inprocess_factory(config(backend, pdpp, recorder=echo))
    before = len(httpx.get(echo + "/recorded").json())
    response = httpx.get(started.url + "/v1/search?q=refund&streams[]=messages",
                         headers={"X-API-Key": SUBJECT_ONLY_KEY}, timeout=30)
    assert response.status_code == 200 and response.json()["data"] == []
    assert httpx.get(echo + "/recorded").json()[before:] == []


@pytest.mark.parametrize("path,schema", SEARCHES)
def test_emitted_at_of_a_hit_never_carries_an_ungranted_field(get, path, schema):
    """Grant {messages: [id, subject]}: no hit's `emitted_at` is the hidden `sent_at`."""
    stored = records(get, "messages")
    page = get(f"{path}?q=payment%20card%20invoice%20password%20refund&limit=50",
               key=SUBJECT_ONLY_KEY).json()
    check(page, schema)
    assert page["data"]
    for result in page["data"]:
        assert result["emitted_at"] != stored[result["record_key"]]["sent_at"]
    granted = get(f"{path}?q=payment%20card%20invoice&streams[]=messages&limit=50",
                  key=CLIENT_KEY).json()["data"]
    assert granted and all(r["emitted_at"] == stored[r["record_key"]]["sent_at"]
                           for r in granted)


@pytest.mark.parametrize("path,schema", SEARCHES)
@pytest.mark.parametrize("limit", ["²", "١٢", " 5"])
def test_a_limit_that_is_not_ascii_digits_is_a_pdpp_400(get, path, schema, limit):
    refused(get(path, params={"q": "card", "limit": limit}), param="limit")


async def test_records_outside_the_grant_do_not_sway_the_ranking(tmp_path):
    """BM25's term statistics come from the records scored: a grant's `resources` must be
    ranked as if the stream held only them, or the order would tell what the others say."""
    from gateway.index.sqlite import SqliteIndex
    from gateway.surfaces.pdpp import search
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
    granted = [Record("a", {"id": "a", "text": "refund refund card"}),
               Record("b", {"id": "b", "text": "card card refund"})]
    hidden = [Record(f"h{i}", {"id": f"h{i}", "text": "card"}) for i in range(6)]

    async def scores(records: list[Record], access: Access) -> dict[str, float]:
        index = SqliteIndex(tmp_path / f"{len(records)}.db", fields=["text"], max_bytes=1 << 24)
        index.replace(indexed(stream, records, None), truncated=False)
        entry = Entry(Snapshot(records, "2026-01-01T00:00:00Z", False), index, 0.0)

        async def entry_for(_: object) -> Entry:
            return entry

        ranked = await search.lexical("refund card", [access], [], entry_for, None, False, 10)
        return {found.record.key: found.score for found in ranked.hits}

    fields = frozenset({"id", "text"})
    alone = await scores(granted, Access(stream, fields))
    among_others = await scores([*granted, *hidden],
                                Access(stream, fields, resources=frozenset({"a", "b"})))
    assert among_others == alone
