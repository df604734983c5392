"""Request bodies on a real gateway process: a stalled or trickled body is answered 408 (in
the dialect of the path's owner) and frees what it held; chunk framing and trailers are bounded
like a head. Spoken over raw sockets, as a hostile client would."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import httpx
import pytest
from aidre_config import aidre_gateway_config
from processes import Gateway
from test_edge_limits import assert_refused, parse, read_until_closed

EDGE = {"header_timeout": 1.0, "body_idle_timeout": 1.0, "body_timeout": 3.0}


@pytest.fixture(scope="module")
def gateway(backend: str, echo: str,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    workdir = tmp_path_factory.mktemp("bodies")
    config = aidre_gateway_config(backend, workdir, listen=EDGE,
                                  default_upstream="legacy", proxy={"buffer_bytes": 1024})
    config["upstreams"]["legacy"] = {"url": echo, "max_connections": 2}
    started = Gateway(config, workdir)
    yield started
    started.stop()


def connect(gateway: Gateway) -> socket.socket:
    return socket.create_connection(("127.0.0.1", gateway.port), timeout=15)


def post_head(path: str, length: int | None, content_type: str = "text/plain") -> bytes:
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return (f"POST {path} HTTP/1.1\r\nHost: edge\r\nContent-Type: {content_type}\r\n"
            f"{framing}\r\n\r\n").encode()


def answer_after(sock: socket.socket, trickle: bytes = b"", interval: float = 0.4) -> bytes:
    """Send `trickle` a byte at a time (until the gateway stops listening), then read."""
    for byte in trickle:
        time.sleep(interval)
        try:
            sock.sendall(bytes([byte]))
        except OSError:
            break
    return read_until_closed(sock)


def test_stalled_bodies_get_408_and_free_their_upstream_connections(gateway: Gateway):
    # Two streamed uploads that stop sending: without a body timeout they hold both of the
    # upstream's two connections, and every other request waits behind them.
    sockets = [connect(gateway) for _ in range(2)]
    for sock in sockets:
        sock.sendall(post_head("/echo/upload", 200_000) + b"x" * 2000)
    for sock in sockets:
        with sock:
            assert_refused(*parse(answer_after(sock)), 408, "request_timeout")
    assert httpx.get(gateway.url + "/echo/after", timeout=10).status_code == 200


def test_a_body_trickled_under_the_idle_timeout_is_cut_at_the_body_deadline(gateway: Gateway):
    with connect(gateway) as sock:
        sock.sendall(post_head("/echo/upload", 200_000))
        raw = answer_after(sock, b"y" * 30)  # a byte every 0.4 s: 12 s if never cut
    assert_refused(*parse(raw), 408, "request_timeout")


def test_a_stalled_body_on_a_surface_route_gets_408_in_the_surfaces_dialect(gateway: Gateway):
    with connect(gateway) as sock:
        sock.sendall(post_head("/search", 100, "application/aidre+json") + b'{"query": ')
        status, headers, body = parse(answer_after(sock))
    assert status == 408 and headers["connection"] == "close"
    error = json.loads(body)
    assert error["error"] == "invalid_request"  # AIDRE's vocabulary (§17.3)
    assert error["details"]["reason"] == "request_timeout"
    assert error["request_id"] == headers["x-request-id"]


def test_a_trailer_that_never_ends_is_refused_431_while_it_arrives(gateway: Gateway):
    with connect(gateway) as sock:
        sock.sendall(post_head("/echo/upload", None) + b"5\r\nhello\r\n0\r\nT: ")
        try:
            for _ in range(64):  # 4 MiB of one trailer value, never ended
                sock.sendall(b"a" * 65536)
        except OSError:
            pass  # the gateway stopped reading: refused
        raw = read_until_closed(sock)
    assert_refused(*parse(raw), 431, "request_header_fields_too_large")


def test_a_slow_trailer_gets_408(gateway: Gateway):
    with connect(gateway) as sock:
        sock.sendall(post_head("/echo/upload", None) + b"5\r\nhello\r\n0\r\nT: a")
        raw = answer_after(sock, b"b" * 30)
    assert_refused(*parse(raw), 408, "request_timeout")


def test_a_timed_receive_arms_its_timer_only_for_a_wait_and_passes_cancellation_on(
        monkeypatch: pytest.MonkeyPatch):
    import asyncio

    from gateway import bodytimer
    from gateway.bodytimer import timed_receive
    from gateway.errors import GatewayError

    async def scenario() -> None:
        arrived = asyncio.Event()

        async def ready() -> dict:
            return {"type": "http.request", "body": b"now", "more_body": True}

        async def later() -> dict:
            await arrived.wait()
            return {"type": "http.request", "body": b"later", "more_body": False}

        async def never() -> dict:
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        armed = []
        timeout = asyncio.timeout
        monkeypatch.setattr(bodytimer.asyncio, "timeout",
                            lambda delay: armed.append(delay) or timeout(delay))
        assert (await timed_receive(ready, 1, 5)())["body"] == b"now"
        assert armed == []  # a message ready at once: no timer
        asyncio.get_running_loop().call_later(0.05, arrived.set)
        assert (await timed_receive(later, 1, 5)())["body"] == b"later"
        assert len(armed) == 1  # one for the wait
        with pytest.raises(GatewayError) as refused:
            await timed_receive(never, 0.05, 5)()
        assert refused.value.status == 408
        waiting = asyncio.ensure_future(timed_receive(never, 5, 5)())
        await asyncio.sleep(0.01)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    asyncio.run(scenario())
