"""MCP tool arguments are checked against each tool's `inputSchema` before the call: a value of
the wrong JSON type (or past a bound) is a JSON-RPC -32602 naming the argument and the
constraint, never Python's exception text; and a failure inside a tool is a generic internal
error with the request id. Every tool the demo config exposes is tried with every wrong type
of every argument (generated from the schemas it lists), over raw JSON-RPC and through the
official SDK client, against a gateway process."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import httpx
import httpx2
import pytest
from hypothesis import find
from hypothesis import strategies as st
from idp_helpers import running_idp
from jsonschema import Draft202012Validator
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from processes import Gateway
from test_mcp import KEY, demo_config, policies

from gateway.surfaces.mcp import server
from gateway.surfaces.mcp.tools import McpTool
from gateway.surfaces.mcp.transport import TransportRules

ENDPOINTS = ("/mcp", "/mcp/pdpp", "/mcp/aidre", "/mcp/aidip", "/mcp/aip")
SCOPES = "articles:read messages:read tasks:run agents:register agents:find"
# One value of each JSON type: those a property's schema refuses are its wrong values.
JSON_VALUES: dict[str, Any] = {"null": None, "boolean": True, "integer": 7, "number": 1.5,
                               "string": "x", "array": [1, 2], "object": {"k": 1}}
PYTHON_TEXT = re.compile(r"object has no attribute|Traceback|Error\b|Exception|'(list|dict|int|"
                         r"str|NoneType|bool|float)'|unhashable|not subscriptable|\.py\b")
HEADERS = {"accept": "application/json, text/event-stream"}
OWNED = {"name": "Owned", "description": "An agent the test caller registered.", "version": "1",
         "capabilities": ["echo"], "endpoint": "https://owned.agents.example.com/run",
         "inputs": {"type": "object"}, "outputs": {"type": "object"}}


@pytest.fixture(scope="module")
def gateway(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    workdir = tmp_path_factory.mktemp("mcp-arguments")
    with running_idp(workdir) as idp:
        idp.publish(KEY)
        started = Gateway(demo_config(backend, idp.url, policies(workdir)), workdir)
        try:
            # An agent of the caller's own, so that changing and removing it are offered too.
            owned = httpx.post(started.url + "/agents", json=OWNED,
                               headers={"authorization": f"Bearer {bearer()}"})
            assert owned.status_code == 201, owned.text
            yield started
        finally:
            started.stop()


def bearer() -> str:
    return KEY.token(scope=SCOPES, sub="u-001", client_id="agent-1")


async def _with_client(url: str, work: Any) -> Any:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer()}"},
                                  timeout=30) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        return await work(client)


def listed_tools(gateway: Gateway) -> dict[str, list[Any]]:
    """Each endpoint's tools, as tools/list gives them to a caller with every scope."""
    async def tools(client: Client) -> list[Any]:
        return list((await client.list_tools()).tools)
    found = {path: asyncio.run(_with_client(gateway.url + path, tools)) for path in ENDPOINTS}
    return {path: tools for path, tools in found.items() if tools}


def sample(schema: dict[str, Any]) -> Any:
    """A value `schema` accepts (the schemas the tools list are small and concrete)."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type", "string")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: sample(properties.get(name, {})) for name in schema.get("required", ())}
    if kind == "array":
        return [sample(schema.get("items", {}))] * schema.get("minItems", 0)
    if kind in ("integer", "number"):
        return max(schema.get("minimum", 1), 0)
    if kind == "boolean":
        return True
    if "pattern" in schema:
        return find(st.from_regex(schema["pattern"], fullmatch=True), lambda _: True)
    if schema.get("format") == "date-time":
        return "2026-11-24T10:00:00Z"
    return "x" * max(schema.get("minLength", 1), 1)


def wrong_calls(tools: list[Any]) -> Iterator[tuple[str, str, dict[str, Any], str]]:
    """(tool, argument, arguments, JSON type) for every argument of every tool and every JSON
    type its schema refuses; the other required arguments are given valid values."""
    for tool in tools:
        schema = tool.input_schema
        valid = sample(schema)
        for name, prop in schema.get("properties", {}).items():
            check = Draft202012Validator(prop)
            for kind, value in JSON_VALUES.items():
                if not check.is_valid(value):
                    yield tool.name, name, {**valid, name: value}, kind


def rpc(gateway: Gateway, path: str, name: str, arguments: dict[str, Any]) -> httpx.Response:
    return httpx.post(gateway.url + path, json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}},
        headers={**HEADERS, "authorization": f"Bearer {bearer()}"}, timeout=30)


def assert_names_the_argument(error: dict[str, Any], argument: str, context: Any) -> None:
    assert error.get("code") == -32602, context
    named = error["data"]["argument"]  # the argument, or a member or item of it
    assert named == argument or named.startswith((f"{argument}[", f"{argument}.")), context
    assert error["data"]["constraint"], context
    assert error["data"]["request_id"], context
    assert argument in error["message"], context
    assert not PYTHON_TEXT.search(error["message"]), context


def test_every_wrong_type_of_every_argument_is_invalid_params_over_raw_json_rpc(gateway):
    tried = 0
    for path, tools in listed_tools(gateway).items():
        for name, argument, arguments, kind in wrong_calls(tools):
            answer = rpc(gateway, path, name, arguments)
            assert answer.status_code == 200, (path, name, argument, kind, answer.text)
            assert_names_the_argument(answer.json().get("error") or {}, argument,
                                      (path, name, argument, kind, answer.text))
            tried += 1
    assert tried > 450  # every tool of every endpoint, about five arguments each
    # What the issue found: a list as PDPP's filter was Python's AttributeError text.
    stderr = gateway.process.stderr()
    assert "has no attribute" not in stderr


def test_every_wrong_type_is_an_mcp_error_through_the_sdk_client(gateway):
    async def every(client: Client, cases: list[tuple[str, str, dict[str, Any], str]]) -> int:
        for name, argument, arguments, kind in cases:
            with pytest.raises(MCPError) as raised:
                await client.call_tool(name, arguments)
            error = raised.value.error.model_dump()
            assert_names_the_argument(error, argument, (name, argument, kind, error))
        return len(cases)

    for path, tools in listed_tools(gateway).items():
        cases = list(wrong_calls(tools))
        assert asyncio.run(_with_client(gateway.url + path,
                                        lambda client, c=cases: every(client, c))) == len(cases)


def test_bounds_in_the_schema_are_enforced(gateway):
    long_query = rpc(gateway, "/mcp", "pdpp_search", {"q": "word " * 400})
    error = long_query.json()["error"]
    assert_names_the_argument(error, "q", long_query.text)
    assert error["data"]["constraint"] == "maxLength"
    too_many = rpc(gateway, "/mcp", "pdpp_query_records",
                   {"stream": "messages", "fields": ["subject"] * 5000})
    assert too_many.json()["error"]["data"]["constraint"] == "maxItems"
    unknown = rpc(gateway, "/mcp/pdpp", "query_records", {"stream": "messages", "nope": 1})
    assert unknown.json()["error"]["data"] == {**unknown.json()["error"]["data"],
                                               "argument": "nope", "constraint": "unknown"}
    missing = rpc(gateway, "/mcp/pdpp", "query_records", {})
    assert missing.json()["error"]["data"]["argument"] == "stream"
    nested = rpc(gateway, "/mcp", "pdpp_query_records",
                 {"stream": "messages", "fields": ["subject", 3]})
    assert nested.json()["error"]["data"]["argument"] == "fields[1]"


def test_a_failure_inside_a_tool_is_an_internal_error_without_its_text(caplog):
    def broken(arguments: Any) -> Any:
        raise RuntimeError(f"secret detail {arguments['q']}")

    tool = McpTool("broken", "A tool that fails.", {"type": "object"}, "GET", "/x", broken)
    endpoint = server.McpEndpoint("test", [tool], rules=TransportRules((), (), 1024),
                                  instructions=None)
    endpoint._ways["broken"] = None  # no route to ask the policy about
    params = server.types.CallToolRequestParams(name="broken", arguments={"q": "hunter2"})
    token = server._EXCHANGE.set(SimpleNamespace(request_id="rid-1"))  # type: ignore[arg-type]
    try:
        with caplog.at_level(logging.ERROR, "aigw.mcp"), pytest.raises(MCPError) as raised:
            asyncio.run(endpoint._call(None, params))
    finally:
        server._EXCHANGE.reset(token)
    error = raised.value.error
    assert error.code == -32603
    assert error.data == {"code": "internal_error", "request_id": "rid-1"}
    assert "secret" not in error.message and "hunter2" not in error.message
    logged = " ".join(f"{record.getMessage()} {getattr(record, 'fields', '')}"
                      for record in caplog.records)
    assert "rid-1" in logged and "RuntimeError" in logged
    assert "hunter2" not in logged and "secret" not in logged


def test_a_gateway_error_inside_a_tool_is_a_tool_error_with_its_code():
    from gateway.errors import GatewayError

    def refused(arguments: Any) -> Any:
        raise GatewayError(502, "answer_too_large", "The answer is too large to relay.")

    tool = dataclasses.replace(
        McpTool("big", "A tool whose answer is too large.", {"type": "object"}, "GET", "/x",
                refused))
    endpoint = server.McpEndpoint("test", [tool], rules=TransportRules((), (), 1024),
                                  instructions=None)
    endpoint._ways["big"] = None
    params = server.types.CallToolRequestParams(name="big", arguments={})
    token = server._EXCHANGE.set(SimpleNamespace(request_id="rid-2"))  # type: ignore[arg-type]
    try:
        result = asyncio.run(endpoint._call(None, params))
    finally:
        server._EXCHANGE.reset(token)
    assert result.is_error
    assert result.structured_content["error"] == {
        "code": "answer_too_large", "message": "The answer is too large to relay.",
        "status": 502, "request_id": "rid-2"}


def test_a_schema_with_local_refs_is_checked_whole_and_named_where_it_can_be():
    from gateway.surfaces.mcp.arguments import SchemaCheck

    check = SchemaCheck({"type": "object", "properties": {"when": {"$ref": "#/$defs/day"},
                                                          "n": {"type": "integer"}},
                         "$defs": {"day": {"type": "string", "maxLength": 10}},
                         "additionalProperties": False})
    assert check.problem({"when": "2026-11-29", "n": 1}) is None
    assert check.problem({"when": "x" * 11}) is not None  # the whole schema resolves the $ref
    assert check.problem({"n": "1"}).path == "n"
