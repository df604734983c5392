"""PDPP resource server over the demo help-centre backend, over real HTTP: metadata,
streams, records, grants, errors and headers (search: tests/test_pdpp_search.py)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from inprocess import InProcessGateway
from pdpp_config import (
    CLIENT_KEY,
    OWNER_KEY,
    RESOURCE,
    check,
    check_metadata,
    config,
    demo_pdpp,
)
from processes import Gateway


@pytest.fixture(scope="module")
def gateway(backend: str, tmp_path_factory) -> Iterator[Gateway]:
    started = InProcessGateway(config(backend), tmp_path_factory.mktemp("pdpp"))
    yield started
    started.stop()


@pytest.fixture(scope="module")
def get(gateway: Gateway):
    def request(path: str, key: str | None = OWNER_KEY, **kwargs) -> httpx.Response:
        headers = kwargs.pop("headers", {})
        if key is not None:
            headers["X-API-Key"] = key
        return httpx.get(gateway.url + path, headers=headers, timeout=30, **kwargs)
    return request


def error(response: httpx.Response, status: int, code: str, param: str | None = None) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    check(body, "error")
    assert body["error"]["code"] == code
    assert body["error"]["request_id"] == response.headers["request-id"]
    if param is not None:
        assert body["error"]["param"] == param
    return body["error"]


def test_metadata_advertises_pdpp_members_publicly(get):
    response = get("/.well-known/oauth-protected-resource", key=None)
    assert response.status_code == 200
    document = response.json()
    check_metadata(document)
    assert document["resource"] == RESOURCE  # RFC 9728 members stay
    assert document["pdpp_token_kinds_supported"] == ["owner", "client"]
    lexical = document["capabilities"]["lexical_retrieval"]
    assert lexical == {"supported": True, "endpoint": "/v1/search", "cross_stream": True,
                       "snippets": True, "default_limit": 10, "max_limit": 50}
    semantic = document["capabilities"]["semantic_retrieval"]
    assert semantic["stability"] == "experimental" and semantic["query_input"] == "text"
    assert semantic["lexical_blending"] is False and semantic["index_state"] == "built"
    assert (semantic["model"], semantic["dimensions"]) == ("demo-hash-256", 256)
    assert "score" not in lexical and "score" not in semantic  # no scores are emitted
    assert "lexical_fields" not in str(document)  # per-stream declarations stay per stream


def test_no_search_advertised_when_no_stream_declares_fields(backend, inprocess_factory):
    pdpp = demo_pdpp()
    for stream in pdpp["streams"].values():
        stream["search"] = {"lexical_fields": ["labels"]}  # an array: never searchable
    started = inprocess_factory(config(backend, pdpp))
    document = httpx.get(started.url + "/.well-known/oauth-protected-resource").json()
    assert "capabilities" not in document
    response = httpx.get(started.url + "/v1/search?q=card", headers={"X-API-Key": OWNER_KEY})
    error(response, 404, "not_found")


def test_streams_owner_sees_all_client_only_its_grant(get):
    owner = get("/v1/streams")
    assert owner.status_code == 200
    check(owner.json(), "stream_list")
    assert {s["name"] for s in owner.json()["data"]} == {"messages", "articles"}
    assert owner.headers["pdpp-version"] == "2026-04-06"
    assert owner.headers["request-id"]
    client = get("/v1/streams", key=CLIENT_KEY, headers={"PDPP-Version": "2026-04-06"})
    assert {s["name"] for s in client.json()["data"]} == {"messages", "articles"}
    from pdpp_config import SUBJECT_ONLY_KEY

    narrow = get("/v1/streams", key=SUBJECT_ONLY_KEY).json()
    assert [s["name"] for s in narrow["data"]] == ["messages"]


def test_missing_or_bad_token_is_refused_with_www_authenticate(get):
    response = get("/v1/streams", key=None)
    error(response, 401, "authentication_error")
    assert response.json()["error"]["type"] == "authentication_error"
    assert response.headers["www-authenticate"].startswith("Bearer")
    bad = get("/v1/streams", key="not-a-key")
    error(bad, 401, "authentication_error")
    assert 'error="invalid_token"' in bad.headers["www-authenticate"] \
        or bad.headers["www-authenticate"].startswith("Bearer") \
        or "apikey" in bad.headers["www-authenticate"].lower()


def test_unknown_version_is_refused(get):
    response = get("/v1/streams", headers={"PDPP-Version": "1999-01-01"})
    error(response, 400, "unsupported_version")
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_stream_metadata_declares_only_top_level_string_search_fields(get):
    response = get("/v1/streams/messages")
    assert response.status_code == 200
    document = response.json()
    check(document, "stream_metadata")
    assert document["query"]["search"] == {"lexical_fields": ["subject", "body"],
                                           "semantic_fields": ["subject", "body"]}
    assert document["query"]["range_filters"] == {"sent_at": ["gte", "gt", "lte", "lt"]}
    assert document["schema"]["properties"]["labels"]["type"] == "array"
    assert document["primary_key"] == ["id"]


def test_unknown_parameters_are_refused_by_name(get):
    error(get("/v1/streams?foo=1"), 400, "invalid_request", "foo")
    error(get("/v1/streams/messages/records?bogus=1"), 400, "invalid_request", "bogus")
    error(get("/v1/streams/messages/records?limit=1&limit=2"), 400, "invalid_request", "limit")


def test_records_list_envelope_default_limit_and_clamp(get):
    response = get("/v1/streams/articles/records")
    assert response.status_code == 200
    page = response.json()
    check(page, "record_list")
    assert len(page["data"]) == 25 and page["has_more"] is True and page["next_cursor"]
    assert all(r["connector_id"] == "helpcentre-articles" for r in page["data"])
    assert "meta" not in page
    clamped = get("/v1/streams/articles/records?limit=500").json()
    check(clamped, "record_list")
    assert len(clamped["data"]) == 100
    assert [w["code"] for w in clamped["meta"]["warnings"]] == ["limit_clamped"]


@pytest.mark.parametrize("order", ["asc", "desc"])
def test_paging_walks_every_record_once_in_order(get, order):
    seen, cursor = [], None
    while True:
        query = f"?order={order}&limit=40" + (f"&cursor={cursor}" if cursor else "")
        page = get("/v1/streams/messages/records" + query).json()
        seen += [(r["data"]["sent_at"], r["id"]) for r in page["data"]]
        cursor = page.get("next_cursor")
        if not page["has_more"]:
            break
    assert len(seen) == len(set(seen)) > 0
    assert seen == sorted(seen, reverse=order == "desc")


def test_cursors_are_direction_bound_and_grant_bound(get):
    cursor = get("/v1/streams/messages/records?limit=2&order=asc").json()["next_cursor"]
    error(get(f"/v1/streams/messages/records?limit=2&order=desc&cursor={cursor}"), 400,
          "invalid_cursor", "cursor")
    error(get(f"/v1/streams/messages/records?limit=2&order=asc&cursor={cursor}",
              key=CLIENT_KEY), 400, "invalid_cursor")
    error(get(f"/v1/streams/articles/records?order=asc&cursor={cursor}"), 400, "invalid_cursor")
    error(get("/v1/streams/messages/records?cursor=forged.sig"), 400, "invalid_cursor")
    error(get("/v1/streams/messages/records?cursor="), 400, "invalid_cursor")  # not "no cursor"


def test_fields_narrowing_and_refused_field(get):
    page = get("/v1/streams/messages/records?fields=subject&limit=3", key=CLIENT_KEY).json()
    assert all(set(r["data"]) == {"id", "subject"} for r in page["data"])
    error(get("/v1/streams/messages/records?fields=body", key=CLIENT_KEY), 403,
          "field_not_granted", "fields")
    error(get("/v1/streams/messages/records?fields=nope"), 400, "unknown_field", "fields")


def test_client_sees_only_granted_fields_and_streams(get, backend, inprocess_factory):
    page = get("/v1/streams/messages/records?limit=5", key=CLIENT_KEY).json()
    check(page, "record_list")
    assert page["data"] and all(set(r["data"]) <= {"id", "subject", "sent_at"}
                                for r in page["data"])
    one = get(f"/v1/streams/messages/records/{page['data'][0]['id']}", key=CLIENT_KEY)
    check(one.json(), "record")
    assert set(one.json()["data"]) <= {"id", "subject", "sent_at"}
    assert "body" in get(f"/v1/streams/messages/records/{page['data'][0]['id']}").json()["data"]


def test_client_owner_only_parameters_are_refused_by_name(get):
    for query, param in [("filter[subject]=x", "filter[subject]"),
                         ("filter[sent_at][gte]=2024-01-01T00:00:00Z", "filter[sent_at][gte]"),
                         ("expand[]=thread", "expand[]"), ("view=basic", "view")]:
        error(get(f"/v1/streams/messages/records?{query}", key=CLIENT_KEY), 400,
              "invalid_request", param)


def test_owner_filters_exact_and_declared_range(get):
    since = "2024-01-01T00:00:00Z"
    page = get(f"/v1/streams/messages/records?filter[sent_at][gte]={since}&limit=100").json()
    assert page["data"] and all(r["data"]["sent_at"] >= since for r in page["data"])
    read = get("/v1/streams/messages/records?filter[read]=true&limit=100").json()
    assert read["data"] and all(r["data"]["read"] is True for r in read["data"])
    error(get("/v1/streams/articles/records?filter[updated_at][gt]=2024-01-01"), 400,
          "invalid_request", "filter[updated_at][gt]")
    error(get("/v1/streams/messages/records?filter[labels]=x"), 400, "invalid_request")
    error(get("/v1/streams/messages/records?expand[]=thread"), 400, "invalid_expand")


def test_changes_since_is_refused_not_ignored(get):
    error(get("/v1/streams/messages/records?changes_since=abc"), 400, "invalid_request",
          "changes_since")


def test_ungranted_and_unknown_streams(get):
    from pdpp_config import SUBJECT_ONLY_KEY

    for path in ("/v1/streams/articles", "/v1/streams/articles/records",
                 "/v1/streams/articles/records/art-0001", "/v1/streams/nope"):
        body = error(get(path, key=SUBJECT_ONLY_KEY), 403, "grant_stream_not_allowed")
        assert body["type"] == "permission_error"
    error(get("/v1/streams/nope"), 404, "not_found")
    error(get("/v1/streams/messages/records/msg-999-999"), 404, "not_found")


def test_paths_under_the_prefix_answer_in_pdpp_dialect(get):
    response = get("/v1/streams/messages/records/x/../../y", key=None)
    assert response.status_code in (400, 401, 404)
    assert "error" in response.json() and "request_id" in response.json()["error"]


def owner_messages(get) -> dict[str, dict]:
    page = get("/v1/streams/messages/records?limit=100").json()
    return {r["id"]: r["data"] for r in page["data"]}


def test_emitted_at_never_carries_an_ungranted_field(get):
    """Grant {messages: [id, subject]}: `sent_at` is refused, and `emitted_at` (which the
    stream reads from `sent_at`) must not hand it over either, in a list or a single read."""
    from pdpp_config import SUBJECT_ONLY_KEY

    stored = owner_messages(get)
    error(get("/v1/streams/messages/records?fields=sent_at", key=SUBJECT_ONLY_KEY), 403,
          "field_not_granted", "fields")
    page = get("/v1/streams/messages/records?limit=100", key=SUBJECT_ONLY_KEY).json()
    check(page, "record_list")
    assert len(page["data"]) == len(stored)
    for record in page["data"]:
        assert set(record["data"]) == {"id", "subject"}
        assert record["emitted_at"] == page["freshness"]["captured_at"]  # when it was read
        assert record["emitted_at"] != stored[record["id"]]["sent_at"]
    for key in list(stored)[:3]:
        one = get(f"/v1/streams/messages/records/{key}", key=SUBJECT_ONLY_KEY).json()
        check(one, "record")
        assert one["emitted_at"] != stored[key]["sent_at"]
    granted = get("/v1/streams/messages/records?limit=5", key=CLIENT_KEY).json()["data"]
    assert all(r["emitted_at"] == r["data"]["sent_at"] for r in granted)  # granted: shown


@pytest.mark.parametrize("order", ["asc", "desc"])
def test_order_and_cursors_say_nothing_of_an_ungranted_cursor_field(get, order):
    """`sent_at` is the cursor field; a client that may not read it gets the records by
    primary key, and its cursors hold no `sent_at` position."""
    from pdpp_config import SUBJECT_ONLY_KEY

    seen, cursor = [], None
    while True:
        query = f"?order={order}&limit=4" + (f"&cursor={cursor}" if cursor else "")
        page = get("/v1/streams/messages/records" + query, key=SUBJECT_ONLY_KEY).json()
        seen += [r["id"] for r in page["data"]]
        cursor = page.get("next_cursor")
        if not page["has_more"]:
            break
    assert seen == sorted(owner_messages(get), reverse=order == "desc")
    assert len(seen) == len(set(seen))
    owner_cursor = get(f"/v1/streams/messages/records?order={order}&limit=4").json()
    error(get(f"/v1/streams/messages/records?order={order}&limit=4&cursor="
              f"{owner_cursor['next_cursor']}", key=SUBJECT_ONLY_KEY), 400, "invalid_cursor")


@pytest.mark.parametrize("limit", ["²", "١٢", " 5", "5 ", "+5", "1_0", "0x10", "-1", ""])
def test_a_limit_that_is_not_ascii_digits_is_a_pdpp_400(get, limit):
    for key in (OWNER_KEY, CLIENT_KEY):
        error(get("/v1/streams/messages/records", key=key, params={"limit": limit}), 400,
              "invalid_request", "limit")
