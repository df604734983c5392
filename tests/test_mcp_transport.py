"""The MCP endpoints' HTTP transport on a real gateway process: no event stream is ever held
open (the endpoints are stateless and push nothing, so `GET` is 405), and the transport's own
refusals (Host, Origin, Content-Type, body size) come in the endpoints' JSON-RPC error dialect
with a request id, never as plain text."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from idp_helpers import running_idp
from processes import Gateway
from test_mcp import KEY, demo_config, policies, token

SSE = {"accept": "text/event-stream"}
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
POST_HEADERS = {"accept": "application/json, text/event-stream",
                "content-type": "application/json"}
HELD = 200  # concurrent GETs of a client trying to hold streams open


@pytest.fixture(scope="module")
def config(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    workdir = tmp_path_factory.mktemp("mcp-transport")
    with running_idp(workdir) as idp:
        idp.publish(KEY)
        yield demo_config(backend, idp.url, policies(workdir))


@pytest.fixture(scope="module")
def gateway(config: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Gateway]:
    started = Gateway(config, tmp_path_factory.mktemp("mcp-gateway"))
    yield started
    started.stop()


def bearer(value: str | None) -> dict[str, str]:
    return {"authorization": f"Bearer {value}"} if value is not None else {}


def assert_mcp_error(answer: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The endpoints' dialect: a JSON-RPC error object, the gateway's code and the request id
    in its `data`, the same id as the response's X-Request-Id."""
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("application/json"), answer.text
    body = answer.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert body["error"]["data"]["code"] == code
    assert body["error"]["data"]["request_id"] == answer.headers["x-request-id"]
    return body


CALLERS = {"no token": None, "a bad token": "not-a-token", "no scope": token(scope=""),
           "a scope": token("articles:read messages:read")}


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize("path", ["/mcp", "/mcp/pdpp"])
def test_get_is_405_whoever_asks(gateway, path, caller):
    with httpx.Client(timeout=10) as client:
        with client.stream("GET", gateway.url + path,
                           headers={**SSE, **bearer(CALLERS[caller])}) as answer:
            assert answer.status_code == 405, "a GET opened a stream"
            answer.read()
        assert answer.headers["allow"] == "POST"
        assert_mcp_error(answer, 405, "method_not_allowed")
        deleted = client.delete(gateway.url + path, headers=bearer(CALLERS[caller]))
        assert_mcp_error(deleted, 405, "method_not_allowed")


def _wait_for(condition: Any, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def _hold_gets(url: str, count: int, while_held: Any) -> list[int]:
    """`count` GETs sent at once, each left open by the client (its body unread); their
    statuses, once `while_held()` has run (in a thread) with every one still held."""
    limits = httpx.Limits(max_connections=count, max_keepalive_connections=count)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client, \
            contextlib.AsyncExitStack() as held:
        answers = await asyncio.gather(*(
            held.enter_async_context(client.stream("GET", url, headers={
                **SSE, **bearer(token(scope=""))}))
            for _ in range(count)))
        await asyncio.to_thread(while_held)
        return [answer.status_code for answer in answers]


def test_many_held_gets_hold_nothing_in_the_gateway(gateway):
    pid = gateway.process.popen.pid
    baseline = _open_fds(pid)
    seen: dict[str, Any] = {}

    def look() -> None:
        seen["idle"] = _wait_for(lambda: gateway.metric("aigw_requests_in_flight") == 0, 20)
        seen["discovery"] = httpx.get(gateway.url + "/.well-known/ai", timeout=10).status_code

    statuses = asyncio.run(_hold_gets(gateway.url + "/mcp", HELD, look))
    assert set(statuses) == {405}
    assert seen == {"idle": True, "discovery": 200}, "held GETs are requests in flight"
    # The clients have gone: their connections close, and with them every descriptor.
    assert _wait_for(lambda: _open_fds(pid) <= baseline + 20, 30), _open_fds(pid) - baseline


@contextlib.contextmanager
def held_get(gateway: Gateway) -> Iterator[httpx.Response]:
    """A client holding `GET /mcp` (event stream asked for) open, its body unread."""
    with httpx.Client(timeout=10) as client, client.stream(
            "GET", gateway.url + "/mcp", headers={**SSE, **bearer(token())}) as answer:
        yield answer


def test_a_reload_retires_the_old_generation_while_a_client_holds_a_get(config,
                                                                         gateway_factory):
    gateway = gateway_factory(config)
    with held_get(gateway) as answer:
        gateway.write_config({**gateway.config, "mcp": {**config["mcp"], "instructions": "v2"}})
        retired = _wait_for(lambda: "config generation retired" in gateway.process.stderr(),
                            20)
        assert retired, "the held request kept generation 1 alive"
        assert answer.status_code == 405


def test_sigterm_exits_promptly_while_a_client_holds_a_get(config, gateway_factory):
    gateway = gateway_factory({**config, "shutdown": {"grace": 30}})
    with held_get(gateway):
        started = time.monotonic()
        gateway.process.signal(signal.SIGTERM)
        exited = _wait_for(lambda: gateway.process.popen.poll() is not None, 15)
        took = time.monotonic() - started
    assert exited, "the held request held the shutdown for its grace period"
    assert gateway.process.popen.returncode == 0, took


def test_a_post_is_never_answered_with_a_stream(gateway):
    """JSON answers, ended when sent, whatever the client accepts or the protocol revision:
    the 2026 revision's `subscriptions/listen` (whose answer is a stream) is not served."""
    headers = {**POST_HEADERS, **bearer(token())}
    listen = {"jsonrpc": "2.0", "id": 2, "method": "subscriptions/listen", "params": {}}
    cases = [(LIST, headers),
             (listen, {**headers, "mcp-protocol-version": "2026-07-28"})]
    with httpx.Client(timeout=30) as client:
        for body, sent in cases:
            answer = client.post(gateway.url + "/mcp", json=body, headers=sent)
            assert answer.headers["content-type"].startswith("application/json"), answer.text
            assert "jsonrpc" in answer.json()


@pytest.mark.parametrize(("headers", "status", "code"), [
    ({"host": "evil.example"}, 421, "misdirected_request"),
    ({"host": "evil.example:8080"}, 421, "misdirected_request"),
    ({"origin": "http://evil.example"}, 403, "origin_not_allowed"),
    ({"origin": "http://127.0.0.1:9"}, 403, "origin_not_allowed"),
    ({"content-type": "text/plain"}, 415, "unsupported_media_type"),
])
@pytest.mark.parametrize("path", ["/mcp", "/mcp/aidre"])
def test_transport_refusals_are_in_the_mcp_dialect(gateway, path, headers, status, code):
    sent = {**POST_HEADERS, **bearer(token()), **headers}
    answer = httpx.post(gateway.url + path, content=b'{"jsonrpc": "2.0", "id": 1, '
                        b'"method": "tools/list"}', headers=sent)
    assert_mcp_error(answer, status, code)


def test_an_oversized_body_is_413_in_the_mcp_dialect(gateway):
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"x": "' + \
        b"a" * (2 * 1024 * 1024) + b'"}}'
    for chunked in (False, True):
        content: Any = body if not chunked else iter([body[:1000], body[1000:]])
        answer = httpx.post(gateway.url + "/mcp", content=content,
                            headers={**POST_HEADERS, **bearer(token())})
        assert_mcp_error(answer, 413, "request_too_large")


def test_allowed_hosts_and_origins_are_still_served(gateway):
    port = gateway.port
    for extra in ({}, {"origin": "http://127.0.0.1:8080"}, {"host": f"127.0.0.1:{port}"},
                  {"host": "127.0.0.1:8080", "origin": "http://127.0.0.1:8080"}):
        answer = httpx.post(gateway.url + "/mcp", json=LIST,
                            headers={**POST_HEADERS, **bearer(token()), **extra})
        assert answer.status_code == 200, (extra, answer.text)
        assert "tools" in answer.json()["result"]


def test_a_host_refusal_names_no_allowed_host(gateway):
    answer = httpx.post(gateway.url + "/mcp", json=LIST,
                        headers={**POST_HEADERS, **bearer(token()), "host": "evil.example"})
    assert "127.0.0.1" not in answer.text
