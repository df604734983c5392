"""AIP 0.1 over real HTTP: client -> in-process aigw -> demo backend / a canned content API.

The spec's JSON Schemas are the oracle: every retrieve answer must validate against
retrieve-response.schema.json and aip.json against aip.schema.json.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import bpe_openai
import httpx
import pytest
import yaml
from inprocess import InProcessGateway
from jsonschema import Draft202012Validator
from processes import ROOT, Gateway, free_port

from gateway.surfaces.aip.tokens import TokenCounter

SPECS = ROOT / "gateway" / "schemas" / "aip"
PUBLISHER = {"id": "acme-help", "name": "Acme Help Centre", "domain": "help.example.com"}
CL100K = bpe_openai.get_encoding("cl100k_base")
AD_WORDS = ("price", "currency", "sponsored", "advertiser", "AdCo", "bid", "cpm", "auction",
            "creative", "clearing")


def validator(name: str) -> Draft202012Validator:
    schema = json.loads((SPECS / f"{name}.schema.json").read_text())
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


RESPONSE = validator("retrieve-response")
DECLARATION = validator("aip")


# --------------------------------------------------------------------------- fixtures


def aip_config(backend: str, canned: str, workdir: Path, *, aip: dict | None = None,
               policy: dict | None = None, **top: Any) -> dict[str, Any]:
    policies = workdir / "policies"
    policies.mkdir(exist_ok=True)
    (policies / "aip.yaml").write_text(yaml.safe_dump({"aip": policy if policy is not None else {
        "denied_platforms": ["scraper-bot"],
        "allowed_placements": ["conversation", "chat"],
        "forbidden_uses": ["training"],
        "max_chunks": 4, "max_tokens": 250}}))
    hit = {"items": "items", "id": "id", "text": "text",
           # an over-eager mapping: ad fields reach the neutral model, never the wire
           "fields": {"title": "title", "url": "url", "price": "price",
                      "sponsored": "sponsored"}}
    section = {
        "publisher": PUBLISHER,
        "editorial_domains": ["support", "finance", "health.nutrition", "canned", "long",
                              "broken", "slow"],
        "retrieval": {"max_chunks": 5, "max_tokens": 600, "chunk_tokens": 80},
        "compliance": {"revocable": True, "notice_required": True,
                       "last_updated": "2026-01-15"},
        "event": {"path": "/pag/events", "required": False},
        "events": {"file": str(workdir / "events.jsonl")},
        "sources": {
            "canned": {"domains": ["canned", "slow"], "search_texts": "excerpts",
                       "search": {"upstream": "canned", "path": "/search",
                                  "query": {"q": "{query}"}, "mapping": hit}},
            "long": {"domains": ["long"],
                     "search": {"upstream": "canned", "path": "/search",
                                "query": {"q": "{query}"}, "mapping": hit},
                     "article": {"upstream": "canned", "path": "/article/{id}",
                                 "mapping": {"id": "id", "text": "body",
                                             "fields": hit["fields"]}}},
            "broken": {"domains": ["broken"],
                       "search": {"upstream": "canned", "path": "/unmappable",
                                  "mapping": hit}},
            "articles": {
                "domains": ["support", "finance", "health.nutrition"],
                "search": {"upstream": "helpcentre", "path": "/api/v1/articles/search",
                           "query": {"q": "{query}", "limit": "{limit}"},
                           "mapping": {"items": "items", "id": "id", "text": "snippet",
                                       "fields": {"title": "title", "url": "url"}}},
                "article": {"upstream": "helpcentre", "path": "/api/v1/articles/{id}",
                            "mapping": {"id": "id", "text": "body",
                                        "fields": {"title": "title", "url": "url"}}}},
        },
        **(aip or {}),
    }
    return {"public_base_url": "https://ai.example.com", "policies": str(policies),
            "upstreams": {"helpcentre": {"url": backend}, "canned": {"url": canned}},
            "aip": section, **top}


@pytest.fixture(scope="module")
def gateway(backend: str, canned: str,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    workdir = tmp_path_factory.mktemp("aip")
    started = InProcessGateway(aip_config(backend, canned, workdir), workdir)
    yield started
    started.stop()


def ask(domain: str = "support.billing", query: str | None = "refund for a damaged item",
        **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "aip_version": "0.1", "request_id": "req_92fA1", "timestamp": "2026-01-15T14:30:00Z",
        "platform": {"id": "acme-assistant"}, "intent": {"domain": domain},
        "context": {"language": "en-US", "placement": "conversation"},
        "runtime": {"session_id": "sess_1", "turn_index": 0},
    }
    if query is not None:
        body["runtime"]["query_text"] = query
    for key, value in changes.items():
        body[key] = {**body[key], **value} if isinstance(value, dict) and key in body else value
    return body


def retrieve(gateway: Gateway, body: dict | bytes,
             content_type: str = "application/json") -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(gateway.url + "/pag/retrieve", content=content, timeout=15,
                      headers={"content-type": content_type})


def answer(response: httpx.Response, http_status: int, status: str) -> dict[str, Any]:
    """The body, after the checks every AIP answer must pass."""
    assert response.status_code == http_status, response.text
    assert response.headers["cache-control"] == "no-store"
    body = response.json()
    errors = [e.message for e in RESPONSE.iter_errors(body)]
    assert not errors, errors
    assert body["status"] == status
    assert not ("content" in body and "denial" in body)
    return body


def denial(response: httpx.Response, reason: str, http_status: int = 403) -> dict[str, Any]:
    body = answer(response, http_status, "denied")
    assert body["denial"]["reason"] == reason and "content" not in body
    return body


# --------------------------------------------------------------------------- aip.json


def test_declaration_validates_and_states_the_enforced_limits(gateway: Gateway):
    response = httpx.get(gateway.url + "/.well-known/aip.json")
    assert response.status_code == 200
    assert response.headers["cache-control"].startswith("public, max-age=")
    document = response.json()
    assert not [e.message for e in DECLARATION.iter_errors(document)]
    assert document["publisher"] == PUBLISHER
    assert document["retrieval"] == {
        "supports": {"chunks": True, "citations": True, "full_article": False},
        "max_chunks": 4, "max_tokens": 250}  # the policy's, stricter than the section's
    assert document["endpoints"] == {
        "capabilities": {"method": "GET",
                         "url": "https://ai.example.com/.well-known/aip/capabilities"},
        "retrieve": {"method": "POST", "url": "https://ai.example.com/pag/retrieve",
                     "capabilities_ref": "retrieval"},
        "event": {"method": "POST", "url": "https://ai.example.com/pag/events",
                  "required": False}}
    assert document["compliance"]["last_updated"] == "2026-01-15"
    assert "revocation_reason" not in document["compliance"]  # null would break the schema
    again = httpx.get(gateway.url + "/.well-known/aip.json",
                      headers={"if-none-match": response.headers["etag"]})
    assert again.status_code == 304


def test_capabilities_are_public_and_the_same_for_every_caller(gateway: Gateway):
    plain = httpx.get(gateway.url + "/.well-known/aip/capabilities")
    other = httpx.get(gateway.url + "/.well-known/aip/capabilities",
                      headers={"authorization": "Bearer whoever", "x-forwarded-for": "10.1.1.1"})
    assert plain.status_code == other.status_code == 200
    assert plain.content == other.content
    document = plain.json()
    assert document["retrieval"]["max_chunks"] == 4
    assert document["retrieval"]["token_counting"]["encoding"] == "cl100k_base"


# --------------------------------------------------------------------------- ok


def test_retrieve_returns_chunks_of_real_articles_with_citations(gateway: Gateway):
    response = retrieve(gateway, ask())
    body = answer(response, 200, "ok")
    assert body["request_id"] == "req_92fA1"
    chunks = body["content"]["chunks"]
    assert 1 <= len(chunks) <= 4 and sum(c["token_count"] for c in chunks) <= 250
    assert any("refund" in c["text"].lower() for c in chunks)
    for chunk in chunks:
        assert chunk["token_count"] == len(CL100K.encode_ordinary(chunk["text"]))
    returned = {c["id"] for c in chunks}
    cited = {i for citation in body["citations"] for i in citation["chunk_ids"]}
    assert cited == returned
    for citation in body["citations"]:
        assert citation["source_url"].startswith("https://help.example.com/articles/")
        assert citation["publisher"] == "Acme Help Centre" and citation["title"]
    assert body["limits_applied"] == {"max_chunks": 4, "max_tokens": 250}


@pytest.mark.parametrize("sizes,expected", [
    ([80, 80, 50, 40], [80, 80, 50, 40]),   # exactly max_tokens (250)
    ([80, 80, 50, 41], [80, 80, 50]),       # the fourth would make 251
    ([10, 10, 10, 10], [10, 10, 10, 10]),   # exactly max_chunks (4)
    ([10, 10, 10, 10, 10], [10, 10, 10, 10]),  # one more offered, never returned
])
def test_max_chunks_and_max_tokens_at_and_one_over(gateway, sizes, expected):
    sizes_query = "sizes:" + ",".join(map(str, sizes))
    body = answer(retrieve(gateway, ask("canned", sizes_query)), 200, "ok")
    chunks = body["content"]["chunks"]
    assert [c["token_count"] for c in chunks] == expected
    assert all(c["token_count"] == len(CL100K.encode_ordinary(c["text"])) for c in chunks)
    returned = {c["id"] for c in chunks}
    assert {i for c in body["citations"] for i in c["chunk_ids"]} == returned
    cited_urls = {c["source_url"] for c in body["citations"]}
    assert cited_urls == {f"https://pub.example.com/excerpts/{n}"
                          for n in range(1, len(expected) + 1)}


def test_ad_and_pricing_fields_from_the_upstream_are_never_emitted(gateway: Gateway):
    response = retrieve(gateway, ask("canned", "sizes:5,5"))
    answer(response, 200, "ok")
    long = retrieve(gateway, ask("long", "billing account"))
    answer(long, 200, "ok")
    for text in (response.text, long.text):
        assert not [word for word in AD_WORDS if word.lower() in text.lower()]


def test_a_long_article_is_split_and_never_returned_whole(gateway: Gateway):
    from aip_upstream import LONG_ARTICLE

    body = answer(retrieve(gateway, ask("long", "billing account step")), 200, "ok")
    chunks = body["content"]["chunks"]
    assert len(chunks) >= 1 and all(c["id"].startswith("long-1#") for c in chunks)
    returned = " ".join(c["text"] for c in chunks)
    assert all(c["text"] != LONG_ARTICLE for c in chunks)
    assert len(returned.split()) < len(LONG_ARTICLE.split())  # some of it is always withheld
    # limits alone (4 chunks, 250 tokens) would have allowed every chunk of this article
    assert len(CL100K.encode_ordinary(LONG_ARTICLE)) <= 250
    assert body["citations"] == [{"source_url": "https://pub.example.com/long-guide",
                                  "publisher": "Acme Help Centre", "title": "The long guide",
                                  "chunk_ids": [c["id"] for c in chunks]}]


# --------------------------------------------------------------------------- denials


@pytest.mark.parametrize("domain,subdomain,reason", [
    ("finance", None, None),
    ("finance.markets", None, None),            # finance covers finance.markets
    ("health", None, "out_of_scope"),           # health.nutrition never covers health
    ("health.nutrition.vitamins", None, None),
    ("financex", None, "out_of_scope"),         # no prefix tricks
    ("finance2.markets", None, "out_of_scope"),
    ("sports", None, "out_of_scope"),
    ("support", "finance.markets", None),
    ("support", "sports.football", "out_of_scope"),  # every declared path must be in scope
])
def test_editorial_domains_follow_the_dot_hierarchy(gateway, domain, subdomain, reason):
    intent = {"domain": domain} | ({"subdomain": subdomain} if subdomain else {})
    response = retrieve(gateway, ask(query="refund", intent=intent))
    if reason is None:
        answer(response, 200, "ok")
    else:
        denial(response, reason)


@pytest.mark.parametrize("changes", [
    {"platform": {"id": "scraper-bot"}},
    {"context": {"language": "en-US", "placement": "voice"}},
    {"extensions": {"aigw": {"use": ["answer", "training"]}}},
])
def test_declared_constraints_are_policy_violations(gateway, changes):
    denial(retrieve(gateway, ask(**changes)), "policy_violation")


@pytest.mark.parametrize("changes", [
    {"platform": {"id": "Scraper-Bot"}},
    {"platform": {"id": " scraper-bot "}},
    {"platform": {"id": "scraper-bot\u3000"}},  # an ideographic space
    {"platform": {"id": "\uff33craper-\uff22ot"}},  # full-width S and B
    {"context": {"language": "en-US", "placement": "Voice"}},
    {"extensions": {"aigw": {"use": "Training"}}},
    {"extensions": {"aigw": {"use": ["answer", " TRAINING"]}}},
])
def test_deny_rules_match_names_whatever_their_case_width_or_spacing(gateway, changes):
    denial(retrieve(gateway, ask(**changes)), "policy_violation")


def test_allowed_names_match_whatever_their_case_or_spacing(gateway):
    answer(retrieve(gateway, ask(context={"language": "en-US", "placement": " Chat "})), 200,
           "ok")


@pytest.mark.parametrize("changes", [
    {"extensions": {"aigw": {"source": "nope"}}},
    {"extensions": {"aigw": {"mode": "full_article"}}},
    {"query": None},  # nothing to retrieve by
])
def test_what_is_not_offered_is_unsupported(gateway, changes):
    denial(retrieve(gateway, ask(**changes)), "unsupported")


@pytest.mark.parametrize("change", [
    {"intent_access": {"enabled": False}},
    {"intent_access": {"state": "paused"}},
    {"compliance": {"revocable": True, "notice_required": True,
                    "sunset": (datetime.now(UTC).date() - timedelta(days=1)).isoformat()}},
])
def test_access_disabled_when_paused_off_or_past_sunset(backend, canned, inprocess_factory,
                                                       tmp_path, change):
    closed = inprocess_factory(aip_config(backend, canned, tmp_path, aip=change))
    denial(retrieve(closed, ask()), "access_disabled")
    document = httpx.get(closed.url + "/.well-known/aip.json").json()
    assert not [e.message for e in DECLARATION.iter_errors(document)]


def test_an_anonymous_caller_is_limited_by_address_whatever_platform_it_declares(
        backend, canned, inprocess_factory, tmp_path):
    limits = {"storage": "memory://", "rules": [
        {"name": "aip", "paths": ["/pag/retrieve"], "key": "platform", "limit": "2/minute"}]}
    limited = inprocess_factory(aip_config(backend, canned, tmp_path, rate_limits=limits))
    first = {"platform": {"id": "platform-a"}}
    for _ in range(2):
        answer(retrieve(limited, ask("canned", "sizes:5", **first)), 200, "ok")
    refused = retrieve(limited, ask("canned", "sizes:5", **first))
    body = denial(refused, "rate_limited", 429)
    assert body["request_id"] == "req_92fA1" and int(refused.headers["retry-after"]) >= 1
    for fresh in range(5):  # a fresh platform id is no fresh quota
        renamed = ask("canned", "sizes:5", platform={"id": f"platform-fresh-{fresh}"})
        denial(retrieve(limited, renamed), "rate_limited", 429)


def test_the_platform_key_narrows_only_an_authenticated_callers_quota():
    from gateway.context import RequestContext
    from gateway.model import Principal, TokenKind
    from gateway.ratelimit.config import Rule
    from gateway.ratelimit.limiter import CompiledRule

    rule = CompiledRule(Rule(name="aip", key="platform", limit="2/minute"))

    def key(platform: str, principal: Principal | None = None) -> str:
        ctx = RequestContext("r", "POST", "/pag/retrieve", "10.0.0.1")
        ctx.platform_id = platform
        if principal is not None:
            ctx.principal = principal
        return rule.key(ctx)

    assert key("platform-a") == key("platform-b") == "address:10.0.0.1"
    crm = Principal(subject="crm", client_id="crm", kind=TokenKind.CLIENT)
    assert key("platform-a", crm) != key("platform-b", crm)
    assert key("platform-a", crm).endswith("|client:crm")


def test_validate_warns_on_a_limit_keyed_only_on_a_declared_value(backend, canned, tmp_path):
    from gateway.loader import load_config

    def warnings_for(rules: list[dict]) -> list[str]:
        config = aip_config(backend, canned, tmp_path,
                            rate_limits={"storage": "memory://", "rules": rules})
        path = tmp_path / "warned.yaml"
        path.write_text(yaml.safe_dump(config))
        return [f"{w.path}: {w.message}" for w in load_config(path, env={}).warnings
                if w.path.startswith("rate_limits.rules")]

    by_platform = {"name": "aip", "paths": ["/pag/retrieve", "/pag/events"],
                   "key": "platform", "limit": "60/minute"}
    [warning] = warnings_for([by_platform])
    assert warning.startswith("rate_limits.rules[0].key: expected a rule keyed on the caller")
    assert "'platform' is declared by each request" in warning
    by_caller = {"name": "callers", "paths": ["/pag"], "key": "client", "limit": "120/minute"}
    assert warnings_for([by_platform, by_caller]) == []
    only_retrieve = {**by_caller, "paths": ["/pag/retrieve"]}  # /pag/events left unbounded
    assert len(warnings_for([by_platform, only_retrieve])) == 1
    posts_only = {**by_caller, "methods": ["POST"]}
    assert len(warnings_for([by_platform, posts_only])) == 1  # the platform rule counts any
    assert warnings_for([{**by_platform, "methods": ["POST"]}, posts_only]) == []
    assert warnings_for([{**by_platform, "key": "address"}]) == []


# --------------------------------------------------------------------------- errors


def test_upstream_down_is_an_error_that_leaks_nothing(canned, inprocess_factory, tmp_path):
    backend = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    config = aip_config(backend, canned, tmp_path)
    down = inprocess_factory(config)
    response = retrieve(down, ask())
    body = answer(response, 502, "error")
    assert body["error"]["code"] == "upstream_unavailable"
    assert body["request_id"] == "req_92fA1"
    port = backend.rsplit(":", 1)[1]
    assert port not in response.text and "127.0.0.1" not in response.text


def test_unmappable_upstream_json_is_an_error(gateway: Gateway):
    response = retrieve(gateway, ask("broken", "anything"))
    body = answer(response, 502, "error")
    assert body["error"]["code"] == "upstream_error"
    assert "10.0.0.7" not in response.text and "nothing to see" not in response.text


SECRET = "internal-7f3a"
GOOD_HIT = {"id": "good-1", "title": "A good hit", "text": "Some text to cut into chunks.",
            "url": "https://pub.example.com/good"}
WRONG_KINDS = {  # source -> (its search answer, its article answer or None, the slot broken)
    "idbool": ({"items": [GOOD_HIT, {**GOOD_HIT, "id": True}]}, None, "id"),
    "titlenumber": ({"items": [GOOD_HIT, {**GOOD_HIT, "title": 5}]}, None, "fields.title"),
    "idobject": ({"items": [{**GOOD_HIT, "id": {"db": SECRET}}]}, None, "id"),
    "articletitle": ({"items": [GOOD_HIT]}, {**GOOD_HIT, "body": "Text.", "title": 5},
                     "fields.title"),
}


def replying(name: str) -> dict[str, Any]:
    """A source (and domain) whose search and article read the echo upstream answers as
    WRONG_KINDS[name] says."""
    search, article, _ = WRONG_KINDS[name]
    hit = {"items": "items", "id": "id", "text": "text",
           "fields": {"title": "title", "url": "url"}}
    source: dict[str, Any] = {"domains": [name], "search": {
        "upstream": "echo", "method": "POST", "path": "/reply",
        "body": {"q": "{query}", **search}, "mapping": hit}}
    if article is not None:
        source["article"] = {"upstream": "echo", "method": "POST", "path": "/reply",
                             "body": {**article, "asked": "{id}"},
                             "mapping": {"id": "id", "text": "body", "fields": hit["fields"]}}
    return source


def test_upstream_values_of_the_wrong_kind_are_upstream_errors_in_the_aip_envelope(
        backend, canned, echo, gateway_factory, tmp_path):
    """The same mapping errors as AIDRE's: a 502 naming no value, never a 500 or a traceback."""
    config = aip_config(backend, canned, tmp_path, aip={
        "editorial_domains": list(WRONG_KINDS),
        "sources": {name: replying(name) for name in WRONG_KINDS}})
    config["upstreams"]["echo"] = {"url": echo}
    started = gateway_factory(config)
    for name in WRONG_KINDS:
        response = retrieve(started, ask(name, "anything"))
        body = answer(response, 502, "error")
        assert body["error"] == {"code": "upstream_error",
                                 "message": "Temporary failure; retry later."}, name
        assert body["request_id"] == "req_92fA1"
        for leaked in (SECRET, "True", "good-1", "5"):
            assert leaked not in response.text.replace(body["timestamp"], ""), (name, leaked)
    logs = started.process.stdout() + started.process.stderr()
    assert "unhandled error" not in logs and '"exception"' not in logs and "Traceback" not in logs
    assert SECRET not in logs  # operators learn which slot, not the value
    assert all(f'"slot":"{slot}"' in logs for _, _, slot in WRONG_KINDS.values())
    assert started.metric("aigw_upstream_errors_total", upstream="echo",
                          kind="mapping") == len(WRONG_KINDS)


def test_latency_budget_bounds_the_upstream_wait(gateway: Gateway):
    response = retrieve(gateway, ask("slow", "slow", runtime={"latency_budget_ms": 200}))
    assert answer(response, 504, "error")["error"]["code"] == "upstream_timeout"


@pytest.mark.parametrize("content,content_type,request_id", [
    (b"{not json", "application/json", None),
    (json.dumps({"aip_version": "0.1", "request_id": "req_bad"}).encode(), "application/json",
     "req_bad"),
    (json.dumps(ask(intent={"domain": "Finance"})).encode(), "application/json", "req_92fA1"),
    (json.dumps(ask(auction={"bid": 1})).encode(), "application/json", "req_92fA1"),
    (json.dumps(ask()).encode(), "text/plain", "req_92fA1"),
])
def test_invalid_requests_are_errors_echoing_a_readable_request_id(gateway, content,
                                                                   content_type, request_id):
    response = retrieve(gateway, content, content_type)
    body = answer(response, 415 if content_type == "text/plain" else 400, "error")
    assert body["error"]["code"] == "invalid_request"
    assert body["request_id"] == (request_id or response.headers["x-request-id"])


def upstream_requests(canned: str) -> int:
    return httpx.get(canned + "/count").json()["requests"]


def test_a_105_kb_query_text_is_invalid_request_without_an_upstream_call(gateway, canned):
    before = upstream_requests(canned)
    response = retrieve(gateway, ask("canned", "q" * 105_000))
    body = answer(response, 400, "error")
    assert body["error"]["code"] == "invalid_request"
    assert "runtime/query_text" in body["error"]["message"] and "1024" in body["error"]["message"]
    answer(retrieve(gateway, ask("canned", "q" * 1024)), 200, "ok")  # at the cap: served
    assert upstream_requests(canned) == before + 1
    padded = retrieve(gateway, ask("canned", "q", extensions={"pad": ["x" * 2000] * 150}))
    body = answer(padded, 413, "error")  # ~300 KB: past aip.retrieve_max_bytes, never parsed
    assert body["error"] == {"code": "request_too_large",
                             "message": "Request body exceeds 262144 bytes."}


def test_an_upstream_url_too_long_is_a_client_error_before_anything_is_sent(
        backend, canned, inprocess_factory, tmp_path):
    roomy = inprocess_factory(aip_config(backend, canned, tmp_path,
                                       aip={"retrieval": {"max_query_chars": 100_000}}))
    before = upstream_requests(canned)
    response = retrieve(roomy, ask("canned", "ü" * 3000))  # 18 KB percent-encoded
    body = answer(response, 400, "error")
    assert body["error"] == {"code": "invalid_request", "message":
                             "The request's values are too long to send to the upstream service."}
    assert upstream_requests(canned) == before
    answer(retrieve(roomy, ask("canned", "q" * 5000)), 200, "ok")
    assert upstream_requests(canned) == before + 1


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"x": value}
    return value


@pytest.mark.parametrize("changes", [
    {"extensions": nested(300)},
    {"extensions": {"other": ["a" * 3000]}},
    {"extensions": {"k" * 3000: 1}},
    {"platform": {"id": "p" * 3000}},
])
def test_bodies_too_deep_or_with_strings_too_long_are_invalid_requests(gateway, changes):
    body = answer(retrieve(gateway, ask(**changes)), 400, "error")
    assert body["error"]["code"] == "invalid_request"
    assert body["request_id"] == "req_92fA1"
    assert "k" * 100 not in body["error"]["message"]  # a member name is never echoed at length


def test_wrong_method_answers_in_the_aip_dialect(gateway: Gateway):
    response = httpx.get(gateway.url + "/pag/retrieve")
    assert response.headers["allow"] == "POST"
    answer(response, 405, "error")


# --------------------------------------------------------------------------- config


@pytest.mark.parametrize("operation,template,placeholder,filled", [
    ("search", {"path": "/api/v1/articles/{visibility}/search"}, "visibility",
     "{after}, {fetch}, {limit}, {offset}, {query}, {top_k}"),
    ("article", {"query": {"q": "{query}"}}, "query", "{id}"),
])
def test_validate_refuses_a_placeholder_the_operation_does_not_fill(
        backend, canned, tmp_path, operation, template, placeholder, filled):
    """Such a config used to load, and then every retrieve failed (500, a KeyError)."""
    config = aip_config(backend, canned, tmp_path)
    source = config["aip"]["sources"]["articles"]
    source[operation] = {**source[operation], **template}
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(config))
    result = subprocess.run([sys.executable, "-m", "gateway", "validate", str(path)],
                            capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 1, result.stdout
    assert f"{path}: aip.sources.articles.{operation}: unknown placeholder {{{placeholder}}}; " \
           f"this operation fills {filled}" in result.stderr
    assert "Traceback" not in result.stderr


# --------------------------------------------------------------------------- token counting


def test_token_counts_fall_back_to_utf8_bytes_which_never_undercount():
    text = "naïve café — 日本語のテキスト, emoji 🎉 and plain words"
    fallback = TokenCounter("no-such-encoding")
    assert not fallback.exact
    assert fallback.count(text) == len(text.encode("utf-8"))
    real = TokenCounter("cl100k_base")
    assert real.exact and real.count(text) == len(CL100K.encode_ordinary(text))
    assert fallback.count(text) >= real.count(text)
