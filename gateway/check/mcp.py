"""MCP (streamable HTTP): found through `/.well-known/ai`, checked with the official SDK.

The endpoint is whatever `/.well-known/ai` names: a capability (or any member) whose
endpoint or url path ends in `/mcp`, or that says its protocol is MCP. Without one, MCP is
"not served": probing `/mcp` blindly would mistake a catch-all 401 for an MCP server.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from gateway.check.aiendpoint import PATH as AI_PATH
from gateway.check.aiendpoint import document_of
from gateway.check.bounded import BoundedTransport, TooLarge, Unreadable
from gateway.check.common import json_object
from gateway.check.context import Context
from gateway.check.http import Credentials, new_client
from gateway.check.rules import PASS, Outcome, Sheet, Spec

__all__ = ["SPEC", "run"]

_PARAMETER = re.compile(r'resource_metadata\s*=\s*"([^"]*)"|resource_metadata\s*=\s*([^\s,]+)')
_MAX_NODES = 5000  # members walked in /.well-known/ai looking for the endpoint
INITIALIZE_BODY = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "aigw-check", "version": "0.1"}}}

SPEC = Spec("mcp", "MCP", "Model Context Protocol, streamable HTTP")
CHALLENGE = SPEC.must("auth.challenge", "MCP Authorization 2025-06-18 §2.3.1; RFC 9728 §5.1",
                      "without a token: 401 with WWW-Authenticate: Bearer resource_metadata=")
METADATA = SPEC.must("auth.metadata", "MCP Authorization §2.3.1; RFC 9728 §3",
                     "that metadata names the resource and its authorization_servers")
INITIALIZE = SPEC.must("initialize", "MCP Lifecycle: initialization",
                       "initialize succeeds with the official SDK's client")
TOOLS = SPEC.must("tools.list", "MCP Server features: tools",
                  "tools/list answers named tools with JSON Schema inputs")


async def run(context: Context, sheet: Sheet) -> None:
    endpoint = mcp_endpoint(document_of(await context.document(AI_PATH)))
    url = context.probe.resolve(endpoint) if endpoint else None
    if url is None:
        sheet.not_served(f"{AI_PATH} names no MCP endpoint on this origin" if not endpoint
                         else f"{AI_PATH} names {endpoint[:80]}, on another origin")
        return
    sheet.note = url
    challenged = await _challenge(context, url)
    sheet.add(*challenged)
    if not context.probe.credentials.given and any(o.result == PASS for o in challenged):
        sheet.skip_rest("the endpoint asks for a token: pass --token (or --api-key)")
        return
    try:
        import mcp  # noqa: F401  (an optional dependency of the checker)
    except ImportError:
        sheet.skip_rest("the mcp package is not installed (pip install 'mcp>=2.3')")
        return
    sheet.add(*await _session(url, context.probe.credentials, context.probe.timeout))


def mcp_endpoint(document: dict[str, Any] | None) -> str | None:
    """The first endpoint the document gives for MCP, by protocol name or by its path."""
    for node in _objects(document):
        target = next((node[k] for k in ("endpoint", "url") if isinstance(node.get(k), str)),
                      None)
        if target is None:
            continue
        named = any(str(node.get(k, "")).lower() == "mcp"
                    for k in ("protocol", "transport", "type", "protocolBinding"))
        if named or urlsplit(target).path.rstrip("/").endswith("/mcp"):
            return target
    return None


def _objects(value: Any) -> Iterator[dict[str, Any]]:
    """Every object in a JSON value, breadth first, at most `_MAX_NODES` values visited."""
    queue, seen = [value], 0
    while queue and seen < _MAX_NODES:
        item = queue.pop(0)
        seen += 1
        if isinstance(item, dict):
            yield item
            queue.extend(item.values())
        elif isinstance(item, list):
            queue.extend(item)


async def _challenge(context: Context, url: str) -> list[Outcome]:
    answer = await context.probe.request(
        "POST", url, auth=False, json_body=INITIALIZE_BODY,
        headers={"Accept": "application/json, text/event-stream"})
    if answer.status != 401:
        reason = f"{answer.describe()} without a token: no authentication asked"
        return [CHALLENGE.skipped(reason), METADATA.skipped(reason)]
    challenge = answer.headers.get("www-authenticate", "")
    match = _PARAMETER.search(challenge)
    if not challenge.lower().startswith("bearer") or match is None:
        return [CHALLENGE.failed(f"WWW-Authenticate: {challenge[:100] or '(none)'}"),
                METADATA.skipped("no resource_metadata link")]
    link = match.group(1) or match.group(2)
    outcomes = [CHALLENGE.passed(f"401, resource_metadata={link[:80]}")]
    if context.probe.resolve(link) is None:
        return [*outcomes, METADATA.skipped(f"{link[:80]} is on another origin")]
    metadata, problem = json_object(await context.probe.get(link, auth=False))
    servers = (metadata or {}).get("authorization_servers")
    if metadata is None or not isinstance(metadata.get("resource"), str) \
            or not isinstance(servers, list) or not servers:
        return [*outcomes, METADATA.failed(problem or "no resource or authorization_servers")]
    return [*outcomes, METADATA.passed(f"{len(servers)} authorization server(s)")]


async def _session(url: str, credentials: Credentials, timeout: float) -> list[Outcome]:
    """initialize and tools/list through the SDK's streamable HTTP client, whose every
    answer goes through the checker's bounded reader."""
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    bound = BoundedTransport()
    http = new_client(timeout, credentials.headers(), bound)
    done: list[Outcome] = []
    try:
        async with asyncio.timeout(timeout * 3), http:
            transport = streamable_http_client(url, http_client=http, max_sse_event_size=1 << 21)
            async with Client(transport, mode="legacy", read_timeout_seconds=timeout,
                              cache=None) as client:
                server = client.server_info
                named = f"{server.name} {server.version}" if server else "a server"
                done.append(INITIALIZE.passed(f"{named}, protocol {client.protocol_version}"))
                if client.server_capabilities.tools is None:
                    return [*done, TOOLS.skipped("the server declares no tools")]
                listed = await client.list_tools()
                return [*done, _tools(listed.tools)]
    except Exception as exc:  # the SDK raises many kinds; each is a failed step
        reason = str(TooLarge()) if bound.exceeded else _reason(exc)
        return [*done, (TOOLS if done else INITIALIZE).failed(reason)]


def _tools(tools: list[Any]) -> Outcome:
    wrong = [t.name for t in tools if not t.name or (t.input_schema or {}).get("type")
             != "object"]
    return TOOLS.check(not wrong, f"no object inputSchema: {', '.join(wrong)[:80]}" if wrong
                       else f"{len(tools)} tool(s)")


def _reason(exc: BaseException) -> str:
    """The innermost error of an exception group, named with its message."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    if isinstance(exc, Unreadable):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"
