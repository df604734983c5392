"""`POST /pag/retrieve`: authenticate, validate, rate-limit by platform, decide, then read the
sources and answer with chunks, a denial or an error, never both content and denial."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway import errors
from gateway.context import RequestContext
from gateway.errors import GatewayError, request_too_large
from gateway.surfaces.aip import render
from gateway.surfaces.aip.chunks import select, split
from gateway.surfaces.aip.config import Aip
from gateway.surfaces.aip.policy import AipPolicy, Denial, pick_source
from gateway.surfaces.aip.request import (
    MEDIA_TYPE,
    RetrieveRequest,
    invalid,
    parse_retrieve,
    readable_request_id,
)
from gateway.surfaces.aip.sources import compile_sources, read_pieces
from gateway.surfaces.aip.tokens import TokenCounter


class Retriever:
    """What one config generation needs to answer retrieves; built once at load."""

    def __init__(self, aip: Aip, upstreams: set[str], policy: AipPolicy) -> None:
        self.aip = aip
        self.policy = policy
        self.sources = compile_sources(aip, upstreams)
        self.counter = TokenCounter(aip.retrieval.encoding)

    async def handle(self, request: Request) -> Response:
        ctx, generation = request.scope["aigw"]
        request_id = ctx.request_id
        try:
            await generation.pipeline.authenticate(ctx, request.scope)
            body, problem = await _body(request, generation.settings.proxy.max_body_bytes)
            request_id = readable_request_id(body) or request_id
            ask = None
            if problem is None:  # only a body of the right media type is ever acted on
                try:
                    ask = parse_retrieve(body)
                except GatewayError as error:
                    problem = error
            ctx.platform_id = ask.platform_id if ask else None
            refusal = await _rate_limit(generation, ctx)
            if refusal is not None:
                return _denied(ctx, request_id, *refusal)
            if problem is not None or ask is None:
                raise problem or invalid("The request could not be read.")
            return await self._answer(ask, generation, ctx)
        except GatewayError as error:
            ctx.error_code = error.code
            return render.error(request_id, error)

    async def _answer(self, ask: RetrieveRequest, generation: Any,
                      ctx: RequestContext) -> Response:
        policy = self.policy
        denial = policy.decide(self.aip, ask, datetime.now(UTC).date(), ctx)
        if denial is not None:
            return _denied(ctx, ask.request_id, denial)
        limits = policy.limits(self.aip.retrieval.max_chunks, self.aip.retrieval.max_tokens)
        source = self.sources[pick_source(self.aip, ask) or ""]
        budget = ask.latency_budget_ms
        try:
            async with asyncio.timeout(budget / 1000 if budget is not None else None):
                pieces = await read_pieces(source, ask.query_text or "", limits.max_chunks,
                                           generation, ctx)
        except TimeoutError:
            ctx.upstream_error = "timeout"
            raise errors.upstream_timeout() from None
        supports = self.aip.retrieval.supports
        whole = supports.full_article or not source.whole_articles
        articles = [split(piece, self.counter, self.aip.retrieval.chunk_tokens)
                    for piece in pieces]
        chunks = select(articles, ask.query_text or "", limits, whole)
        return render.ok(ask.request_id, chunks, self.aip.publisher.name, limits,
                         supports.citations)


def routes(aip: Aip, upstreams: set[str], policy: AipPolicy) -> list[Route]:
    retriever = Retriever(aip, upstreams, policy)
    return [Route(aip.retrieve_path, retriever.handle, methods=["POST"], name="aip.retrieve")]


def _denied(ctx: RequestContext, request_id: str, denial: Denial,
            headers: dict[str, str] | None = None) -> Response:
    ctx.error_code = denial.reason
    return render.denied(request_id, denial, headers)


async def _rate_limit(generation: Any,
                      ctx: RequestContext) -> tuple[Denial, dict[str, str]] | None:
    """A 429 from the rate-limit stage as an AIP `rate_limited` denial; other failures raise."""
    try:
        await generation.pipeline.limit(ctx)
    except GatewayError as error:
        if error.code != "rate_limited":
            raise
        return Denial("rate_limited", "Too many requests; retry later."), dict(error.headers)
    return None


async def _body(request: Request, limit: int) -> tuple[Any, GatewayError | None]:
    """The JSON body, or why it is refused (reported after rate limiting); a body sent with
    the wrong media type is still read, so its request_id can be echoed."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise request_too_large(limit)
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            raise request_too_large(limit)
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None, invalid("The request body is not valid JSON (UTF-8).")
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != MEDIA_TYPE:
        return body, GatewayError(415, "invalid_request", "Send the body as application/json.")
    return body, None
