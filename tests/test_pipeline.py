"""The request pipeline with a minimal surface, against the demo backend over real HTTP."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from processes import free_port
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway import errors
from gateway.context import RequestContext
from gateway.dispatch import serve_surface
from gateway.exchange import Exchange
from gateway.mapping import UpstreamValueError, compile_mapping
from gateway.model import ALLOW, Decision, Hit, Principal, Query, TokenKind, deny
from gateway.operations import Operation, Placeholders, UpstreamOperation, compile_operation
from gateway.pipeline import Pipeline
from gateway.proxy import ProxyTarget
from gateway.settings import Upstream
from gateway.surface import Mount, SurfaceRoute
from gateway.upstream import create_transport

SEARCH_MAPPING = {
    "items": "items", "id": "id", "text": "snippet", "score": "score",
    "fields": {"title": "title", "url": "url"}, "metadata": {"updated_at": "updated_at"},
}


@dataclass(frozen=True, slots=True)
class Keywords(Placeholders):
    """The test surface's one kind of operation."""

    query: str
    limit: int


SEARCH = compile_operation(UpstreamOperation(
    upstream="demo", path="/api/v1/articles/search", query={"q": "{query}", "limit": "{limit}"},
    mapping=SEARCH_MAPPING), "search", {"demo"}, Keywords)


class KeywordSurface:
    """A stand-in for a spec surface: ?q= in, {"results": [...]} out, {"fault": code} errors."""

    name = "test-surface"

    def __init__(self, trail: list[str]) -> None:
        self.trail = trail

    async def parse(self, request: Request, ctx: RequestContext) -> Query:
        self.trail.append("validate")
        text = request.query_params.get("q", "").strip()
        if not text:
            raise errors.GatewayError(400, "invalid_request", "q is required")
        return Query(text=text, top_k=int(request.query_params.get("k", "3")))

    def plan(self, query: Query, ctx: RequestContext) -> tuple[Operation[Any], Placeholders]:
        self.trail.append("plan")
        return SEARCH, Keywords(query=query.text or "", limit=query.top_k)

    def render(self, query: Query, hits: list[Hit], ctx: RequestContext) -> Response:
        self.trail.append("render")
        results = [{"id": h.id, "title": h.fields["title"], "score": h.score} for h in hits]
        return JSONResponse({"results": results, "request_id": ctx.request_id})

    def render_error(self, error: errors.GatewayError, exchange: Exchange) -> Response:
        self.trail.append(f"error {exchange.ctx.error_code}")
        return JSONResponse({"fault": error.code, "request_id": exchange.request_id},
                            status_code=error.status)


class RecordingStages:
    def __init__(self, trail: list[str], limit: Decision = ALLOW) -> None:
        self.trail = trail
        self.limit = limit

    async def authenticate(self, ctx: RequestContext, headers: list) -> Principal:
        self.trail.append("authenticate")
        return Principal(subject="alice", kind=TokenKind.CLIENT)

    async def check(self, ctx: RequestContext) -> Decision:
        self.trail.append("rate limit")
        return self.limit

    def before(self, ctx: RequestContext, query: Query) -> Query | Decision:
        self.trail.append("policy pre")
        if query.text == "forbidden":
            return deny(403, "forbidden", "not for you")
        return Query(text=query.text, top_k=min(query.top_k, 2))  # policy narrows top_k

    def after(self, ctx: RequestContext, query: Query, hits: list[Hit]) -> list[Hit]:
        self.trail.append("policy post")
        assert ctx.principal.subject == "alice"
        return [hit for hit in hits if "Internal" not in hit.fields["title"]]


@contextlib.asynccontextmanager
async def client_for(
    url: str, trail: list[str], limit: Decision = ALLOW
) -> AsyncIterator[httpx.AsyncClient]:
    transport = create_transport(Upstream(url=url, timeout={"connect": 1, "read": 2}))
    target = ProxyTarget("demo", url, url.removeprefix("http://").encode(), False, transport)
    stages = RecordingStages(trail, limit)
    pipeline = Pipeline(authenticator=stages, limiter=stages, policy=stages,
                        targets={"demo": target})
    surface = KeywordSurface(trail)

    async def search(exchange: Exchange) -> Response:
        return await pipeline.retrieve(surface, exchange)

    mount = Mount("test", [SurfaceRoute("/search", search, methods=["GET"])],
                  render_error=surface.render_error)

    async def app(scope: dict, receive: Any, send: Any) -> None:
        """What the gateway app does for a path a surface owns (gateway.dispatch)."""
        ctx = RequestContext("rid-1", scope["method"], scope["path"], "")
        generation: Any = SimpleNamespace(pipeline=pipeline)
        await serve_surface(mount, Exchange(Request(scope, receive, send), ctx, generation), send)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://gw") as client:
            yield client
    finally:
        await transport.aclose()


@pytest.fixture
def trail() -> list[str]:
    return []


async def test_stages_run_in_the_designed_order_and_map_upstream_json(backend, trail):
    async with client_for(backend, trail) as client:
        response = await client.get("/search", params={"q": "refund", "k": 10})
    assert response.status_code == 200
    results = response.json()["results"]
    assert len(results) == 2  # narrowed by policy before the upstream was asked
    assert all(r["id"].startswith("art-") and r["score"] > 0 for r in results)
    assert any("refund" in r["title"].lower() for r in results)
    assert trail == ["authenticate", "rate limit", "validate", "policy pre", "plan",
                     "policy post", "render"]


async def test_a_rate_limit_denial_stops_before_validation(backend, trail):
    limited = deny(429, "rate_limited", "slow down", (("retry-after", "7"),))
    async with client_for(backend, trail, limited) as client:
        response = await client.get("/search", params={"q": "refund"})
    assert response.status_code == 429
    assert response.json() == {"fault": "rate_limited", "request_id": "rid-1"}
    assert trail == ["authenticate", "rate limit", "error rate_limited"]


async def test_a_policy_denial_never_reaches_the_upstream(backend, trail):
    async with client_for(backend, trail) as client:
        response = await client.get("/search", params={"q": "forbidden"})
    assert response.status_code == 403 and response.json()["fault"] == "forbidden"
    assert "plan" not in trail


async def test_bad_input_is_answered_in_the_surface_dialect(backend, trail):
    async with client_for(backend, trail) as client:
        response = await client.get("/search")
    assert response.status_code == 400 and response.json()["fault"] == "invalid_request"


async def test_upstream_failure_becomes_a_dialect_error_without_upstream_detail(trail):
    async with client_for(f"http://127.0.0.1:{free_port()}", trail) as client:
        response = await client.get("/search", params={"q": "refund"})
    assert response.status_code == 502
    assert response.json() == {"fault": "upstream_unavailable", "request_id": "rid-1"}


def test_mapping_errors_name_the_path():
    where = "collections.docs.mapping"
    with pytest.raises(ValueError, match=rf"{where}.fields.title: invalid JMESPath"):
        compile_mapping({"id": "id", "fields": {"title": "items[?"}}, where)
    with pytest.raises(ValueError, match=r"m.id: expected a JMESPath expression"):
        compile_mapping({"items": "items"}, "m")


@pytest.mark.parametrize("empty", ["", None])
def test_an_empty_id_expression_is_refused_when_the_config_loads(empty):
    # Was taken for "no id" and compiled to None: every search then failed with AttributeError.
    with pytest.raises(ValueError, match=r"m.id: expected a JMESPath expression"):
        compile_mapping({"items": "items", "id": empty}, "m")


def test_mapping_turns_upstream_items_into_hits_and_skips_items_without_id():
    mapping = compile_mapping({"items": "data.rows", "id": "key", "vector": "emb",
                               "metadata": {"updated_at": "meta.updated"}})
    hits = mapping.hits({"data": {"rows": [
        {"key": 7, "emb": [0.1, 0.2], "meta": {"updated": "2024-01-01T00:00:00Z"}},
        {"no_key": True},
    ]}})
    assert [(h.id, h.vector, h.metadata) for h in hits] == [
        ("7", [0.1, 0.2], {"updated_at": "2024-01-01T00:00:00Z"})
    ]


def test_items_of_the_wrong_kind_fail_the_answer_and_absent_items_are_none():
    mapping = compile_mapping({"items": "items", "id": "id"})
    assert mapping.hits({"items": {"id": "one"}})[0].id == "one"  # one object: one item
    assert mapping.hits({"items": None}) == mapping.hits({}) == []
    for wrong in ("nothing to see", 7, True):
        with pytest.raises(UpstreamValueError) as caught:
            mapping.hits({"items": wrong})
        assert (caught.value.slot, caught.value.expected) == ("items", "a list or an object")
