"""A small origin that is not aigw and serves every spec `aigw check` knows, conformantly,
except for the one MUST that `broken` names (tests/test_check.py checks each is caught).

`build(broken)` returns the ASGI app: the AI Discovery document, AIDRE, AIP, PDPP, AIDIP,
an MCP endpoint (the official SDK's server, behind a bearer token) and an A2A card.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import jsonschema
from mcp.server.mcpserver import MCPServer
from processes import ROOT
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

TOKEN = "fixture-token"
API_KEY = "fixture-key"  # PDPP reads take it in X-Fixture-Key as well as the token
CORS = {"Access-Control-Allow-Origin": "*"}
LIMITS = {"RateLimit-Limit": "100", "RateLimit-Remaining": "99", "RateLimit-Reset": "60"}
DOCS = [{"id": f"docs:{n}", "text": f"Help article {n}"} for n in range(1, 4)]
RECORDS = [{"object": "record", "id": f"n{n}", "stream": "notes", "data": {"id": f"n{n}"},
            "emitted_at": "2026-01-01T00:00:00Z"} for n in range(1, 4)]
RECORD_PARAMETERS = ("limit", "cursor", "order", "fields", "changes_since")
HUGE = 1 << 30
REQUEST_SCHEMA = json.loads((ROOT / "gateway/schemas/aip/retrieve-request.schema.json")
                            .read_text())
# Each breaks one MUST (the rule id the checker must name); `no_cors` breaks SHOULDs only.
BROKEN = {
    "ai_media_type": "aiendpoint.media_type",
    "ai_requires_auth": "aiendpoint.status",
    "top_k_zero": "aidre.search.top_k_bounds",
    "vector_dimension_200": "aidre.search.vector_dimension",
    "aidre_error_not_json": "aidre.errors.json",
    "ratelimit_syntax": "aidre.ratelimit.syntax",
    "aip_schema": "aip.retrieve.ok",
    "aip_not_denied": "aip.retrieve.denied",
    "pdpp_no_envelope": "pdpp.streams.list",
    "pdpp_unknown_parameter": "pdpp.records.unknown_parameter",
    "mcp_no_metadata_link": "mcp.auth.challenge",
    "mcp_huge_answer": "mcp.initialize",  # a 1 GiB JSON answer: the checker stops at 2 MiB
    "a2a_card_invalid": "a2a.card.parses",
}


def build(broken: str | None) -> Any:
    mcp = MCPServer("check-fixture", version="1.0")

    @mcp.tool()
    def echo(text: str) -> dict[str, str]:
        """Echo the text back."""
        return {"text": text}

    app = mcp.streamable_http_app(host="127.0.0.1")
    app.router.routes.extend(Origin(broken).routes())
    return _McpAuth(app, broken)


class _McpAuth:
    """The MCP endpoint wants a bearer token: 401 with the RFC 9728 link without one."""

    def __init__(self, app: Starlette, broken: str | None) -> None:
        self.app, self.broken = app, broken

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/mcp"):
            headers = dict(scope["headers"])
            if headers.get(b"authorization") != f"Bearer {TOKEN}".encode():
                link = f'http://{headers[b"host"].decode()}/.well-known/oauth-protected-resource'
                challenge = 'Bearer realm="fixture"' if self.broken == "mcp_no_metadata_link" \
                    else f'Bearer realm="fixture", resource_metadata="{link}"'
                await JSONResponse({"error": "unauthorized"}, 401,
                                   {"WWW-Authenticate": challenge})(scope, receive, send)
                return
            if self.broken == "mcp_huge_answer" and scope["method"] == "POST":
                await StreamingResponse(_huge_json(), media_type="application/json")(
                    scope, receive, send)
                return
        await self.app(scope, receive, send)


async def _huge_json() -> AsyncIterator[bytes]:
    """A JSON-RPC answer of 1 GiB, made as it is sent."""
    yield b'{"jsonrpc": "2.0", "id": 1, "result": {"padding": "'
    chunk = b"x" * 65536
    for _ in range(HUGE // len(chunk)):
        yield chunk
        await asyncio.sleep(0)  # the other origins this process serves are served meanwhile
    yield b'"}}'


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


class Origin:
    """The spec routes; `broken` names the one MUST they break (None: none)."""

    def __init__(self, broken: str | None) -> None:
        self.broken = broken

    def routes(self) -> list[Route]:
        return [
            Route("/.well-known/ai", self.ai), Route("/ai", self.ai),
            Route("/.well-known/ai-discovery", self.ai_discovery),
            Route("/collections", self.collections),
            Route("/search", self.search, methods=["POST"]),
            Route("/chunks/{id}", self.chunk),
            Route("/.well-known/aip.json", self.aip_policy),
            Route("/pag/retrieve", self.retrieve, methods=["POST"]),
            Route("/.well-known/oauth-protected-resource", self.resource_metadata),
            Route("/v1/streams", self.v1(self.streams, ())),
            Route("/v1/streams/{name}", self.v1(self.stream, ())),
            Route("/v1/streams/{name}/records", self.v1(self.records, RECORD_PARAMETERS,
                                                        "pdpp_unknown_parameter")),
            Route("/v1/search", self.v1(self.lexical, ("q", "limit", "cursor", "streams[]"))),
            Route("/agents", self.agents),
            Route("/agents/search", self.agent_search, methods=["POST"]),
            Route("/agents/{id}", self.agent),
            Route("/agents/{id}/invoke", self.invoke, methods=["POST"]),
            Route("/.well-known/agent-card.json", self.card),
        ]

    def document(self, content: Any, status: int = 200, kind: str = "application/json"
                 ) -> Response:
        cors = {} if self.broken == "no_cors" else CORS
        return Response(json.dumps(content), status, {"Content-Type": kind, **cors})

    # The AI Discovery Endpoint
    def ai(self, request: Request) -> Response:
        if self.broken == "ai_requires_auth":
            return JSONResponse({"error": "unauthorized"}, 401, {"WWW-Authenticate": "Bearer"})
        document = {
            "aiendpoint": "1.0",
            "service": {"name": "Fixture", "description": "A conformant test origin."},
            "capabilities": [
                {"id": "search", "description": "Search docs", "endpoint": "/search",
                 "method": "POST"},
                {"id": "agents", "description": "List agents", "endpoint": "/agents",
                 "method": "GET"},
                {"id": "mcp", "description": "MCP tools", "endpoint": "/mcp", "method": "POST"},
            ],
            "auth": {"type": "bearer"},
        }
        kind = "text/plain" if self.broken == "ai_media_type" \
            else "application/json; charset=utf-8"
        answer = self.document(document, kind=kind)
        answer.headers["Cache-Control"] = "public, max-age=86400"
        return answer

    # AIDRE
    def aidre(self, body: Any, status: int = 200) -> Response:
        remaining = "lots" if self.broken == "ratelimit_syntax" else "99"
        return Response(json.dumps(body), status, {
            "Content-Type": "application/aidre+json", **LIMITS, "RateLimit-Remaining": remaining})

    def aidre_error(self, code: str, status: int, message: str) -> Response:
        if self.broken == "aidre_error_not_json":
            return PlainTextResponse(message, status)
        return self.aidre({"error": code, "message": message, "details": {},
                           "request_id": "req-1"}, status)

    def ai_discovery(self, request: Request) -> Response:
        base = _base(request)
        return self.document({
            "version": "1", "service": "AIDRE",
            "endpoints": {"search": f"{base}/search", "collections": f"{base}/collections",
                          "chunk": base + "/chunks/{id}"},
            "capabilities": {"query_text": True, "query_vector": True},
            "embedding_spaces": [{"id": "fixture-3", "dimensions": 3, "distance": "cosine"}],
        })

    def collections(self, request: Request) -> Response:
        return self.aidre({"collections": [{"name": "docs", "description": "Docs",
                                            "visibility": "public",
                                            "updated_at": "2026-01-01T00:00:00Z"}]})

    async def search(self, request: Request) -> Response:
        kind = request.headers.get("content-type", "")
        if not kind.startswith(("application/aidre+json", "application/json")):
            return self.aidre_error("invalid_request", 415, "Send application/aidre+json.")
        body = json.loads(await request.body())
        if ("query" in body) == ("query_vector" in body):
            return self.aidre_error("invalid_request", 400, "Send one of query, query_vector.")
        top_k = body.get("top_k", 10)
        if not isinstance(top_k, int) or (top_k < 1 and self.broken != "top_k_zero"):
            return self.aidre_error("invalid_request", 400, "top_k must be positive.")
        if "query_vector" in body:
            if body.get("embedding_space") != "fixture-3":
                return self.aidre_error("unsupported_embedding_space", 400, "Unknown space.")
            if len(body["query_vector"]) != 3 and self.broken != "vector_dimension_200":
                return self.aidre_error("invalid_embedding_dimension", 422, "Wrong length.")
        results = [{"id": d["id"], "score": 1.0} for d in DOCS[:max(top_k, 0)]]
        return self.aidre({"request_id": "req-1", "collection": "docs", "results": results,
                           "meta": {"returned": len(results), "top_k": top_k}})

    def chunk(self, request: Request) -> Response:
        found = [d for d in DOCS if d["id"] == request.path_params["id"]]
        return self.aidre(found[0]) if found \
            else self.aidre_error("not_found", 404, "No such chunk.")

    # AIP
    def aip_policy(self, request: Request) -> Response:
        return self.document({
            "aip_version": "0.1",
            "publisher": {"id": "fixture", "name": "Fixture", "domain": "fixture.example"},
            "intent_access": {"enabled": True, "state": "active", "mode": "live_only",
                              "training_use": False, "storage_rights": "none"},
            "editorial_domains": ["support"],
            "endpoints": {"retrieve": {"method": "POST",
                                       "url": _base(request) + "/pag/retrieve"}},
            "retrieval": {"supports": {"chunks": True, "citations": True,
                                       "full_article": False},
                          "max_chunks": 2, "max_tokens": 100},
            "compliance": {"revocable": True, "notice_required": True,
                           "last_updated": "2026-01-01"},
        })

    async def retrieve(self, request: Request) -> Response:
        body = json.loads(await request.body())
        answer: dict[str, Any] = {"aip_version": "0.1", "request_id": body.get("request_id"),
                                  "timestamp": "2026-01-01T00:00:00Z"}
        if list(jsonschema.Draft202012Validator(REQUEST_SCHEMA).iter_errors(body)):
            answer |= {"status": "error", "error": {"code": "invalid_request"}}
            return JSONResponse(answer, 400)
        if body["intent"]["domain"] != "support" and self.broken != "aip_not_denied":
            answer |= {"status": "denied", "denial": {"reason": "out_of_scope"}}
            return JSONResponse(answer, 403)
        answer |= {"status": "ok", "content": {"chunks": [
            {"id": "c1", "text": "Help text.", "token_count": 3}]},
            "citations": [{"source_url": "https://fixture.example/1", "chunk_ids": ["c1"]}]}
        if self.broken == "aip_schema":
            answer["advert"] = {"price": 1}  # a member the schema does not allow
        return JSONResponse(answer)

    # PDPP
    def pdpp(self, content: Any, status: int = 200, **headers: str) -> Response:
        return JSONResponse(content, status, {"Request-Id": "req-1",
                                              "PDPP-Version": "2026-04-06", **headers})

    def pdpp_error(self, kind: str, code: str, status: int, **headers: str) -> Response:
        return self.pdpp({"error": {"type": kind, "code": code, "message": code,
                                    "request_id": "req-1"}}, status, **headers)

    def resource_metadata(self, request: Request) -> Response:
        return self.document({
            "resource": _base(request), "authorization_servers": ["https://issuer.example"],
            "bearer_methods_supported": ["header"],
            "pdpp_token_kinds_supported": ["owner", "client"],
            "capabilities": {"lexical_retrieval": {
                "supported": True, "endpoint": "/v1/search", "cross_stream": True,
                "snippets": False, "default_limit": 10, "max_limit": 50}},
        })

    def v1(self, handler: Any, allowed: tuple[str, ...], lenient: str = "") -> Any:
        """A PDPP read: a token first, then only the parameters it knows (§8)."""
        def guarded(request: Request) -> Response:
            if request.headers.get("authorization") != f"Bearer {TOKEN}" \
                    and request.headers.get("x-fixture-key") != API_KEY:
                return self.pdpp_error("authentication_error", "authentication_error", 401,
                                       **{"WWW-Authenticate": "Bearer"})
            if set(request.query_params) - set(allowed) and self.broken != lenient:
                return self.pdpp_error("invalid_request_error", "invalid_request", 400)
            return handler(request)
        return guarded

    def streams(self, request: Request) -> Response:
        listed = [{"object": "stream", "name": "notes"}]
        return self.pdpp(listed if self.broken == "pdpp_no_envelope"
                         else {"object": "list", "data": listed})

    def stream(self, request: Request) -> Response:
        return self.pdpp_error("not_found_error", "not_found", 404)

    def records(self, request: Request) -> Response:
        if request.path_params["name"] != "notes":
            return self.pdpp_error("not_found_error", "not_found", 404)
        if "cursor" in request.query_params:
            return self.pdpp_error("invalid_request_error", "invalid_cursor", 400)
        limit = int(request.query_params.get("limit", "25"))
        body: dict[str, Any] = {"object": "list", "data": RECORDS[:min(limit, 100)],
                                "has_more": limit < len(RECORDS)}
        if limit > 100:
            body["meta"] = {"warnings": [{"code": "limit_clamped", "message": "clamped"}]}
        return self.pdpp(body)

    def lexical(self, request: Request) -> Response:
        hits = [{"object": "search_result", "stream": "notes", "record_key": r["id"],
                 "connector_id": "fixture", "emitted_at": r["emitted_at"],
                 "matched_fields": ["id"]} for r in RECORDS[:2]]
        return self.pdpp({"object": "list", "data": hits, "has_more": False})

    # AIDIP
    def summary(self, request: Request) -> dict[str, Any]:
        return {"id": "echo", "name": "Echo", "description": "Echoes text.",
                "endpoint": _base(request) + "/agents/echo/invoke", "capabilities": ["echo"]}

    def agents(self, request: Request) -> Response:
        return JSONResponse([self.summary(request)])

    def agent(self, request: Request) -> Response:
        if request.path_params["id"] != "echo":
            return JSONResponse({"error": {"code": "NotFound", "message": "No agent."}}, 404)
        text = {"type": "object", "required": ["text"],
                "properties": {"text": {"type": "string"}}}
        return JSONResponse({**self.summary(request), "version": "1.0", "publisher": "Fixture",
                             "tags": ["test"], "operations": [{
                                 "name": "echo", "description": "Echo.", "inputs": text,
                                 "outputs": text}]})

    async def agent_search(self, request: Request) -> Response:
        top = (await request.json()).get("top", 10)
        return JSONResponse([self.summary(request)][:top])

    async def invoke(self, request: Request) -> Response:
        body = await request.json()
        if not isinstance(body.get("text"), str):
            return JSONResponse({"error": {"code": "InvalidInput", "message": "text?"}}, 400)
        return JSONResponse({"text": body["text"]})

    # A2A
    def card(self, request: Request) -> Response:
        if self.broken == "a2a_card_invalid":
            return self.document({"name": ["not", "a", "string"], "supportedInterfaces": 7})
        return self.document({
            "name": "Fixture", "description": "A test agent.", "version": "1",
            "supportedInterfaces": [{"url": _base(request) + "/a2a",
                                     "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
            "capabilities": {"streaming": False}, "defaultInputModes": ["application/json"],
            "defaultOutputModes": ["application/json"],
            "skills": [{"id": "echo", "name": "Echo", "description": "Echoes.", "tags": ["t"]}],
        })
