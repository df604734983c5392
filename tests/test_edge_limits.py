"""Edge limits on a real gateway process: header caps, header and idle timeouts, client-IP
headers, request ids and the answer to malformed HTTP, spoken over raw sockets where httpx
would refuse to send what a hostile client sends."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from aidre_config import aidre_gateway_config
from processes import Gateway
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect as ws_connect

from gateway.app import GatewayApp
from gateway.loader import load_config
from gateway.runtime import Runtime

MAX_HEADERS = 100
MAX_HEADER_BYTES = 60 * 1024
EDGE = {"header_timeout": 1.0, "keep_alive_timeout": 1.0}
CLIENT_IP_HEADERS = ["x-real-ip", "true-client-ip", "x-client-ip", "cf-connecting-ip"]


def config_for(echo: str, **proxy: object) -> dict:
    return {"upstreams": {"legacy": {"url": echo}}, "default_upstream": "legacy",
            "listen": EDGE, "proxy": proxy}


@pytest.fixture(scope="module")
def gateway(echo: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    started = Gateway(config_for(echo), tmp_path_factory.mktemp("edge"))
    yield started
    started.stop()


@pytest.fixture(scope="module")
def trusting(echo: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """A gateway that takes this test's loopback address for a trusted proxy."""
    started = Gateway(config_for(echo, trusted_proxies=["127.0.0.1"]),
                      tmp_path_factory.mktemp("edge-trusted"))
    yield started
    started.stop()


# --- raw HTTP over a socket -------------------------------------------------------------

def connect(gateway: Gateway) -> socket.socket:
    return socket.create_connection(("127.0.0.1", gateway.port), timeout=10)


def head(target: str = "/echo/edge", fields: list[tuple[str, str]] | None = None) -> bytes:
    lines = [f"GET {target} HTTP/1.1", "Host: edge", *(f"{k}: {v}" for k, v in fields or [])]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (an exception if it keeps it open)."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One response with a Content-Length, leaving the connection open."""
    raw = b""
    while b"\r\n\r\n" not in raw:
        raw += sock.recv(65536)
    status, headers, body = parse(raw)
    while len(body) < int(headers["content-length"]):
        body += sock.recv(65536)
    return status, headers, body


def parse(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head_part, _, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head_part.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines)
    return int(status_line.split()[1]), {k.lower(): v for k, v in headers.items()}, body


def send_and_close(gateway: Gateway, data: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send `data`, then read the answer up to the server's close."""
    with connect(gateway) as sock:
        sock.sendall(data)
        return parse(read_until_closed(sock))


def request_count(gateway: Gateway) -> int:
    return httpx.get(gateway.url + "/count").json()["requests"]


def upstream_calls(gateway: Gateway) -> int:
    return httpx.get(gateway.url + "/count").json()["others"]


def assert_refused(status: int, headers: dict[str, str], body: bytes, expected: int,
                   code: str) -> None:
    assert status == expected, body
    assert headers["content-type"] == "application/json"
    assert headers["connection"] == "close"
    assert len(body) < 300  # short, and not an HTML page
    error = json.loads(body)["error"]
    assert error["code"] == code
    assert error["request_id"] == headers["x-request-id"]


def fields_of(count: int) -> list[tuple[str, str]]:
    return [(f"X-Field-{i}", "v") for i in range(count)]


def header_values(response: httpx.Response, name: str) -> list[str]:
    return [value for key, value in response.json()["headers"] if key == name]


# --- header count and size caps ----------------------------------------------------------

def test_the_hundredth_header_passes_and_the_hundred_and_first_is_refused(gateway: Gateway):
    with connect(gateway) as sock:  # Host plus 99: exactly at the cap, and kept alive
        sock.sendall(head(fields=fields_of(MAX_HEADERS - 1)))
        status, _, _ = read_response(sock)
    assert status == 200

    before = request_count(gateway)
    status, headers, body = send_and_close(gateway, head(fields=fields_of(MAX_HEADERS)))
    assert_refused(status, headers, body, 431, "request_header_fields_too_large")
    assert request_count(gateway) == before + 1  # only the count request got through


CLOSE = [("Connection", "close")]


def pad_to(total: int) -> list[tuple[str, str]]:
    """Fields that bring target + names + values of `head(fields=...)` to `total` bytes."""
    fixed = len("/echo/edge") + len("Host") + len("edge") + len("Connection") + len("close")
    return [*CLOSE, ("X-Pad", "a" * (total - fixed - len("X-Pad")))]


def test_a_head_of_exactly_the_byte_cap_reaches_the_upstream(gateway: Gateway):
    fields = pad_to(MAX_HEADER_BYTES)
    status, _, body = send_and_close(gateway, head(fields=fields))
    assert status == 200, body
    echoed = [value for key, value in json.loads(body)["headers"] if key == "x-pad"]
    assert echoed == [fields[-1][1]]


def test_one_byte_over_the_cap_is_refused_and_the_connection_closed(gateway: Gateway):
    before = request_count(gateway)
    status, headers, body = send_and_close(gateway, head(fields=pad_to(MAX_HEADER_BYTES + 1)))
    assert_refused(status, headers, body, 431, "request_header_fields_too_large")
    assert json.loads(body)["error"]["details"] == {"max_header_bytes": MAX_HEADER_BYTES}
    assert request_count(gateway) == before + 1


def test_a_huge_head_is_refused_while_it_still_arrives(gateway: Gateway):
    with connect(gateway) as sock:  # 1 MiB of one field value, never finished
        sock.sendall(b"GET /echo/edge HTTP/1.1\r\nHost: edge\r\nX-Flood: ")
        sent = 0
        try:
            while sent < 1024 * 1024:
                sock.sendall(b"a" * 16384)
                sent += 16384
        except OSError:  # the gateway stopped reading: that is the point
            pass
        status, headers, body = parse(read_until_closed(sock))
    assert_refused(status, headers, body, 431, "request_header_fields_too_large")


def test_a_long_target_counts_towards_the_byte_cap(gateway: Gateway):
    target = "/echo/" + "a" * MAX_HEADER_BYTES
    status, headers, body = send_and_close(gateway, head(target))
    assert_refused(status, headers, body, 431, "request_header_fields_too_large")


async def test_the_app_refuses_an_oversized_head_under_any_server(tmp_path: Path, echo: str):
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(config_for(echo) | {"listen": {"max_headers": 8}}))
    runtime = Runtime(load_config(config, env={}))
    transport = httpx.ASGITransport(app=GatewayApp(runtime), client=("127.0.0.1", 1234))
    extra = {f"x-{i}": "1" for i in range(4)}  # with httpx's own five fields: nine
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://edge") as client:
            ok = await client.get("/echo/app", headers=dict(list(extra.items())[:3]))
            refused = await client.get("/echo/app", headers=extra)
    finally:
        await runtime.aclose()
    assert ok.status_code == 200
    assert refused.status_code == 431
    assert refused.json()["error"]["code"] == "request_header_fields_too_large"
    assert refused.json()["error"]["request_id"] == refused.headers["x-request-id"]


# --- timeouts ----------------------------------------------------------------------------

def trickle(sock: socket.socket, line: bytes, interval: float, attempts: int) -> bytes:
    """Send `line` every `interval` seconds until the server answers or closes."""
    sock.settimeout(interval)
    for _ in range(attempts):
        try:
            sock.sendall(line)
        except OSError:
            break
        try:
            answer = sock.recv(65536)
        except TimeoutError:
            continue
        sock.settimeout(10)
        return answer + read_until_closed(sock) if answer else answer
    raise AssertionError("the gateway kept a slow-header connection open")


def test_a_slowloris_client_gets_408_and_is_closed(gateway: Gateway):
    with connect(gateway) as sock:
        sock.sendall(b"GET /echo/slow HTTP/1.1\r\nHost: edge\r\n")
        raw = trickle(sock, b"X-Slow: 1\r\n", interval=0.3, attempts=40)
    status, headers, body = parse(raw)
    assert_refused(status, headers, body, 408, "request_timeout")


def test_a_connection_that_never_speaks_is_closed_without_an_answer(gateway: Gateway):
    with connect(gateway) as sock:
        assert read_until_closed(sock) == b""


def test_an_idle_keep_alive_connection_is_closed(gateway: Gateway):
    with connect(gateway) as sock:
        sock.sendall(head())
        status, headers, _ = read_response(sock)
        assert status == 200 and headers.get("connection") != "close"
        assert read_until_closed(sock) == b""  # nothing more, then the close


def test_a_slow_body_is_not_cut_by_the_header_timeout(gateway: Gateway):
    body = b"0123456789"
    with connect(gateway) as sock:
        sock.sendall(b"POST /echo/upload HTTP/1.1\r\nHost: edge\r\n"
                     b"Content-Length: 10\r\nConnection: close\r\n\r\n")
        for byte in body:  # 2 s in all, twice the header timeout
            time.sleep(0.2)
            sock.sendall(bytes([byte]))
        status, _, answer = parse(read_until_closed(sock))
    assert status == 200
    assert json.loads(answer)["body"] == body.decode()


# --- malformed HTTP ----------------------------------------------------------------------

@pytest.mark.parametrize("data", [
    b"NOT HTTP AT ALL\r\n\r\n",
    b"GET /echo HTTP/1.1\r\nBad Header Without Colon\r\n\r\n",
    b"GET /echo HTTP/1.1\r\nHost: edge\r\nContent-Length: x\r\n\r\n",
])
def test_malformed_http_gets_a_short_json_answer(gateway: Gateway, data: bytes):
    status, headers, body = send_and_close(gateway, data)
    assert_refused(status, headers, body, 400, "invalid_http")
    assert b"<" not in body


# --- client-IP headers -------------------------------------------------------------------

@pytest.mark.parametrize("name", [*CLIENT_IP_HEADERS, "x_real_ip"])
def test_client_ip_headers_from_an_untrusted_peer_never_reach_the_upstream(
    gateway: Gateway, name: str
):
    response = httpx.get(gateway.url + "/echo/ip", headers={name: "203.0.113.7"})
    sent = {key.replace("_", "-") for key, _ in response.json()["headers"]}
    assert name.replace("_", "-") not in sent


@pytest.mark.parametrize("name", CLIENT_IP_HEADERS)
def test_client_ip_headers_from_a_trusted_proxy_are_kept(trusting: Gateway, name: str):
    response = httpx.get(trusting.url + "/echo/ip", headers={name: "203.0.113.7"})
    assert header_values(response, name) == ["203.0.113.7"]


# --- request ids -------------------------------------------------------------------------

def test_an_untrusted_clients_request_id_is_replaced(gateway: Gateway):
    response = httpx.get(gateway.url + "/echo/id", headers={"x-request-id": "abc-123"})
    assert response.headers["x-request-id"] != "abc-123"
    assert header_values(response, "x-request-id") == [response.headers["x-request-id"]]


def test_a_trusted_proxys_safe_request_id_is_kept(trusting: Gateway):
    safe = "Edge-1.trace_" + "9" * 115  # 128 characters, the longest kept
    response = httpx.get(trusting.url + "/echo/id", headers={"x-request-id": safe})
    assert response.headers["x-request-id"] == safe
    assert header_values(response, "x-request-id") == [safe]


@pytest.mark.parametrize("unsafe", ["a b", "id:1", "id/1", "<script>", "a" * 129, ""])
def test_a_trusted_proxys_unsafe_request_id_is_replaced(trusting: Gateway, unsafe: str):
    response = httpx.get(trusting.url + "/echo/id", headers={"x-request-id": unsafe})
    generated = response.headers["x-request-id"]
    assert generated != unsafe and len(generated) == 32
    assert header_values(response, "x-request-id") == [generated]


def test_two_request_ids_from_a_trusted_proxy_are_not_guessed_between(trusting: Gateway):
    response = httpx.get(trusting.url + "/echo/id",
                         headers=[("x-request-id", "one"), ("x-request-id", "two")])
    assert response.headers["x-request-id"] not in ("one", "two")


def test_generated_request_ids_differ_across_requests(gateway: Gateway):
    with httpx.Client(base_url=gateway.url, timeout=10) as client:
        ids = {client.get("/echo/id").headers["x-request-id"] for _ in range(50)}
    assert len(ids) == 50


# --- upgrades: no WebSocket is served ----------------------------------------------------

WEBSOCKET_FIELDS = [("Upgrade", "websocket"), ("Connection", "Upgrade"),
                    ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
                    ("Sec-WebSocket-Version", "13")]


def test_a_websocket_handshake_gets_a_json_refusal_with_a_request_id(gateway: Gateway):
    with pytest.raises(InvalidStatus) as refused:
        ws_connect(f"ws://127.0.0.1:{gateway.port}/echo/socket", open_timeout=10)
    response = refused.value.response
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/json"
    error = json.loads(response.body)["error"]
    assert error["code"] == "websocket_not_supported"
    assert error["request_id"] == response.headers["x-request-id"]


def test_a_websocket_handshake_never_reaches_the_upstream_and_closes(gateway: Gateway):
    before = upstream_calls(gateway)
    frame = b"\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58"  # a masked "Hello" text frame
    status, headers, body = send_and_close(
        gateway, head("/echo/socket", WEBSOCKET_FIELDS) + frame)
    assert_refused(status, headers, body, 400, "websocket_not_supported")
    assert upstream_calls(gateway) == before  # and the frame after it was never parsed


@pytest.fixture(scope="module")
def surfaced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """A gateway whose AIDRE surface owns /search and /chunks."""
    workdir = tmp_path_factory.mktemp("edge-aidre")
    started = Gateway(aidre_gateway_config("http://127.0.0.1:9", workdir, listen=EDGE), workdir)
    yield started
    started.stop()


def test_a_websocket_handshake_on_a_surface_path_is_refused_in_its_dialect(surfaced: Gateway):
    status, headers, body = send_and_close(surfaced, head("/chunks/articles:a1",
                                                          WEBSOCKET_FIELDS))
    assert status == 400 and headers["connection"] == "close"
    document = json.loads(body)
    assert document["error"] == "invalid_request"  # AIDRE's vocabulary
    assert document["details"]["reason"] == "websocket_not_supported"
    assert document["request_id"] == headers["x-request-id"]


def test_an_upgrade_request_with_a_body_is_refused_at_the_edge(gateway: Gateway):
    fields = [("Upgrade", "h2c"), ("Connection", "Upgrade"), ("Content-Length", "5")]
    data = head("/echo/h2c", fields).replace(b"GET ", b"POST ", 1) + b"hello"
    status, headers, body = send_and_close(gateway, data)
    assert_refused(status, headers, body, 400, "invalid_http")


def test_another_upgrade_is_ignored_and_answered_over_http_1_1(gateway: Gateway):
    fields = [("Upgrade", "h2c"), ("Connection", "Upgrade, HTTP2-Settings"),
              ("HTTP2-Settings", "AAMAAABkAARAAAAAAAIAAAAA")]
    status, headers, body = send_and_close(gateway, head("/echo/h2c", fields))
    assert status == 200 and headers["connection"] == "close"
    sent = [name.lower() for name, _ in json.loads(body)["headers"]]
    assert "upgrade" not in sent  # hop-by-hop: never forwarded


async def test_a_websocket_scope_from_another_server_gets_the_same_refusal(tmp_path: Path,
                                                                         echo: str):
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(config_for(echo)))
    runtime = Runtime(load_config(config, env={}))
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    async def receive() -> dict:
        return {"type": "websocket.connect"}

    scope = {"type": "websocket", "path": "/echo/socket", "raw_path": b"/echo/socket",
             "query_string": b"", "headers": [(b"host", b"edge"), (b"upgrade", b"websocket"),
                                              (b"connection", b"upgrade")],
             "client": ("127.0.0.1", 1234), "scheme": "ws",
             "extensions": {"websocket.http.response": {}}}
    try:
        await GatewayApp(runtime)(scope, receive, send)
    finally:
        await runtime.aclose()
    start, body = sent
    assert start["type"] == "websocket.http.response.start" and start["status"] == 400
    request_id = dict(start["headers"])[b"x-request-id"].decode()
    assert body["type"] == "websocket.http.response.body"
    assert json.loads(body["body"])["error"] == {
        "code": "websocket_not_supported", "request_id": request_id,
        "message": "This gateway does not serve WebSocket connections."}
