"""Prometheus metrics, the JSON access log and the gateway's own structured log lines.

Access-log lines carry no query string, header, token or body: only what is safe to keep,
and the caller's subject as the one rule for logs says (gateway.personal_data).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import orjson
from prometheus_client import Counter, Gauge, Histogram

from gateway import tracing
from gateway.context import RequestContext
from gateway.personal_data import SubjectRule, logged_subject

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

REQUESTS = Counter(
    "aigw_requests_total", "Requests answered by the public listener.",
    ["surface", "method", "status"],
)
REQUEST_SECONDS = Histogram(
    "aigw_request_duration_seconds",
    "Time from request to the end of the response (exemplars: trace).",
    ["surface"], buckets=_BUCKETS,
)
UPSTREAM_SECONDS = Histogram(
    "aigw_upstream_duration_seconds",
    "Time until the upstream's response headers arrived (exemplars: trace).",
    ["upstream"], buckets=_BUCKETS,
)
UPSTREAM_ERRORS = Counter(
    "aigw_upstream_errors_total",
    "Failed upstream calls by kind (connect, timeout, protocol, status_NNN, mapping, too_large).",
    ["upstream", "kind"],
)
BODY_URL_REWRITES = Counter(
    "aigw_body_url_rewrites_total",
    "Passthrough JSON bodies of upstreams with rewrite_body_urls, by result (rewritten, "
    "unchanged, too_large, encoded, partial).", ["upstream", "result"],
)
SURFACE_UPSTREAM_URLS = Counter(
    "aigw_surface_upstream_urls_total",
    "Values naming a configured upstream's URL in answers to surface calls, by the upstream "
    "named and action (rewritten, dropped).", ["upstream", "action"],
)
CONFIG_RELOADS = Counter(
    "aigw_config_reloads_total", "Config reload attempts by result (success, failure).", ["result"],
)
CONFIG_GENERATION = Gauge("aigw_config_generation", "Number of the config generation serving.",
                          multiprocess_mode="max")
JWKS_FETCHES = Counter(
    "aigw_jwks_fetches_total", "JWKS fetches by issuer and result (success, failure).",
    ["issuer", "result"],
)
INTROSPECTIONS = Counter(
    "aigw_introspections_total", "Token introspection calls by result (active, inactive, error).",
    ["result"],
)
AUTH_FAILURES = Counter(
    "aigw_auth_failures_total", "Requests refused by authentication or scope, by error code.",
    ["code"],
)
RATE_LIMIT_DECISIONS = Counter(
    "aigw_ratelimit_decisions_total",
    "Rate-limit decisions by rule and result (allowed, limited, store_error_allow, "
    "store_error_deny).", ["rule", "result"],
)
RATE_LIMIT_STORE_ERRORS = Counter(
    "aigw_ratelimit_store_errors_total", "Rate-limit store (Redis) failures by rule.", ["rule"],
)
EDGE_REFUSALS = Counter(
    "aigw_edge_refusals_total",
    "Requests the listener refused before the app (431, 408, malformed HTTP), by code.", ["code"],
)
POLICY_DECISIONS = Counter(
    "aigw_policy_decisions_total",
    "Policy decisions by deciding rule (default:<kind> when none), effect and mode (shadow: "
    "what a shadow rule would have decided).", ["rule", "effect", "mode"],
)
POLICY_LOG_DROPPED = Counter(
    "aigw_policy_decision_log_dropped_total",
    "Decision-log lines not written, by reason (queue_full, sink_error).", ["reason"],
)
POLICY_REVISION = Gauge(
    "aigw_policy_bundle_info", "The policy bundle serving (a digest of the policy files).",
    ["revision"],
)
SCHEMA_VIOLATIONS = Counter(
    "aigw_schema_violations_total",
    "Upstream values that break the schema a surface advertises (a stream's) and were not "
    "sent: a wrong type or format left out (field_omitted), or a record skipped for its "
    "required field (record_skipped).",
    ["surface", "collection", "field", "action"],
)
INDEX_REFRESHES = Counter(
    "aigw_index_refreshes_total",
    "Background refreshes of the records the gateway keeps of an upstream (streams): ok, or "
    "failed (the last good copy keeps serving, marked stale).",
    ["surface", "collection", "outcome"],
)
IN_FLIGHT = Gauge("aigw_requests_in_flight", "Requests being handled now.",
                  multiprocess_mode="livesum")
MULTIPROCESS = "PROMETHEUS_MULTIPROC_DIR" in os.environ  # workers of `aigw run --workers`
_in_flight: list[Callable[[], int]] = []
TRACE_EXPORTS = Counter(
    "aigw_trace_spans_exported_total",
    "Spans handed to the OTLP exporter, by result (success, failure).", ["result"],
)
TRACE_SPANS_DROPPED = Counter(
    "aigw_trace_spans_dropped_total", "Spans dropped because the export queue was full.",
)

EVENT_LOOP_LAG = Histogram(
    "aigw_event_loop_lag_seconds",
    "How late the event loop ran a tick due every 0.1 s: how long other work held the loop "
    "(each process serving requests; summed over --workers).",
    buckets=_BUCKETS,
)

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class _Children:
    """A metric's children by label values, looked up once: `labels()` takes a lock and
    validates its arguments on every call. Label values here come from bounded sets."""

    def __init__(self, metric: Any) -> None:
        self._metric = metric
        self._children: dict[tuple[str, ...], Any] = {}

    def __call__(self, *values: str) -> Any:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self._metric.labels(*values)
        return child


_REQUESTS = _Children(REQUESTS)
_REQUEST_SECONDS = _Children(REQUEST_SECONDS)
_UPSTREAM_SECONDS = _Children(UPSTREAM_SECONDS)
_UPSTREAM_ERRORS = _Children(UPSTREAM_ERRORS)


def observe(ctx: RequestContext) -> float:
    """Record one finished request in the metrics; returns its duration in seconds."""
    elapsed = time.perf_counter() - ctx.started
    method = ctx.method if ctx.method in METHODS else "OTHER"  # bounded label values
    exemplar = tracing.exemplar()  # links the observation to its trace; None when off
    _REQUESTS(ctx.surface, method, str(ctx.status)).inc()
    _REQUEST_SECONDS(ctx.surface).observe(elapsed, exemplar)
    if ctx.upstream is not None:
        if ctx.upstream_seconds is not None:
            _UPSTREAM_SECONDS(ctx.upstream).observe(ctx.upstream_seconds, exemplar)
        if ctx.upstream_error is not None:
            _UPSTREAM_ERRORS(ctx.upstream, ctx.upstream_error).inc()
    return elapsed


def derive_in_flight(count: Callable[[], int]) -> None:
    """Read the in-flight gauge from `count` when scraped, instead of two updates a request.
    A worker's metrics are read from files by another process: see `publish_in_flight`."""
    _in_flight[:] = [count]
    if not MULTIPROCESS:
        IN_FLIGHT.set_function(count)


async def publish_in_flight(interval: float = 1.0) -> None:
    """In a worker, write the in-flight count for the supervisor's /metrics every interval."""
    while True:
        if _in_flight:
            IN_FLIGHT.set(_in_flight[0]())
        await asyncio.sleep(interval)


async def measure_event_loop_lag(interval: float = 0.1) -> None:
    """Observe, every `interval`, how much later than asked the loop woke this task. Anything
    that blocks the loop (CPU work, blocking I/O) delays every request of the process alike;
    this shows it. Each process serving requests runs one (see the app's lifespan)."""
    loop = asyncio.get_running_loop()
    while True:
        due = loop.time() + interval
        await asyncio.sleep(interval)
        EVENT_LOOP_LAG.observe(max(0.0, loop.time() - due))


def access_record(ctx: RequestContext, elapsed: float, subjects: SubjectRule) -> dict[str, Any]:
    """The access-log line of a request; its subject as `logging.subjects` says."""
    record: dict[str, Any] = {
        "ts": time.time(), "type": "access", "request_id": ctx.request_id,
        "method": ctx.method, "path": ctx.path, "status": ctx.status, "client": ctx.client,
        "surface": ctx.surface, "duration_ms": round(elapsed * 1000, 3),
    }
    if ctx.upstream is not None:
        record["upstream"] = ctx.upstream
        if ctx.upstream_seconds is not None:
            record["upstream_ms"] = round(ctx.upstream_seconds * 1000, 3)
    if ctx.error_code is not None:
        record["error"] = ctx.error_code
    if ctx.parent is not None:
        record["parent_request_id"] = ctx.parent
    ids = tracing.current_ids()
    if ids is not None:
        record["trace_id"], record["span_id"] = ids
    if not ctx.principal.is_anonymous:
        subject = logged_subject(ctx.principal.subject, subjects)
        if subject is not None:
            record["subject"] = subject
        record["client_id"] = ctx.principal.client_id
    return record


def write_access_log(ctx: RequestContext, elapsed: float, subjects: SubjectRule) -> None:
    sys.stdout.buffer.write(orjson.dumps(access_record(ctx, elapsed, subjects)) + b"\n")
    sys.stdout.flush()


class JsonFormatter(logging.Formatter):
    """One JSON object per line; `extra={"fields": {...}}` adds structured fields."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": record.created, "type": "log", "level": record.levelname.lower(),
            "logger": record.name, "message": record.getMessage(),
        }
        line.update(getattr(record, "fields", {}))
        ids = tracing.current_ids()  # the request's trace, for lines logged while handling one
        if ids is not None:
            line["trace_id"], line["span_id"] = ids
        if record.exc_info and record.levelno >= logging.ERROR:
            line["exception"] = record.exc_info[0].__name__ if record.exc_info[0] else None
        return orjson.dumps(line).decode()


def configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    logging.getLogger("uvicorn.access").disabled = True
    # they log every URL, query strings (tokens) included
    for chatty in ("httpx", "httpcore", "httpx2", "httpcore2"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
    logging.captureWarnings(True)  # a library's warning is a JSON line too, not raw stderr
