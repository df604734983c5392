"""The tracing switch, the bounded export queue, and the facade while tracing is off."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from gateway import telemetry, tracing
from gateway.observability import TRACE_SPANS_DROPPED
from gateway.settings import Tracing


class StuckExporter(SpanExporter):
    """A collector that never answers until released."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.release.wait(10)
        return SpanExportResult.SUCCESS


@pytest.mark.parametrize(("config", "environ", "on"), [
    ({}, {}, False),
    ({}, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
    ({}, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
    ({"enabled": True}, {}, True),
    ({"enabled": False}, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, False),
    ({"enabled": True}, {"OTEL_SDK_DISABLED": "true"}, False),
    ({"enabled": True}, {"OTEL_TRACES_EXPORTER": "none"}, False),
])
def test_tracing_is_off_unless_the_config_or_the_environment_asks(config, environ, on):
    assert telemetry.wanted(Tracing(**config), environ) is on


def test_a_full_export_queue_drops_and_counts_instead_of_waiting():
    exporter = StuckExporter()
    batch = BatchSpanProcessor(exporter, max_queue_size=2, max_export_batch_size=1,
                               schedule_delay_millis=10)
    provider = TracerProvider()
    provider.add_span_processor(telemetry.DropCounter(batch))
    tracer = provider.get_tracer("test")
    before = TRACE_SPANS_DROPPED._value.get()
    for index in range(20):  # the exporter holds one batch; the queue takes two more
        tracer.start_span(f"s{index}").end()
    assert TRACE_SPANS_DROPPED._value.get() - before >= 15
    exporter.release.set()
    provider.shutdown()


def test_the_facade_does_nothing_while_tracing_is_off():
    tracing.install(None)
    assert tracing.span("aigw.render") is tracing.OFF
    assert tracing.request_span("GET", {"headers": []}, True, {}) is tracing.OFF
    assert tracing.outgoing_headers() == [] and tracing.owned_fields() == frozenset()
    assert tracing.current_ids() is None and tracing.exemplar() is None


def test_current_ids_name_the_current_span_while_tracing_is_on():
    provider = TracerProvider()
    tracing.install(provider.get_tracer("test"))
    try:
        with tracing.request_span("GET", {"headers": []}, False, {}) as server:
            trace_id, span_id = tracing.current_ids()
            assert int(trace_id, 16) == server.get_span_context().trace_id
            assert int(span_id, 16) == server.get_span_context().span_id
            [(name, value)] = tracing.outgoing_headers()
            assert name == b"traceparent" and trace_id in value.decode()
    finally:
        tracing.install(None)
        provider.shutdown()
