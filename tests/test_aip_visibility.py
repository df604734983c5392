"""AIP record visibility over real HTTP, with the demo's own `aip` source over the demo
backend: an `internal` article never reaches a caller without articles:read, in any form."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from inprocess import InProcessGateway
from processes import ROOT, Gateway
from test_aip import RESPONSE, ask

from gateway.demo.data import generate

DEMO = yaml.safe_load((ROOT / "config" / "demo.yaml").read_text())
ARTICLES = {a["id"]: a for a in generate(n_articles=300, seed=7).articles}
INTERNAL = [a for a in ARTICLES.values() if a["visibility"] == "internal"]
STAFF_KEY = "aip-staff-key"  # holds articles:read, the scope internal articles need
# Queries the review found leaking, then the titles of the first internal articles.
QUERIES = ["The mobile app keeps crashing", "update your payment method on the Teams plan",
           *(a["title"] for a in INTERNAL[:6])]


def demo_aip_config(backend: str, workdir: Path, **source: Any) -> dict[str, Any]:
    """The demo's `aip` section (its sources as shipped), unsigned and without events."""
    aip = {k: copy.deepcopy(v) for k, v in DEMO["aip"].items()
           if k not in ("signing", "event", "events")}
    aip["sources"] = {name: {**s, **source} for name, s in aip["sources"].items()}
    aip["retrieval"] = {**aip["retrieval"], "max_chunks": 10, "max_tokens": 5000}
    (workdir / "policies").mkdir(exist_ok=True)
    key = {"sha256": hashlib.sha256(STAFF_KEY.encode()).hexdigest(), "subject": "staff",
           "client_id": "staff", "scopes": ["articles:read"]}
    return {"public_base_url": "https://ai.example.com", "policies": str(workdir / "policies"),
            "upstreams": {"helpcentre": {"url": backend}},
            "auth": {"default_access": "public", "api_keys": {"keys": [key]}}, "aip": aip}


@pytest.fixture(scope="module")
def demo(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    workdir = tmp_path_factory.mktemp("aip-visibility")
    started = InProcessGateway(demo_aip_config(backend, workdir), workdir)
    yield started
    started.stop()


def retrieve(gateway: Gateway, query: str, key: str | None = None, **changes: Any) -> dict:
    headers = {"X-API-Key": key} if key else {}
    response = httpx.post(gateway.url + "/pag/retrieve", json=ask(query=query, **changes),
                          headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    document = response.json()
    assert not list(RESPONSE.iter_errors(document))
    return document


def sources(document: dict) -> set[str]:
    return {chunk["id"].split("#")[0] for chunk in document.get("content", {}).get("chunks", [])}


def leaked(document: dict) -> list[str]:
    """Internal article ids or URLs anywhere in the answer (chunk ids, citations)."""
    text = json.dumps(document)
    return [a["id"] for a in INTERNAL if a["id"] in text or a["url"] in text]


def test_internal_articles_reach_only_callers_with_articles_read(demo: Gateway):
    staff = set()
    for query in QUERIES:
        staff |= sources(retrieve(demo, query, key=STAFF_KEY))
        document = retrieve(demo, query)
        assert document["status"] == "ok"
        assert not leaked(document), query
        for chunk in document.get("content", {}).get("chunks", []):
            article = ARTICLES[chunk["id"].split("#")[0]]
            assert article["visibility"] == "public"
            assert " ".join(chunk["text"].split()) in " ".join(article["body"].split())
    assert {"art-0033", "art-0017"} <= staff
    assert len(staff & {a["id"] for a in INTERNAL}) >= 4


def test_a_hit_without_a_visibility_is_left_out(backend: str, inprocess_factory, tmp_path):
    """A source whose rules ask for a visibility its mapping never gives shows nothing."""
    config = demo_aip_config(backend, tmp_path)
    article = config["aip"]["sources"]["help-articles"]["article"]
    article["mapping"] = {**article["mapping"], "metadata": {}}
    gateway = inprocess_factory(config)
    for key in (None, STAFF_KEY):
        document = retrieve(gateway, "How to reset your password", key=key)
        assert "content" not in document and document["status"] == "ok"


def test_without_rules_only_public_hits_are_served(backend: str, inprocess_factory, tmp_path):
    """A source that maps a visibility but declares no rules: other values are hidden."""
    config = demo_aip_config(backend, tmp_path)
    config["aip"]["sources"]["help-articles"].pop("record_visibility")
    gateway = inprocess_factory(config)
    for key in (None, STAFF_KEY):
        document = retrieve(gateway, "The mobile app keeps crashing", key=key)
        assert sources(document) and not leaked(document)


def test_a_long_or_empty_request_id_is_refused_and_never_echoed_whole(demo: Gateway):
    response = httpx.post(demo.url + "/pag/retrieve",
                          json=ask(request_id="r" * 100_000), timeout=10)
    document = response.json()
    assert response.status_code == 400 and document["status"] == "error"
    assert document["request_id"] == "r" * 128
    assert not list(RESPONSE.iter_errors(document))
    assert retrieve(demo, "password", request_id="r" * 128)["request_id"] == "r" * 128
    empty = httpx.post(demo.url + "/pag/retrieve", json=ask(request_id=""), timeout=10)
    assert empty.status_code == 400
    assert empty.json()["request_id"] == empty.headers["x-request-id"]


def with_aidre(config: dict[str, Any]) -> dict[str, Any]:
    """The demo's AIDRE section beside its AIP one: collection `articles`, source
    `help-articles`, the same records."""
    return {**config, "aidre": {k: v for k, v in DEMO["aidre"].items() if k != "cursor_secret"}}


def test_a_policies_rule_governs_an_aip_source_as_it_governs_an_aidre_collection(
        backend: str, inprocess_factory, tmp_path):
    """One `record_visibility` rule shape in policies/, naming the AIP source or the AIDRE
    collection: internal articles reach the articles:read caller on both, anonymous on neither.
    The source declares no record_visibility of its own, so only the policies rule shows them."""
    config = with_aidre(demo_aip_config(backend, tmp_path))
    config["aip"]["sources"]["help-articles"].pop("record_visibility")
    rules = [{"id": f"internal-{name}-for-article-readers", "kind": "record_visibility",
              "collection": name, "visibility": "internal", "when": {"scopes": ["articles:read"]},
              "description": "Internal articles are for article readers."}
             for name in ("articles", "help-articles")]
    (tmp_path / "policies" / "records.yaml").write_text(yaml.safe_dump({"rules": rules}))
    gateway = inprocess_factory(config)

    def aidre_visibilities(query: str, key: str | None) -> set[str]:
        headers = {"content-type": "application/json", **({"X-API-Key": key} if key else {})}
        response = httpx.post(gateway.url + "/search", headers=headers, timeout=10,
                              json={"query": query, "collection": "articles", "top_k": 10})
        assert response.status_code == 200, response.text
        return {r["metadata"]["visibility"] for r in response.json()["results"]}

    internal_ids = {a["id"] for a in INTERNAL}
    seen = {"aip": set(), "aidre": set()}
    for query in QUERIES:
        assert not leaked(retrieve(gateway, query))
        assert aidre_visibilities(query, None) <= {"public"}
        seen["aip"] |= sources(retrieve(gateway, query, key=STAFF_KEY)) & internal_ids
        seen["aidre"] |= aidre_visibilities(query, STAFF_KEY) - {"public"}
    assert len(seen["aip"]) >= 4
    assert seen["aidre"] == {"internal"}


def test_an_aip_source_is_no_aidre_collection(backend: str, inprocess_factory, tmp_path):
    """Both are policy resources, in one namespace: AIDRE answers a source's name as it answers
    an unknown one."""
    gateway = inprocess_factory(with_aidre(demo_aip_config(backend, tmp_path)))

    def refusal(response: httpx.Response) -> tuple[int, str, str]:
        return response.status_code, response.json()["error"], response.json()["message"]

    searches = [refusal(httpx.post(gateway.url + "/search", timeout=10, json={
        "query": "password", "collection": name})) for name in ("help-articles", "nope")]
    assert searches[0] == searches[1] == (404, "not_found", "No such collection.")
    chunks = [refusal(httpx.get(f"{gateway.url}/chunks/{name}:art-0001", timeout=10))
              for name in ("help-articles", "nope")]
    assert chunks[0] == chunks[1] and chunks[0][0] == 404
