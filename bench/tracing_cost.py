"""What tracing costs one request, in process: the facade calls of a passthrough request with
authentication and a rate limit (server span, two stage spans, one client span, the outgoing
trace context, the exemplar and the access log's ids), with tracing off, on at a sample ratio
(new traces) and on for every request. Spans go through the SDK's batch processor to an
exporter that drops them, so export encoding is not counted; CPU time per request, best of
`--repeat` runs of `--requests` requests each.

Usage: PYTHONPATH=. .venv/bin/python bench/tracing_cost.py [--requests N] [--repeat N]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from gateway import telemetry, tracing
from gateway.settings import Tracing

HEADERS = [(b"host", b"127.0.0.1:8080"), (b"user-agent", b"wrk"), (b"accept", b"*/*"),
           (b"authorization", b"Bearer x.y.z")]
SCOPE = {"headers": HEADERS}
START = {"http.request.method": "GET", "url.path": "/bench", "url.scheme": "http",
         "client.address": "127.0.0.1", "network.protocol.version": "1.1",
         "aigw.request_id": "0123456789abcdef"}
END = {"http.response.status_code": 200, "aigw.surface": "passthrough"}


class Discard(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def one_request() -> None:
    """The facade calls of one authenticated, rate-limited passthrough request."""
    with tracing.request_span("GET", SCOPE, False, START):
        with tracing.span("aigw.authenticate"):
            tracing.annotate({"aigw.auth.result": "authenticated"})
        with tracing.span("aigw.rate_limit"):
            tracing.annotate({"aigw.ratelimit.result": "allowed"})
        with tracing.upstream_span("GET", "http://127.0.0.1:9000/bench", "bench"):
            tracing.owned_fields()
            tracing.outgoing_headers()
            tracing.upstream_status(200)
        tracing.exemplar()
        tracing.current_ids()
        tracing.finish_request("GET", END, False)


def cpu_per_request(requests: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        for _ in range(requests):
            one_request()
        best = min(best, time.process_time() - started)
    return best / requests * 1e6


def traced(ratio: float | None) -> TracerProvider | None:
    """Tracing as `telemetry.start` sets it up, with an exporter that drops every span."""
    if ratio is None:
        tracing.install(None)
        return None
    settings = Tracing(enabled=True, sample_ratio=ratio)
    provider = telemetry.provider_for(settings)
    provider.add_span_processor(BatchSpanProcessor(Discard()))
    telemetry.install_tracer(provider, settings)
    return provider


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    print("| tracing | CPU µs/request (facade only) |\n|---|---|")
    for label, ratio in (("off", None), ("on, ratio 0.1", 0.1), ("on, ratio 0", 0.0),
                         ("on, ratio 1", 1.0)):
        provider = traced(ratio)
        print(f"| {label} | {cpu_per_request(args.requests, args.repeat):.1f} |", flush=True)
        tracing.install(None)
        if provider is not None:
            provider.shutdown()


if __name__ == "__main__":
    main()
