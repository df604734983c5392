"""Traces: a small facade over OpenTelemetry that costs nothing while tracing is off, and
next to nothing for a request its sampler leaves out.

`gateway.telemetry.start` turns it on at process start. Until then every function here returns
at once and no OpenTelemetry object is made per request. While on, a trace's sampling is
decided before any span is made (the SDK's own sampler, asked once with the trace id the trace
will have): a sampled request gets SDK spans; an unsampled one gets none, only the ids its
`traceparent` carries upstream (sampled flag clear) and its log lines name. Attributes follow
the OpenTelemetry HTTP semantic conventions plus the `aigw.*` set documented in the README;
callers pass ids, names and codes only, never a token, a key, a body or a field value.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.context import Context, attach, detach, get_current
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.sdk.trace.sampling import ParentBased, Sampler, TraceIdRatioBased
from opentelemetry.trace import (
    INVALID_SPAN_CONTEXT,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
    TraceState,
    format_span_id,
    format_trace_id,
    get_current_span,
    use_span,
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
_NO_CONTEXT = Context()
_ID_LIMIT = TraceIdRatioBased.TRACE_ID_LIMIT  # the bits of a trace id a ratio decides on


class TraceIds(RandomIdGenerator):
    """The SDK's random ids, except that a root span made right after `preset` takes the
    preset trace id: the one its sampling was decided on (a ratio sampler decides on the id)."""

    def __init__(self) -> None:
        self._next = threading.local()

    def preset(self, trace_id: int | None) -> None:
        self._next.trace_id = trace_id

    def generate_trace_id(self) -> int:
        preset = getattr(self._next, "trace_id", None)
        if preset is not None:
            self._next.trace_id = None
            return int(preset)
        return super().generate_trace_id()

    random_trace_id = RandomIdGenerator.generate_trace_id  # never the preset one


class RatioSampler(ParentBased):
    """`ParentBased(TraceIdRatioBased(ratio))`, the sampler the `tracing` config makes, whose
    decision the facade takes without building the SDK's sampling result (about 1 µs)."""

    def __init__(self, ratio: float) -> None:
        self.bound = TraceIdRatioBased(ratio).bound
        super().__init__(TraceIdRatioBased(ratio))

    def decide(self, parent: SpanContext, continued: bool, trace_id: int) -> bool:
        """What `should_sample` decides: the sampled flag of the parent a trace continues
        (ParentBased's default delegates), else whether the trace id is under the bound."""
        if continued:
            return parent.trace_flags.sampled
        return trace_id & _ID_LIMIT < self.bound


@dataclass(frozen=True, slots=True)
class _State:
    tracer: Tracer
    sampler: Sampler
    ids: IdGenerator
    new_trace_id: Callable[[], int]
    root_flags: int  # of a new trace: random-trace-id when the ids are random (W3C level 2)
    bound: int | None  # a RatioSampler's: a new trace is sampled when its id is under it
    accept: Literal["trusted", "all", "none"]
    baggage: bool


class _Unsampled:
    """A trace the sampler left out, current while its block runs: no span, only the ids and
    trace state its trace context carries upstream and its log lines name."""

    __slots__ = ("flags", "parent", "span_id", "token", "trace_id", "trace_state")

    def __init__(self, trace_id: int, span_id: int, flags: int,
                 trace_state: TraceState | None, parent: Context) -> None:
        self.trace_id, self.span_id, self.flags = trace_id, span_id, flags  # flags: unsampled
        self.trace_state, self.parent = trace_state, parent  # parent: its baggage travels on
        self.token: Token[_Unsampled | None] | None = None

    def __enter__(self) -> None:
        self.token = _unsampled.set(self)

    def __exit__(self, *exc: object) -> None:
        if self.token is not None:
            _unsampled.reset(self.token)


_state: _State | None = None
# Set while an unsampled request (or background task) runs: every span call is then a no-op.
_unsampled: ContextVar[_Unsampled | None] = ContextVar("aigw_unsampled", default=None)


def install(tracer: Tracer | None, accept: Literal["trusted", "all", "none"] = "trusted",
            baggage: bool = False) -> None:
    """Route spans to `tracer`, an SDK tracer (None: tracing off); the facade asks its
    sampler before making a span. Called by `gateway.telemetry`."""
    global _state
    if tracer is None:
        _state = None
        return
    sampler, ids = getattr(tracer, "sampler", None), getattr(tracer, "id_generator", None)
    if not isinstance(sampler, Sampler) or not isinstance(ids, IdGenerator):
        raise TypeError("tracing needs an OpenTelemetry SDK tracer")
    new_trace_id = ids.random_trace_id if isinstance(ids, TraceIds) else ids.generate_trace_id
    root_flags = TraceFlags.RANDOM_TRACE_ID if ids.is_trace_id_random() else 0
    bound = sampler.bound if isinstance(sampler, RatioSampler) else None
    _state = _State(tracer, sampler, ids, new_trace_id, root_flags, bound, accept, baggage)


def enabled() -> bool:
    return _state is not None


def recording() -> bool:
    """Whether the current request's spans are recorded (tracing on and the trace sampled)."""
    return _state is not None and _unsampled.get() is None


def request_span(method: str, scope: Scope, trusted: bool,
                 attributes: Attributes | Callable[[], Attributes],
                 ) -> contextlib.AbstractContextManager[Any]:
    """The server span of one request: the caller's trace when it may continue one, else a
    new trace. Renamed and completed with `finish_request` before it ends. `attributes` may
    be a function making them, called only when they are needed (the request is sampled)."""
    if _state is None:
        return OFF
    remote = _incoming_context(scope["headers"], trusted)
    if remote is _NO_CONTEXT and _state.bound is not None:
        return _new_trace(_state, method, attributes)
    return _start(method, SpanKind.SERVER, attributes, remote)


def finish_request(name: str, attributes: Attributes, server_error: bool) -> None:
    """Name the current server span after its route and set what is known only at the end."""
    if _state is None or _unsampled.get() is not None:
        return
    current = get_current_span()
    current.update_name(name)
    current.set_attributes(attributes)
    if server_error:  # 4xx are the client's doing, not a failure of the server span
        current.set_status(Status(StatusCode.ERROR))


def span(name: str, attributes: Attributes | None = None) -> contextlib.AbstractContextManager[Any]:
    """A child span (a pipeline stage) of the current span; a shared no-op while off or
    while the trace is unsampled."""
    if _state is None or _unsampled.get() is not None:
        return OFF
    return _start(name, SpanKind.INTERNAL, attributes or {})


def upstream_span(method: str, url: str, upstream: str) -> contextlib.AbstractContextManager[Any]:
    """The client span of one upstream call (`url` without its query, which may carry a search
    text or a credential); end it with `upstream_status` once the status is known."""
    if _state is None or _unsampled.get() is not None:
        return OFF
    parts = urlsplit(url)
    attributes: dict[str, Any] = {
        "http.request.method": method if method in _METHODS else "_OTHER",
        "url.full": parts._replace(query="", fragment="").geturl(),
        "server.address": parts.hostname or "", "aigw.upstream": upstream,
    }
    attributes["server.port"] = parts.port or (443 if parts.scheme == "https" else 80)
    return _start(method, SpanKind.CLIENT, attributes)


def upstream_status(status: int) -> None:
    """Record the upstream's status on the current client span; 4xx and 5xx mark it failed."""
    if _state is None or _unsampled.get() is not None:
        return
    current = get_current_span()
    current.set_attribute("http.response.status_code", status)
    if status >= 400:
        current.set_attribute("error.type", str(status))
        current.set_status(Status(StatusCode.ERROR))


def annotate(attributes: Attributes) -> None:
    """Add attributes to the current span (a stage's outcome, a cache hit, a rule name)."""
    if _state is None or _unsampled.get() is not None:
        return
    get_current_span().set_attributes(attributes)


def outgoing_headers() -> RawHeaders:
    """`traceparent` and `tracestate` of the current span (and `baggage` when configured),
    for an upstream request; nothing while tracing is off."""
    if _state is None:
        return []
    unsampled = _unsampled.get()
    if unsampled is not None:
        return _unsampled_headers(unsampled, _state.baggage)
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
    unsampled = _unsampled.get()
    if unsampled is not None:
        return format_trace_id(unsampled.trace_id), format_span_id(unsampled.span_id)
    context = get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format_trace_id(context.trace_id), format_span_id(context.span_id)


def exemplar() -> dict[str, str] | None:
    """Labels linking a metric observation to the current trace, when that trace is sampled."""
    if _state is None or _unsampled.get() is not None:
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
        return _NO_CONTEXT  # a fresh trace, whatever the caller sent
    carrier: dict[str, str] = {}
    for name, value in headers:
        if name in CONTEXT_FIELDS:
            key = name.decode("latin-1")
            # Repeated fields combine as a list (RFC 9110 §5.3); traceparent must not repeat.
            text = value.decode("latin-1")
            carrier[key] = f"{carrier[key]},{text}" if key in carrier else text
    if not carrier:
        return _NO_CONTEXT
    context = _TRACE_CONTEXT.extract(carrier, Context())
    if _state.baggage:
        context = _BAGGAGE.extract(carrier, context)
    return context


def _start(name: str, kind: SpanKind, attributes: Attributes | Callable[[], Attributes],
           remote: Context | None = None) -> contextlib.AbstractContextManager[Any]:
    """A span in the caller's `remote` context (a server span) or in the current one. Within
    a recorded trace the SDK makes it; at the root of a trace (a request, or work outside
    any request) the sampler is asked first, and an unsampled trace gets no SDK span."""
    assert _state is not None
    context = get_current() if remote is None else remote
    parent = INVALID_SPAN_CONTEXT if context is _NO_CONTEXT \
        else get_current_span(context).get_span_context()
    continued = parent.is_valid
    if remote is None and continued:
        return _span(name, kind, _made(attributes))
    trace_id = parent.trace_id if continued else _state.new_trace_id()
    sampler = _state.sampler
    if isinstance(sampler, RatioSampler):
        recorded = sampler.decide(parent, continued, trace_id)
        trace_state: TraceState | None = parent.trace_state if continued else None
    else:
        attributes = _made(attributes)
        decided = sampler.should_sample(context, trace_id, name, kind, attributes)
        recorded, trace_state = decided.decision.is_recording(), decided.trace_state
    if recorded:
        return _span(name, kind, _made(attributes), remote, None if continued else trace_id)
    flags = parent.trace_flags & TraceFlags.RANDOM_TRACE_ID if continued else _state.root_flags
    return _Unsampled(trace_id, _state.ids.generate_span_id(), flags, trace_state, context)


def _new_trace(state: _State, name: str, attributes: Attributes | Callable[[], Attributes],
               ) -> contextlib.AbstractContextManager[Any]:
    """A request that starts a trace, sampled by the config's ratio: `_start`'s decision for
    it in a few steps (the common case: every request of a caller sending no context)."""
    assert state.bound is not None
    trace_id = state.new_trace_id()
    if trace_id & _ID_LIMIT < state.bound:
        return _span(name, SpanKind.SERVER, _made(attributes), _NO_CONTEXT, trace_id)
    return _Unsampled(trace_id, state.ids.generate_span_id(), state.root_flags, None,
                      _NO_CONTEXT)


def _made(attributes: Attributes | Callable[[], Attributes]) -> Attributes:
    return attributes() if callable(attributes) else attributes


def _unsampled_headers(unsampled: _Unsampled, baggage: bool) -> RawHeaders:
    """What `TraceContextTextMapPropagator` would write for the unsampled trace's span."""
    traceparent = b"00-%032x-%016x-%02x" % (unsampled.trace_id, unsampled.span_id,
                                            unsampled.flags)
    fields = [(b"traceparent", traceparent)]
    if unsampled.trace_state:
        fields.append((b"tracestate", unsampled.trace_state.to_header().encode("latin-1")))
    if baggage:
        carrier: dict[str, str] = {}
        _BAGGAGE.inject(carrier, unsampled.parent)
        fields.extend((name.encode("latin-1"), value.encode("latin-1"))
                      for name, value in carrier.items())
    return fields


@contextlib.contextmanager
def _span(name: str, kind: SpanKind, attributes: Attributes, remote: Context | None = None,
          preset: int | None = None) -> Iterator[Any]:
    """An SDK span (in `remote`, the caller's context, when given; a root one takes the
    `preset` trace id) that records what failed as a code, never an exception message or
    traceback."""
    assert _state is not None
    token = None if remote is None else attach(remote)
    try:
        current = _sdk_span(_state, name, kind, attributes, preset)
        with use_span(current, end_on_exit=True, record_exception=False,
                      set_status_on_exception=False):
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
    finally:
        if token is not None:
            detach(token)


def _sdk_span(state: _State, name: str, kind: SpanKind, attributes: Attributes,
              preset: int | None) -> Any:
    """The SDK's span; a root takes the trace id it was sampled on when the provider's ids
    are `TraceIds` (as `gateway.telemetry` makes them), else the SDK draws and samples anew."""
    ids = state.ids if isinstance(state.ids, TraceIds) else None
    if ids is not None:
        ids.preset(preset)
    try:
        return state.tracer.start_span(name, kind=kind, attributes=attributes,
                                       record_exception=False, set_status_on_exception=False)
    finally:
        if ids is not None:
            ids.preset(None)
