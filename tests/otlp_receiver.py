"""A local OTLP/HTTP traces receiver for the tests: decodes what the gateway exports.

It runs on a thread in the test process and keeps every span it was sent, flattened into
`Span` records (hex ids, attributes as plain Python values).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanProto

KINDS = {SpanProto.SPAN_KIND_SERVER: "server", SpanProto.SPAN_KIND_CLIENT: "client",
         SpanProto.SPAN_KIND_INTERNAL: "internal"}


@dataclass
class Span:
    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    status_error: bool
    resource: dict[str, Any] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)


class Receiver:
    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver._keep(request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1/traces"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        daemon=True)  # a quick shutdown
        self._thread.start()

    def _keep(self, request: ExportTraceServiceRequest) -> None:
        with self._lock:
            self.requests += 1
            for resource_spans in request.resource_spans:
                resource = _attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append(Span(
                            span.name, KINDS.get(span.kind, str(span.kind)),
                            span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex(),
                            _attributes(span.attributes),
                            span.status.code == span.status.STATUS_CODE_ERROR, resource,
                            [event.name for event in span.events]))

    def trace(self, request_id: str, timeout: float = 10.0) -> list[Span]:
        """Every span of the trace whose server span carries this request id, once the server
        span has arrived (it ends last, so its children were exported with or before it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                server = [s for s in self.spans
                          if s.attributes.get("aigw.request_id") == request_id]
                if server:
                    return [s for s in self.spans if s.trace_id == server[0].trace_id]
            time.sleep(0.05)
        raise TimeoutError(f"no trace for request {request_id} within {timeout} s")

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _attributes(values: Any) -> dict[str, Any]:
    return {item.key: _value(item.value) for item in values}


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


def children(spans: list[Span], parent: Span) -> list[Span]:
    return [span for span in spans if span.parent_id == parent.span_id]
