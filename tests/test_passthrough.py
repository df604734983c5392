"""Passthrough over real HTTP: client -> aigw process (with each transport) -> echo upstream
process."""

from __future__ import annotations

import gzip
import hashlib
import http.client
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from processes import Gateway, free_port

MAX_BODY = 1024 * 1024


@pytest.fixture(scope="module", params=["httptools", "aiohttp", "httpx"])
def gateway(
    request: pytest.FixtureRequest, echo: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    upstream = {"url": echo, "transport": request.param, "timeout": {"connect": 1, "read": 1}}
    config = {
        "upstreams": {"legacy": upstream},
        "default_upstream": "legacy",
        "proxy": {"max_body_bytes": MAX_BODY, "buffer_bytes": 64 * 1024},
    }
    started = Gateway(config, tmp_path_factory.mktemp("passthrough"))
    yield started
    started.stop()


@pytest.fixture(scope="module")
def client(gateway: Gateway) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gateway.url, timeout=10) as http:
        yield http


def echoed(response: httpx.Response) -> dict:
    assert response.status_code == 200, response.text
    return response.json()


def header_values(echo: dict, name: str) -> list[str]:
    return [value for key, value in echo["headers"] if key == name]


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
def test_method_path_and_query_reach_the_upstream_unchanged(client: httpx.Client, method: str):
    echo = echoed(client.request(method, "/echo/a%20b/%C3%A9?x=1&x=2&q=a%20b&empty="))
    assert echo["method"] == method
    assert echo["raw_path"] == "/echo/a%20b/%C3%A9"
    assert echo["query"] == "x=1&x=2&q=a%20b&empty="


@pytest.mark.parametrize("path", [
    "/echo/../count", "/echo/./x", "/echo/..", "//echo", "/echo//x", "/echo/%2e%2e/count",
    "/echo/%2E./x", "/echo/a%2Fb", "/echo/a%5cb", "/echo\\x", "/echo/..;/x",
])
def test_ambiguous_paths_are_refused_before_the_upstream(gateway: Gateway, path: str):
    before = httpx.get(gateway.url + "/count").json()["requests"]
    status, headers, body = raw_get(gateway.port, path)
    assert status == 400, body
    assert json.loads(body)["error"]["code"] == "invalid_path"
    assert json.loads(body)["error"]["request_id"] == headers["x-request-id"]
    assert httpx.get(gateway.url + "/count").json()["requests"] == before + 1


def raw_get(port: int, target: str) -> tuple[int, dict[str, str], bytes]:
    """A request with its target sent byte for byte (httpx would normalise it first)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", target)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, \
            response.read()
    finally:
        connection.close()


def test_head_gets_headers_without_body(client: httpx.Client):
    response = client.head("/echo/head")
    assert response.status_code == 200
    assert response.content == b""
    assert int(response.headers["content-length"]) > 0


def test_small_body_is_forwarded_byte_for_byte(client: httpx.Client):
    body = json.dumps({"name": "ünïcode", "n": 1}).encode()
    echo = echoed(client.post("/echo", content=body, headers={"content-type": "application/json"}))
    assert echo["body_sha256"] == hashlib.sha256(body).hexdigest()
    assert header_values(echo, "content-type") == ["application/json"]


def test_large_body_is_streamed_to_the_upstream(client: httpx.Client):
    body = os.urandom(900 * 1024)  # above buffer_bytes, below the limit
    echo = echoed(client.put("/echo/upload", content=body))
    assert echo["body_length"] == len(body)
    assert echo["body_sha256"] == hashlib.sha256(body).hexdigest()


def test_chunked_request_body_is_streamed(client: httpx.Client):
    parts = [os.urandom(10_000) for _ in range(20)]
    echo = echoed(client.post("/echo/chunked", content=iter(parts)))
    assert echo["body_sha256"] == hashlib.sha256(b"".join(parts)).hexdigest()


def test_large_response_is_streamed_back_intact(client: httpx.Client):
    size = 5 * 1024 * 1024 + 7
    with client.stream("GET", f"/large?bytes={size}") as response:
        digest = hashlib.sha256()
        for chunk in response.iter_raw():
            digest.update(chunk)
    expected = (bytes(range(256)) * 256 * 100)[:size]
    assert response.status_code == 200
    assert digest.hexdigest() == hashlib.sha256(expected).hexdigest()


@pytest.mark.parametrize("status", [201, 204, 304, 400, 404, 418, 500, 503])
def test_upstream_status_codes_pass_through(client: httpx.Client, status: int):
    response = client.get(f"/status/{status}")
    assert response.status_code == status
    assert response.headers["x-upstream"] == "echo"


def test_repeated_response_headers_are_kept(client: httpx.Client):
    response = client.get("/cookies")
    assert response.headers.get_list("set-cookie") == ["c0=0; Path=/", "c1=1; Path=/",
                                                       "c2=2; Path=/"]


def test_repeated_request_headers_are_kept(client: httpx.Client):
    echo = echoed(client.get("/echo", headers=[("x-multi", "a"), ("x-multi", "b")]))
    assert header_values(echo, "x-multi") == ["a", "b"]


def test_gzip_body_passes_through_without_decoding(client: httpx.Client):
    with client.stream("GET", "/gzip", headers={"accept-encoding": "gzip"}) as response:
        raw = b"".join(response.iter_raw())
    assert response.headers["content-encoding"] == "gzip"
    assert int(response.headers["content-length"]) == len(raw)
    assert json.loads(gzip.decompress(raw))["compressed"] is True


def test_accept_encoding_from_the_client_is_forwarded_as_sent(client: httpx.Client):
    echo = echoed(client.get("/echo", headers={"accept-encoding": "br"}))
    assert header_values(echo, "accept-encoding") == ["br"]


def test_hop_by_hop_request_fields_are_removed(client: httpx.Client):
    headers = {
        "connection": "keep-alive, x-drop-me", "x-drop-me": "secret", "keep-alive": "timeout=5",
        "te": "trailers", "proxy-authorization": "Basic c2VjcmV0", "upgrade": "h2c",
        "x-stays": "1",
    }
    echo = echoed(client.get("/echo", headers=headers))
    names = {name for name, _ in echo["headers"]}
    for removed in ("x-drop-me", "keep-alive", "te", "proxy-authorization", "upgrade"):
        assert removed not in names
    assert header_values(echo, "x-stays") == ["1"]


def test_hop_by_hop_response_fields_are_removed(client: httpx.Client):
    response = client.get("/hop")
    for removed in ("x-hop-secret", "keep-alive", "proxy-authenticate"):
        assert removed not in response.headers
    assert response.headers["x-kept"] == "yes"


def test_via_is_added_both_ways(client: httpx.Client):
    response = client.get("/echo", headers={"via": "1.0 corporate-proxy"})
    assert header_values(response.json(), "via") == ["1.0 corporate-proxy, 1.1 aigw"]
    assert response.headers["via"] == "1.1 aigw"


def test_forwarded_fields_from_an_untrusted_client_are_replaced(client: httpx.Client,
                                                               gateway: Gateway):
    spoofed = {"x-forwarded-for": "203.0.113.9", "x-forwarded-proto": "https",
               "x-forwarded-host": "evil.example", "forwarded": "for=203.0.113.9",
               "x_forwarded_for": "198.51.100.7", "X_Forwarded-Host": "evil.example"}
    echo = echoed(client.get("/echo", headers=spoofed))
    assert not [name for name, _ in echo["headers"] if "_" in name]
    assert header_values(echo, "x-forwarded-for") == ["127.0.0.1"]
    assert header_values(echo, "x-forwarded-proto") == ["http"]
    assert header_values(echo, "x-forwarded-host") == [f"127.0.0.1:{gateway.port}"]
    assert header_values(echo, "forwarded") == []


def test_forwarded_fields_from_a_trusted_proxy_are_extended(echo: str, inprocess_factory):
    trusting = inprocess_factory({
        "upstreams": {"legacy": {"url": echo}}, "default_upstream": "legacy",
        "proxy": {"trusted_proxies": ["127.0.0.0/8"]},
    })
    headers = {"x-forwarded-for": "203.0.113.9", "x-forwarded-proto": "https",
               "x-forwarded-host": "api.example.com"}
    echo_doc = echoed(httpx.get(trusting.url + "/echo", headers=headers))
    assert header_values(echo_doc, "x-forwarded-for") == ["203.0.113.9, 127.0.0.1"]
    assert header_values(echo_doc, "x-forwarded-proto") == ["https"]
    assert header_values(echo_doc, "x-forwarded-host") == ["api.example.com"]


def test_upstream_gets_its_own_host_unless_configured(client: httpx.Client, echo: str):
    echo_doc = echoed(client.get("/echo"))
    assert header_values(echo_doc, "host") == [echo.removeprefix("http://")]


def test_request_id_from_an_untrusted_client_is_replaced_everywhere(client: httpx.Client):
    response = client.get("/echo", headers={"x-request-id": "trace-42"})
    generated = response.headers["x-request-id"]
    assert generated != "trace-42" and len(generated) == 32
    assert header_values(response.json(), "x-request-id") == [generated]


def test_invalid_request_id_is_replaced(client: httpx.Client):
    response = client.get("/echo", headers={"x-request-id": "bad id\twith spaces"})
    generated = response.headers["x-request-id"]
    assert generated != "bad id\twith spaces" and len(generated) == 32
    assert header_values(response.json(), "x-request-id") == [generated]


def assert_gateway_error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == code
    assert error["request_id"] == response.headers["x-request-id"]
    assert "Traceback" not in response.text


def test_declared_body_over_the_limit_is_refused_before_the_upstream(client: httpx.Client):
    before = client.get("/count").json()["requests"]
    response = client.post("/echo", content=b"x" * (MAX_BODY + 1))
    assert_gateway_error(response, 413, "request_too_large")
    second = client.get("/count")
    assert "requests" in second.json(), (second.status_code, second.headers, second.text)
    after = second.json()["requests"]
    assert after == before + 1  # only the second /count reached the upstream


def test_chunked_body_over_the_limit_is_refused(gateway: Gateway):
    parts = (b"x" * 65536 for _ in range(MAX_BODY // 65536 + 2))
    response = httpx.post(gateway.url + "/echo", content=parts, timeout=10)
    assert_gateway_error(response, 413, "request_too_large")


def test_a_truncated_upstream_body_is_a_502_not_a_bare_500(client: httpx.Client):
    assert_gateway_error(client.get("/truncated"), 502, "upstream_error")


def test_a_request_target_that_is_no_path_is_refused(gateway: Gateway):
    connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=10)
    try:
        connection.request("OPTIONS", "*")
        response = connection.getresponse()
        assert response.status == 400
        assert json.loads(response.read())["error"]["code"] == "invalid_path"
    finally:
        connection.close()


def test_upstream_timeout_is_a_504(client: httpx.Client):
    assert_gateway_error(client.get("/slow?seconds=3"), 504, "upstream_timeout")


@pytest.mark.parametrize("transport", ["httptools", "aiohttp", "httpx"])
def test_a_read_timeout_is_answered_once_and_never_sent_to_the_upstream_twice(
        gateway_factory, echo: str, transport: str):
    read = 2.0
    slow = gateway_factory({
        "upstreams": {"slow": {"url": echo, "transport": transport,
                               "timeout": {"connect": 1, "read": read}}},
        "default_upstream": "slow",
    })
    with httpx.Client(base_url=slow.url, timeout=30) as client:
        before = client.get("/count").json()["others"]  # leaves a kept-alive connection
        started = time.monotonic()
        assert_gateway_error(client.get("/slow?seconds=4"), 504, "upstream_timeout")
        elapsed = time.monotonic() - started
        after = client.get("/count").json()["others"]
    assert after - before == 1  # the slow request reached the upstream once
    assert elapsed < 2 * read


def test_unreachable_upstream_is_a_502(gateway_factory):
    dead = gateway_factory({
        "upstreams": {"gone": {"url": f"http://127.0.0.1:{free_port()}"}},
        "default_upstream": "gone",
    })
    response = httpx.get(dead.url + "/anything")
    assert_gateway_error(response, 502, "upstream_unavailable")
    assert "127.0.0.1" not in response.text  # no upstream address leaks
    assert dead.metric("aigw_upstream_errors_total", upstream="gone", kind="connect") == 1
    ready = httpx.get(dead.admin_url + "/readyz")
    assert ready.status_code == 503 and ready.json()["upstreams"] == {"gone": "down"}


def test_without_a_default_upstream_unknown_paths_are_404(echo: str, inprocess_factory):
    closed = inprocess_factory({"upstreams": {"legacy": {"url": echo}}})
    assert_gateway_error(httpx.get(closed.url + "/echo"), 404, "not_found")


def wait_for_log_lines(path: Path, marker: str) -> list[dict]:
    """The log line is written just after the response is sent, so give it a moment."""
    deadline = time.monotonic() + 5
    while True:
        lines = [json.loads(line) for line in path.read_text().splitlines() if marker in line]
        if lines or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def test_access_log_has_one_json_line_per_request_without_query(gateway: Gateway,
                                                                client: httpx.Client):
    marker = "/echo/log-marker"
    response = client.get(marker + "?token=secret-value")
    request_id = response.headers["x-request-id"]
    lines = wait_for_log_lines(Path(gateway.process.stdout_path), marker)
    assert len(lines) == 1
    assert lines[0]["request_id"] == request_id
    assert lines[0]["status"] == 200 and lines[0]["upstream"] == "legacy"
    assert "secret-value" not in Path(gateway.process.stdout_path).read_text()


def test_admin_listener_serves_metrics_and_health(gateway: Gateway, client: httpx.Client):
    client.get("/status/418")
    assert gateway.metric("aigw_requests_total", method="GET", status="418",
                          surface="passthrough") >= 1
    assert httpx.get(gateway.admin_url + "/healthz").json() == {"status": "ok"}
    ready = httpx.get(gateway.admin_url + "/readyz")
    assert ready.status_code == 200 and ready.json()["upstreams"] == {"legacy": "up"}
    public = httpx.get(gateway.url + "/metrics")  # the public listener proxies it instead
    assert public.headers["x-upstream"] == "echo"
