"""The PDPP resource-server endpoints: streams, records and search, each admitted by the
shared pipeline (authentication, rate limits) before it runs, then served by it: the stream
list as a pipeline listing, every other endpoint by `Pipeline.serve`, its grant decisions
(policy_rules.py) taken by `Pipeline.permitted`, the record visibilities its caller sees by
`Pipeline.record_visibilities`, and its upstream reads made through the `Stages` it is
handed. Failures are raised and answered in PDPP's dialect by `PdppService.render_error`."""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from gateway.context import RequestContext
from gateway.errors import GatewayError
from gateway.exchange import Exchange
from gateway.handles import Stages
from gateway.model import Principal, TokenKind
from gateway.pipeline import Listing
from gateway.policy.decisions import Again
from gateway.policy.rules import Ask
from gateway.surface import SurfaceRoute, Way
from gateway.surfaces.pdpp import filters, paging, render, request, search
from gateway.surfaces.pdpp.config import Pdpp
from gateway.surfaces.pdpp.keys import page_key
from gateway.surfaces.pdpp.memo import Decided, Memo
from gateway.surfaces.pdpp.metadata import lexical_served, semantic_served
from gateway.surfaces.pdpp.policy_rules import readable
from gateway.surfaces.pdpp.projection import (
    Access,
    Grantee,
    check_grant,
    is_owner,
    listing_order,
    narrowed,
    readable_stream_ask,
    stream_coverage,
)
from gateway.surfaces.pdpp.store import Entry, Store
from gateway.surfaces.pdpp.streams import (
    CompiledStream,
    FieldSearch,
    Record,
    read_all,
    read_one,
    search_upstream,
)

Handler = Callable[["PdppService", "Call"], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class Call:
    """One admitted PDPP request: its exchange, the negotiated version, and the pipeline's
    stages through which it reads the upstream."""

    exchange: Exchange
    version: str
    stages: Stages

    @property
    def http(self) -> Request:
        return self.exchange.request

    @property
    def ctx(self) -> RequestContext:
        return self.exchange.ctx

    @property
    def principal(self) -> Principal:
        return self.exchange.principal


class _Served:
    """One endpoint as the pipeline serves it (pipeline.ServedSurface)."""

    name = "pdpp"

    def __init__(self, service: PdppService, handler: Handler, version: str) -> None:
        self.service, self.handler, self.version = service, handler, version

    async def respond(self, exchange: Exchange, stages: Stages) -> Response:
        call = Call(exchange, self.version, stages)
        return await self.handler(self.service, call)


def _pdpp(handler: Handler) -> Callable[[PdppService, Exchange], Awaitable[Response]]:
    """Version negotiation and the token kinds PDPP serves, once the pipeline has admitted the
    caller; then the pipeline serves the request. Failures raise and are answered by
    `PdppService.render_error`."""

    @functools.wraps(handler)
    async def endpoint(self: PdppService, exchange: Exchange) -> Response:
        version = self.admitted(exchange)
        return await exchange.pipeline.serve(_Served(self, handler, version), exchange)

    return endpoint


class StreamList:
    """`GET /v1/streams`: the streams this caller may read (pipeline.AskingListing)."""

    name = "pdpp"

    def __init__(self, streams: dict[str, CompiledStream], principal: Principal,
                 version: str) -> None:
        self.streams, self.principal, self.version = streams, principal, version

    def listed(self) -> list[str]:
        return listing_order(self.principal, self.streams)

    def read_ask(self, name: str, principal: Principal) -> Ask:
        return readable_stream_ask(principal, name)

    def render_listing(self, listing: Listing, exchange: Exchange) -> Response:
        data = [{"object": "stream", "name": name} for name in listing.readable
                if readable(stream_coverage(self.principal, name))]  # the grant bounds it
        return render.json_response({"object": "list", "data": data}, exchange.request_id,
                                    self.version)


class PdppService:
    """One config generation's PDPP resource server."""

    def __init__(self, pdpp: Pdpp, streams: dict[str, CompiledStream], secret: bytes,
                 store: Store) -> None:
        self.pdpp = pdpp
        self.streams = streams
        self.cursors = paging.Cursors(secret, pdpp.cursor_ttl)
        self.store = store
        self.memo = Memo()

    def routes(self) -> list[SurfaceRoute]:
        base = self.pdpp.base_path
        ways = self.readable_streams
        found = [
            SurfaceRoute(f"{base}/v1/streams", self.list_streams, methods=["GET"],
                         name="pdpp.streams"),
            SurfaceRoute(f"{base}/v1/streams/{{stream}}", self.stream_metadata, methods=["GET"],
                         name="pdpp.stream", ways=ways),
            SurfaceRoute(f"{base}/v1/streams/{{stream}}/records", self.list_records,
                         methods=["GET"], name="pdpp.records", ways=ways),
            SurfaceRoute(f"{base}/v1/streams/{{stream}}/records/{{key:path}}", self.get_record,
                         methods=["GET"], name="pdpp.record", ways=ways),
        ]
        if lexical_served(self.pdpp):
            found.append(SurfaceRoute(f"{base}/v1/search", self.lexical_search,
                                      methods=["GET"], name="pdpp.search", ways=ways))
        if semantic_served(self.pdpp):
            found.append(SurfaceRoute(f"{base}/v1/search/semantic", self.semantic_search,
                                      methods=["GET"], name="pdpp.semantic", ways=ways))
        return found

    async def readable_streams(self, exchange: Exchange) -> AsyncGenerator[Way, None]:
        """Reading a stream or searching serves a caller whose grant (one PDPP can enforce)
        and the `pdpp_stream` rules let it read one of the streams."""
        principal = exchange.principal
        try:
            check_grant(principal, self.streams)
        except GatewayError:
            return
        for name in listing_order(principal, self.streams):
            yield Way((readable_stream_ask(principal, name),))

    def render_error(self, error: GatewayError, exchange: Exchange) -> Response:
        """Every failure of a PDPP path, in the version the caller asked for when it is one
        served (else the newest)."""
        try:
            version = self.version(exchange.request)
        except GatewayError:
            version = self.pdpp.versions[0]
        return render.error_response(error, exchange.request_id, version)

    def version(self, http: Request) -> str:
        sent = render.sent_version(http.scope)
        if sent is None:
            return self.pdpp.versions[0]
        if sent.strip() not in self.pdpp.versions:
            raise GatewayError(400, "unsupported_version", "Unsupported PDPP-Version.")
        return sent.strip()

    def admitted(self, exchange: Exchange) -> str:
        """The negotiated version, for a token of a kind PDPP serves (else 401)."""
        ctx = exchange.ctx
        ctx.surface = "pdpp"
        version = self.version(exchange.request)
        if ctx.principal.kind not in (TokenKind.OWNER, TokenKind.CLIENT):
            raise GatewayError(401, "missing_credentials", "A bearer token is required.",
                               headers=(("www-authenticate", 'Bearer realm="aigw"'),))
        return version

    async def list_streams(self, exchange: Exchange) -> Response:
        version = self.admitted(exchange)
        principal = exchange.principal
        request.parse(request.items(exchange.request), frozenset(),
                      owner=is_owner(principal))
        check_grant(principal, self.streams)
        return exchange.pipeline.listing(StreamList(self.streams, principal, version), exchange)

    @_pdpp
    async def stream_metadata(self, call: Call) -> Response:
        request.parse(request.items(call.http), frozenset(), owner=_owner(call))
        stream = self._grantee(call).readable_stream(call.http.path_params["stream"])
        return render.json_response(self._metadata(stream), call.ctx.request_id, call.version)

    @_pdpp
    async def list_records(self, call: Call) -> Response:
        owner = _owner(call)
        params = request.parse(request.items(call.http),
                               frozenset({"limit", "cursor", "order", "fields"}),
                               owner=owner, filters=owner, records=True)
        access = self._access(call, call.http.path_params["stream"])
        limit = request.limit(params, request.RECORDS_DEFAULT_LIMIT, request.RECORDS_MAX_LIMIT)
        asked = paging.Listed(access, limit, request.order(params),
                              narrowed(access, params.get("fields")), params.filters)
        filters.check(params.filters, access)
        cursor = params.get("cursor")
        # Made when a cursor is read or issued (a grant digest): not for a remembered first page.
        binding = paging.records_binding(asked, call.principal) if cursor is not None else None
        position = self.cursors.position(cursor, binding) if binding is not None else None
        entry = await self._entry(access.stream, call)
        # The body is all the query's, the copy's and the caller's (the cursor is bound to it).
        pipeline, memo_key = call.exchange.pipeline, (
            entry.serial, access.stream.name, bytes(call.http.scope.get("query_string", b"")))
        body = self.memo.body(call.principal, pipeline, memo_key)
        if body is None:
            binding = binding or paging.records_binding(asked, call.principal)
            document = await self._records(asked, entry, position, params, binding)
            body = orjson.dumps(document)
            self.memo.keep_body(call.principal, pipeline, memo_key, body,
                                "next_cursor" in document)
        return render.encoded_response(body, call.ctx.request_id, call.version)

    async def _records(self, asked: paging.Listed, entry: Entry, position: list[Any] | None,
                       params: request.Params, binding: dict[str, Any]) -> dict[str, Any]:
        """The page of records after `position`, as a document (its cursor bound to
        `binding`)."""
        access = asked.access
        key = page_key(entry.serial, access, asked.field, asked.order, position, asked.filters,
                        asked.limit, asked.wanted)
        page = self.store.pages.get(key) if key is not None else None
        if page is None:
            page = await paging.read_page(entry, asked, position)
            if key is not None:
                self.store.pages.put(key, page, 200 + len(orjson.dumps(page[0])))
        data, last = page
        cursor = self.cursors.signer.issue_position(binding, last) if last is not None else None
        document = render.page(
            f"{self.pdpp.base_path}/v1/streams/{access.stream.name}/records", data, cursor,
            request.meta(params))
        document["freshness"] = {"status": "current", "captured_at": entry.snapshot.captured_at}
        return document

    @_pdpp
    async def get_record(self, call: Call) -> Response:
        params = request.parse(request.items(call.http), frozenset({"fields"}),
                               owner=_owner(call), records=True)
        access = self._access(call, call.http.path_params["stream"])
        wanted = narrowed(access, params.get("fields"))
        key = call.http.path_params["key"]
        if not access.permits_key(key):  # outside the grant's resources: not even asked for
            raise GatewayError(404, "not_found", "No such record.")
        stream = access.stream
        if stream.record_op is not None:
            found = await read_one(stream, _subject(call), key, call.stages.items)
            read_at = _now()
        else:
            entry = await self._entry(stream, call)
            found, read_at = entry.by_key.get(key), entry.snapshot.captured_at
        view = access.view(found) if found is not None else None
        if view is None:
            raise GatewayError(404, "not_found", "No such record.")
        body = render.record(access, view, wanted, read_at)
        return render.json_response(body, call.ctx.request_id, call.version)

    @_pdpp
    async def lexical_search(self, call: Call) -> Response:
        return await self._search(call, semantic=False)

    @_pdpp
    async def semantic_search(self, call: Call) -> Response:
        return await self._search(call, semantic=True)

    async def _search(self, call: Call, *, semantic: bool) -> Response:
        params = request.parse(request.items(call.http),
                               frozenset({"q", "limit", "cursor"}), owner=_owner(call),
                               filters=True, streams=True)
        q = request.search_query(params)
        settings = self.pdpp.semantic if semantic and self.pdpp.semantic else self.pdpp.lexical
        limit = request.limit(params, settings.default_limit, settings.max_limit)
        if params.filters and len(params.streams) != 1:
            raise request.invalid("filter[...] needs exactly one streams[] value.",
                                  params.filters[0].param)
        accesses = self._search_scope(self._grantee(call), params.streams)
        if params.filters:
            filters.check(params.filters, accesses[0])
        named = sorted(a.stream.name for a in accesses) if params.streams else None
        binding = paging.search_binding(q, semantic, named, params.filters, call.principal)
        offset = self.cursors.offset(params.get("cursor"), binding)

        async def entry_for(stream: CompiledStream) -> Entry:
            return await self._entry(stream, call)

        if semantic and self.pdpp.semantic is not None:
            ranked = await search.semantic(q, accesses, params.filters, entry_for,
                                           self.pdpp.semantic.min_similarity, settings.snippets,
                                           self.pdpp.semantic.embedder, offset + limit,
                                           self.store.searches)
        else:
            ranked = await search.lexical(q, accesses, params.filters, entry_for,
                                          self._upstream_search(q, call), settings.snippets,
                                          offset + limit, self.store.searches)
        hits = ranked.hits[offset:offset + limit]
        more = ranked.total > offset + limit
        now = _now()
        data = [render.search_result(h, self.pdpp.base_path, semantic, now) for h in hits]
        meta = request.meta(params)
        if not semantic:
            meta.update(_recall(ranked.total, ranked.truncated))
        url = f"{self.pdpp.base_path}/v1/search" + ("/semantic" if semantic else "")
        cursor = self.cursors.signer.issue(binding, offset + limit) if more else None
        return render.json_response(render.page(url, data, cursor, meta), call.ctx.request_id,
                                    call.version)

    def _grantee(self, call: Call) -> Grantee:
        """The caller's grant, its stream, field and record-visibility decisions taken by the
        pipeline."""
        pipeline = call.exchange.pipeline
        return Grantee(call.principal, self.streams,
                       functools.partial(pipeline.permitted, call.exchange),
                       functools.partial(pipeline.record_visibilities, call.exchange))

    def _access(self, call: Call, name: str) -> Access:
        """The caller's access to a stream (`Grantee.stream`): remembered for this principal
        under this pipeline's policy with the decisions that made it, which are noted again."""
        pipeline = call.exchange.pipeline
        found = self.memo.access(call.principal, pipeline, name)
        if found is None:
            ctx = call.ctx
            taken = len(ctx.decisions)
            access = self._grantee(call).stream(name)
            self.memo.keep_access(Decided(call.principal, pipeline, access,
                                          Again.of(ctx.decisions[taken:])))
            return access
        check_grant(call.principal, self.streams)  # its expiry: every request
        pipeline.permitted_again(call.exchange, found.decisions)
        return found.access

    @staticmethod
    def _search_scope(grantee: Grantee, names: list[str]) -> list[Access]:
        if not names:
            return list(grantee.every().values())
        return [grantee.stream(name, "streams[]") for name in dict.fromkeys(names)]

    @staticmethod
    def _upstream_search(q: str, call: Call) -> search.UpstreamSearch:
        async def records(stream: CompiledStream,
                          fields: tuple[str, ...]) -> tuple[list[Record], bool]:
            assert stream.lexical_op is not None
            cap = stream.lexical_op.settings.max_items or stream.settings.max_records
            values = FieldSearch.of(q, fields, _subject(call),
                                    min(stream.settings.max_records, cap))
            return await search_upstream(stream, values, call.stages.items)
        return records

    def _metadata(self, stream: CompiledStream) -> dict[str, Any]:
        settings = stream.settings
        query: dict[str, Any] = {}
        if settings.range_filters:
            query["range_filters"] = {f: list(ops) for f, ops in settings.range_filters.items()}
        declared: dict[str, Any] = {}
        if stream.lexical_fields and lexical_served(self.pdpp):
            declared["lexical_fields"] = list(stream.lexical_fields)
        if stream.semantic_fields and semantic_served(self.pdpp):
            declared["semantic_fields"] = list(stream.semantic_fields)
        if declared:
            query["search"] = declared
        document: dict[str, Any] = {
            "object": "stream_metadata", "name": stream.name, "schema": stream.schema(),
            "primary_key": [settings.primary_key], "cursor_field": settings.cursor_field,
            "consent_time_field": settings.consent_time_field,
        }
        if query:
            document["query"] = query
        return document

    async def _entry(self, stream: CompiledStream, call: Call) -> Entry:
        """The stream's records (the caller's subject's, when they are per subject), read
        through this request's stages when the store has none fresh enough."""
        if not stream.per_subject:
            return await self.store.entry(
                stream, "", lambda: read_all(stream, "", call.stages.shared_item_page))
        subject = _subject(call)
        return await self.store.entry(
            stream, subject, lambda: read_all(stream, subject, call.stages.item_page))


def _recall(count: int, truncated: bool) -> dict[str, Any]:
    return {"count": count, "count_accuracy": "lower_bound" if truncated else "exact",
            "recall": {"complete": not truncated,
                       "ranking_scope": "candidate_window" if truncated else "all_matches",
                       "truncated": truncated}}


def _owner(call: Call) -> bool:
    return is_owner(call.principal)


def _subject(call: Call) -> str:
    return call.principal.subject or ""


def _now() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
