"""AIDRE data correctness over real HTTP: record visibility (§12), vector validity (§19.2),
pagination past the upstream's page cap (§18) and embedding-space revisions (§19.1)."""

from __future__ import annotations

import copy
import hashlib
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
import yaml
from aidre_config import ADVERTISED_SPACE, SPACE, aidre_gateway_config, collection
from demo_vectors import embed
from inprocess import InProcessGateway
from processes import ROOT, Gateway
from test_aidre import assert_error, search

from gateway import registry
from gateway.demo.data import generate
from gateway.model import Hit, Principal, Query, TokenKind
from gateway.policy.bundle import PolicyBundle
from gateway.policy.engine import PolicyEngine

DEMO = yaml.safe_load((ROOT / "config" / "demo.yaml").read_text())
INTERNAL = {f"articles:{a['id']}" for a in generate(n_articles=300, seed=7).articles
            if a["visibility"] == "internal"}
ARTICLES_KEY = "articles-key"  # a caller with articles:read, the scope internal articles need


def demo_aidre_config(backend: str, workdir: Path) -> dict:
    """The demo's own `aidre` section and record rules over the demo backend, plus an
    articles:read key. A copy: tests change it (add collections) for themselves alone."""
    config = aidre_gateway_config(backend, workdir, aidre=copy.deepcopy(DEMO["aidre"]))
    shutil.copy(ROOT / "policies" / "records.yaml", workdir / "policies" / "records.yaml")
    config["auth"]["api_keys"]["keys"].append(
        {"sha256": hashlib.sha256(ARTICLES_KEY.encode()).hexdigest(), "subject": "agent",
         "client_id": "agent", "scopes": ["articles:read"]})
    return config


@pytest.fixture(scope="module")
def demo(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    workdir = tmp_path_factory.mktemp("aidre-demo")
    started = InProcessGateway(demo_aidre_config(backend, workdir), workdir)
    yield started
    started.stop()


def all_results(gateway: Gateway, body: dict, key: str | None = None) -> list[dict]:
    results, cursor = [], None
    for _ in range(20):
        response = search(gateway, {**body, **({"cursor": cursor} if cursor else {})}, key=key)
        assert response.status_code == 200, response.text
        results += response.json()["results"]
        cursor = response.json()["meta"].get("next_cursor")
        if cursor is None:
            return results
    raise AssertionError("pagination did not end")


# --------------------------------------------------------------------------- visibility (§12)


def test_text_search_never_shows_internal_articles_to_anonymous_callers(demo: Gateway):
    body = {"query": "account", "collection": "articles", "top_k": 50}
    anonymous = all_results(demo, body)
    assert anonymous and not {r["id"] for r in anonymous} & INTERNAL
    assert {r["metadata"]["visibility"] for r in anonymous} == {"public"}
    staff = all_results(demo, body, key=ARTICLES_KEY)
    internal = [r for r in staff if r["id"] in INTERNAL]
    assert internal and {r["metadata"]["visibility"] for r in internal} == {"internal"}
    assert len(staff) == len(anonymous) + len(internal)


def test_vector_search_never_shows_internal_articles_to_anonymous_callers(demo: Gateway):
    body = {"query_vector": embed("invoice"), "embedding_space": SPACE["id"],
            "collection": "articles", "top_k": 50}
    anonymous = search(demo, body).json()["results"]
    staff = search(demo, body, key=ARTICLES_KEY).json()["results"]
    assert anonymous and not {r["id"] for r in anonymous} & INTERNAL
    assert {r["id"] for r in staff} & INTERNAL
    assert all(r["metadata"]["visibility"] == "public" for r in anonymous)


def test_an_internal_chunk_is_the_same_404_as_a_missing_one(demo: Gateway):
    internal = sorted(INTERNAL)[0]
    hidden = assert_error(httpx.get(f"{demo.url}/chunks/{internal}"), 404, "not_found")
    missing = assert_error(httpx.get(f"{demo.url}/chunks/articles:art-9999"), 404, "not_found")
    assert (hidden["message"], hidden["details"]) == (missing["message"], missing["details"])
    allowed = httpx.get(f"{demo.url}/chunks/{internal}", headers={"x-api-key": ARTICLES_KEY})
    assert allowed.status_code == 200 and allowed.json()["metadata"]["visibility"] == "internal"
    public = httpx.get(f"{demo.url}/chunks/articles:art-0001").json()
    assert "articles:art-0001" not in INTERNAL and public["metadata"]["visibility"] == "public"


def test_hidden_records_neither_shorten_a_page_nor_show_where_they_rank(demo: Gateway):
    body = {"query": "The mobile app keeps crashing", "collection": "articles", "top_k": 3}
    everything = [r["id"] for r in all_results(demo, {**body, "top_k": 50}, key=ARTICLES_KEY)]
    public = [item for item in everything if item not in INTERNAL]
    assert public != everything[:len(public)]  # hidden records rank among the public ones
    first = search(demo, body).json()
    assert first["meta"]["returned"] == 3 and "truncated" not in first["meta"]
    assert [r["id"] for r in first["results"]] == public[:3]
    pages, cursor = [], None
    for _ in range(len(public) + 1):
        page = search(demo, {**body, "top_k": 1, **({"cursor": cursor} if cursor else {})})
        pages.append(page.json())
        cursor = pages[-1]["meta"].get("next_cursor")
        if cursor is None:
            break
    assert [p["meta"]["returned"] for p in pages] == [1] * len(public)  # never an empty page
    assert [r["id"] for p in pages for r in p["results"]] == public


def test_the_call_budget_ends_a_page_early_and_its_cursor_continues(demo, backend,
                                                                   inprocess_factory, tmp_path):
    config = demo_aidre_config(backend, tmp_path)
    config["aidre"]["max_upstream_calls"] = 4  # one search page and three visibility lookups
    gateway = inprocess_factory(config)
    body = {"query": "The mobile app keeps crashing", "collection": "articles", "top_k": 10}
    first = search(gateway, body).json()
    assert first["meta"]["truncated"] is True and first["meta"]["returned"] <= 3
    seen, cursor = [], first["meta"]["next_cursor"]
    seen += [r["id"] for r in first["results"]]
    for _ in range(100):
        page = search(gateway, {**body, "cursor": cursor}).json()
        assert page["meta"]["returned"] <= 3
        seen += [r["id"] for r in page["results"]]
        cursor = page["meta"].get("next_cursor")
        if cursor is None:
            break
    assert seen == [r["id"] for r in all_results(demo, {**body, "top_k": 50})]


@pytest.mark.parametrize("scopes,seen", [
    ((), {"p"}),
    (("staff:read",), {"p", "i"}),
    (("staff:read", "everything"), {"p", "i"}),
])
def test_unknown_or_missing_visibility_is_seen_by_nobody(scopes, seen):
    class Ctx:
        principal = Principal("s", scopes=frozenset(scopes),
                              kind=TokenKind.CLIENT if scopes else TokenKind.ANONYMOUS)

    hits = [Hit("p", metadata={"visibility": "public"}),
            Hit("i", metadata={"visibility": "internal"}),
            Hit("x", metadata={"visibility": "secret"}), Hit("n"),
            Hit("l", metadata={"visibility": ["public"]})]
    articles = SimpleNamespace(  # a public collection whose records carry their visibility
        public=True, scopes=frozenset(), returns_vectors=False, visibility="public",
        records_carry_visibility=True)
    rule = registry.rule_model().validate_python({
        "id": "internal", "kind": "record_visibility", "collection": "articles",
        "visibility": "internal", "when": {"scopes": ["staff:read"]}, "description": "staff"})
    engine = PolicyEngine({"articles": articles}, PolicyBundle((rule,), registry.rule_kinds()))
    kept = engine.after(Ctx(), Query(collection="articles"), hits)  # type: ignore[arg-type]
    assert {hit.id for hit in kept} == seen


def test_the_visibilities_a_caller_may_see_are_offered_to_the_upstream(
    echo, backend, inprocess_factory, tmp_path
):
    config = demo_aidre_config(backend, tmp_path)
    config["upstreams"]["echo"] = {"url": echo}
    echoed = collection("echo", description="What the upstream was asked.",
                        record_visibility={"scopes": {"internal": ["articles:read"]}})
    echoed["text_search"]["query"]["only"] = "{visibility}"
    echoed["text_search"]["mapping"] = {"items": "[query]", "id": "@",
                                        "metadata": {"visibility": "'public'"}}
    config["aidre"]["collections"]["echoed"] = echoed
    gateway = inprocess_factory(config)

    def asked(key: str | None) -> str:
        [result] = search(gateway, {"query": "x", "collection": "echoed"}, key=key).json()[
            "results"]
        return result["id"]

    assert "&only=public&" in asked(None)
    assert "&only=internal%2Cpublic&" in asked(ARTICLES_KEY)


# --------------------------------------------------------------------------- vectors (§19.2)


@pytest.mark.parametrize("vector,details", [
    ([], {"actual_dimensions": 0}),
    ([0.5] * 8193, {"actual_dimensions": 8193}),
    ([0.0] * 256, {}),
])
def test_vectors_that_cannot_be_searched_are_422_invalid_vector(demo, vector, details):
    body = {"query_vector": vector, "embedding_space": SPACE["id"], "collection": "articles"}
    error = assert_error(search(demo, body), 422, "invalid_vector")
    assert error["details"] == {"embedding_space": SPACE["id"], **details}


# --------------------------------------------------------------------------- the page cap


def test_text_search_pages_the_upstream_past_its_cap(backend, inprocess_factory, tmp_path):
    config = aidre_gateway_config(backend, tmp_path, aidre={"max_top_k": 150})
    config["aidre"]["collections"]["articles"]["text_search"]["max_items"] = 100
    gateway = inprocess_factory(config)
    body = {"query": "account", "collection": "articles", "top_k": 120}
    first = search(gateway, body).json()
    expected = [item["id"] for offset in (0, 100) for item in httpx.get(
        backend + "/api/v1/articles/search",
        params={"q": "account", "limit": 100, "offset": offset}).json()["items"]]
    assert len(expected) == 170
    assert [r["id"].removeprefix("articles:") for r in first["results"]] == expected[:120]
    rest = search(gateway, {**body, "cursor": first["meta"]["next_cursor"]}).json()
    assert [r["id"].removeprefix("articles:") for r in rest["results"]] == expected[120:]
    assert "next_cursor" not in rest["meta"] and "truncated" not in rest["meta"]


def test_vector_search_says_when_the_upstream_cap_cuts_the_results(demo: Gateway):
    body = {"query_vector": embed("parcel tracking"), "embedding_space": SPACE["id"],
            "collection": "articles", "top_k": 40}
    pages, cursor = [], None
    while True:
        key_body = {**body, **({"cursor": cursor} if cursor else {})}
        pages.append(search(demo, key_body, key=ARTICLES_KEY).json())
        cursor = pages[-1]["meta"].get("next_cursor")
        if cursor is None:
            break
    assert [p["meta"]["returned"] for p in pages] == [40, 40, 20]
    assert [p["meta"].get("truncated") for p in pages] == [None, None, True]
    ids = [r["id"] for p in pages for r in p["results"]]
    assert len(set(ids)) == 100


# --------------------------------------------------------------------------- spaces (§19.1)


def test_the_demo_embedding_space_carries_its_revision(demo: Gateway):
    document = httpx.get(demo.url + "/.well-known/ai-discovery").json()
    [space] = document["embedding_spaces"]
    assert space == {**ADVERTISED_SPACE, "revision": "1"}
