"""`POST` citation events (aip.json `endpoints.event`): authenticated like retrieve, checked
against access-citation-event.schema.json (422 names the failing field), then stored."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from gateway.context import RequestContext
from gateway.errors import GatewayError
from gateway.surfaces.aip import render
from gateway.surfaces.aip.body import parse_json
from gateway.surfaces.aip.config import Aip
from gateway.surfaces.aip.events import EventSink, EventSinkUnavailable, citation_problem
from gateway.surfaces.aip.gate import Gate
from gateway.surfaces.aip.request import readable_request_id
from gateway.surfaces.aip.signed import SignedEndpoint
from gateway.surfaces.aip.signing import VerifiedKey


def events_unavailable() -> GatewayError:
    return GatewayError(503, "events_unavailable", "Events cannot be stored; retry later.")


async def store_event(sink: EventSink, event: dict[str, Any]) -> None:
    """Store one event; an outage is the caller's 503, never a silently lost event."""
    try:
        await sink.emit(event)
    except EventSinkUnavailable:
        raise events_unavailable() from None


def invalid_event(field: str, message: str) -> GatewayError:
    return GatewayError(422, "invalid_event", f"{field}: {message}", {"field": field})


class EventIntake(SignedEndpoint):
    def __init__(self, aip: Aip, gate: Gate, sink: EventSink) -> None:
        self.aip = aip
        self.gate = gate
        self.sink = sink

    async def _handle(self, request: Request, ctx: RequestContext,
                      generation: Any) -> tuple[Response, VerifiedKey | None]:
        request_id, verified = ctx.request_id, None
        try:
            raw, verified = await self._admitted_body(request, ctx, generation)
            await generation.pipeline.limit(ctx)
            event, problem = parse_json(raw, request.headers.get("content-type", ""))
            request_id = readable_request_id(event) or request_id
            if problem is not None:
                raise problem
            self._check(event)
            await store_event(self.sink, event)
            return render.accepted(request_id, event["event_id"]), verified
        except GatewayError as error:
            ctx.error_code = error.code
            return render.error(request_id, error), verified

    def _check(self, event: Any) -> None:
        problem = citation_problem(event)
        if problem is not None:
            raise invalid_event(*problem)
        if event["publisher"]["id"] != self.aip.publisher.id:
            raise invalid_event("publisher.id", f"expected {self.aip.publisher.id!r}")
