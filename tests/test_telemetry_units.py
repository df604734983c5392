"""The tracing switch, the bounded export queue, the facade while tracing is off, and
sampling decided before any span is made."""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    TraceFlags,
    set_span_in_context,
)

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


@pytest.fixture
def spans_at():
    """Install tracing as `telemetry.start` does, at a sample ratio, with spans kept in
    memory; yields a function (ratio, accept) -> the exporter."""
    providers = []

    def install(ratio: float, accept: str = "trusted"):
        settings = Tracing(enabled=True, sample_ratio=ratio, accept_context=accept)
        provider = telemetry.provider_for(settings)
        exporter = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        telemetry.install_tracer(provider, settings)
        providers.append(provider)
        return exporter

    yield install
    tracing.install(None)
    for provider in providers:
        provider.shutdown()


def a_request(headers=(), trusted=False):
    """The facade calls of a passthrough request; what it showed the upstream and the logs."""
    with tracing.request_span("GET", {"headers": list(headers)}, trusted, {"url.path": "/x"}):
        with tracing.span("aigw.authenticate"):
            tracing.annotate({"aigw.auth.result": "authenticated"})
        with tracing.upstream_span("GET", "http://127.0.0.1:1/x", "legacy"):
            sent = dict(tracing.outgoing_headers())
            tracing.upstream_status(200)
        ids, exemplar, recording = tracing.current_ids(), tracing.exemplar(), tracing.recording()
        tracing.finish_request("GET /x", {"http.response.status_code": 200}, False)
    return sent, ids, exemplar, recording


def test_an_unsampled_request_makes_no_span_but_carries_its_trace_context(spans_at):
    exporter = spans_at(0.0)
    sent, ids, exemplar, recording = a_request()
    assert exporter.get_finished_spans() == () and not recording and exemplar is None
    version, trace_id, span_id, flags = sent[b"traceparent"].decode().split("-")
    # What the SDK's non-recording span said: sampled clear, the trace id random (W3C level 2).
    assert (version, flags) == ("00", "02") and int(trace_id, 16) and int(span_id, 16)
    assert ids == (trace_id, span_id)  # the access log names what the upstream saw
    assert b"tracestate" not in sent
    assert tracing.current_ids() is None and tracing.recording()  # nothing left current


def test_a_trusted_callers_sampled_flag_wins_over_the_ratio(spans_at):
    exporter = spans_at(0.0)
    caller = [(b"traceparent", f"00-{'ab' * 16}-{'cd' * 8}-01".encode()),
              (b"tracestate", b"vendor=1")]
    sent, ids, exemplar, recording = a_request(caller, trusted=True)
    spans = exporter.get_finished_spans()
    assert recording and {span.name for span in spans} == {"GET /x", "aigw.authenticate", "GET"}
    assert {span.context.trace_id for span in spans} == {int("ab" * 16, 16)}
    assert exemplar == {"trace_id": "ab" * 16, "span_id": ids[1]}
    assert sent[b"tracestate"] == b"vendor=1"

    untrusted = a_request(caller, trusted=False)
    assert len(exporter.get_finished_spans()) == 3 and not untrusted[3]


def test_a_trusted_callers_unsampled_flag_is_honoured_and_passed_on(spans_at):
    exporter = spans_at(1.0)
    caller = [(b"traceparent", f"00-{'ab' * 16}-{'cd' * 8}-00".encode()),
              (b"tracestate", b"vendor=1")]
    sent, ids, _, recording = a_request(caller, trusted=True)
    assert exporter.get_finished_spans() == () and not recording
    assert sent[b"traceparent"].decode().startswith(f"00-{'ab' * 16}-")
    assert sent[b"traceparent"].decode().endswith("-00")
    assert sent[b"tracestate"] == b"vendor=1" and ids[0] == "ab" * 16


def test_a_sampled_trace_keeps_the_id_its_ratio_was_decided_on(spans_at):
    exporter = spans_at(0.25)
    bound = TraceIdRatioBased.get_bound_for_rate(0.25)
    outcomes = [a_request() for _ in range(400)]
    sampled = {int(ids[0], 16) for _, ids, _, recording in outcomes if recording}
    unsampled = {int(ids[0], 16) for _, ids, _, recording in outcomes if not recording}
    assert 40 < len(sampled) < 160  # about a quarter
    assert all(trace_id & TraceIdRatioBased.TRACE_ID_LIMIT < bound for trace_id in sampled)
    assert all(trace_id & TraceIdRatioBased.TRACE_ID_LIMIT >= bound for trace_id in unsampled)
    assert {span.context.trace_id for span in exporter.get_finished_spans()} == sampled


def test_work_outside_a_request_is_sampled_as_a_root(spans_at):
    exporter = spans_at(0.0)
    with tracing.upstream_span("GET", "http://127.0.0.1:1/refresh", "legacy"):
        [(name, value)] = tracing.outgoing_headers()
        assert name == b"traceparent"
        assert not tracing.recording() and value.endswith(b"-02")
    assert exporter.get_finished_spans() == ()


@pytest.mark.parametrize("ratio", [0.0, 0.1, 0.5, 1.0])
def test_the_ratio_samplers_quick_decision_is_the_sdks(ratio):
    sampler = tracing.RatioSampler(ratio)
    rng = random.Random(24)
    for _ in range(2000):
        trace_id = rng.getrandbits(128) or 1
        flags = rng.choice([0, 1, 2, 3])
        parent = SpanContext(trace_id, rng.getrandbits(64) or 1, is_remote=True,
                             trace_flags=TraceFlags(flags))
        for context, continued in ((set_span_in_context(NonRecordingSpan(parent)), True),
                                   (Context(), False)):
            sdk = sampler.should_sample(context, trace_id, "GET", SpanKind.SERVER)
            assert sampler.decide(parent, continued, trace_id) is sdk.decision.is_sampled()


def test_a_sampler_from_the_environment_is_asked_before_any_span(spans_at, monkeypatch):
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_always_off")
    exporter = spans_at(None)
    assert not isinstance(tracing._state.sampler, tracing.RatioSampler)
    assert not a_request()[3] and exporter.get_finished_spans() == ()
    caller = [(b"traceparent", f"00-{'ab' * 16}-{'cd' * 8}-01".encode())]
    assert a_request(caller, trusted=True)[3] and len(exporter.get_finished_spans()) == 3


def test_a_library_warning_is_a_json_log_line_not_raw_stderr():
    """Workers printed a raw UserWarning to stderr, breaking the JSON log stream (issue 34)."""
    import json
    import subprocess
    import sys

    script = ("import warnings\nfrom gateway.observability import configure_logging\n"
              "configure_logging('info')\nwarnings.warn('something deprecated', UserWarning)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=True)
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    assert any("something deprecated" in line["message"] for line in lines), done.stderr
