"""One MCP endpoint: the official SDK's low-level server over its streamable-HTTP transport
(stateless, JSON answers), whose tool calls are inner requests to this gateway's routes.

The pipeline has admitted the caller (bearer token, route scopes, rate limits) before the SDK
sees the request. Listing tools shows those this caller is offered (offers.py): the route rules
let it use the route, and the policy engine allows it one of the ways the route's surface says
it could be served. Calling one the engine allows no way of is a tool error (`forbidden`);
any other call serves its route in-process for the same caller (gateway.inner), so the wrapped
surface's policy, grants, decision log, metrics and error codes apply as over HTTP (a route the
route rules refuse answers so itself). Its failures come back as tool errors carrying the
surface's stable code and the request id.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import mcp_types as types
import orjson
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from starlette.responses import Response

from gateway import inner, tracing
from gateway.asgi import Scope
from gateway.errors import GatewayError
from gateway.exchange import Exchange
from gateway.surface import Ways
from gateway.surfaces.mcp.arguments import SchemaCheck
from gateway.surfaces.mcp.offers import Offers, route_ways
from gateway.surfaces.mcp.rpc_errors import invalid_arguments, unexpected
from gateway.surfaces.mcp.tools import McpTool, ToolInputError
from gateway.surfaces.mcp.transport import TransportRules, replaying

OWN_HEADERS = frozenset({b"mcp-session-id", b"mcp-protocol-version", b"last-event-id"})
_EXCHANGE: contextvars.ContextVar[Exchange] = contextvars.ContextVar("aigw_mcp_exchange")
_MAX_TEXT = 16_000  # characters of a result's JSON repeated as text for clients without
#                     structured output


class McpEndpoint:
    """The tools of one endpoint, served for one config generation."""

    def __init__(self, name: str, tools: list[McpTool], *, rules: TransportRules,
                 instructions: str | None) -> None:
        self.tools = {tool.name: tool for tool in tools}
        self._checks = {tool.name: SchemaCheck(tool.input_schema) for tool in tools}
        # Each tool's route's ways, found on first use: the routes are this generation's.
        self._ways: dict[str, Ways | None] = {}
        self.server: Server[Any] = Server(
            name, version="1", instructions=instructions,
            on_list_tools=self._list, on_call_tool=self._call,
            get_tool_input_schema=self._input_schema)
        self.rules = rules  # Host and Origin are checked there, before the SDK
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        self.manager = StreamableHTTPSessionManager(
            self.server, json_response=True, stateless=True, security_settings=security,
            max_request_body_size=rules.max_body_bytes)
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None

    async def endpoint(self, exchange: Exchange) -> Response:
        """The route's endpoint: the SDK answers the admitted request."""
        body = await self.rules.admit(exchange.request)
        if self._runner is None:
            self._runner = asyncio.ensure_future(self._run())
        await self._ready.wait()
        return _Relay(self, exchange, body)

    async def serve(self, exchange: Exchange, scope: Scope, receive: Any, send: Any) -> None:
        token = _EXCHANGE.set(exchange)
        try:
            await self.manager.handle_request(scope, receive, send)
        finally:
            _EXCHANGE.reset(token)

    async def _run(self) -> None:
        """The SDK's task group, from the first request until the generation retires."""
        async with self.manager.run():
            self._ready.set()
            await self._stop.wait()

    async def aclose(self) -> None:
        if self._runner is not None:
            self._stop.set()
            await self._runner

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        tool = self.tools.get(name)
        return tool.input_schema if tool is not None else None

    def _ways_of(self, exchange: Exchange, tool: McpTool) -> Ways | None:
        if tool.name not in self._ways:
            self._ways[tool.name] = route_ways(exchange, tool)
        return self._ways[tool.name]

    async def _list(self, ctx: Any, params: Any) -> types.ListToolsResult:
        exchange = _EXCHANGE.get()
        offers = Offers(exchange)
        try:
            return types.ListToolsResult(tools=[
                listing(tool) for tool in self.tools.values()
                if await offers.offered(tool, self._ways_of(exchange, tool))])
        except Exception as exc:
            raise unexpected("tools/list", exc, exchange.request_id) from None

    async def _call(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        """The call served; a failure it did not foresee is a JSON-RPC internal error that
        says nothing of itself (rpc_errors.unexpected)."""
        exchange = _EXCHANGE.get()
        try:
            return await self._served(exchange, params)
        except GatewayError as error:
            return tool_error(error.code, error.message, exchange.request_id, error.status)
        except MCPError:
            raise
        except Exception as exc:
            raise unexpected(params.name, exc, exchange.request_id) from None

    async def _served(self, exchange: Exchange,
                      params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = self.tools.get(params.name)
        if tool is None:
            return tool_error("unknown_tool", f"No tool is named {params.name[:64]!r} here.",
                              exchange.request_id, 404)
        tracing.annotate({"aigw.mcp.tool": tool.name})
        problem = self._checks[tool.name].problem(params.arguments or {})
        if problem is not None:
            raise invalid_arguments(tool.name, problem, exchange.request_id)
        ways = self._ways_of(exchange, tool)
        if ways is not None and not await Offers(exchange).some_way(tool.method, ways,
                                                                     unreadable=True):
            return tool_error("forbidden", f"The policy allows this caller no use of "
                              f"{tool.name}; tools/list shows the tools it may call.",
                              exchange.request_id, 403)
        try:
            request = tool.request(params.arguments or {})
        except ToolInputError as exc:
            return tool_error("invalid_arguments", str(exc), exchange.request_id, 400)
        answer = await inner.call(exchange, request, own_headers=OWN_HEADERS)
        if not answer.ok:
            code, message = failure(answer)
            return tool_error(code, message, answer.request_id, answer.status)
        structured = tool.structured(answer.json(), answer.request_id)
        return types.CallToolResult(content=[types.TextContent(text=summary(structured))],
                                    structured_content=structured)


class _Relay(Response):
    """A response the SDK writes itself, for the exchange the pipeline admitted."""

    def __init__(self, endpoint: McpEndpoint, exchange: Exchange, body: bytes) -> None:
        super().__init__()
        self.mcp = endpoint
        self.exchange = exchange
        self.request_body = body

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        await self.mcp.serve(self.exchange, scope, replaying(self.request_body, receive), send)


def listing(tool: McpTool) -> types.Tool:
    annotations = types.ToolAnnotations(
        title=tool.title, read_only_hint=tool.read_only,
        destructive_hint=tool.method == "DELETE", idempotent_hint=tool.method != "POST",
        open_world_hint=False)
    return types.Tool(name=tool.name, title=tool.title, description=tool.description,
                      input_schema=tool.input_schema, output_schema=tool.output_schema,
                      annotations=annotations)


def tool_error(code: str, message: str, request_id: str, status: int) -> types.CallToolResult:
    error = {"code": code, "message": message, "status": status, "request_id": request_id}
    return types.CallToolResult(
        content=[types.TextContent(text=f"{code}: {message} (request {request_id})")],
        structured_content={"error": error}, is_error=True)


def failure(answer: inner.InnerAnswer) -> tuple[str, str]:
    """The stable code and message of a wrapped route's error, in whichever dialect its
    surface answers: `{"error": {"code", "message"}}`, `{"error": code, "message"}` or an AIP
    `{"denial": {"reason", "message"}}`."""
    body = answer.json()
    body = body if isinstance(body, dict) else {}
    error = body.get("error")
    if error is None and isinstance(body.get("denial"), dict):
        error = {"code": body["denial"].get("reason"), "message": body["denial"].get("message")}
    if isinstance(error, dict):
        code, message = error.get("code") or error.get("type"), error.get("message")
    else:
        code, message = error, body.get("message") or body.get("error_description")
    code = code if isinstance(code, str) and code else f"http_{answer.status}"
    message = message if isinstance(message, str) and message else "The call failed."
    return code[:64], message[:500]


def summary(structured: dict[str, Any]) -> str:
    """The result as text (for clients that hide structured output), with a warning when a
    search was ranked over a bounded window (PDPP lexical retrieval: MCP mirrors recall)."""
    text = orjson.dumps(structured).decode()
    if len(text) > _MAX_TEXT:
        text = text[:_MAX_TEXT] + " ... (truncated; the structured result is complete)"
    data = structured.get("data")
    meta = data.get("meta") if isinstance(data, dict) else None
    recall = meta.get("recall") if isinstance(meta, dict) else None
    if isinstance(recall, dict) and recall.get("complete") is not True:
        scope = recall.get("ranking_scope", "a bounded set")
        text = f"Note: results were ranked over {scope}, not every record.\n" + text
    return text
