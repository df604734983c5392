"""AIDRE over real HTTP: client -> in-process aigw (tests/inprocess.py; processes where a test
needs one) -> demo help-centre backend process."""

from __future__ import annotations

import base64
import http.client
import json
import math
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from aidre_config import ADVERTISED_SPACE, SPACE, aidre_gateway_config, collection
from demo_vectors import embed
from inprocess import InProcessGateway
from processes import Gateway

from gateway.surfaces.cursors import seal

AIDRE_JSON = "application/aidre+json"


@pytest.fixture(scope="module")
def gateway(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    workdir = tmp_path_factory.mktemp("aidre")
    started = InProcessGateway(aidre_gateway_config(backend, workdir), workdir)
    yield started
    started.stop()


def search(gateway: Gateway, body: dict | bytes, key: str | None = None,
           content_type: str = AIDRE_JSON) -> httpx.Response:
    headers = {"content-type": content_type, "accept": AIDRE_JSON}
    if key:
        headers["x-api-key"] = key
    content = body if isinstance(body, bytes) else httpx.Request(
        "POST", "http://x", json=body).content
    return httpx.post(gateway.url + "/search", content=content, headers=headers, timeout=10)


def assert_error(response: httpx.Response, status: int, error: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(AIDRE_JSON)
    body = response.json()
    assert body["error"] == error
    assert isinstance(body["message"], str) and isinstance(body["details"], dict)
    assert body["request_id"] == response.headers["x-request-id"]
    return body


# --------------------------------------------------------------------------- discovery


def test_discovery_document_tells_the_truth_to_anonymous_callers(gateway: Gateway):
    response = httpx.get(gateway.url + "/.well-known/ai-discovery")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    document = response.json()
    assert document["version"] == "1" and document["service"] == "AIDRE"
    assert document["endpoints"] == {
        "collections": "https://ai.example.com/collections",
        "search": "https://ai.example.com/search",
        "chunk": "https://ai.example.com/chunks/{id}",
    }
    assert document["capabilities"]["query_text"] is True
    assert document["capabilities"]["query_vector"] is True
    assert document["capabilities"]["return_vectors"] is True  # a policy can allow it
    assert document["embedding_spaces"] == [ADVERTISED_SPACE]
    assert [c["name"] for c in document["collections"]] == ["articles"]
    assert "staff" not in response.text  # §11.6: protected collections stay undescribed


def test_discovery_shows_private_collections_to_those_who_can_read_them(gateway: Gateway):
    response = httpx.get(gateway.url + "/.well-known/ai-discovery",
                         headers={"x-api-key": "staff-key"})
    assert [c["name"] for c in response.json()["collections"]] == ["articles", "staff"]
    assert response.headers["cache-control"].startswith("private")
    again = httpx.get(gateway.url + "/.well-known/ai-discovery",
                      headers={"x-api-key": "staff-key",
                               "if-none-match": response.headers["etag"]})
    assert again.status_code == 304


def test_return_vectors_is_false_when_no_policy_allows_it(backend, inprocess_factory, tmp_path):
    config = aidre_gateway_config(backend, tmp_path)
    (tmp_path / "policies" / "vector-return.yaml").write_text("vector_return: []\n")
    plain = inprocess_factory(config)
    document = httpx.get(plain.url + "/.well-known/ai-discovery").json()
    assert document["capabilities"]["return_vectors"] is False


def test_collections_lists_only_what_the_caller_may_see(gateway: Gateway):
    anonymous = httpx.get(gateway.url + "/collections").json()["collections"]
    staff = httpx.get(gateway.url + "/collections", headers={"x-api-key": "staff-key"}).json()
    assert [c["name"] for c in anonymous] == ["articles"]
    assert anonymous[0]["visibility"] == "public" and anonymous[0]["description"]
    assert [c["name"] for c in staff["collections"]] == ["articles", "staff"]


# --------------------------------------------------------------------------- search


def test_text_search_returns_the_envelope_with_relevant_results(gateway: Gateway):
    response = search(gateway, {"query": "refund for a returned order", "collection": "articles",
                                "top_k": 5})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith(AIDRE_JSON)
    body = response.json()
    assert body["request_id"] == response.headers["x-request-id"]
    assert body["collection"] == "articles"
    assert body["meta"]["returned"] == len(body["results"]) == 5 and body["meta"]["top_k"] == 5
    first = body["results"][0]
    assert first["id"].startswith("articles:art-")
    assert first["score"] > 0 and first["text"]
    assert first["source"]["url"].startswith("https://help.example.com/")
    assert first["metadata"]["category"] == "returns" and first["metadata"]["updated_at"]


def test_vector_search_and_leaked_embeddings_are_stripped(gateway: Gateway):
    body = {"query_vector": embed("I forgot my password and cannot log in"),
            "embedding_space": SPACE["id"], "collection": "articles", "top_k": 3}
    response = search(gateway, body)
    assert response.status_code == 200
    results = response.json()["results"]
    titles = " ".join(r["source"]["title"].lower() for r in results)
    assert "password" in titles or "sign" in titles or "log" in titles, titles
    assert "embedding" not in response.text and all("vector" not in r for r in results)


def test_vectors_return_only_when_a_policy_allows_it_for_that_caller(gateway: Gateway):
    body = {"query": "password reset", "collection": "articles", "top_k": 2,
            "return": {"vectors": True}}
    anonymous = search(gateway, body).json()["results"]
    assert anonymous and all("vector" not in r for r in anonymous)
    vector_body = {k: v for k, v in body.items() if k != "query"} | {
        "query_vector": embed("password reset"), "embedding_space": SPACE["id"]}
    with_vectors = search(gateway, vector_body, key="vector-key").json()["results"]
    assert all(len(r["vector"]) == 256 for r in with_vectors)
    staff = search(gateway, {**vector_body, "collection": "staff"}, key="staff-key").json()
    assert all("vector" not in r for r in staff["results"])  # access-controlled: no rule


def test_a_denied_return_field_can_be_refused_instead(backend, inprocess_factory, tmp_path):
    strict = inprocess_factory(aidre_gateway_config(
        backend, tmp_path, aidre={"denied_return_field": "reject"}))
    body = {"query": "refund", "collection": "articles", "return": {"vectors": True}}
    error = assert_error(search(strict, body), 400, "unsupported_return_field")
    assert error["details"]["fields"] == ["vectors"]
    assert search(strict, body, key="vector-key").status_code == 200


def test_return_object_selects_the_optional_parts(gateway: Gateway):
    body = {"query": "shipping", "collection": "articles", "top_k": 2,
            "return": {"text": False, "metadata": False, "semantic_payload": True}}
    results = search(gateway, body).json()["results"]
    assert results and all("text" not in r and "metadata" not in r for r in results)
    assert all(r["id"] and r["score"] for r in results)


def test_unknown_request_fields_are_ignored(gateway: Gateway):
    body = {"query": "invoice", "collection": "articles", "x-future": {"a": 1}, "filters": []}
    assert search(gateway, body).status_code == 200


@pytest.mark.parametrize("body,status,error", [
    ({"collection": "articles"}, 400, "invalid_request"),
    ({"query": "a", "query_vector": [0.1], "collection": "articles"}, 400, "invalid_request"),
    ({"query": "", "collection": "articles"}, 400, "invalid_request"),
    ({"query": "a"}, 400, "invalid_request"),
    ({"query": "a", "collection": "articles", "top_k": 0}, 400, "invalid_request"),
    ({"query": "a", "collection": "articles", "top_k": -3}, 400, "invalid_request"),
    ({"query": "a", "collection": "articles", "top_k": "5"}, 400, "invalid_request"),
    ({"query": "a", "collection": "articles", "return": {"text": "yes"}}, 400,
     "invalid_request"),
    ({"query_vector": [0.1] * 256, "collection": "articles"}, 400, "invalid_request"),
    ({"query_vector": [0.1] * 256, "embedding_space": "openai:unknown",
      "collection": "articles"}, 400, "unsupported_embedding_space"),
    ({"query_vector": ["a"] * 256, "embedding_space": SPACE["id"], "collection": "articles"},
     400, "invalid_request"),
    ({"query_vector": [True] * 256, "embedding_space": SPACE["id"], "collection": "articles"},
     400, "invalid_request"),
    ({"query": "a", "collection": "nope"}, 404, "not_found"),
    ({"query": "a", "collection": "staff"}, 404, "not_found"),
])
def test_bad_search_requests_are_refused_in_the_aidre_dialect(gateway, body, status, error):
    assert_error(search(gateway, body), status, error)


def test_vector_of_the_wrong_length_is_422_with_expected_and_actual(gateway: Gateway):
    body = {"query_vector": [0.5, 0.5], "embedding_space": SPACE["id"], "collection": "articles"}
    error = assert_error(search(gateway, body), 422, "invalid_embedding_dimension")
    assert error["details"] == {"embedding_space": SPACE["id"], "expected_dimensions": 256,
                                "actual_dimensions": 2}


def test_non_finite_numbers_and_bad_json_are_refused(gateway: Gateway):
    vector = b"[" + b",".join([b"0.1"] * 255 + [b"1e999"]) + b"]"
    raw = b'{"collection": "articles", "embedding_space": "%s", "query_vector": %s}' % (
        SPACE["id"].encode(), vector)
    assert_error(search(gateway, raw), 400, "invalid_request")
    assert_error(search(gateway, b"{not json"), 400, "invalid_request")
    assert_error(search(gateway, b"[1, 2]"), 400, "invalid_request")


def test_top_k_defaults_and_clamps_as_documented(gateway: Gateway):
    default = search(gateway, {"query": "account", "collection": "articles"}).json()
    assert default["meta"]["top_k"] == 10 and default["meta"]["returned"] == 10
    clamped = search(gateway, {"query": "account", "collection": "articles", "top_k": 500})
    assert clamped.json()["meta"]["top_k"] == 50


def test_top_k_over_the_maximum_can_be_refused(backend, inprocess_factory, tmp_path):
    strict = inprocess_factory(aidre_gateway_config(backend, tmp_path,
                                                  aidre={"top_k_over_max": "reject"}))
    body = {"query": "account", "collection": "articles", "top_k": 51}
    assert assert_error(search(strict, body), 400, "invalid_request")["details"] == \
        {"max_top_k": 50}


@pytest.mark.parametrize("content_type,status", [
    ("application/aidre+json", 200), ("application/aidre+json; charset=utf-8", 200),
    ("application/json", 200), ("text/plain", 415), ("application/x-www-form-urlencoded", 415),
])
def test_request_media_types(gateway: Gateway, content_type: str, status: int):
    response = search(gateway, {"query": "a", "collection": "articles"},
                      content_type=content_type)
    assert response.status_code == status
    assert response.headers["content-type"].startswith(AIDRE_JSON)


def test_get_on_search_is_405_in_the_aidre_dialect(gateway: Gateway):
    response = httpx.get(gateway.url + "/search")
    assert_error(response, 405, "invalid_request")
    assert response.headers["allow"] == "POST"


# --------------------------------------------------------------------------- pagination


def page_through(gateway: Gateway, body: dict) -> list[str]:
    seen, cursor = [], None
    for _ in range(20):
        response = search(gateway, {**body, **({"cursor": cursor} if cursor else {})})
        assert response.status_code == 200, response.text
        payload = response.json()
        seen += [r["id"] for r in payload["results"]]
        cursor = payload["meta"].get("next_cursor")
        if cursor is None:
            return seen
    raise AssertionError("pagination did not end")


def test_text_pagination_with_opaque_cursors_visits_every_result_once(gateway: Gateway,
                                                                      backend: str):
    body = {"query": "two-factor authentication code", "collection": "articles", "top_k": 20}
    total = httpx.get(backend + "/api/v1/articles/search",
                      params={"q": body["query"], "limit": 1}).json()["total"]
    first_fifty = search(gateway, {**body, "top_k": 50}).json()["results"]
    paged = page_through(gateway, body)
    assert len(paged) == len(set(paged)) == total > 50
    assert paged[:50] == [r["id"] for r in first_fifty]


def test_vector_pagination_slices_at_the_gateway(gateway: Gateway):
    body = {"query_vector": embed("parcel tracking delivery"), "embedding_space": SPACE["id"],
            "collection": "articles", "top_k": 4}
    first = search(gateway, body).json()
    second = search(gateway, {**body, "cursor": first["meta"]["next_cursor"]}).json()
    ids = [r["id"] for r in first["results"] + second["results"]]
    assert len(ids) == len(set(ids)) == 8
    assert first["results"][0]["score"] >= second["results"][0]["score"]


def test_a_cursor_with_any_bytes_is_refused_not_a_500(gateway: Gateway):
    body = {"query": "refund", "collection": "articles", "cursor": "abc.é\u2603"}
    assert_error(search(gateway, body), 400, "invalid_request")


def test_cursors_cannot_be_forged_or_replayed_against_another_query(gateway: Gateway):
    body = {"query": "refund", "collection": "articles", "top_k": 2}
    cursor = search(gateway, body).json()["meta"]["next_cursor"]
    forged = cursor[:-2] + ("AA" if not cursor.endswith("AA") else "BB")
    assert_error(search(gateway, {**body, "cursor": forged}), 400, "invalid_request")
    other = {**body, "query": "shipping"}
    assert_error(search(gateway, {**other, "cursor": cursor}), 400, "invalid_request")
    assert search(gateway, {**body, "cursor": cursor}).status_code == 200



def test_a_cursor_sealed_with_the_right_key_but_the_wrong_payload_is_refused_not_a_500(
        backend: str, inprocess_factory, tmp_path: Path):
    secret = "a-secret-the-forger-knows"
    keyed = inprocess_factory(aidre_gateway_config(backend, tmp_path,
                                                 aidre={"cursor_secret": secret}))
    body = {"query": "refund", "collection": "articles", "top_k": 2}
    later = int(time.time()) + 600
    for payload in (b"", b"x", b'{"o":"x"}', b"\0" * 27, b"\0" * 29,
                    struct.pack(">IQ16s", 10**9, later, b"\0" * 16)):
        assert_error(search(keyed, {**body, "cursor": seal(secret.encode(), payload)}), 400,
                     "invalid_request")
    assert search(keyed, {**body, "cursor": search(keyed, body).json()["meta"][
        "next_cursor"]}).status_code == 200


def test_cursors_do_not_say_where_the_next_page_starts(gateway: Gateway):
    body = {"query": "account", "collection": "articles", "top_k": 1}
    cursors = [search(gateway, {**body, "top_k": top_k}).json()["meta"]["next_cursor"]
               for top_k in (1, 1, 9, 50)]
    assert len(set(cursors)) == 4 and len({len(c) for c in cursors}) == 1
    for cursor in cursors:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        assert b'"o"' not in raw and b"offset" not in raw


def test_without_a_cursor_secret_replicas_with_one_config_share_cursors(
        gateway: Gateway, backend: str, tmp_path: Path):
    """No process keeps a key of its own: a second replica (and a restart) honours the first
    one's cursor, and a replica with another config refuses it."""
    assert "cursor_secret" not in gateway.config["aidre"]
    body = {"query": "refund", "collection": "articles", "top_k": 2}
    first = search(gateway, body).json()
    replica = Gateway(aidre_gateway_config(backend, tmp_path), tmp_path)
    other = Gateway(aidre_gateway_config(backend, tmp_path, aidre={"cursor_ttl": 600}),
                    tmp_path)
    try:
        cursor = first["meta"]["next_cursor"]
        on_replica = search(replica, {**body, "cursor": cursor}).json()
        on_first = search(gateway, {**body, "cursor": cursor}).json()
        assert on_replica["results"] == on_first["results"] != first["results"]
        assert_error(search(other, {**body, "cursor": cursor}), 400, "invalid_request")
    finally:
        replica.stop()
        other.stop()


# --------------------------------------------------------------------------- chunks


def test_chunk_has_hash_date_and_etag_and_honours_if_none_match(gateway: Gateway):
    response = httpx.get(gateway.url + "/chunks/articles:art-0001")
    assert response.status_code == 200
    chunk = response.json()
    assert chunk["id"] == "articles:art-0001" and chunk["text"]
    assert chunk["content_hash"].startswith("sha256:") and chunk["updated_at"]
    assert "embedding" not in response.text
    etag = response.headers["etag"]
    again = httpx.get(gateway.url + "/chunks/articles:art-0001", headers={"if-none-match": etag})
    assert again.status_code == 304 and again.content == b""


@pytest.mark.parametrize("path,key", [
    ("/chunks/articles:art-9999", None), ("/chunks/nope:art-0001", None),
    ("/chunks/staff:art-0001", None), ("/chunks/staff:art-0001", "reader-key"),
    ("/chunks/garbage", None), ("/chunks/articles:..", None),
    ("/chunks/articles:..%2Fusers%2Fu-001%2Fmessages", None), ("/chunks/articles:a%2F..", None),
    ("/chunks/articles:a/../b", None),
    ("/chunks/articles:search", None),  # lands on the upstream's search route: a 400 there
    ("/chunks/articles:%2f", None),  # the upstream's listing, which redirects: found by fuzz
])
def test_unknown_and_unreadable_chunks_look_alike(gateway: Gateway, path: str, key: str | None):
    headers = {"x-api-key": key} if key else {}
    connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=10)
    try:  # sent byte for byte: httpx would resolve the dot segments before sending
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        status, body = response.status, json.loads(response.read())
    finally:
        connection.close()
    if status == 400:  # dot segments and encoded slashes are refused before any routing,
        # in the dialect of the surface that owns the path
        assert (body["error"], body["details"]["reason"]) == ("invalid_request", "invalid_path")
        assert body["request_id"]
    else:
        assert (status, body["error"]) == (404, "not_found")
        assert "staff" not in body["message"]
    assert "users area" not in json.dumps(body) and "jade" not in json.dumps(body)


def test_private_chunks_for_those_allowed(gateway: Gateway):
    response = httpx.get(gateway.url + "/chunks/staff:art-0001",
                         headers={"x-api-key": "staff-key"})
    assert response.status_code == 200 and response.json()["collection"] == "staff"


# --------------------------------------------------------------------------- failures


def test_auth_failures_and_rate_limits_in_the_aidre_dialect(backend, inprocess_factory, tmp_path):
    config = aidre_gateway_config(backend, tmp_path)
    config["rate_limits"] = {"rules": [{"name": "search", "paths": ["/search"],
                                        "limit": "2/minute"}]}
    limited = inprocess_factory(config)
    error = assert_error(search(limited, {"query": "a", "collection": "articles"},
                                key="wrong-key"), 401, "unauthorized")
    assert error["details"]["reason"] == "invalid_token"
    body = {"query": "a", "collection": "articles"}
    statuses = [search(limited, body).status_code for _ in range(2)]
    refused = search(limited, body)
    assert statuses == [200, 200]
    assert_error(refused, 429, "rate_limited")
    assert refused.headers["retry-after"] and refused.headers["ratelimit-remaining"] == "0"


def test_scope_failures_are_forbidden(backend, inprocess_factory, tmp_path):
    config = aidre_gateway_config(backend, tmp_path)
    config["auth"]["routes"] = [{"path": "/search", "scopes": ["search:run"]}]
    scoped = inprocess_factory(config)
    assert_error(search(scoped, {"query": "a", "collection": "articles"}, key="reader-key"),
                 403, "forbidden")


def test_upstream_failure_is_503_internal_error_without_upstream_detail(
    backend, inprocess_factory, tmp_path
):
    config = aidre_gateway_config(backend, tmp_path)
    config["upstreams"]["gone"] = {"url": "http://127.0.0.1:9"}
    config["aidre"]["collections"]["broken"] = collection("gone", description="Down.")
    broken = inprocess_factory(config)
    error = assert_error(search(broken, {"query": "a", "collection": "broken"}), 503,
                         "internal_error")
    assert error["details"] == {"reason": "upstream_unavailable"}
    assert "127.0.0.1" not in str(error)


def test_upstream_calls_carry_gateway_credentials_and_caller_identity(
    echo, inprocess_factory, tmp_path, backend
):
    config = aidre_gateway_config(backend, tmp_path)
    config["upstreams"]["echo"] = {"url": echo, "add_headers": {"X-Upstream-Key": "gw-secret"}}
    headers_as_hits = {"items": "headers", "id": "[0]", "text": "[1]"}
    echoed = collection("echo", description="What the upstream received.")
    echoed["text_search"]["mapping"] = headers_as_hits
    config["aidre"]["collections"]["echoed"] = echoed
    gateway = inprocess_factory(config)
    body = {"query": "x", "collection": "echoed", "top_k": 50}
    received = {r["id"].removeprefix("echoed:"): r["text"]
                for r in search(gateway, body, key="reader-key").json()["results"]}
    assert received["x-upstream-key"] == "gw-secret"
    assert received["x-aigw-subject"] == "reader"
    assert "x-api-key" not in received and received["via"] == "1.1 aigw"


def test_bad_vectors_never_reach_the_upstream(echo, inprocess_factory, tmp_path, backend):
    config = aidre_gateway_config(backend, tmp_path)
    config["upstreams"]["echo"] = {"url": echo}
    config["aidre"]["collections"]["echoed"] = collection("echo", description="Echo.")
    guarded = inprocess_factory(config)
    before = httpx.get(echo + "/count").json()["requests"]
    for vector in ([0.1] * 3, [math.pi] * 255 + ["x"], [0.0] * 9000):
        body = {"query_vector": vector, "embedding_space": SPACE["id"], "collection": "echoed"}
        assert search(guarded, body).status_code in (400, 422)
    assert httpx.get(echo + "/count").json()["requests"] == before + 1


# --------------------------------------------------------------------------- config


@pytest.mark.parametrize("change,path,message", [
    (lambda c: c["text_search"].update(upstream="nowhere"),
     "aidre.collections.articles.text_search.upstream", "expected one of the upstreams"),
    (lambda c: c["chunk"]["mapping"]["fields"].update(title="items[?"),
     "aidre.collections.articles.chunk.mapping.fields.title", "invalid JMESPath"),
    (lambda c: c["vector_search"].update(embedding_space="other"),
     "aidre.collections.articles.vector_search.embedding_space", "embedding_spaces"),
    (lambda c: c["text_search"]["query"].update(q="{question}"),
     "aidre.collections.articles.text_search", "unknown placeholder {question}"),
    (lambda c: c["text_search"]["mapping"].pop("id"),
     "aidre.collections.articles.text_search.mapping.id", "JMESPath expression"),
])
def test_collection_config_errors_are_refused_at_load_naming_the_path(
    backend, tmp_path, change, path, message
):
    import yaml

    from gateway.loader import ConfigError, load_config

    config = aidre_gateway_config(backend, tmp_path)
    change(config["aidre"]["collections"]["articles"])
    file = tmp_path / "gateway.yaml"
    file.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError) as caught:
        load_config(file, env={})
    [issue] = caught.value.issues
    assert (issue.file, issue.path) == (str(file), path) and message in issue.message


def test_the_ai_document_lists_the_aidre_capabilities(backend, inprocess_factory, tmp_path):
    import json
    from pathlib import Path

    import jsonschema

    config = aidre_gateway_config(
        backend, tmp_path, service={"name": "Acme", "description": "Acme help centre."},
        ai_endpoint={"capabilities": []})
    described = inprocess_factory(config)
    document = httpx.get(described.url + "/.well-known/ai").json()
    schema_file = Path(__file__).parent.parent / "gateway" / "schemas" / "aiendpoint.schema.json"
    jsonschema.Draft202012Validator(json.loads(schema_file.read_text())).validate(document)
    by_id = {c["id"]: c for c in document["capabilities"]}
    assert by_id["aidre_search"]["endpoint"] == "/search"
    assert by_id["aidre_search"]["method"] == "POST"
    assert by_id["aidre_chunk"]["endpoint"] == "/chunks/{id}"
    assert set(by_id) == {"aidre_search", "aidre_collections", "aidre_chunk"}


def test_discovery_stays_public_when_everything_else_needs_a_token(
    backend, inprocess_factory, tmp_path
):
    config = aidre_gateway_config(backend, tmp_path)
    config["auth"]["default_access"] = "authenticated"
    closed = inprocess_factory(config)
    assert httpx.get(closed.url + "/.well-known/ai-discovery").status_code == 200
    assert_error(httpx.get(closed.url + "/collections"), 401, "unauthorized")


def test_the_public_ai_document_never_names_a_private_collection(tmp_path):
    """Found by `make fuzz`: /.well-known/ai listed every collection in aidre_search's params."""
    from gateway.surfaces.aidre.capabilities import surface_capabilities
    from gateway.surfaces.aidre.config import Aidre

    settings = aidre_gateway_config("http://127.0.0.1:1", tmp_path)["aidre"]
    [search] = [c for c in surface_capabilities(Aidre.model_validate(settings))
                if c.id == "aidre_search"]
    assert "articles" in search.params["collection"]
    assert "staff" not in search.params["collection"]


# --------------------------------------------------------------------------- bookkeeping


def _logged(gateway: Gateway, request_id: str) -> dict:
    deadline = time.monotonic() + 5
    while True:
        for line in Path(gateway.process.stdout_path).read_text().splitlines():
            record = json.loads(line)
            if record.get("request_id") == request_id:
                return record
        assert time.monotonic() < deadline, f"no access log line for {request_id}"
        time.sleep(0.05)


def test_every_refusal_is_logged_with_its_error_code_whichever_route_refused(
        backend: str, tmp_path: Path):
    """The app records the code of every error it answers, whether the pipeline refused the
    caller before the endpoint ran or the endpoint raised (one place, not one per surface).
    A gateway process of its own: the access log is its standard output."""
    gateway = Gateway(aidre_gateway_config(backend, tmp_path), tmp_path)
    try:
        _refusals_are_logged(gateway)
    finally:
        gateway.stop()


def _refusals_are_logged(gateway: Gateway) -> None:
    wrong_key = {"x-api-key": "not-a-key", "content-type": AIDRE_JSON}
    for method, path in (("GET", "/collections"), ("POST", "/search"),
                         ("GET", "/chunks/articles:art-0001")):
        response = httpx.request(method, gateway.url + path, headers=wrong_key,
                                 content=b'{"query": "refund"}', timeout=10)
        assert_error(response, 401, "unauthorized")
        record = _logged(gateway, response.headers["x-request-id"])
        assert record["status"] == 401 and record["error"] == "invalid_token", (path, record)
