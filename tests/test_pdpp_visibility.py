"""PDPP record visibility over real HTTP, between real processes: the demo backend, the demo
token issuer and `aigw run` with the demo's AIDRE and PDPP sections and shipped policies. The
demo's `internal` articles (art-0017 among them) reach only callers with articles:read, on
every surface serving `articles`: PDPP records, lexical and semantic search, MCP, AIDRE."""

from __future__ import annotations

import asyncio
import copy
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
import yaml
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from pdpp_config import check, demo_pdpp
from processes import ROOT, Gateway, Process, free_port, wait_for_http
from test_policy_decisions import logged

from gateway.caching import BoundedCache
from gateway.demo.data import generate
from gateway.index.sqlite import SqliteIndex
from gateway.loader import ConfigError, load_config
from gateway.model import Principal, TokenKind
from gateway.policy.matrix import matrix
from gateway.policy.rules import Ask
from gateway.surfaces.pdpp import search
from gateway.surfaces.pdpp.config import Pdpp
from gateway.surfaces.pdpp.indexing import indexed, version
from gateway.surfaces.pdpp.projection import Access
from gateway.surfaces.pdpp.store import Entry, _from_index
from gateway.surfaces.pdpp.streams import Record, Snapshot, compile_streams

DEMO = yaml.safe_load((ROOT / "config" / "demo.yaml").read_text())
ARTICLES = {a["id"]: a for a in generate(n_articles=300, seed=7).articles}
INTERNAL = {key for key, article in ARTICLES.items() if article["visibility"] == "internal"}
HIDDEN = "art-0017"  # internal: "How to update your payment method on the Teams plan"
QUERY = "update payment method Teams plan"
RULE = "internal-articles-for-article-readers"  # policies/records.yaml
# The demo issuer's clients: an app u-001 granted article titles (no scope), an agent with
# articles:read (its grant: every article field, from auth.scope_grants), and the owner of
# u-001's data (every stream, no scope).
CLIENTS = {
    "pdpp-app": {"secret": "app-secret", "subject": "u-001",
                 "grant": {"articles": ["id", "title", "category", "updated_at"]}},
    "demo-agent": {"secret": "agent-secret", "scopes": ["articles:read"]},
    "u-001": {"secret": "owner-secret", "kind": "owner"},
}


@dataclass
class Stack:
    gateway: Gateway
    issuer: str
    log: Path
    tokens: dict[str, str] = field(default_factory=dict)

    def token(self, client: str) -> str:
        """The client's token from the issuer (one each: the gateway then answers a caller
        asking again from what it remembers of it, decisions noted again)."""
        if client not in self.tokens:
            answer = httpx.post(self.issuer + "/token", timeout=10,
                                data={"grant_type": "client_credentials"},
                                auth=(client, CLIENTS[client]["secret"]))
            assert answer.status_code == 200, answer.text
            self.tokens[client] = answer.json()["access_token"]
        return self.tokens[client]

    def get(self, path: str, client: str, **params: Any) -> httpx.Response:
        return httpx.get(self.gateway.url + path, params=params, timeout=30,
                         headers={"Authorization": f"Bearer {self.token(client)}"})


def gateway_config(backend: str, issuer: str, workdir: Path) -> dict[str, Any]:
    """The demo's AIDRE and PDPP sections (both serve `articles`) and shipped policies, in
    front of the test backend, trusting the test issuer."""
    aidre = copy.deepcopy(DEMO["aidre"])
    aidre.pop("cursor_secret")
    pdpp = demo_pdpp()
    pdpp["index"] = {"path": str(workdir / "index")}
    return {
        "policies": str(ROOT / "policies"),
        "upstreams": {"helpcentre": {"url": backend}},
        "auth": {"issuers": [{"issuer": issuer, "jwks_uri": issuer + "/.well-known/jwks.json",
                              "audiences": ["aigw-demo"]}],
                 "scope_grants": DEMO["auth"]["scope_grants"]},
        "aidre": aidre, "pdpp": pdpp, "mcp": {"allowed_hosts": ["127.0.0.1:*"]},
        "decision_log": {"sink": "file", "path": str(workdir / "decisions.jsonl")},
    }


@pytest.fixture(scope="module")
def stack(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("pdpp-visibility")
    port = free_port()
    issuer = f"http://127.0.0.1:{port}"
    issuer_file = workdir / "issuer.yaml"
    issuer_file.write_text(yaml.safe_dump({
        "upstreams": {"none": {"url": "http://127.0.0.1:9"}},
        "demo": {"issuer": {"url": issuer, "port": port, "key_file": "issuer.jwk.json",
                            "audience": "aigw-demo", "clients": CLIENTS}}}))
    process = Process([sys.executable, "-m", "gateway.demo.issuer", "--config",
                       str(issuer_file)], workdir, f"issuer-{port}")
    wait_for_http(issuer + "/.well-known/jwks.json", process=process.popen)
    gateway = Gateway(gateway_config(backend, issuer, workdir), workdir, public=True)
    yield Stack(gateway, issuer, workdir / "decisions.jsonl")
    gateway.stop()
    process.stop()


def error(response: httpx.Response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    check(body, "error")
    assert body["error"]["code"] == code
    return body["error"]


def listed(stack: Stack, client: str) -> list[str]:
    """Every record key of the articles stream the client is given, page by page."""
    keys: list[str] = []
    params: dict[str, Any] = {"limit": 100}
    while True:
        response = stack.get("/v1/streams/articles/records", client, **params)
        assert response.status_code == 200, response.text
        page = response.json()
        keys += [record["id"] for record in page["data"]]
        if not page.get("has_more"):
            return keys
        params["cursor"] = page["next_cursor"]


def found(stack: Stack, path: str, client: str, **params: Any) -> tuple[list[str], dict]:
    response = stack.get(path, client, q=QUERY, **{"streams[]": "articles", **params})
    assert response.status_code == 200, response.text
    document = response.json()
    return [hit["record_key"] for hit in document["data"]], document


def every_hit(stack: Stack, path: str, client: str) -> tuple[list[str], str]:
    """Every hit of a search, a page of 20 at a time, and every page's body as sent."""
    keys, bodies, params = [], [], {"limit": 20}
    while True:
        page, document = found(stack, path, client, **params)
        keys += page
        bodies.append(str(document))
        if not document.get("has_more"):
            return keys, "".join(bodies)
        params["cursor"] = document["next_cursor"]


def test_an_internal_article_is_not_found_without_articles_read(stack: Stack):
    hidden = stack.get(f"/v1/streams/articles/records/{HIDDEN}", "pdpp-app")
    missing = stack.get("/v1/streams/articles/records/art-9999", "pdpp-app")
    assert error(hidden, 404, "not_found")["message"] == \
        error(missing, 404, "not_found")["message"]  # answered as a record that does not exist
    assert HIDDEN not in hidden.text
    public = stack.get("/v1/streams/articles/records/art-0001", "pdpp-app")
    assert public.status_code == 200 and ARTICLES["art-0001"]["visibility"] == "public"

    again = stack.get(f"/v1/streams/articles/records/{HIDDEN}", "pdpp-app")  # from memory
    for response in (hidden, again):  # the same decisions noted, taken or remembered
        record = logged(stack.log, response.headers["x-aigw-decision-id"])
        [internal] = [d for d in record["decisions"] if d["kind"] == "record_visibility"
                      and d["attributes"]["visibility"] == "internal"]
        assert (internal["resource"], internal["effect"], internal["rule"]) == \
            ("articles", "deny", RULE)
        assert record["surface"] == "pdpp"


def test_internal_articles_are_left_out_of_listings_and_searches(stack: Stack):
    keys = listed(stack, "pdpp-app")
    assert len(keys) == len(set(keys)) == len(ARTICLES) - len(INTERNAL)
    assert not INTERNAL & set(keys)

    for path in ("/v1/search", "/v1/search/semantic"):
        hits, bodies = every_hit(stack, path, "pdpp-app")
        assert hits and len(hits) == len(set(hits)), path  # pages and cursors over what it sees
        assert not INTERNAL & set(hits) and HIDDEN not in bodies, path
        agent, _ = every_hit(stack, path, "demo-agent")
        assert set(agent) - set(hits) == set(agent) & INTERNAL and HIDDEN in agent, path
    _, first = found(stack, "/v1/search", "pdpp-app", limit=20)
    assert first["meta"]["count"] == len(every_hit(stack, "/v1/search", "pdpp-app")[0])


def test_callers_with_articles_read_still_see_internal_articles(stack: Stack):
    record = stack.get(f"/v1/streams/articles/records/{HIDDEN}", "demo-agent")
    assert record.status_code == 200, record.text
    assert record.json()["data"]["title"] == ARTICLES[HIDDEN]["title"]
    assert set(listed(stack, "demo-agent")) >= INTERNAL
    lexical, _ = found(stack, "/v1/search", "demo-agent", limit=5)
    assert lexical[0] == HIDDEN
    # The owner of u-001's data holds no articles:read: its grant covers every stream, and
    # the rule decides the articles' visibility for it as for anyone.
    error(stack.get(f"/v1/streams/articles/records/{HIDDEN}", "u-001"), 404, "not_found")


def _mcp(stack: Stack, client: str, tool: str, arguments: dict[str, Any]) -> Any:
    async def call() -> Any:
        headers = {"Authorization": f"Bearer {stack.token(client)}"}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
                Client(streamable_http_client(stack.gateway.url + "/mcp",
                                              http_client=http)) as session:
            return await session.call_tool(tool, arguments)
    return asyncio.run(call())


def test_mcp_fetch_and_search_follow_the_same_visibility(stack: Stack):
    fetched = _mcp(stack, "pdpp-app", "pdpp_fetch", {"id": f"articles:{HIDDEN}"})
    assert fetched.is_error and fetched.structured_content["error"]["code"] == "not_found"
    for mode in ("lexical", "semantic"):
        searched = _mcp(stack, "pdpp-app", "pdpp_search", {
            "q": QUERY, "streams": ["articles"], "limit": 50, "mode": mode})
        assert not searched.is_error, searched.content
        ids = {result["id"] for result in searched.structured_content["results"]}
        assert ids and not {f"articles:{key}" for key in INTERNAL} & ids, mode

    allowed = _mcp(stack, "demo-agent", "pdpp_fetch", {"id": f"articles:{HIDDEN}"})
    assert not allowed.is_error, allowed.content
    assert allowed.structured_content["title"] == ARTICLES[HIDDEN]["title"]


def test_aidre_refuses_the_same_article_to_the_same_caller(stack: Stack):
    assert stack.get(f"/chunks/articles:{HIDDEN}", "pdpp-app").status_code == 404
    assert stack.get(f"/chunks/articles:{HIDDEN}", "demo-agent").status_code == 200


# --------------------------------------------------------------------------- config and policy


def load(tmp_path: Path, *rules: dict, **changes: Any) -> Any:
    """The config of the stack above (issuer and backend unreachable: nothing is called),
    with `rules` as its only policy file."""
    config = gateway_config("http://127.0.0.1:9", "http://127.0.0.1:9", tmp_path)
    policies = tmp_path / "policies"
    policies.mkdir(exist_ok=True)
    (policies / "rules.yaml").write_text(yaml.safe_dump({"rules": list(rules)}))
    config.update(policies=str(policies), public_base_url="https://rs.example.com", **changes)
    (tmp_path / "aigw.yaml").write_text(yaml.safe_dump(config))
    return load_config(tmp_path / "aigw.yaml", env={})


def refused(tmp_path: Path, *rules: dict, **changes: Any) -> dict[str, str]:
    with pytest.raises(ConfigError) as found_issues:
        load(tmp_path, *rules, **changes)
    return {issue.path: issue.message for issue in found_issues.value.issues}


DRAFTS = {"id": "drafts", "kind": "record_visibility", "collection": "messages",
          "visibility": "draft", "when": {"scopes": ["drafts:read"]},
          "description": "Draft messages are for drafts:read."}


def test_a_visibility_rule_may_name_a_stream_and_is_in_the_report(tmp_path: Path):
    loaded = load(tmp_path, DRAFTS, {**DRAFTS, "id": "internal", "collection": "articles",
                                     "visibility": "internal", "when": {"scopes": ["x"]}})
    stranger = Principal("s", "app", frozenset(), TokenKind.CLIENT)
    ask = Ask("record_visibility", "messages", stranger,
              {"visibility": "draft", "collection_visibility": "public"})
    assert loaded.bundle.decide(ask).rule == "drafts"
    rows = {cell.row for cell in matrix(loaded.bundle, loaded.settings)}  # the report's rows
    assert ("pdpp", "record_visibility", "messages", "visibility=draft") in rows
    # One resource, served by both surfaces: its rows say so.
    assert ("aidre, pdpp", "record_visibility", "articles", "visibility=internal") in rows
    assert not [row for row in rows if row[1:3] == ("collection_read", "messages")]  # the grant


def test_what_a_stream_is_not_refuses_rules_and_configs(tmp_path: Path):
    reads = {"id": "r", "kind": "collection_read", "collection": "messages",
             "description": "A grant says who reads a stream, never this kind."}
    problems = refused(tmp_path, reads)
    assert problems["rules[0].collection"] == \
        "expected one of the collections and sources the config declares (articles)"
    assert "(articles, messages)" in refused(tmp_path, {**DRAFTS, "collection": "mesages"})[
        "rules[0].collection"]
    pdpp = demo_pdpp()
    pdpp["streams"]["articles"]["visibility"] = "internal"
    problems = refused(tmp_path, DRAFTS, pdpp=pdpp)
    assert "a name several surfaces serve is one resource, with one visibility" in \
        problems["pdpp.streams.articles.visibility"]


# --------------------------------------------------------------------------- units

NOTES = compile_streams(Pdpp.model_validate({"streams": {"notes": {
    "connector_id": "c", "primary_key": "id", "cursor_field": "id",
    "fields": {"id": {"path": "id", "required": True}, "title": {"path": "title"}},
    "record_visibility": {"path": "meta.visibility"},
    "records": {"upstream": "u", "path": "/notes", "mapping": {"id": "id"}},
    "search": {"lexical_fields": ["title"]}}}}), {"u"})["notes"]
ITEMS = [{"id": "a", "title": "Refund policy", "meta": {"visibility": "public"}},
         {"id": "b", "title": "Refund desk", "meta": {"visibility": "internal"}},
         {"id": "c", "title": "Refund by card"},  # no visibility: seen by nobody
         {"id": "d", "title": "Refund for visibility", "visibility": "public", "meta": {}}]


def test_a_records_visibility_is_read_with_it_and_kept_in_the_index(tmp_path: Path):
    records = [NOTES.record(item, Counter()) for item in ITEMS]
    assert [r.visibility for r in records if r is not None] == ["public", "internal", None, None]
    assert all("visibility" not in r.data for r in records if r is not None)  # not a field
    index = SqliteIndex(tmp_path / "notes.db", fields=["title"], max_bytes=1 << 24)
    index.replace(indexed(NOTES, [r for r in records if r is not None], None), truncated=False)
    kept = _from_index(index)  # what a restarted gateway serves
    assert kept is not None
    assert [(r.key, r.visibility) for r in kept.snapshot.records] == \
        [(r.key, r.visibility) for r in records if r is not None]
    changed = Record("b", records[1].data, "public")  # a new visibility is a new version
    assert version(changed) != version(records[1])


async def test_each_set_of_visibilities_gets_what_it_would_get_alone(tmp_path: Path):
    records = [r for item in ITEMS if (r := NOTES.record(item, Counter())) is not None]
    index = SqliteIndex(tmp_path / "notes.db", fields=["title"], max_bytes=1 << 24)
    index.replace(indexed(NOTES, records, None), truncated=False)
    entry = Entry(Snapshot(records, "2026-01-01T00:00:00Z", False), index, 0.0)

    async def entry_for(_: object) -> Entry:
        return entry

    fields = frozenset({"id", "title"})
    searches: search.Searches = BoundedCache(100, 1 << 20)
    for _ in range(2):  # the second round answers from what the first remembered
        for seen, keys in ((None, {"a", "b", "c", "d"}), (frozenset({"public"}), {"a"}),
                           (frozenset({"public", "internal"}), {"a", "b"})):
            access = Access(NOTES, fields, visibilities=seen)
            ranked = await search.lexical("refund", [access], [], entry_for, None, True, 10,
                                          searches)
            assert {f.record.key for f in ranked.hits} == keys and ranked.total == len(keys)
    assert Access(NOTES, fields, visibilities=frozenset({"public"})).view(records[2]) is None
