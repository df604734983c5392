"""`POST` citation events (aip.json `endpoints.event`): admitted like retrieve, bounded in
size, checked against access-citation-event.schema.json (422 names the failing field), bound to
a request this gateway answered to the same platform (and to the signing key's platform when
signed), stored once per platform and event_id, then stored in the sink."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from starlette.responses import Response

from gateway.errors import GatewayError
from gateway.exchange import Exchange
from gateway.surfaces.aip import render
from gateway.surfaces.aip.body import parse_json
from gateway.surfaces.aip.config import Aip
from gateway.surfaces.aip.events import EventSink, EventSinkUnavailable, citation_problem
from gateway.surfaces.aip.gate import Gate, check_platform
from gateway.surfaces.aip.ledger import Claim, EventLedger, events_unavailable
from gateway.surfaces.aip.names import normal_name
from gateway.surfaces.aip.request import readable_request_id
from gateway.surfaces.aip.signed import AipAnswer, answer_of, content_type


async def store_event(sink: EventSink, event: dict[str, Any]) -> None:
    """Store one event; an outage is the caller's 503, never a silently lost event."""
    try:
        await sink.emit(event)
    except EventSinkUnavailable:
        raise events_unavailable() from None


def invalid_event(field: str, message: str) -> GatewayError:
    return GatewayError(422, "invalid_event", f"{field}: {message}", {"field": field})


def duplicate_event() -> GatewayError:
    return GatewayError(409, "duplicate_event",
                        "event_id: already used by this platform for a different event",
                        {"field": "event_id"})


class EventIntake:
    def __init__(self, aip: Aip, gate: Gate, sink: EventSink, ledger: EventLedger) -> None:
        self.aip = aip
        self.gate = gate
        self.sink = sink
        self.ledger = ledger
        self.max_bytes = aip.event.max_bytes if aip.event is not None else 64 * 1024

    async def handle(self, exchange: Exchange) -> Response:
        """An admitted event (the pipeline read its body, verified or authenticated the
        caller, and counted it), stored once; the answer is signed like any other."""
        answer = answer_of(exchange, self.gate)
        response = await self._accept(exchange, answer)
        return self.gate.sign(answer.verified, exchange.request.scope, response)

    async def _accept(self, exchange: Exchange, answer: AipAnswer) -> Response:
        event, problem = parse_json(exchange.body or b"", content_type(exchange.request))
        answer.request_id = readable_request_id(event) or answer.request_id
        if problem is not None:
            raise problem
        self._check(event)
        platform = normal_name(event["platform"]["id"])
        check_platform(answer.verified, platform)
        if not await self.ledger.issued(platform, event["request_id"]):
            raise invalid_event("request_id", "no request with this id was answered to "
                                "this platform within the retention window")
        await self._store_once(platform, event)
        return render.accepted(answer.request_id, event["event_id"])

    def _check(self, event: Any) -> None:
        problem = citation_problem(event)
        if problem is not None:
            raise invalid_event(*problem)
        if event["publisher"]["id"] != self.aip.publisher.id:
            raise invalid_event("publisher.id", f"expected {self.aip.publisher.id!r}")

    async def _store_once(self, platform: str, event: dict[str, Any]) -> None:
        """Stored once per (platform, event_id). The same event posted again (a retry after a
        lost answer) is accepted again without a second copy; a different event under an id
        already used is refused, 409."""
        digest = hashlib.sha256(orjson.dumps(event, option=orjson.OPT_SORT_KEYS)).digest()
        claim = await self.ledger.claim(platform, event["event_id"], digest)
        if claim is Claim.CONFLICT:
            raise duplicate_event()
        if claim is Claim.RETRY:
            return
        try:
            await store_event(self.sink, event)
        except GatewayError:
            await self.ledger.release(platform, event["event_id"])
            raise
