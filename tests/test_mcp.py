"""The MCP endpoints, called with the official `mcp` SDK's client over real HTTP: tools
generated from the demo's config, each call through the pipeline of the route it wraps."""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
import yaml
from idp_helpers import AUDIENCE, ISSUER, FakeIdp, SigningKey
from inprocess import InProcessGateway
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from pdpp_config import demo_pdpp
from processes import ROOT, Gateway, Process, free_port, wait_for_http

KEY = SigningKey.rsa("mcp")
HIDDEN_MESSAGE_FIELDS = {"body", "from", "to", "priority"}  # outside messages:read's grant
REFUSED = "refused-reader"  # a client the test policy denies the articles, in AIDRE and AIP
REFUSALS = {"description": "Test callers refused the articles.", "owner": "tests", "rules": [
    {"id": f"no-{name}-for-refused", "kind": "collection_read", "collection": name,
     "effect": "deny", "when": {"clients": [REFUSED]},
     "description": f"{REFUSED} may not read {name}."}
    for name in ("articles", "help-articles")]}
# Agent metadata of the schema's shape (the tools check it) that the registry refuses all the
# same: its endpoint is outside the egress origins.
ELSEWHERE = {"name": "Elsewhere", "description": "An agent the registry may not call.",
             "version": "1", "capabilities": ["echo"],
             "endpoint": "https://agent.elsewhere.example/run",
             "inputs": {"type": "object"}, "outputs": {"type": "object"}}


def policies(workdir: Path) -> Path:
    """The shipped policies, and one refusing the articles to the client REFUSED."""
    folder = workdir / "policies"
    folder.mkdir()
    for file in (ROOT / "policies").glob("*.yaml"):
        if not file.name.endswith(".test.yaml"):
            shutil.copy(file, folder / file.name)
    (folder / "mcp-refusals.yaml").write_text(yaml.safe_dump(REFUSALS))
    return folder


def demo_config(backend: str, idp_url: str, policy_folder: Path) -> dict[str, Any]:
    """The shipped demo config, in front of the test backend, trusting the test IdP."""
    config = yaml.safe_load((ROOT / "config" / "demo.yaml").read_text())
    config.pop("demo", None)
    config["policies"] = str(policy_folder)
    config["upstreams"] = {name: {**upstream, "url": backend}
                           for name, upstream in config["upstreams"].items()}
    config["auth"]["issuers"] = [{"issuer": ISSUER, "jwks_uri": idp_url + "/jwks",
                                  "audiences": [AUDIENCE]}]
    config["auth"].pop("introspection", None)
    # Finding agents needs a scope here, so that a caller without it is not offered the tool.
    config["auth"]["routes"] = [{"path": "/agents/search", "methods": ["POST"],
                                 "scopes": ["agents:find"]}]
    config["pdpp"] = demo_pdpp()
    config["aip"].pop("signing", None)
    config["mcp"] = {"allowed_hosts": ["127.0.0.1:*"]}
    return config


@pytest.fixture(scope="module")
def gateway(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    workdir = tmp_path_factory.mktemp("mcp")
    port = free_port()
    idp_process = Process([sys.executable, str(ROOT / "tests" / "fake_idp.py"), str(port),
                           "gw", "gw-secret"], workdir, "idp")
    idp = FakeIdp(f"http://127.0.0.1:{port}")
    wait_for_http(idp.url + "/admin/stats", process=idp_process.popen)
    idp.publish(KEY)
    started = InProcessGateway(demo_config(backend, idp.url, policies(workdir)), workdir)
    yield started
    started.stop()
    idp_process.stop()


def token(scope: str = "articles:read", subject: str = "u-001",
          client: str = "agent-1") -> str:
    return KEY.token(scope=scope, sub=subject, client_id=client)


async def _session(url: str, bearer: str | None, work: Any) -> Any:
    headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        return await work(client)


def run(url: str, work: Any, bearer: str | None = None) -> Any:
    return asyncio.run(_session(url, bearer, work))


def tool_names(gateway: Gateway, path: str, bearer: str) -> set[str]:
    async def names(client: Client) -> set[str]:
        return {tool.name for tool in (await client.list_tools()).tools}
    return run(gateway.url + path, names, bearer)


def call(gateway: Gateway, path: str, name: str, arguments: dict[str, Any],
         bearer: str) -> Any:
    async def called(client: Client) -> Any:
        return await client.call_tool(name, arguments)
    return run(gateway.url + path, called, bearer)


def test_initialize_and_list_tools_generated_from_the_config(gateway):
    async def both(client: Client) -> tuple[Any, Any]:
        return client.server_info if hasattr(client, "server_info") else None, \
            await client.list_tools()
    _, listed = run(gateway.url + "/mcp", both, token("articles:read agents:find tasks:run"))
    tools = {tool.name: tool for tool in listed.tools}
    assert {"aidre_search", "aidre_chunk", "aip_retrieve", "aidip_list_agents",
            "aidip_search_agents", "aidip_invoke_agent", "pdpp_query_records", "pdpp_search",
            "pdpp_fetch"} <= set(tools)
    assert "mcp" not in tools  # the endpoint does not wrap itself
    search = tools["aidre_search"]
    assert search.input_schema["type"] == "object"
    assert search.input_schema["properties"]["top_k"]["type"] == "integer"
    assert tools["pdpp_fetch"].output_schema["required"] == ["id", "title", "text", "url",
                                                             "metadata"]
    # Each surface's own endpoint: the names its clients expect.
    assert tool_names(gateway, "/mcp/aidre", token()) == {"search", "fetch"}
    assert tool_names(gateway, "/mcp/pdpp", token()) == {"query_records", "search", "fetch"}


def test_aidre_search_then_fetch_in_the_connector_shape(gateway):
    found = call(gateway, "/mcp/aidre", "search", {"query": "reset my password"}, token())
    assert not found.is_error, found.content
    results = found.structured_content["results"]
    assert results and set(results[0]) == {"id", "title", "url"}
    document = call(gateway, "/mcp/aidre", "fetch", {"id": results[0]["id"]}, token())
    assert not document.is_error, document.content
    assert set(document.structured_content) == {"id", "title", "text", "url", "metadata"}
    assert document.structured_content["id"] == results[0]["id"]
    assert document.structured_content["text"]


def test_capability_tools_aip_and_aidip(gateway):
    retrieved = call(gateway, "/mcp", "aip_retrieve", {
        "aip_version": "0.1", "request_id": "mcp-test-1", "timestamp": "2026-11-24T10:00:00Z",
        "platform": {"id": "mcp-test"}, "intent": {"domain": "support.billing"},
        "context": {"language": "en-US", "placement": "conversation"},
        "runtime": {"session_id": "s1", "turn_index": 0, "query_text": "refund policy"}},
        token())
    assert not retrieved.is_error, retrieved.content
    assert retrieved.structured_content["status"] == "ok"
    agents = call(gateway, "/mcp", "aidip_search_agents", {"query": "classify"},
                  token("articles:read agents:find"))
    assert not agents.is_error, agents.content
    invoked = call(gateway, "/mcp", "aidip_invoke_agent",
                   {"id": "classifier", "body": {"text": "I was charged twice"}},
                   token("articles:read tasks:run"))
    assert not invoked.is_error, invoked.content
    assert "category" in str(invoked.structured_content)


def test_a_denied_call_is_a_tool_error_with_the_surface_code(gateway):
    # Offered (the grant covers messages), refused for the stream this call names.
    denied = call(gateway, "/mcp", "pdpp_query_records", {"stream": "articles"},
                  token("messages:read"))
    assert denied.is_error
    error = denied.structured_content["error"]
    assert error["status"] == 403 and error["code"] == "grant_stream_not_allowed"
    assert error["request_id"] and error["code"] in denied.content[0].text


def test_registering_is_offered_to_the_callers_the_rules_let_register(gateway):
    reader, registrant = token("articles:read"), token("articles:read agents:register")
    for path in ("/mcp", "/mcp/aidip"):
        assert "aidip_register_agent" not in tool_names(gateway, path, reader)
        assert "aidip_register_agent" in tool_names(gateway, path, registrant)
    assert "aidip_register_agent" in tool_names(gateway, "/mcp", token("agents:admin"))
    refused = call(gateway, "/mcp", "aidip_register_agent", {"body": ELSEWHERE}, reader)
    assert refused.is_error  # the tool error of a tool not offered
    assert (refused.structured_content["error"]["status"],
            refused.structured_content["error"]["code"]) == (403, "forbidden")
    checked = call(gateway, "/mcp", "aidip_register_agent", {"body": ELSEWHERE}, registrant)
    assert checked.structured_content["error"]["code"] == "InvalidInput"  # past the policy


def test_changing_an_agent_is_offered_to_its_owner(gateway):
    owner, other = token("agents:register", "u-owner", "owner-app"), token("agents:register")
    changing = {"aidip_update_agent", "aidip_delete_agent"}
    assert not changing & tool_names(gateway, "/mcp", owner)
    metadata = {"name": "Owned", "description": "An agent one client registered.", "version": "1",
                "capabilities": ["echo"], "endpoint": "https://owned.agents.example.com/run",
                "allowed_clients": ["owner-app"], "inputs": {"type": "object"},
                "outputs": {"type": "object"}}
    registered = call(gateway, "/mcp", "aidip_register_agent", {"body": metadata}, owner)
    assert not registered.is_error, registered.content
    agent_id = registered.structured_content["id"]
    try:
        assert changing <= tool_names(gateway, "/mcp", owner)
        assert not changing & tool_names(gateway, "/mcp", other)
    finally:
        deleted = call(gateway, "/mcp", "aidip_delete_agent", {"id": agent_id}, owner)
        assert not deleted.is_error, deleted.content
    assert not changing & tool_names(gateway, "/mcp", owner)


def test_a_tool_is_offered_only_for_a_resource_the_engine_lets_the_caller_use(gateway):
    pdpp = {"pdpp_query_records", "pdpp_search", "pdpp_fetch"}
    # PDPP: scopes that grant no stream.
    assert not pdpp & tool_names(gateway, "/mcp", token("agents:find"))
    assert tool_names(gateway, "/mcp/pdpp", token("agents:find")) == set()
    assert pdpp <= tool_names(gateway, "/mcp", token("messages:read"))
    # AIDIP: both configured agents need tasks:run to be invoked (route rules per agent).
    assert "aidip_invoke_agent" not in tool_names(gateway, "/mcp", token("articles:read"))
    assert "aidip_invoke_agent" in tool_names(gateway, "/mcp", token("tasks:run"))
    # AIDRE and AIP: a policy rule refuses this client the articles, the only collection
    # and source; listing the collections it may read stays offered.
    refused = tool_names(gateway, "/mcp", token(client=REFUSED))
    assert not {"aidre_search", "aidre_chunk", "aip_retrieve"} & refused
    assert "aidre_collections" in refused
    assert tool_names(gateway, "/mcp/aidre", token(client=REFUSED)) == set()
    assert {"aidre_search", "aidre_chunk", "aip_retrieve"} <= tool_names(gateway, "/mcp",
                                                                         token())


def arguments(stream: str) -> dict[str, dict[str, Any]]:
    """A call of each tool of `/mcp`; PDPP's name `stream`, which the caller's grant covers."""
    retrieve = {"aip_version": "0.1", "timestamp": "2026-11-24T10:00:00Z",
                "platform": {"id": "mcp-test"}, "intent": {"domain": "support.billing"},
                "context": {"language": "en-US", "placement": "conversation"},
                "runtime": {"session_id": "s1", "turn_index": 0, "query_text": "refund"}}
    return {
        "aidre_search": {"query": "reset my password"}, "aidre_collections": {},
        "aidre_chunk": {"id": "articles:art-0001"},
        "aip_retrieve": {**retrieve, "request_id": f"mcp-agree-{stream}"},
        "aidip_list_agents": {}, "aidip_search_agents": {"query": "classify"},
        "aidip_get_agent": {"id": "classifier"},
        "aidip_invoke_agent": {"id": "classifier", "body": {"text": "I was charged twice"}},
        "aidip_register_agent": {"body": ELSEWHERE},
        "aidip_update_agent": {"id": "none", "body": ELSEWHERE},
        "aidip_delete_agent": {"id": "none"},
        "search_articles": {"q": "password"}, "get_article": {"id": "art-0001"},
        "classify_text": {"text": "I was charged twice"},
        "pdpp_query_records": {"stream": stream, "limit": 2}, "pdpp_search": {"q": "password"},
        "pdpp_fetch": {"id": f"{stream}:none"},
    }


@pytest.mark.parametrize(("scopes", "client", "stream"), [
    ("articles:read", "agent-1", "articles"),
    ("messages:read tasks:run agents:register agents:find", "agent-1", "messages"),
    ("agents:find", "agent-1", "messages"),
    ("articles:read", REFUSED, "articles"),
    ("agents:admin", "agent-1", "messages"),
])
def test_the_listing_and_the_calls_agree(gateway, scopes, client, stream):
    """A tool listed is never refused for who the caller is (401, 403); one not listed is."""
    bearer = token(scopes, client=client)
    calls = arguments(stream)
    listed = tool_names(gateway, "/mcp", bearer)
    assert listed <= set(calls), "a tool this test does not call"
    for name, values in calls.items():
        answer = call(gateway, "/mcp", name, values, bearer)
        status = answer.structured_content["error"]["status"] if answer.is_error else 200
        assert (status in (401, 403)) == (name not in listed), (name, answer.content)


def test_a_tool_the_caller_may_not_use_is_not_listed(gateway):
    assert "aidip_search_agents" not in tool_names(gateway, "/mcp", token("articles:read"))
    assert "aidip_search_agents" in tool_names(gateway, "/mcp", token("agents:find"))
    refused = call(gateway, "/mcp", "aidip_search_agents", {"query": "classify"},
                   token("articles:read"))  # called all the same: the route refuses it
    assert refused.is_error
    # In AIDIP's own dialect: the surface's stable code, as over HTTP.
    assert refused.structured_content["error"]["code"] == "Forbidden"


def test_invalid_arguments_are_a_tool_error(gateway):
    wrong = call(gateway, "/mcp/pdpp", "fetch", {"id": "no-colon"}, token("messages:read"))
    assert wrong.is_error
    assert wrong.structured_content["error"]["code"] == "invalid_arguments"


def test_a_grant_narrowed_pdpp_call_never_shows_a_hidden_field(gateway):
    bearer = token("messages:read")
    page = call(gateway, "/mcp/pdpp", "query_records", {"stream": "messages", "limit": 20},
                bearer)
    assert not page.is_error, page.content
    records = page.structured_content["data"]["data"]
    assert records
    for record in records:
        assert not HIDDEN_MESSAGE_FIELDS & set(record["data"])
    asked = call(gateway, "/mcp/pdpp", "query_records",
                 {"stream": "messages", "fields": ["subject", "body"]}, bearer)
    assert asked.is_error or all("body" not in r["data"]
                                 for r in asked.structured_content["data"]["data"])
    found = call(gateway, "/mcp/pdpp", "search", {"q": "password", "streams": ["messages"]},
                 bearer)
    assert not found.is_error, found.content
    for result in found.structured_content["results"]:
        document = call(gateway, "/mcp/pdpp", "fetch", {"id": result["id"]}, bearer)
        assert not document.is_error, document.content
        assert "body" not in document.content[0].text or '"body"' not in \
            str(document.structured_content["metadata"])
        assert not HIDDEN_MESSAGE_FIELDS & set(str(document.structured_content["text"]).split())


def test_without_a_token_401_points_at_the_endpoints_own_metadata(gateway):
    for path in ("/mcp", "/mcp/pdpp"):
        answer = httpx.post(gateway.url + path, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"accept": "application/json, text/event-stream"})
        assert answer.status_code == 401
        challenge = answer.headers["www-authenticate"]
        metadata_url = f"{gateway.url.replace(str(gateway.port), '8080')}" \
            f"/.well-known/oauth-protected-resource{path}"
        assert f'resource_metadata="{metadata_url}"' in challenge, challenge
        assert answer.json()["error"]["data"]["code"] == "missing_credentials"
        document = httpx.get(f"{gateway.url}/.well-known/oauth-protected-resource{path}").json()
        assert document["resource"].endswith(path)
        assert document["authorization_servers"] == [ISSUER]


def test_the_discovery_document_names_the_mcp_endpoint(gateway):
    document = httpx.get(gateway.url + "/.well-known/ai").json()
    endpoints = {c["id"]: c["endpoint"] for c in document["capabilities"]}
    assert endpoints["mcp"] == "/mcp"


def test_an_unknown_path_under_mcp_answers_in_the_mcp_dialect(gateway):
    answer = httpx.post(gateway.url + "/mcp/nothing", json={},
                        headers={"Authorization": f"Bearer {token()}"})
    assert answer.status_code == 404
    assert answer.json()["error"]["data"]["code"] == "not_found"
