"""Traces over real HTTP: gateway processes export OTLP/HTTP to a receiver in this test, which
decodes the spans; the echo upstream shows what trace context reached it."""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from aidre_config import aidre_gateway_config
from otlp_receiver import Receiver, Span, children
from processes import Gateway, free_port

API_KEY = "tracing-secret-key-0123456789"
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
HEX32, HEX16 = re.compile(r"[0-9a-f]{32}"), re.compile(r"[0-9a-f]{16}")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    started = Receiver()
    yield started
    started.close()


def traced(endpoint: str, **tracing: object) -> dict:
    return {"tracing": {"enabled": True, "endpoint": endpoint, "schedule_delay": 0.05,
                        **tracing}}


def passthrough_config(echo: str, endpoint: str, trusted: bool = False, **tracing: object) -> dict:
    key = {"sha256": hashlib.sha256(API_KEY.encode()).hexdigest(), "subject": "crm",
           "client_id": "crm", "scopes": []}
    return {
        "upstreams": {"legacy": {"url": echo}}, "default_upstream": "legacy",
        "proxy": {"trusted_proxies": ["127.0.0.1"] if trusted else []},
        "auth": {"resource": "https://api.example.com", "default_access": "authenticated",
                 "api_keys": {"keys": [key]}},
        "rate_limits": {"rules": [{"name": "api", "paths": ["/"], "limit": "100/minute"}]},
        **traced(endpoint, **tracing),
    }


def by_name(spans: list[Span], name: str, kind: str | None = None) -> Span:
    [found] = [span for span in spans if span.name == name and kind in (None, span.kind)]
    return found


def received(response: httpx.Response, name: str) -> list[str]:
    return [value for key, value in response.json()["headers"] if key == name]


def access_line(gateway: Gateway, request_id: str, timeout: float = 5.0) -> dict:
    """The request's access-log line: written once its response is sent, so a client may
    read the answer before the line is there (a busy machine); it is waited for."""
    deadline = time.monotonic() + timeout
    while True:
        for line in gateway.process.stdout().splitlines():
            record = json.loads(line)
            if record.get("request_id") == request_id:
                return record
        if time.monotonic() > deadline:
            raise AssertionError(f"no access-log line for {request_id}")
        time.sleep(0.05)


def every_value(spans: list[Span]) -> str:
    return json.dumps([[s.name, s.attributes, s.resource] for s in spans])


def test_passthrough_trace_continues_a_trusted_caller_and_reaches_the_upstream(
        echo: str, receiver: Receiver, gateway_factory):
    gateway = gateway_factory(passthrough_config(echo, receiver.url, trusted=True, baggage=True))
    response = httpx.get(gateway.url + "/echo/items?token=query-secret", headers={
        "x-api-key": API_KEY, "traceparent": TRACEPARENT, "tracestate": "vendor=abc",
        "baggage": "tenant=acme"})
    assert response.status_code == 200
    spans = receiver.trace(response.headers["x-request-id"])

    server = by_name(spans, "GET", "server")
    assert server.kind == "server" and server.trace_id == CALLER_TRACE
    assert server.parent_id == CALLER_SPAN
    assert server.attributes["http.request.method"] == "GET"
    assert server.attributes["http.response.status_code"] == 200
    assert server.attributes["url.path"] == "/echo/items"
    assert server.attributes["aigw.surface"] == "passthrough"
    assert server.resource["service.name"] == "aigw"
    stages = {span.name: span for span in children(spans, server)}
    assert set(stages) == {"aigw.authenticate", "aigw.rate_limit", "GET"}
    assert stages["aigw.authenticate"].attributes["aigw.auth.result"] == "authenticated"
    assert stages["aigw.authenticate"].attributes["aigw.auth.credential"] == "api_key"
    assert stages["aigw.rate_limit"].attributes["aigw.ratelimit.result"] == "allowed"
    upstream = stages["GET"]
    assert upstream.kind == "client" and upstream.attributes["aigw.upstream"] == "legacy"
    assert upstream.attributes["url.full"] == echo + "/echo/items"  # no query string
    assert upstream.attributes["http.response.status_code"] == 200

    # The upstream continues the same trace, as a child of the gateway's client span.
    [traceparent] = received(response, "traceparent")
    assert traceparent == f"00-{CALLER_TRACE}-{upstream.span_id}-01"
    assert received(response, "tracestate") == ["vendor=abc"]
    assert received(response, "baggage") == ["tenant=acme"]

    record = access_line(gateway, response.headers["x-request-id"])
    assert (record["trace_id"], record["span_id"]) == (CALLER_TRACE, server.span_id)
    assert "query-secret" not in every_value(spans) and API_KEY not in every_value(spans)


def test_an_untrusted_caller_starts_a_new_trace_and_its_baggage_is_dropped(
        echo: str, receiver: Receiver, gateway_factory):
    gateway = gateway_factory(passthrough_config(echo, receiver.url))
    response = httpx.get(gateway.url + "/echo/x", headers={
        "x-api-key": API_KEY, "traceparent": TRACEPARENT, "tracestate": "vendor=abc",
        "baggage": "tenant=acme"})
    spans = receiver.trace(response.headers["x-request-id"])
    server = by_name(spans, "GET", "server")
    assert server.trace_id != CALLER_TRACE and HEX32.fullmatch(server.trace_id)
    assert server.parent_id == ""
    [traceparent] = received(response, "traceparent")
    assert traceparent.split("-")[1] == server.trace_id
    assert received(response, "tracestate") == [] and received(response, "baggage") == []


def test_an_unsampled_request_exports_nothing_and_a_trusted_sampled_caller_still_traces(
        echo: str, receiver: Receiver, gateway_factory):
    gateway = gateway_factory(passthrough_config(echo, receiver.url, trusted=True,
                                                 sample_ratio=0))
    unsampled = httpx.get(gateway.url + "/echo/quiet", headers={"x-api-key": API_KEY})
    assert unsampled.status_code == 200
    [traceparent] = received(unsampled, "traceparent")
    version, trace_id, span_id, flags = traceparent.split("-")
    assert (version, flags) == ("00", "02") and HEX32.fullmatch(trace_id)
    record = access_line(gateway, unsampled.headers["x-request-id"])
    assert (record["trace_id"], record["span_id"]) == (trace_id, span_id)

    # Parent-based: a trusted caller's sampled flag is followed whatever the ratio.
    sampled = httpx.get(gateway.url + "/echo/loud", headers={
        "x-api-key": API_KEY, "traceparent": TRACEPARENT})
    spans = receiver.trace(sampled.headers["x-request-id"])
    server = by_name(spans, "GET", "server")
    assert server.trace_id == CALLER_TRACE and server.parent_id == CALLER_SPAN
    assert {span.name for span in children(spans, server)} == \
        {"aigw.authenticate", "aigw.rate_limit", "GET"}
    # Spans are exported in the order they end: the unsampled request's would have come first.
    assert not [span for span in receiver.spans if span.trace_id == trace_id]


def test_a_denied_request_is_traced_with_its_reason_and_no_upstream_call(
        echo: str, receiver: Receiver, gateway_factory):
    gateway = gateway_factory(passthrough_config(echo, receiver.url))
    response = httpx.get(gateway.url + "/echo/private", headers={"x-api-key": "wrong-key"})
    assert response.status_code == 401
    spans = receiver.trace(response.headers["x-request-id"])
    server = by_name(spans, "GET", "server")
    assert server.attributes["http.response.status_code"] == 401
    assert server.attributes["aigw.error_code"] == "invalid_token"
    assert not server.status_error  # a 4xx is the caller's failure, not the server's
    [auth] = children(spans, server)
    assert auth.name == "aigw.authenticate"
    assert auth.attributes["aigw.auth.result"] == "denied"
    assert auth.attributes["aigw.denial_reason"] == "invalid_token"
    assert not [span for span in spans if span.kind == "client"]
    assert "wrong-key" not in every_value(spans)


def test_aidre_search_span_tree(backend: str, receiver: Receiver, gateway_factory,
                                tmp_path: Path):
    config = aidre_gateway_config(backend, tmp_path, **traced(receiver.url))
    gateway = gateway_factory(config)
    secret_text = "refund for a returned order"
    response = httpx.post(gateway.url + "/search", headers={"x-api-key": "reader-key"},
                          json={"query": secret_text, "collection": "articles", "top_k": 3})
    assert response.status_code == 200
    spans = receiver.trace(response.headers["x-request-id"])

    server = by_name(spans, "POST /search")
    assert server.attributes["http.route"] == "/search"
    assert server.attributes["aigw.surface"] == "aidre"
    assert server.attributes["aigw.collection"] == "articles"
    names = [span.name for span in children(spans, server)]  # in the order they ended
    assert names == ["aigw.authenticate", "aigw.policy", "GET", "aigw.policy", "aigw.render"]
    before, after = [s for s in spans if s.name == "aigw.policy"]
    assert {before.attributes["aigw.policy.stage"], after.attributes["aigw.policy.stage"]} == \
        {"before", "after"}
    decided = before if before.attributes["aigw.policy.stage"] == "before" else after
    assert decided.attributes["aigw.policy.effect"] == "allow"
    upstream = by_name(spans, "GET")
    assert upstream.attributes["url.full"] == backend + "/api/v1/articles/search"
    assert upstream.attributes["http.response.status_code"] == 200
    text = every_value(spans)
    assert "refund" not in text and "reader-key" not in text
    assert "help.example.com" not in text  # nothing of the upstream's answer either


def test_aidre_policy_denial_is_on_the_policy_span(backend: str, receiver: Receiver,
                                                   gateway_factory, tmp_path: Path):
    gateway = gateway_factory(aidre_gateway_config(backend, tmp_path, **traced(receiver.url)))
    response = httpx.post(gateway.url + "/search", headers={"x-api-key": "reader-key"},
                          json={"query": "notes", "collection": "staff"})
    assert response.status_code == 404
    spans = receiver.trace(response.headers["x-request-id"])
    policy = by_name(spans, "aigw.policy")
    assert policy.attributes["aigw.policy.effect"] == "deny"
    assert policy.attributes["aigw.denial_reason"] == "not_found"
    assert not [span for span in spans if span.kind == "client"]


def test_an_unreachable_collector_changes_no_response(echo: str, gateway_factory):
    dead = f"http://127.0.0.1:{free_port()}/v1/traces"  # nothing listens there
    gateway = gateway_factory(passthrough_config(echo, dead, max_queue_size=4, timeout=1))
    answers = [httpx.get(gateway.url + f"/echo/n{i}", headers={"x-api-key": API_KEY})
               for i in range(12)]
    assert [a.status_code for a in answers] == [200] * 12
    assert all(a.json()["raw_path"] == f"/echo/n{i}" for i, a in enumerate(answers))
    _eventually(lambda: gateway.metric("aigw_trace_spans_exported_total", result="failure") > 0)


def test_tracing_is_configured_by_the_otel_environment(echo: str, receiver: Receiver,
                                                       gateway_factory, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", receiver.url)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "edge-gw")
    gateway = gateway_factory({"upstreams": {"legacy": {"url": echo}},
                               "default_upstream": "legacy"})
    response = httpx.get(gateway.url + "/echo/env")
    [server] = [s for s in receiver.trace(response.headers["x-request-id"]) if s.kind == "server"]
    assert server.resource["service.name"] == "edge-gw"


def test_request_durations_carry_trace_exemplars_in_openmetrics(
        echo: str, receiver: Receiver, gateway_factory):
    gateway = gateway_factory(passthrough_config(echo, receiver.url))
    response = httpx.get(gateway.url + "/echo/x", headers={"x-api-key": API_KEY})
    server = by_name(receiver.trace(response.headers["x-request-id"]), "GET", "server")
    metrics = httpx.get(gateway.admin_url + "/metrics",
                        headers={"accept": "application/openmetrics-text; version=1.0.0"})
    assert metrics.headers["content-type"].startswith("application/openmetrics-text")
    assert metrics.text.rstrip().endswith("# EOF")
    exemplar = re.compile(
        r'^aigw_request_duration_seconds_bucket\{le="[^"]+",surface="passthrough"\} \S+ '
        r'# \{span_id="([0-9a-f]{16})",trace_id="([0-9a-f]{32})"\} [0-9.e+-]+ [0-9.]+$')
    found = [m.groups() for line in metrics.text.splitlines() if (m := exemplar.match(line))]
    assert (server.span_id, server.trace_id) in found
    plain = httpx.get(gateway.admin_url + "/metrics")
    assert plain.headers["content-type"].startswith("text/plain")
    assert "trace_id" not in plain.text


def _eventually(check, timeout: float = 15.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def test_an_mcp_tool_call_is_traced_as_mcp_with_the_wrapped_request_inside(
        echo: str, receiver: Receiver, gateway_factory):
    config = passthrough_config(echo, receiver.url)
    config["service"] = {"name": "Traced API", "description": "A legacy API, traced."}
    config["ai_endpoint"] = {"capabilities": [{
        "id": "echo_items", "description": "Items of the legacy API.", "endpoint": "/echo/items",
        "method": "GET", "params": {"q": "string, optional — what to look for"}}]}
    config["mcp"] = {"allowed_hosts": ["127.0.0.1:*"]}
    gateway = gateway_factory(config)
    response = httpx.post(gateway.url + "/mcp", headers={
        "x-api-key": API_KEY, "accept": "application/json, text/event-stream"}, json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "echo_items", "arguments": {"q": "api-key-free"}}})
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert not result["isError"], result
    echoed = result["structuredContent"]
    assert (echoed["raw_path"], echoed["query"]) == ("/echo/items", "q=api-key-free")
    sent = {name for name, _ in echoed["headers"]}
    assert not sent & {"x-api-key", "mcp-protocol-version", "mcp-session-id"}
    outer_id = response.headers["x-request-id"]
    spans = receiver.trace(outer_id)
    server = by_name(spans, "POST /mcp", "server")
    assert server.attributes["aigw.surface"] == "mcp"
    [inner] = [span for span in spans if span.attributes.get("aigw.parent_request_id")]
    assert inner.attributes["aigw.parent_request_id"] == outer_id
    assert inner.attributes["aigw.request_id"] == f"{outer_id}.1"
    assert inner.attributes["aigw.surface"] == "passthrough"
    assert inner.attributes["http.response.status_code"] == 200
    assert {span.name for span in children(spans, inner)} >= {"aigw.authenticate", "GET"}
    assert access_line(gateway, f"{outer_id}.1")["parent_request_id"] == outer_id
    assert API_KEY not in every_value(spans)
