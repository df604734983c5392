"""Start and stop the OpenTelemetry SDK from the `tracing` settings (at process start only).

Spans are exported by the SDK's batch processor on its own thread: a request only appends its
ended spans to a bounded queue, which drops (and counts) when full, so a slow or unreachable
collector never slows a request.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ParentBased

from gateway import tracing
from gateway.observability import TRACE_EXPORTS, TRACE_SPANS_DROPPED
from gateway.settings import Tracing

log = logging.getLogger("aigw.telemetry")
_SHUTDOWN_SECONDS = 5.0
_DEFAULT_BATCH = 512
_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def wanted(settings: Tracing, environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """Whether to trace: the config says so, or it is silent and an OTLP endpoint is set."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    if settings.enabled is not None:
        return settings.enabled
    return any(environ.get(name) for name in _ENDPOINT_VARIABLES)


def start(settings: Tracing) -> TracerProvider | None:
    """Install a tracer when tracing is wanted; the provider, for `stop`, or None."""
    if not wanted(settings):
        tracing.install(None)
        return None
    provider = provider_for(settings)
    exporter = OTLPSpanExporter(endpoint=settings.endpoint, headers=settings.headers or None,
                                timeout=settings.timeout)
    batch_size = settings.max_export_batch_size
    if settings.max_queue_size is not None and batch_size is None:  # a small queue, one batch
        batch_size = min(settings.max_queue_size, _DEFAULT_BATCH)
    batch = BatchSpanProcessor(
        CountingExporter(exporter), max_queue_size=settings.max_queue_size,
        max_export_batch_size=batch_size,
        schedule_delay_millis=None if settings.schedule_delay is None
        else settings.schedule_delay * 1000,
    )
    provider.add_span_processor(DropCounter(batch))
    install_tracer(provider, settings)
    log.info("tracing on")
    return provider


def provider_for(settings: Tracing) -> TracerProvider:
    """A tracer provider with the configured sampler and the facade's id generator (without
    a span processor)."""
    return TracerProvider(resource=_resource(settings), sampler=_sampler(settings),
                          id_generator=tracing.TraceIds())


def install_tracer(provider: TracerProvider, settings: Tracing) -> None:
    """Point the facade at `provider`, whose sampler it asks before making any span."""
    tracing.install(provider.get_tracer("aigw", _version()), settings.accept_context,
                    settings.baggage)


def stop(provider: TracerProvider | None) -> None:
    """Export what is queued, waiting at most a few seconds (the collector may be down)."""
    tracing.install(None)
    if provider is None:
        return
    worker = threading.Thread(target=provider.shutdown, name="aigw-trace-shutdown", daemon=True)
    worker.start()
    worker.join(_SHUTDOWN_SECONDS)
    if worker.is_alive():
        log.warning("trace export did not finish before shutdown; queued spans are lost")


class CountingExporter(SpanExporter):
    """Counts exported and failed spans in the gateway's metrics."""

    def __init__(self, inner: SpanExporter) -> None:
        self._inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self._inner.export(spans)
        ok = result is SpanExportResult.SUCCESS
        TRACE_EXPORTS.labels("success" if ok else "failure").inc(len(spans))
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


class DropCounter(SpanProcessor):
    """The batch processor in front, counting each span it drops because its queue is full."""

    def __init__(self, batch: BatchSpanProcessor) -> None:
        self._batch = batch
        inner = getattr(batch, "_batch_processor", None)  # the SDK keeps its queue private
        self._queue = getattr(inner, "_queue", None)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self._batch.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        queue = self._queue
        if (queue is not None and queue.maxlen is not None and len(queue) >= queue.maxlen
                and span.context is not None and span.context.trace_flags.sampled):
            TRACE_SPANS_DROPPED.inc()
        self._batch.on_end(span)

    def shutdown(self) -> None:
        self._batch.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._batch.force_flush(timeout_millis)


def _sampler(settings: Tracing) -> ParentBased | None:
    if settings.sample_ratio is None and os.environ.get("OTEL_TRACES_SAMPLER"):
        return None  # the SDK reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG
    ratio = 1.0 if settings.sample_ratio is None else settings.sample_ratio
    return tracing.RatioSampler(ratio)


def _resource(settings: Tracing) -> Resource:
    attributes = {"service.version": _version()}
    name = settings.service_name or os.environ.get("OTEL_SERVICE_NAME") or "aigw"
    attributes["service.name"] = name
    return Resource.create(attributes)


def _version() -> str:
    try:
        return version("aigw")
    except PackageNotFoundError:
        return "0"
