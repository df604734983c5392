"""The AIDRE surface: discovery, collections, search and chunks on the shared pipeline.

Each handler takes the request's exchange (admitted by the pipeline as its route declares),
runs the pipeline, and renders in AIDRE's dialect; failures are raised and answered by the app
in AIDRE's error object. No collection-specific code lives here.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncGenerator
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from gateway.bodies import read_capped
from gateway.context import RequestContext
from gateway.errors import GatewayError
from gateway.exchange import Exchange
from gateway.handles import Stages
from gateway.headers import request_origin
from gateway.ids import addressable
from gateway.model import Hit, Query
from gateway.operations import Placeholders
from gateway.pipeline import Listing
from gateway.policy.resources import read_ask
from gateway.surface import Admission, SurfaceRoute, Way
from gateway.surfaces.aidre import render, window
from gateway.surfaces.aidre.collections import CompiledCollection, Operation
from gateway.surfaces.aidre.config import aidre_of
from gateway.surfaces.aidre.request import invalid, parse_search
from gateway.surfaces.aidre.visibility import Memo
from gateway.surfaces.cursors import MAX_OFFSET, CursorSigner, InvalidCursor, derived_key

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
        self.collections = _own_collections(generation)
        self.page = window.Window([])  # set by `collect` for this request
        self.start = window.Position()  # where this request's page starts (its cursor's)

    async def parse(self, request: Request, ctx: RequestContext) -> Query:
        await _check_media_type(request)
        body = await _json_body(request, self.generation.settings.proxy.max_body_bytes)
        query = parse_search(body, self.settings)
        if query.cursor is not None:
            self.start = self._position(query.cursor, query)
        self._check_collection(query.collection)
        return query

    async def collect(self, query: Query, ctx: RequestContext, stages: Stages) -> list[Hit]:
        """The caller's page at the query's offset: policy decides on each record as it is
        read, so hidden records neither shorten the page nor show in whether more follow."""
        collection = self.collections[query.collection or ""]
        memo = Memo(collection.visibilities, collection.name, stages.caller_key(),
                    window.visible_values(query)) if collection.visibilities is not None else None
        source = window.Source(collection, self._operation(query), memo)
        fetch = stages.page if "vectors" in query.fields else stages.page_without_vectors
        self.page = await window.gather(source, query, self.start, fetch, stages.keep,
                                        window.Budget(self.settings.max_upstream_calls))
        return self.page.hits

    def render(self, query: Query, hits: list[Hit], ctx: RequestContext) -> Response:
        """The cursor holds an upstream position, encrypted (it counts hidden records)."""
        collection = self.collections[query.collection or ""]
        meta: dict[str, Any] = {"returned": len(hits), "top_k": query.top_k}
        truncated = self.page.truncated
        if self.page.next_position is not None:
            cursor = self._cursor(query, self.page.next_position)
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

    def _cursor(self, query: Query, position: window.Position) -> str | None:
        """The next page's cursor; None past the deepest offset a cursor holds. A position
        without the upstream's token is an offset cursor (every one the same length)."""
        if not position.size:
            return self.cursors.issue(_cursor_key(query), position.offset)
        if position.offset > MAX_OFFSET:
            return None
        return self.cursors.issue_position(_cursor_key(query),
                                           [position.after, position.offset, position.size])

    def _position(self, cursor: str, query: Query) -> window.Position:
        """Where a cursor continues; 400 `invalid_request` unless it is ours and fits."""
        try:
            found = self.cursors.position(cursor, _cursor_key(query))
        except InvalidCursor as exc:
            raise invalid(str(exc)) from None
        if isinstance(found, int):
            return window.Position(offset=found)
        if isinstance(found, list) and len(found) == 3 and isinstance(found[0], str) \
                and all(_counts(n) for n in found[1:]) and found[2] > 0:
            return window.Position(found[0], found[1], found[2])
        raise invalid("The cursor is not valid.")

    def _check_collection(self, name: str | None) -> None:
        """Another surface's resource (an AIP source) is no collection here: refused as the
        policy stage refuses an unknown one."""
        if name not in self.collections:
            raise GatewayError(404, "not_found", "No such collection.", {"collection": name})

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



class ChunkSurface(AidreSurface):
    """`GET /chunks/{id}`: one chunk, read through the collection's chunk operation."""

    def __init__(self, generation: Any, if_none_match: list[str]) -> None:
        super().__init__(generation)
        self.if_none_match = if_none_match

    async def parse(self, request: Request, ctx: RequestContext) -> Query:
        collection, _, item = request.path_params["id"].partition(":")
        if not addressable(item):
            raise GatewayError(404, "not_found", "No such chunk.")
        self._check_collection(collection)
        return Query(collection=collection, filters={"id": item})

    def plan(self, query: Query, ctx: RequestContext) -> tuple[Operation[Any], Placeholders]:
        collection = self.collections[query.collection or ""]
        if collection.chunk is None:
            raise GatewayError(404, "not_found", "No such chunk.")
        return collection.chunk, window.chunk_values(query, query.filters["id"])

    async def collect(self, query: Query, ctx: RequestContext, stages: Stages) -> list[Hit]:
        """Missing upstream, hidden by policy or unknown: one and the same 404 (see render).
        An id the upstream refuses (4xx) or redirects (3xx, never followed) names no chunk
        either, never a 503 (an id such as "search" or "/" may land on another upstream
        route, or on a listing's redirect)."""
        try:
            return await stages.hits(*self.plan(query, ctx))
        except GatewayError as error:
            refused = error.code == "upstream_error" \
                and (ctx.upstream_error or "").startswith(("status_4", "status_3"))
            if error.status == 404 or refused:
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


def routes(base_path: str) -> list[SurfaceRoute]:
    return [
        SurfaceRoute("/.well-known/ai-discovery", discovery, methods=["GET"],
                     name="aidre.discovery", admission=Admission.OPTIONAL),
        SurfaceRoute(f"{base_path}/collections", list_collections, methods=["GET"],
                     name="aidre.collections"),
        SurfaceRoute(f"{base_path}/search", search, methods=["POST"], name="aidre.search",
                     ways=readable_collections),
        SurfaceRoute(f"{base_path}/chunks/{{id:path}}", read_chunk, methods=["GET"],
                     name="aidre.chunk", ways=readable_collections),
    ]


async def readable_collections(exchange: Exchange) -> AsyncGenerator[Way, None]:
    """A search or a chunk read serves a caller who may read one of the collections."""
    for name in _collections(exchange):
        yield Way((read_ask(exchange.principal, name),))


async def search(exchange: Exchange) -> Response:
    return await exchange.pipeline.retrieve(AidreSurface(exchange.generation), exchange)


async def read_chunk(exchange: Exchange) -> Response:
    tags = _if_none_match(exchange.request.scope["headers"])
    return await exchange.pipeline.retrieve(ChunkSurface(exchange.generation, tags), exchange)


class CollectionList:
    """`GET /collections`: the collections this caller may read."""

    name = "aidre"

    def __init__(self, collections: dict[str, CompiledCollection]) -> None:
        self.collections = collections

    def listed(self) -> list[str]:
        return list(self.collections)

    def render_listing(self, listing: Listing, exchange: Exchange) -> Response:
        readable = [self.collections[name] for name in listing.readable]
        return render.json_response(
            {"request_id": exchange.request_id,
             "collections": [render.collection_entry(c) for c in readable]},
            headers=_per_caller(exchange.generation, exchange.ctx))


class Discovery(CollectionList):
    """`/.well-known/ai-discovery` (§3): public; a credential that cannot be used is ignored,
    a valid one personalises the collections listed."""

    def render_listing(self, listing: Listing, exchange: Exchange) -> Response:
        generation, scope = exchange.generation, exchange.request.scope
        settings = generation.settings
        organization = settings.service.organization.name \
            if settings.service and settings.service.organization else None
        base_url = settings.public_base_url or request_origin(scope, generation.trusted_networks)
        readable = [self.collections[name] for name in listing.readable]
        document = render.discovery(aidre_of(settings), base_url, organization, readable,
                                    listing.vectors_possible, _auth_summary(generation))
        body = orjson.dumps(document)
        etag = '"' + _digest(body) + '"'
        headers = {"etag": etag, **_per_caller(generation, exchange.ctx)}
        if not settings.public_base_url:  # its URLs come from the request: caches key on it
            headers["vary"] += ", Host, X-Forwarded-Host, X-Forwarded-Proto"
        if _matches(etag, _if_none_match(scope["headers"])):
            return Response(status_code=304, headers=headers)
        return Response(body, 200, headers, "application/json")  # §3.2: application/json


async def list_collections(exchange: Exchange) -> Response:
    return exchange.pipeline.listing(CollectionList(_collections(exchange)), exchange)


async def discovery(exchange: Exchange) -> Response:
    return exchange.pipeline.listing(Discovery(_collections(exchange)), exchange)


def _collections(exchange: Exchange) -> dict[str, CompiledCollection]:
    return _own_collections(exchange.generation)


def _own_collections(generation: Any) -> dict[str, CompiledCollection]:
    """AIDRE's collections among every surface's resources."""
    return {name: resource for name, resource in generation.resources.items()
            if isinstance(resource, CompiledCollection)}


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


def _counts(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_OFFSET


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
