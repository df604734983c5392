"""Upstream URLs in bodies: passthrough JSON bodies rewritten when an upstream opts in
(`rewrite_body_urls`), and values surfaces receive rewritten or dropped (gateway.upstream_urls).
Client -> in-process aigw -> an upstream in memory; json-server does the same for real in
tests/test_json_server.py."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from aidre_config import aidre_gateway_config
from inprocess import InProcessGateway

from gateway.body_urls import JsonBodyUrls, is_json
from gateway.redirects import UpstreamOrigin
from gateway.upstream.memory import Reply, UpstreamRequest
from gateway.upstream_urls import UpstreamUrls

PUBLIC = "https://api.example.com"
UPSTREAM = "http://legacy.internal:8081"
METRIC = "aigw_body_url_rewrites_total"


def rewrite(upstream: str, body: str, public: str = "https://pub") -> str:
    rule = JsonBodyUrls.of("up", UpstreamOrigin.from_url(upstream), 1 << 20)
    return rule.rewrite(body.encode(), public).decode()


# --------------------------------------------------------------------------- the JSON text


@pytest.mark.parametrize(("upstream", "body", "expected"), [
    ("http://up:81", '{"a": "http://up:81/x?y=1#z"}', '{"a": "https://pub/x?y=1#z"}'),
    ("http://up:81", '{"a": "http:\\/\\/up:81\\/x"}', '{"a": "https://pub\\/x"}'),  # \/ escaped
    ("http://up:81", '["http://up:81", "http://up:81?q", "http://up:81#f"]',
     '["https://pub/", "https://pub/?q", "https://pub/#f"]'),
    ("http://up:81", '"<a href=\\"http://up:81\\">"', '"<a href=\\"https://pub/\\">"'),
    ("http://up:81", '{"a": "see http://up:81/x and HTTP://UP:81/y"}',
     '{"a": "see https://pub/x and https://pub/y"}'),  # case-insensitive scheme and host
    ("http://up", '["http://up/x", "http://up:80/x"]', '["https://pub/x", "https://pub/x"]'),
    ("http://up/base", '["http://up/base/x", "http://up/base", "http://up/basement",'
     ' "http://up/other"]',
     '["https://pub/x", "https://pub/", "http://up/basement", "http://up/other"]'),
    ("http://[::1]:81", '"http://[::1]:81/x"', '"https://pub/x"'),
])
def test_the_upstream_prefix_becomes_the_public_base(upstream: str, body: str, expected: str):
    assert rewrite(upstream, body) == expected
    json.loads(expected)


@pytest.mark.parametrize("body", [
    '"http://up:810/x"', '"http://up:8/x"', '"http://up.evil:81/x"', '"http://up:81.evil/x"',
    '"https://up:81/x"', '"xhttp://up:81/x"', '"http://other/?u=up:81"', '"http://up:81@e/x"',
    '"//up:81/x"',  # scheme-relative: no scheme to know the origin by in text
])
def test_other_origins_pass_unchanged(body: str):
    assert rewrite("http://up:81", body) == body


def test_without_a_public_origin_urls_become_paths_and_stay_json():
    assert rewrite("http://up:81", '["http://up:81/x", "http://up:81"]', "") == '["/x", "/"]'
    assert json.loads(rewrite("http://up", '"http://up/x"', 'https://h/"q')) == 'https://h/"q/x'


def test_nothing_to_rewrite_gives_the_same_bytes():
    body = b'{"a": "http://elsewhere/x"}'
    rule = JsonBodyUrls.of("up", UpstreamOrigin.from_url("http://up"), 100)
    assert rule.rewrite(body, "https://pub") is body


@pytest.mark.parametrize(("content_type", "expected"), [
    (b"application/json", True), (b"Application/JSON; charset=utf-8", True),
    (b"application/problem+json", True), (b"application/hal+json", True),
    (b"text/json", False), (b"text/html", False), (b"application/jsonx", False), (b"", False),
])
def test_json_media_types(content_type: bytes, expected: bool):
    assert is_json(content_type) is expected


# --------------------------------------------------------------------------- passthrough


def legacy(request: UpstreamRequest) -> Reply:
    """Answers what the test asks for: /json (a body naming the upstream), /html, /gzip,
    /chunked (no Content-Length), /big, /partial, /etag."""
    document = {"self": f"{UPSTREAM}/items/1", "next_url": f"{UPSTREAM}/items?page=2",
                "elsewhere": "https://cdn.example/x.png",
                "accept_encoding": request.header("accept-encoding")}
    body = json.dumps(document).encode()
    json_type = (b"content-type", b"application/json")
    if request.path == "/html":
        return Reply(200, [(b"content-type", b"text/html")], f"<a href={UPSTREAM}/x>".encode())
    if request.path == "/gzip":
        return Reply(200, [json_type, (b"content-encoding", b"gzip")], gzip.compress(body))
    if request.path == "/chunked":
        return Reply(200, [json_type], iter([body[:10], body[10:]]))
    if request.path == "/big":
        padding = json.dumps({"pad": "x" * 4096, **document}).encode()
        chunks = [padding[i:i + 1000] for i in range(0, len(padding), 1000)]
        sized = request.query == [("sized", "1")]
        return Reply(200, [json_type, *([(b"content-length", str(len(padding)).encode())]
                                        if sized else [])], iter(chunks))
    if request.path == "/partial":
        return Reply(206, [json_type, (b"content-range", b"bytes 0-9/100")], body)
    return Reply(200, [(b"content-type", b"application/problem+json"), (b"etag", b'"v1"'),
                       (b"accept-ranges", b"bytes"),
                       (b"content-length", str(len(body)).encode())], body)


def config(**upstream: Any) -> dict[str, Any]:
    return {"public_base_url": PUBLIC, "default_upstream": "legacy",
            "upstreams": {"legacy": {"url": UPSTREAM, **upstream}}}


@pytest.fixture(scope="module")
def rewriting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessGateway]:
    gateway = InProcessGateway(config(rewrite_body_urls=True, rewrite_body_max_bytes=2048),
                               tmp_path_factory.mktemp("body-urls"), {"legacy": legacy})
    yield gateway
    gateway.stop()


def get(gateway: InProcessGateway, path: str, method: str = "GET") -> httpx.Response:
    return httpx.request(method, gateway.url + path, headers={"accept-encoding": "gzip, br"})


def test_a_json_body_naming_the_upstream_is_rewritten_with_its_length(
        rewriting: InProcessGateway):
    before = rewriting.metric(METRIC, upstream="legacy", result="rewritten")
    response = get(rewriting, "/json")
    assert response.json()["self"] == f"{PUBLIC}/items/1"
    assert response.json()["next_url"] == f"{PUBLIC}/items?page=2"
    assert response.json()["elsewhere"] == "https://cdn.example/x.png"
    assert int(response.headers["content-length"]) == len(response.content)
    assert response.headers["etag"] == 'W/"v1"'  # other bytes: no longer strongly the same
    assert "accept-ranges" not in response.headers
    assert rewriting.metric(METRIC, upstream="legacy", result="rewritten") == before + 1


def test_the_upstream_is_asked_for_bodies_it_does_not_encode(rewriting: InProcessGateway):
    assert get(rewriting, "/json").json()["accept_encoding"] == "identity"


def test_a_body_without_a_length_is_rewritten_and_given_one(rewriting: InProcessGateway):
    response = get(rewriting, "/chunked")
    assert response.json()["self"] == f"{PUBLIC}/items/1"
    assert int(response.headers["content-length"]) == len(response.content)


@pytest.mark.parametrize("path", ["/big?sized=1", "/big"])
def test_a_body_over_the_bound_passes_unchanged_and_whole(rewriting: InProcessGateway,
                                                          path: str):
    before = rewriting.metric(METRIC, upstream="legacy", result="too_large")
    response = get(rewriting, path)
    assert response.status_code == 200
    assert response.json()["self"] == f"{UPSTREAM}/items/1"
    assert len(response.json()["pad"]) == 4096
    assert rewriting.metric(METRIC, upstream="legacy", result="too_large") == before + 1


@pytest.mark.parametrize(("path", "result"), [("/gzip", "encoded"), ("/partial", "partial")])
def test_encoded_and_partial_bodies_pass_unchanged(rewriting: InProcessGateway, path: str,
                                                   result: str):
    before = rewriting.metric(METRIC, upstream="legacy", result=result)
    response = get(rewriting, path)
    assert UPSTREAM.encode() in response.content  # httpx decodes the gzip body itself
    assert rewriting.metric(METRIC, upstream="legacy", result=result) == before + 1


def test_other_media_types_are_not_rewritten(rewriting: InProcessGateway):
    assert get(rewriting, "/html").text == f"<a href={UPSTREAM}/x>"


def test_head_of_a_json_resource_declares_no_length_it_cannot_know(rewriting: InProcessGateway):
    response = get(rewriting, "/json", "HEAD")
    assert response.status_code == 200 and "content-length" not in response.headers


def test_off_by_default_the_body_and_its_fields_pass_as_sent(inprocess_factory):
    plain = inprocess_factory(config(), {"legacy": legacy})
    response = get(plain, "/json")
    assert response.json()["self"] == f"{UPSTREAM}/items/1"
    assert response.json()["accept_encoding"] == "gzip, br"
    assert response.headers["etag"] == '"v1"' and response.headers["accept-ranges"] == "bytes"


def test_without_public_base_url_the_origin_the_client_used(inprocess_factory):
    plain = inprocess_factory({"default_upstream": "legacy", "upstreams": {
        "legacy": {"url": UPSTREAM, "rewrite_body_urls": True}}}, {"legacy": legacy})
    response = httpx.get(plain.url + "/json", headers={"host": "shop.example:8443"})
    assert response.json()["self"] == "http://shop.example:8443/items/1"


# --------------------------------------------------------------------------- surface values


def urls(public: str | None = PUBLIC, passthrough: str | None = "legacy") -> UpstreamUrls:
    upstreams = {"legacy": UPSTREAM + "/api", "search": "http://Search.Internal:9200"}
    return UpstreamUrls(upstreams, public, passthrough, lambda path: path.startswith("/search"))


def scrub(guard: UpstreamUrls, document: Any) -> Any:
    return guard.scrub(document, json.dumps(document).encode())


def test_a_url_the_gateway_passes_through_is_rewritten_onto_the_public_base():
    document = {"items": [{"href": f"{UPSTREAM}/api/items/1?x=1", "n": 1}]}
    assert scrub(urls(), document) == {"items": [{"href": f"{PUBLIC}/items/1?x=1", "n": 1}]}
    assert urls().public("HTTP://LEGACY.INTERNAL:8081/api/a%20b") == f"{PUBLIC}/a%20b"
    assert urls().public("http:\\\\legacy.internal:8081/api/x") == f"{PUBLIC}/x"


@pytest.mark.parametrize("value", [
    f"{UPSTREAM}/api/search?q=x",  # a surface answers that path, not the upstream
    f"{UPSTREAM}/other",  # outside the base path
    "http://search.internal:9200/idx/_doc/1",  # an upstream no path passes through to
    "//search.internal:9200/idx/_doc/1", "http:\\\\search.internal:9200/x",  # as browsers read it
    "HTTP://SEARCH.INTERNAL:9200/x", "http://Search.Internal:9200/x",  # the case forms looked for
])
def test_any_other_upstream_url_is_dropped(value: str):
    assert scrub(urls(), {"a": value, "b": [value, "kept"], "c": 1}) == {"b": ["kept"], "c": 1}


def test_without_public_base_url_every_upstream_url_is_dropped():
    assert scrub(urls(public=None), [f"{UPSTREAM}/api/x", "https://elsewhere/x"]) \
        == ["https://elsewhere/x"]


def test_values_that_are_no_upstream_url_are_kept_as_they_are():
    document = {"text": f"see {UPSTREAM}/api/x", "url": "https://elsewhere/x", "path": "/api/x",
                "deep": [[[[{"id": "legacy.internal:8081"}]]]]}
    assert scrub(urls(), json.loads(json.dumps(document))) == document


def test_a_document_that_names_no_upstream_host_is_not_walked():
    document = {"a": f"{UPSTREAM}/api/x"}
    assert urls().scrub(document, b'{"unrelated": true}') is document
    assert document == {"a": f"{UPSTREAM}/api/x"}  # untouched: its raw text said no host


def test_deep_documents_are_walked_without_recursion():
    document: Any = f"{UPSTREAM}/api/x"
    for _ in range(5000):
        document = [document]
    cleaned = urls().scrub(document, UPSTREAM.encode())  # json.dumps would recurse
    for _ in range(5000):
        cleaned = cleaned[0]
    assert cleaned == f"{PUBLIC}/x"


def articles(request: UpstreamRequest) -> Reply:
    """A help-centre search whose hits carry the upstream's own URLs."""
    items = [{"id": "a1", "snippet": f"Quoted: {UPSTREAM}/api/a1", "score": 2.0,
              "title": "Passed through", "url": f"{UPSTREAM}/api/articles/a1",
              "category": f"{UPSTREAM}/api/search"},  # a path AIDRE answers itself
             {"id": "a2", "snippet": "Elsewhere", "score": 1.0, "title": "Public",
              "url": "https://help.example.com/a2", "category": "billing"}]
    return Reply.json({"items": items})


def test_a_surface_answer_has_the_public_url_or_none(inprocess_factory, tmp_path):
    config = aidre_gateway_config(UPSTREAM + "/api", tmp_path, default_upstream="helpcentre")
    gateway = inprocess_factory(config, {"helpcentre": articles})
    before = gateway.metric("aigw_surface_upstream_urls_total", upstream="helpcentre",
                            action="dropped")
    response = httpx.post(gateway.url + "/search",
                          json={"query": "login", "collection": "articles"})
    assert response.status_code == 200, response.text
    first, second = response.json()["results"]
    assert first["source"]["url"] == "https://ai.example.com/articles/a1"
    assert "category" not in first["metadata"]  # /search is AIDRE's: no public form
    assert first["text"] == f"Quoted: {UPSTREAM}/api/a1"  # prose is text, not a URL
    assert second["source"]["url"] == "https://help.example.com/a2"
    assert gateway.metric("aigw_surface_upstream_urls_total", upstream="helpcentre",
                          action="dropped") == before + 1


def test_an_agents_output_has_the_public_url_or_none(inprocess_factory):
    def lookup(request: UpstreamRequest) -> Reply:
        return Reply.json({"id": 7, "self": f"{UPSTREAM}/items/7", "search": f"{UPSTREAM}/agents",
                           "related": [f"{UPSTREAM}/items/8", "https://elsewhere/9"]})

    operation = {"name": "lookup", "description": "An item.", "upstream": "legacy",
                 "path": "/lookup", "inputs": {"type": "object"},
                 "outputs": {"type": "object", "required": ["id", "self"]}}
    gateway = inprocess_factory({
        **config(), "rate_limits": {"storage": "memory://", "rules": [
            {"name": "agents", "paths": ["/agents"], "limit": "1000/minute"}]},
        "aidip": {"agents": {"items": {
            "name": "Items", "description": "Looks items up.", "capabilities": ["lookup"],
            "operations": [operation]}}}}, {"legacy": lookup})
    response = httpx.post(gateway.url + "/agents/items/invoke/lookup", json={})
    assert response.status_code == 200, response.text
    assert response.json() == {"id": 7, "self": f"{PUBLIC}/items/7",  # /agents is AIDIP's
                               "related": [f"{PUBLIC}/items/8", "https://elsewhere/9"]}


@pytest.mark.parametrize("raw", [
    b'{"a": "http://Legacy.Internal:8081/other"}',  # a case the config did not write
    b'{"a": "http://legacy.inter\\u006eal:8081/other"}',  # a host character escaped
    b'{"a": "http://legacy.inter\\tnal:8081/other"}',  # URL parsers remove a tab (LF, CR)
    b'{"a": "http://legacy.inter\\u000anal:8081/other"}',  # so does an LF escaped so
    b'{"a": "http://legacy.inter\\nnal:8081/other", "b": "\\\\"}',  # any escape ambiguous
])
def test_an_upstream_host_spelled_otherwise_in_the_raw_text_is_still_found(raw: bytes):
    kept = {"b": "\\"} if b'"b"' in raw else {}
    assert urls().scrub(json.loads(raw), raw) == kept


def test_escapes_that_spell_no_host_leave_the_document_unwalked():
    raw = b'{"a": "line\\none \\u00e9t\\u00e9 \\"quoted\\"", "b": "http:\\/\\/elsewhere\\/x"}'
    document = json.loads(raw)
    assert urls().scrub(document, raw) is document


def test_a_kelvin_sign_is_a_k_to_the_host_comparison():
    guard = UpstreamUrls({"kube": "http://kube.internal"}, PUBLIC, None, lambda path: False)
    value = "http://\u212aube.internal/x"
    assert guard.public(value) is None  # what the walk decides, so the scan must not skip it
    raw = json.dumps({"a": value}, ensure_ascii=False).encode()
    assert guard.scrub(json.loads(raw), raw) == {}
