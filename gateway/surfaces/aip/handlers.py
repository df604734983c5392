"""`POST /pag/retrieve` on the shared pipeline. It admits the request (a signature, else
authentication; then the rate limit, keyed on the platform the body declares: see
`RetrieveAdmission`) and runs it as a `Retrieval`: parsed, decided, the source read through the
pipeline's stages, and answered with chunks, a denial or an error, never both content and
denial; an ok answer is recorded first: its request id as issued to the platform (what citation
events must name) and an access event."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from datetime import UTC, datetime

from starlette.requests import Request
from starlette.responses import Response

from gateway import errors
from gateway.caching import BoundedCache
from gateway.context import RequestContext
from gateway.errors import GatewayError
from gateway.exchange import Exchange
from gateway.handles import Stages
from gateway.model import Hit, Query
from gateway.policy.resources import read_ask
from gateway.policy.rules import Ask
from gateway.surface import Admission, SurfaceRoute, Way
from gateway.surfaces.aip import render
from gateway.surfaces.aip.body import parse_json
from gateway.surfaces.aip.chunks import Chunk, Cutter, Piece, select, withheld_whole
from gateway.surfaces.aip.config import Aip
from gateway.surfaces.aip.events import EventSink, access_event
from gateway.surfaces.aip.gate import Gate, check_platform
from gateway.surfaces.aip.intake import EventIntake, store_event
from gateway.surfaces.aip.ledger import EventLedger
from gateway.surfaces.aip.policy import (
    AipPolicy,
    Denial,
    access_refusal,
    pick_source,
    scope_refusal,
    unsupported,
)
from gateway.surfaces.aip.request import (
    QUERY_PATH,
    RetrieveRequest,
    invalid,
    parse_retrieve,
    readable_request_id,
)
from gateway.surfaces.aip.signed import (
    AipAnswer,
    Denied,
    SignedAdmission,
    answer_of,
    content_type,
)
from gateway.surfaces.aip.sources import CompiledSource, Text, read_hits, texts
from gateway.surfaces.aip.tokens import TokenCounter
from gateway.surfaces.aip.wiring import Wiring


class RetrieveAdmission(SignedAdmission):
    """Admission of a retrieve: the rate limit keys on the platform the body declares, so the
    body is read here (once: the endpoint answers from what is kept on the `AipAnswer`). A
    body that cannot be read is counted all the same, then refused by the endpoint."""

    def __init__(self, aip: Aip, gate: Gate) -> None:
        super().__init__(gate, aip.retrieve_max_bytes)
        self.max_query_chars = aip.retrieval.max_query_chars

    def learn_limit_key(self, exchange: Exchange) -> None:
        answer = answer_of(exchange, self.gate)
        body, problem = parse_json(exchange.body or b"", content_type(exchange.request),
                                   {QUERY_PATH: self.max_query_chars})
        answer.request_id = readable_request_id(body) or answer.request_id
        if problem is None:  # only a body of the right media type is ever acted on
            try:
                answer.retrieve = parse_retrieve(body)
                check_platform(answer.verified, answer.retrieve.platform)
            except GatewayError as error:
                answer.retrieve, problem = None, error
        answer.problem = problem
        exchange.ctx.platform_id = answer.retrieve.platform if answer.retrieve else None


class Retriever:
    """What one config generation needs to answer retrieves; built once at load."""

    def __init__(self, aip: Aip, sources: dict[str, CompiledSource], policy: AipPolicy,
                 gate: Gate, sink: EventSink | None, ledger: EventLedger | None = None) -> None:
        self.aip = aip
        self.limits = policy.limits(aip.retrieval.max_chunks, aip.retrieval.max_tokens)
        self.gate = gate
        self.sink = sink
        self.ledger = ledger
        self.sources = sources
        self.cutter = Cutter(TokenCounter(aip.retrieval.encoding), aip.retrieval.chunk_tokens)
        self._intents: BoundedCache[tuple[tuple[str, ...], str | None],
                                    tuple[Denial | None, str | None]] = BoundedCache(INTENTS_KEPT)
        # (texts, query, whole allowed) -> what `cut` chose from them: what the same query
        # over the same texts always gives, so a busy query's answer is chosen once.
        self._chosen: BoundedCache[tuple[tuple[Text, ...], str, bool],
                                   tuple[tuple[Chunk, ...], int]] = BoundedCache(
            CHOSEN_ENTRIES, CHOSEN_BYTES)

    async def handle(self, exchange: Exchange) -> Response:
        """The pipeline runs the retrieve (`Retrieval`); the answer is signed like any other."""
        answer = answer_of(exchange, self.gate)
        response = await exchange.pipeline.retrieve(Retrieval(self, answer), exchange)
        return self.gate.sign(answer.verified, exchange.request.scope, response)

    async def readable_sources(self, exchange: Exchange) -> AsyncGenerator[Way, None]:
        """A retrieve serves a caller who may read one of the sources: which one the intent
        picks, and the `aip_retrieve` rules decide on what the request declares."""
        for name in self.sources:
            yield Way((read_ask(exchange.principal, name),))

    def intent(self, wanted: RetrieveRequest) -> tuple[Denial | None, str | None]:
        """Whether the request's intent is out of the editorial scope, and the source it picks:
        both follow from its intent and named source alone, so each is worked out once."""
        key = (wanted.intent_domains, wanted.source)
        found = self._intents.get(key)
        if found is None:
            found = (scope_refusal(self.aip, wanted), pick_source(self.aip, wanted))
            self._intents.put(key, found)
        return found

    def cut(self, source: CompiledSource, hits: list[Hit], query: str) -> tuple[list[Chunk], int]:
        """The chunks an answer carries, cut from the hits' texts within the limits, and how
        many texts gave none because they are too short to return but whole."""
        retrieval = self.aip.retrieval
        whole = retrieval.supports.full_article or not source.whole_articles
        key = (texts(hits), query, whole)
        found = self._chosen.get(key)
        if found is None:
            articles = [self.cutter.cut(Piece(*text)) for text in key[0]]
            chosen = tuple(select(articles, query, self.limits, whole))
            found = chosen, withheld_whole(articles, whole)
            self._chosen.put(key, found, _chosen_size(key[0], query, chosen))
        return list(found[0]), found[1]

    async def record_access(self, wanted: RetrieveRequest, chunks: list[Chunk]) -> None:
        """Recorded before the content leaves: no record, no content. The request id is issued
        first, so a failure there leaves no access event for content never sent."""
        if self.ledger is not None:
            await self.ledger.issue(wanted.platform, wanted.request_id)
        if self.sink is None:
            return
        publisher = self.aip.publisher
        event = access_event(
            request_id=wanted.request_id, publisher_id=publisher.id,
            publisher_domain=publisher.domain, platform_id=wanted.platform_id,
            chunks_returned=len(chunks), token_count=sum(c.token_count for c in chunks))
        await store_event(self.sink, event)


INTENTS_KEPT = 1024  # (intent, source named) pairs a retriever remembers the scope of
CHOSEN_ENTRIES = 1024  # answers a retriever remembers the chunks of
CHOSEN_BYTES = 4 * 1024 * 1024  # their size, about (texts often shared with the cutter's)


def _chosen_size(cut_from: tuple[Text, ...], query: str, chosen: tuple[Chunk, ...]) -> int:
    return 200 + len(query) + 100 * len(chosen) + sum(
        100 + len(text) + len(url or "") + len(title or "") for _, text, url, title in cut_from)


class Retrieval:
    """One retrieve as the pipeline runs it (`pipeline.CollectingSurface`), in the spec's order
    of decisions: access and scope as it is parsed; the policy packs' `aip_retrieve` rules (the
    query's ask) and who reads the source, by the policy stage; what the publisher can serve
    before any upstream call; then the source's hits the caller may see, cut into chunks."""

    name = "aip"

    def __init__(self, retriever: Retriever, answer: AipAnswer) -> None:
        self.retriever = retriever
        self.answer = answer
        self.chunks: list[Chunk] = []
        self.withheld = 0  # texts too short to return but whole (full_article: false)
        self.source: str | None = None  # the source the intent picks (`pick_source`)

    @property
    def wanted(self) -> RetrieveRequest:
        """The retrieve request as admission read it; one it could not read is refused (as it
        is parsed)."""
        if self.answer.retrieve is None:
            raise self.answer.problem or invalid("The request could not be read.")
        return self.answer.retrieve

    async def parse(self, request: Request, ctx: RequestContext) -> Query:
        wanted, aip = self.wanted, self.retriever.aip
        out_of_scope, self.source = self.retriever.intent(wanted)
        denial = access_refusal(aip, datetime.now(UTC).date()) or out_of_scope
        if denial is not None:
            raise Denied(denial)
        return Query(
            text=wanted.query_text, top_k=self.retriever.limits.max_chunks,
            collection=self.source,
            asks=(Ask("aip_retrieve", "retrieve", ctx.principal, {
                "platform": wanted.platform, "placement": wanted.placement, "uses": wanted.uses}),))

    async def collect(self, query: Query, ctx: RequestContext, stages: Stages) -> list[Hit]:
        """The hits the caller may see, within the request's latency budget; their chunks are
        cut and the access recorded here, before anything is rendered."""
        wanted, retriever = self.wanted, self.retriever
        denial = unsupported(retriever.aip, wanted, self.source)
        if denial is not None:
            raise Denied(denial)
        source = retriever.sources[query.collection or ""]
        budget = wanted.latency_budget_ms
        reading = read_hits(source, query.text or "", query.top_k, stages)
        try:
            if budget is None:  # no timer to arm (each upstream call has its own)
                hits = await reading
            else:
                async with asyncio.timeout(budget / 1000):
                    hits = await reading
        except TimeoutError:
            ctx.upstream_error = "timeout"
            raise errors.upstream_timeout() from None
        self.chunks, self.withheld = retriever.cut(source, hits, query.text or "")
        await retriever.record_access(wanted, self.chunks)
        return hits

    def render(self, query: Query, hits: list[Hit], ctx: RequestContext) -> Response:
        aip = self.retriever.aip
        return render.ok(self.wanted.request_id, self.chunks, aip.publisher.name,
                         self.retriever.limits, aip.retrieval.supports.citations,
                         self.withheld)


def routes(aip: Aip, sources: dict[str, CompiledSource], policy: AipPolicy,
           wiring: Wiring) -> list[SurfaceRoute]:
    gate, sink, ledger = wiring.gate, wiring.sink, wiring.ledger
    retriever = Retriever(aip, sources, policy, gate, sink, ledger)
    served = [SurfaceRoute(aip.retrieve_path, retriever.handle, methods=["POST"],
                           name="aip.retrieve", admission=Admission.BODY_FIRST,
                           body_first=RetrieveAdmission(aip, gate),
                           ways=retriever.readable_sources)]
    if aip.event is not None and sink is not None and ledger is not None:
        intake = EventIntake(aip, gate, sink, ledger)
        served.append(SurfaceRoute(aip.event.path, intake.handle, methods=["POST"],
                                   name="aip.event", admission=Admission.BODY_FIRST,
                                   body_first=SignedAdmission(gate, intake.max_bytes)))
    return served
