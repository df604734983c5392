"""The AIDRE surface: discovery, collections, search and chunks on the shared pipeline.

Each handler finds the request context and config generation the app put in the scope, runs
the pipeline, and renders in AIDRE's dialect; no collection-specific code lives here.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.bodies import read_capped
from gateway.context import RequestContext
from gateway.errors import GatewayError
from gateway.headers import request_origin
from gateway.model import Hit, Query
from gateway.operations import Placeholders
from gateway.pipeline import Fetch
from gateway.surfaces.aidre import render, window
from gateway.surfaces.aidre.collections import CompiledCollection, Operation
from gateway.surfaces.aidre.request import invalid, parse_search
from gateway.surfaces.cursors import CursorSigner, InvalidCursor, derived_key

_MEDIA_TYPES = ("application/aidre+json", "application/json")


class AidreSurface:
    """The surface parts of `/search` (see pipeline.RetrievalSurface)."""

    name = "aidre"

    def __init__(self, generation: Any) -> None:
        self.generation = generation
        self.settings = generation.settings.aidre
        secret = self.settings.cursor_secret
        key = secret.get_secret_value().encode() if secret else \
            derived_key(self.settings, generation.settings.public_base_url)
        self.cursors = CursorSigner(key, self.settings.cursor_ttl)
        self.page = window.Window([])  # set by `collect` for this request

    @property
    def collections(self) -> dict[str, CompiledCollection]:
        return self.generation.resources

    async def parse(self, request: Request, ctx: RequestContext) -> Query:
        await _check_media_type(request)
        body = await _json_body(request, self.generation.settings.proxy.max_body_bytes)
        query = parse_search(body, self.settings)
        if query.cursor is None:
            return query
        try:
            offset = self.cursors.offset(query.cursor, _cursor_key(query))
        except InvalidCursor as exc:
            raise invalid(str(exc)) from None
        return replace(query, offset=offset)

    async def collect(self, query: Query, ctx: RequestContext, fetch: Fetch) -> list[Hit]:
        """The caller's page at the query's offset: policy decides on each record as it is
        read, so hidden records neither shorten the page nor show in whether more follow."""
        collection = self.collections[query.collection or ""]
        source = window.Source(collection, self._operation(query))
        policy = self.generation.pipeline.policy
        self.page = await window.gather(
            source, query, fetch, lambda hits: policy.after(ctx, query, hits),
            window.Budget(self.settings.max_upstream_calls))
        return self.page.hits

    def render(self, query: Query, hits: list[Hit], ctx: RequestContext) -> Response:
        """The cursor holds an upstream position, encrypted (it counts hidden records)."""
        collection = self.collections[query.collection or ""]
        meta: dict[str, Any] = {"returned": len(hits), "top_k": query.top_k}
        truncated = self.page.truncated
        if self.page.next_offset is not None:
            cursor = self.cursors.issue(_cursor_key(query), self.page.next_offset)
            if cursor is None:
                truncated = True  # deeper than cursors go
            else:
                meta["next_cursor"] = cursor
        if truncated:
            meta["truncated"] = True
        results = [render.result(hit, collection, query.fields) for hit in hits]
        return render.json_response({"request_id": ctx.request_id,
                                     "collection": collection.name,
                                     "results": results, "meta": meta})

    def _operation(self, query: Query) -> Operation[Any]:
        collection = self.collections[query.collection or ""]
        if query.vector is None:
            return collection.text_search
        if collection.vector_search is None or collection.space is None \
                or collection.space.id != query.embedding_space:
            raise GatewayError(400, "unsupported_embedding_space",
                               "This collection does not accept that embedding space.",
                               {"embedding_space": query.embedding_space,
                                "collection": collection.name})
        return collection.vector_search

    def render_error(self, error: GatewayError, ctx: RequestContext) -> Response:
        return render.error_response(error, ctx.request_id)


class ChunkSurface(AidreSurface):
    """`GET /chunks/{id}`: one chunk, read through the collection's chunk operation."""

    def __init__(self, generation: Any, if_none_match: list[str]) -> None:
        super().__init__(generation)
        self.if_none_match = if_none_match

    async def parse(self, request: Request, ctx: RequestContext) -> Query:
        collection, _, item = request.path_params["id"].partition(":")
        if not window.ITEM_ID.fullmatch(item) or item in (".", ".."):
            raise GatewayError(404, "not_found", "No such chunk.")
        return Query(collection=collection, filters={"id": item})

    def plan(self, query: Query, ctx: RequestContext) -> tuple[Operation[Any], Placeholders]:
        collection = self.collections[query.collection or ""]
        if collection.chunk is None:
            raise GatewayError(404, "not_found", "No such chunk.")
        return collection.chunk, window.chunk_values(query, query.filters["id"])

    async def collect(self, query: Query, ctx: RequestContext, fetch: Fetch) -> list[Hit]:
        """Missing upstream, hidden by policy or unknown: one and the same 404 (see render)."""
        try:
            return await fetch(*self.plan(query, ctx))
        except GatewayError as error:
            if error.status == 404:
                return []
            raise

    def render(self, query: Query, hits: list[Hit], ctx: RequestContext) -> Response:
        if not hits:
            raise GatewayError(404, "not_found", "No such chunk.")
        document = render.chunk(hits[0], self.collections[query.collection or ""],
                                ctx.request_id)
        etag = '"' + _digest(document["content_hash"].encode()) + '"'
        headers = {"etag": etag, "cache-control": "private, no-cache"}
        if _matches(etag, self.if_none_match):
            return Response(status_code=304, headers=headers)
        return render.json_response(document, headers=headers)

    def render_error(self, error: GatewayError, ctx: RequestContext) -> Response:
        # An id the upstream refuses (4xx) names no chunk: the same 404 as a missing one, never
        # a 503 (an id such as "search" may land on another upstream route).
        if error.code == "upstream_error" and (ctx.upstream_error or "").startswith("status_4"):
            error = GatewayError(404, "not_found", "No such chunk.")
        return super().render_error(error, ctx)


def routes(base_path: str) -> list[Route]:
    return [
        Route("/.well-known/ai-discovery", discovery, methods=["GET"],
              name="aidre.discovery"),
        Route(f"{base_path}/collections", list_collections, methods=["GET"],
              name="aidre.collections"),
        Route(f"{base_path}/search", search, methods=["POST"], name="aidre.search"),
        Route(f"{base_path}/chunks/{{id:path}}", read_chunk, methods=["GET"],
              name="aidre.chunk"),
    ]


async def search(request: Request) -> Response:
    ctx, generation = request.scope["aigw"]
    return await generation.pipeline.retrieve(AidreSurface(generation), request, ctx)


async def read_chunk(request: Request) -> Response:
    ctx, generation = request.scope["aigw"]
    surface = ChunkSurface(generation, _if_none_match(request.scope["headers"]))
    return await generation.pipeline.retrieve(surface, request, ctx)


async def list_collections(request: Request) -> Response:
    ctx, generation = request.scope["aigw"]
    if (refusal := await _admit(request)) is not None:
        return refusal
    readable = generation.pipeline.policy.readable(ctx.principal)
    return render.json_response({"request_id": ctx.request_id,
                                 "collections": [render.collection_entry(c) for c in readable]},
                                headers=_per_caller(generation, ctx))


async def discovery(request: Request) -> Response:
    """Public (§3.1): a credential that cannot be used is ignored, a valid one personalises."""
    ctx, generation = request.scope["aigw"]
    if (refusal := await _admit(request, credentials_optional=True)) is not None:
        return refusal
    policy, settings = generation.pipeline.policy, generation.settings
    organization = settings.service.organization.name \
        if settings.service and settings.service.organization else None
    base_url = settings.public_base_url \
        or request_origin(request.scope, generation.trusted_networks)
    document = render.discovery(settings.aidre, base_url, organization,
                                policy.readable(ctx.principal), policy.vectors_possible(),
                                _auth_summary(generation))
    body = orjson.dumps(document)
    etag = '"' + _digest(body) + '"'
    headers = {"etag": etag, **_per_caller(generation, ctx)}
    if not settings.public_base_url:  # its URLs come from the request: caches must key on it
        headers["vary"] += ", Host, X-Forwarded-Host, X-Forwarded-Proto"
    if _matches(etag, _if_none_match(request.scope["headers"])):
        return Response(status_code=304, headers=headers)
    return Response(body, 200, headers, "application/json")  # §3.2: MUST be application/json


async def _admit(request: Request, *, credentials_optional: bool = False) -> Response | None:
    """Authenticate and rate-limit; the refusal in AIDRE's dialect, or None."""
    ctx, generation = request.scope["aigw"]
    try:
        await generation.pipeline.admit(ctx, request.scope,
                                        credentials_optional=credentials_optional)
    except GatewayError as error:
        return render.error_response(error, ctx.request_id)
    return None


def _per_caller(generation: Any, ctx: RequestContext) -> dict[str, str]:
    """Caching fields of a response that depends on the caller's credential."""
    auth = generation.settings.auth
    vary = ["Authorization"]
    if auth is not None and auth.api_keys is not None:
        vary.append(auth.api_keys.header)
    visibility = "public" if ctx.principal.is_anonymous else "private"
    return {"vary": ", ".join(vary), "cache-control":
            f"{visibility}, max-age={generation.settings.aidre.discovery_max_age}"}


def _auth_summary(generation: Any) -> dict[str, Any]:
    auth = generation.settings.auth
    if auth is None:
        return {"type": "none"}
    from gateway.auth.metadata import metadata_url, resource_identifier

    resource = resource_identifier(auth, generation.settings.public_base_url)
    return {"type": "oauth2" if auth.issuers or auth.introspection else "apikey",
            "resource_metadata": metadata_url(resource)}


def _cursor_key(query: Query) -> dict[str, Any]:
    return {"c": query.collection, "t": query.text, "v": query.vector,
            "s": query.embedding_space}


async def _check_media_type(request: Request) -> None:
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type not in _MEDIA_TYPES:
        raise GatewayError(415, "invalid_request",
                           "Send the body as application/aidre+json (or application/json).",
                           {"content_type": media_type[:100]})


async def _json_body(request: Request, limit: int) -> Any:
    body = await read_capped(request, limit)
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        raise invalid("The request body is not valid JSON (UTF-8).") from None


def _if_none_match(headers: list[tuple[bytes, bytes]]) -> list[str]:
    for name, value in headers:
        if name == b"if-none-match":
            return [tag.strip().removeprefix("W/") for tag in value.decode("latin-1").split(",")]
    return []


def _matches(etag: str, if_none_match: list[str]) -> bool:
    """`*` matches any current representation (RFC 9110 §13.1.2); the caller has one."""
    return etag in if_none_match or "*" in if_none_match


def _digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()[:32]
