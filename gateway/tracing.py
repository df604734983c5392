"""Traces: a small facade over OpenTelemetry that costs nothing while tracing is off.

`gateway.telemetry.start` turns it on at process start. Until then every function here returns
at once and no OpenTelemetry object is made per request. Attributes follow the OpenTelemetry
HTTP semantic conventions plus the `aigw.*` set documented in the README; callers pass ids,
names and codes only, never a token, a key, a body or a field value.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.context import Context, attach, detach
from opentelemetry.trace import (
    SpanKind,
    Status,
    StatusCode,
    Tracer,
    format_span_id,
    format_trace_id,
    get_current_span,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from gateway import errors
from gateway.asgi import RawHeaders, Scope

Attributes = Mapping[str, str | int | float | bool | tuple[str, ...]]
# W3C Trace Context and Baggage: the gateway owns these fields on upstream requests.
CONTEXT_FIELDS = frozenset({b"traceparent", b"tracestate", b"baggage"})
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
OFF: contextlib.nullcontext[None] = contextlib.nullcontext()
_TRACE_CONTEXT = TraceContextTextMapPropagator()
_BAGGAGE = W3CBaggagePropagator()


@dataclass(frozen=True, slots=True)
class _State:
    tracer: Tracer
    accept: Literal["trusted", "all", "none"]
    baggage: bool


_state: _State | None = None


def install(tracer: Tracer | None, accept: Literal["trusted", "all", "none"] = "trusted",
            baggage: bool = False) -> None:
    """Route spans to `tracer` (None: tracing off). Called by `gateway.telemetry`."""
    global _state
    _state = None if tracer is None else _State(tracer, accept, baggage)


def enabled() -> bool:
    return _state is not None


def request_span(method: str, scope: Scope, trusted: bool,
                 attributes: Attributes) -> contextlib.AbstractContextManager[Any]:
    """The server span of one request: the caller's trace when it may continue one, else a
    new trace. Renamed and completed with `finish_request` before it ends."""
    if _state is None:
        return OFF
    return _server_span(method, _incoming_context(scope["headers"], trusted), attributes)


def finish_request(name: str, attributes: Attributes, server_error: bool) -> None:
    """Name the current server span after its route and set what is known only at the end."""
    if _state is None:
        return
    current = get_current_span()
    current.update_name(name)
    current.set_attributes(attributes)
    if server_error:  # 4xx are the client's doing, not a failure of the server span
        current.set_status(Status(StatusCode.ERROR))


def span(name: str, attributes: Attributes | None = None) -> contextlib.AbstractContextManager[Any]:
    """A child span (a pipeline stage) of the current span; a shared no-op while off."""
    if _state is None:
        return OFF
    return _span(name, SpanKind.INTERNAL, attributes or {})


def upstream_span(method: str, url: str, upstream: str) -> contextlib.AbstractContextManager[Any]:
    """The client span of one upstream call (`url` without its query, which may carry a search
    text or a credential); end it with `upstream_status` once the status is known."""
    if _state is None:
        return OFF
    parts = urlsplit(url)
    attributes: dict[str, Any] = {
        "http.request.method": method if method in _METHODS else "_OTHER",
        "url.full": parts._replace(query="", fragment="").geturl(),
        "server.address": parts.hostname or "", "aigw.upstream": upstream,
    }
    attributes["server.port"] = parts.port or (443 if parts.scheme == "https" else 80)
    return _span(method, SpanKind.CLIENT, attributes)


def upstream_status(status: int) -> None:
    """Record the upstream's status on the current client span; 4xx and 5xx mark it failed."""
    if _state is None:
        return
    current = get_current_span()
    current.set_attribute("http.response.status_code", status)
    if status >= 400:
        current.set_attribute("error.type", str(status))
        current.set_status(Status(StatusCode.ERROR))


def annotate(attributes: Attributes) -> None:
    """Add attributes to the current span (a stage's outcome, a cache hit, a rule name)."""
    if _state is None:
        return
    get_current_span().set_attributes(attributes)


def outgoing_headers() -> RawHeaders:
    """`traceparent` and `tracestate` of the current span (and `baggage` when configured),
    for an upstream request; nothing while tracing is off."""
    if _state is None:
        return []
    carrier: dict[str, str] = {}
    _TRACE_CONTEXT.inject(carrier)
    if _state.baggage:
        _BAGGAGE.inject(carrier)
    return [(name.encode("latin-1"), value.encode("latin-1")) for name, value in carrier.items()]


def owned_fields() -> frozenset[bytes]:
    """Incoming fields a proxy must drop because `outgoing_headers` replaces them: none while
    tracing is off (the gateway is then transparent to the caller's trace context)."""
    return CONTEXT_FIELDS if _state is not None else frozenset()


def current_ids() -> tuple[str, str] | None:
    """(trace id, span id) of the current span as 32 and 16 hex digits, or None when tracing
    is off or no span is current. For log lines that should link to the trace."""
    if _state is None:
        return None
    context = get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format_trace_id(context.trace_id), format_span_id(context.span_id)


def exemplar() -> dict[str, str] | None:
    """Labels linking a metric observation to the current trace, when that trace is sampled."""
    if _state is None:
        return None
    context = get_current_span().get_span_context()
    if not (context.is_valid and context.trace_flags.sampled):
        return None
    return {"trace_id": format_trace_id(context.trace_id),
            "span_id": format_span_id(context.span_id)}


def _incoming_context(headers: RawHeaders, trusted: bool) -> Context:
    """The caller's trace context when the config lets this caller continue a trace."""
    assert _state is not None
    if _state.accept == "none" or (_state.accept == "trusted" and not trusted):
        return Context()  # a fresh trace, whatever the caller sent
    carrier: dict[str, str] = {}
    for name, value in headers:
        if name in CONTEXT_FIELDS:
            key = name.decode("latin-1")
            # Repeated fields combine as a list (RFC 9110 §5.3); traceparent must not repeat.
            text = value.decode("latin-1")
            carrier[key] = f"{carrier[key]},{text}" if key in carrier else text
    context = _TRACE_CONTEXT.extract(carrier, Context())
    if _state.baggage:
        context = _BAGGAGE.extract(carrier, context)
    return context


@contextlib.contextmanager
def _server_span(name: str, parent: Context, attributes: Attributes) -> Iterator[Any]:
    """The server span, current within the caller's context (whose baggage travels on)."""
    token = attach(parent)
    try:
        with _span(name, SpanKind.SERVER, attributes) as current:
            yield current
    finally:
        detach(token)


@contextlib.contextmanager
def _span(name: str, kind: Any, attributes: Attributes) -> Iterator[Any]:
    """A span that records what failed as a code, never an exception message or traceback."""
    assert _state is not None
    with _state.tracer.start_as_current_span(
        name, kind=kind, attributes=attributes,
        record_exception=False, set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except errors.GatewayError as error:
            if error.status >= 500:
                current.set_attributes({"error.type": error.code})
                current.set_status(Status(StatusCode.ERROR))
            else:
                current.set_attribute("aigw.denial_reason", error.code)
            raise
        except BaseException as exc:
            current.set_attribute("error.type", type(exc).__name__)
            current.set_status(Status(StatusCode.ERROR))
            raise
