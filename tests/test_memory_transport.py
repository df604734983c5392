"""The in-memory upstream transport (gateway/upstream/memory.py): the gateway app in this
process behind `httpx.ASGITransport`, its upstreams answered by Python functions."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
from aidre_config import aidre_gateway_config
from inprocess import InProcessGateway, memory_gateway

from gateway.demo.backend import create_app
from gateway.upstream import UpstreamError
from gateway.upstream.memory import MemoryUpstreams, Reply, UpstreamRequest, asgi


def passthrough(**upstream: object) -> dict:
    return {"upstreams": {"legacy": {"url": "http://legacy.test", **upstream}},
            "default_upstream": "legacy"}


async def test_a_handler_answers_and_sees_what_the_gateway_sent(tmp_path: Path):
    def legacy(request: UpstreamRequest) -> Reply:
        return Reply.json({"got": request.json(), "path": request.path}, status=201,
                          headers={"x-upstream": "legacy"})

    async with memory_gateway(passthrough(), tmp_path, {"legacy": legacy}) as gateway:
        response = await gateway.client.post("/orders/7?x=1", json={"n": 1},
                                              headers={"x-request-id": "abc"})
        assert response.status_code == 201
        assert response.json() == {"got": {"n": 1}, "path": "/orders/7"}
        assert response.headers["x-upstream"] == "legacy"
        [seen] = gateway.upstreams.requests("legacy")
        assert (seen.method, seen.query) == ("POST", [("x", "1")])
        assert seen.url.startswith("http://legacy.test/orders/7")
        assert seen.header("via") is not None


async def test_async_handlers_and_streamed_bodies_are_relayed(tmp_path: Path):
    async def chunks() -> AsyncIterator[bytes]:
        for part in (b"one ", b"two ", b"three"):
            await asyncio.sleep(0)
            yield part

    async def legacy(request: UpstreamRequest) -> Reply:
        return Reply(200, [(b"content-type", b"text/plain")], chunks())

    async with memory_gateway(passthrough(), tmp_path, {"legacy": legacy}) as gateway:
        response = await gateway.client.get("/stream")
        assert response.status_code == 200
        assert response.text == "one two three"


async def test_failures_are_the_gateways_upstream_errors(tmp_path: Path):
    def unreachable(request: UpstreamRequest) -> Reply:
        raise UpstreamError("connect")

    async def slow(request: UpstreamRequest) -> Reply:
        await asyncio.sleep(5)
        return Reply()

    def huge_head(request: UpstreamRequest) -> Reply:
        return Reply(200, [(b"x-field-%d" % i, b"v") for i in range(101)])

    async def stalls_mid_body(request: UpstreamRequest) -> Reply:
        async def body() -> AsyncIterator[bytes]:
            yield b"start"
            await asyncio.sleep(5)
            yield b"never"
        return Reply(200, [(b"content-length", b"10")], body())

    cases = [(unreachable, {}, 502, "upstream_unavailable"),
             (slow, {"timeout": {"connect": 0.1, "read": 0.1}}, 504, "upstream_timeout"),
             (huge_head, {}, 502, "upstream_error"),
             (None, {}, 502, "upstream_unavailable")]  # no handler: nothing listens there
    for handler, settings, status, code in cases:
        handlers = {"legacy": handler} if handler else {}
        async with memory_gateway(passthrough(**settings), tmp_path, handlers) as gateway:
            response = await gateway.client.get("/x")
            assert response.status_code == status, code
            assert response.json()["error"]["code"] == code
    stalling = passthrough(timeout={"read": 0.1})
    async with memory_gateway(stalling, tmp_path, {"legacy": stalls_mid_body}) as gateway:
        response = await gateway.client.get("/x")  # each chunk is due within the read timeout
        assert response.status_code == 504
        assert response.json()["error"]["code"] == "upstream_timeout"


async def test_an_asgi_app_serves_as_an_upstream_by_its_url(tmp_path: Path):
    upstreams = MemoryUpstreams({"http://backend.test": asgi(create_app(n_articles=30))})
    config = aidre_gateway_config("http://backend.test", tmp_path)
    async with memory_gateway(config, tmp_path, upstreams) as gateway:
        response = await gateway.client.post(
            "/search", json={"query": "refund", "collection": "articles", "top_k": 2},
            headers={"content-type": "application/aidre+json"})
        assert response.status_code == 200, response.text
        assert len(response.json()["results"]) == 2
        assert upstreams.requests("helpcentre")


def test_the_in_process_gateway_serves_a_socket_and_reloads_its_config(tmp_path: Path):
    def answer(name: str):
        return lambda request: Reply.json({"from": name})

    gateway = InProcessGateway(passthrough(), tmp_path, {"legacy": answer("a"),
                                                          "http://b.test": answer("b")})
    try:
        assert httpx.get(gateway.url + "/x").json() == {"from": "a"}
        assert httpx.get(gateway.admin_url + "/healthz").status_code == 200
        gateway.write_config({**gateway.config,
                              "upstreams": {"other": {"url": "http://b.test"}},
                              "default_upstream": "other"})
        deadline = time.monotonic() + 5
        while httpx.get(gateway.url + "/x").json() != {"from": "b"}:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        gateway.stop()
