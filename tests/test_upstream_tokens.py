"""Upstreams paged by an opaque `next` token (keyset), in memory: AIDRE, AIP and PDPP read
them with `{after}` filled from the mapping's `next`, and the token travels to the client only
sealed inside the gateway's own cursor."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import pytest
from aidre_config import aidre_gateway_config
from inprocess import memory_gateway
from pdpp_config import OWNER_KEY, demo_pdpp
from pdpp_config import config as pdpp_gateway_config
from test_aip import ask

from gateway.upstream.memory import Reply, UpstreamRequest

RECORDS = [{"id": f"r{index:04d}", "title": f"Record {index}",
            "text": f"Refunds and invoices, record {index}. A second sentence is here.",
            "visibility": "internal" if index % 3 == 0 else "public",
            "updated_at": f"2026-01-01T00:{index // 60:02d}:{index % 60:02d}Z"}
           for index in range(1, 241)]
PUBLIC = [r["id"] for r in RECORDS if r["visibility"] == "public"]
STAFF_KEY = "tokens-staff-key"


class KeysetApi:
    """A legacy API that pages only by an opaque token: `?after=` (empty: from the top) and
    `?limit=`, answering `{"data": [...], "paging": {"next": token | null}}`. A token it did
    not issue is a 400, as keyset APIs answer."""

    def __init__(self, page_cap: int = 1000) -> None:
        self.page_cap = page_cap
        self.calls: list[dict[str, str]] = []

    def __call__(self, request: UpstreamRequest) -> Reply:
        query = dict(request.query)
        self.calls.append(query)
        start = self._start(query.get("after", ""))
        if start is None:
            return Reply.json({"error": "bad token"}, status=400)
        limit = min(int(query.get("limit", "10")), self.page_cap)
        page = RECORDS[start:start + limit]
        more = start + limit < len(RECORDS)
        token = _token(start + limit) if more else None
        return Reply.json({"data": page, "paging": {"next": token}})

    @staticmethod
    def _start(after: str) -> int | None:
        if not after:
            return 0
        try:
            kind, _, position = base64.urlsafe_b64decode(after.encode()).decode().partition(":")
        except ValueError:
            return None
        return int(position) if kind == "pos" and position.isdigit() else None


def _token(position: int) -> str:
    return base64.urlsafe_b64encode(f"pos:{position}".encode()).decode()


def operation(**changes: Any) -> dict[str, Any]:
    return {"upstream": "legacy", "path": "/records",
            "query": {"q": "{query}", "limit": "{limit}", "after": "{after}"},
            "mapping": {"items": "data", "id": "id", "text": "text", "next": "paging.next",
                        "fields": {"title": "title"},
                        "metadata": {"visibility": "visibility"}},
            **changes}


def staff_key() -> dict[str, Any]:
    return {"sha256": hashlib.sha256(STAFF_KEY.encode()).hexdigest(), "subject": "staff",
            "client_id": "staff", "scopes": ["articles:read"]}


def aidre_config(workdir: Path, **search: Any) -> dict[str, Any]:
    config = aidre_gateway_config("http://legacy.invalid", workdir, aidre={"collections": {
        "records": {"description": "Records of a keyset-paged API.",
                    "text_search": operation(**search),
                    "record_visibility": {"scopes": {"internal": ["articles:read"]}}}}})
    config["upstreams"] = {"legacy": {"url": "http://legacy.invalid"}}
    (workdir / "policies" / "vector-return.yaml").unlink()
    return config


async def every_page(client: Any, body: dict[str, Any], headers: dict[str, str] | None = None
                     ) -> tuple[list[str], list[str]]:
    """(the ids of every page, in order; the cursors that led there)."""
    ids: list[str] = []
    cursors: list[str] = []
    for _ in range(100):
        response = await client.post("/search", json=body, headers=headers or {})
        assert response.status_code == 200, response.text
        ids += [result["id"] for result in response.json()["results"]]
        cursor = response.json()["meta"].get("next_cursor")
        if cursor is None:
            return ids, cursors
        cursors.append(cursor)
        body = {**body, "cursor": cursor}
    raise AssertionError("paging did not end")


@pytest.mark.parametrize("page_cap", [1000, 4])
async def test_aidre_pages_a_keyset_upstream_by_its_token(tmp_path: Path, page_cap: int):
    api = KeysetApi(page_cap)
    config = aidre_config(tmp_path, max_items=page_cap if page_cap < 1000 else None)
    async with memory_gateway(config, tmp_path, {"legacy": api}) as gateway:
        body = {"query": "refunds", "collection": "records", "top_k": 7}
        ids, cursors = await every_page(gateway.client, body)
    assert ids == [f"records:{item}" for item in PUBLIC]  # each once, the upstream's order
    tokens = {call["after"] for call in api.calls} - {""}
    assert tokens and all(token not in cursor for token in tokens for cursor in cursors)
    # No page re-reads the upstream from the top: past the first, every call sends a token
    # or resumes inside the page it names, asking at most a page and a page's offset more.
    assert sum(1 for call in api.calls if call["after"] == "") <= 2
    assert max(int(call["limit"]) for call in api.calls) <= 2 * (7 + 1)


async def test_a_caller_who_sees_more_pages_through_more(tmp_path: Path):
    config = aidre_config(tmp_path)
    config["auth"]["api_keys"]["keys"].append(staff_key())
    api = KeysetApi()
    async with memory_gateway(config, tmp_path, {"legacy": api}) as gateway:
        body = {"query": "refunds", "collection": "records", "top_k": 10}
        ids, cursors = await every_page(gateway.client, body, {"X-API-Key": STAFF_KEY})
    assert ids == [f"records:{r['id']}" for r in RECORDS]
    # Nothing hidden, no page cap: a page's look-ahead record is the one the next page starts
    # with, inside the upstream page already read. That page is read again at its own size,
    # then its token followed: two calls a page, never a longer page, never from the top.
    assert len(api.calls) <= 2 * (len(cursors) + 1)
    assert sum(1 for call in api.calls if call["after"] == "") == 2
    assert max(int(call["limit"]) for call in api.calls) == 10 + 1


async def test_a_cursor_of_one_query_is_refused_for_another(tmp_path: Path):
    async with memory_gateway(aidre_config(tmp_path), tmp_path,
                              {"legacy": KeysetApi(4)}) as gateway:
        body = {"query": "refunds", "collection": "records", "top_k": 5}
        first = await gateway.client.post("/search", json=body)
        cursor = first.json()["meta"]["next_cursor"]
        other = await gateway.client.post("/search", json={**body, "query": "invoices",
                                                           "cursor": cursor})
    assert other.status_code == 400 and "another query" in other.text


async def test_an_upstream_token_of_the_wrong_kind_is_a_mapping_error(tmp_path: Path):
    def api(request: UpstreamRequest) -> Reply:
        return Reply.json({"data": RECORDS[:3], "paging": {"next": {"opaque": True}}})

    async with memory_gateway(aidre_config(tmp_path), tmp_path, {"legacy": api}) as gateway:
        response = await gateway.client.post(
            "/search", json={"query": "refunds", "collection": "records", "top_k": 5})
    assert response.status_code == 503  # AIDRE's dialect for an upstream it cannot use
    assert response.json()["details"] == {"reason": "mapping", "field": "next",
                                          "expected": "a string or an integer"}


def aip_config(workdir: Path, page_cap: int) -> dict[str, Any]:
    search = operation(max_items=page_cap)
    search["query"] = {"q": "{query}", "limit": "{limit}", "after": "{after}"}
    (workdir / "policies").mkdir(exist_ok=True)
    return {
        "public_base_url": "https://ai.example.com", "policies": str(workdir / "policies"),
        "upstreams": {"legacy": {"url": "http://legacy.invalid"}},
        "auth": {"default_access": "public", "api_keys": {"keys": [staff_key()]}},
        "aip": {
            "publisher": {"id": "pub", "domain": "example.com", "name": "Example"},
            "editorial_domains": ["support.billing"],
            "retrieval": {"max_chunks": 5, "max_tokens": 5000, "chunk_tokens": 80,
                          "supports": {"chunks": True, "citations": True,
                                       "full_article": False}},
            "sources": {"records": {"search": search, "search_texts": "excerpts",
                                    "record_visibility": {"scopes": {
                                        "internal": ["articles:read"]}}}},
        },
    }


async def test_aip_reads_on_through_a_keyset_upstream_until_it_has_the_hits_wanted(
        tmp_path: Path):
    api = KeysetApi()
    async with memory_gateway(aip_config(tmp_path, 2), tmp_path, {"legacy": api}) as gateway:
        response = await gateway.client.post("/pag/retrieve", json=ask(query="refunds"))
    assert response.status_code == 200, response.text
    chunks = response.json()["content"]["chunks"]
    assert [chunk["id"].split("#")[0] for chunk in chunks] == PUBLIC[:5]
    assert [call["after"] != "" for call in api.calls] == [False, True, True, True]
    assert [call["limit"] for call in api.calls] == ["2", "2", "2", "1"]  # what is still wanted


async def test_pdpp_reads_every_record_of_a_keyset_upstream(tmp_path: Path):
    pdpp = demo_pdpp()
    messages = pdpp["streams"]["messages"]
    messages["records"] = {"upstream": "legacy", "path": "/records",
                           "query": {"limit": "{limit}", "after": "{after}"},
                           "mapping": {"items": "data", "id": "id", "next": "paging.next"}}
    messages.pop("record", None)
    messages["page_size"] = 50
    messages["fields"] = {"id": {"path": "id"}, "subject": {"path": "title"},
                          "body": {"path": "text"},
                          "sent_at": {"path": "updated_at", "format": "date-time"}}
    messages["search"] = {"lexical_fields": ["subject", "body"]}
    pdpp["streams"] = {"messages": messages}
    config = pdpp_gateway_config("http://legacy.invalid", pdpp, legacy="http://legacy.invalid")
    api = KeysetApi()
    async with memory_gateway(config, tmp_path, {"legacy": api}) as gateway:
        keys, cursor = [], None
        for _ in range(20):
            params = {"limit": 100, **({"cursor": cursor} if cursor else {})}
            response = await gateway.client.get("/v1/streams/messages/records", params=params,
                                                headers={"X-API-Key": OWNER_KEY})
            assert response.status_code == 200, response.text
            keys += [record["id"] for record in response.json()["data"]]
            cursor = response.json().get("next_cursor")
            if cursor is None:
                break
    assert sorted(keys) == [r["id"] for r in RECORDS]  # each once (listed newest first)
    assert len(api.calls) == len(RECORDS) // 50 + 1  # each page once, until no token
    assert [call["after"] == "" for call in api.calls] == [True] + [False] * 4
