"""A PostgreSQL outage under the shared index (pdpp.index.engine postgres) costs only the
requests that need the index: they are answered fast, 503 `index_unavailable` with a
Retry-After, while every other route and the admin listener answer as usual and the event
loop never waits for the database; searches work again once it is back. The outage is a
TCP relay between the gateway and the real PostgreSQL at 127.0.0.1:5432, made to refuse."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest
from prometheus_client import REGISTRY
from test_pdpp_index_scope import KEYS, scoped_config
from test_upstream_tokens import KeysetApi

CONNINFO = "host=127.0.0.1 port=5432 user=postgres dbname=test"
SECRET = next(iter(KEYS))
# What a request needing the index must stay well under during an outage: the pool waited
# 10 s for a connection before.
FAST = 2.0


def _unreachable() -> str | None:
    try:
        psycopg.connect(CONNINFO, connect_timeout=3).close()
    except psycopg.Error as error:
        return f"PostgreSQL at 127.0.0.1:5432 is unreachable: {error}".strip()
    return None


_WHY = _unreachable()
pytestmark = pytest.mark.skipif(_WHY is not None, reason=_WHY or "")


class Relay:
    """A TCP relay to PostgreSQL on a loop of its own; `down()` closes every connection it
    relays and closes each new one at once (a server refusing), `up()` relays again."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.refusing = False
        self._open: set[asyncio.StreamWriter] = set()
        listening = socket.socket()
        listening.bind(("127.0.0.1", 0))
        self.port = listening.getsockname()[1]
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        asyncio.run_coroutine_threadsafe(self._serve(listening), self.loop).result(5)

    async def _serve(self, listening: socket.socket) -> None:
        self.server = await asyncio.start_server(self._relay, sock=listening)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", 5432)
        self._open |= {writer, up_writer}

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except OSError:
                pass
            finally:
                sink.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._open -= {writer, up_writer}

    def down(self) -> None:
        async def cut() -> None:
            self.refusing = True
            for writer in list(self._open):
                writer.transport.abort()
        asyncio.run_coroutine_threadsafe(cut(), self.loop).result(5)

    def up(self) -> None:
        self.refusing = False

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)


@pytest.fixture
def relay() -> Iterator[Relay]:
    started = Relay()
    yield started
    started.close()


def outage_config(relay: Relay, **index: Any) -> tuple[dict[str, Any], str]:
    config = scoped_config("/records")
    origin = f"http://legacy-{os.urandom(4).hex()}.invalid"  # an index of this test's own
    config["upstreams"]["legacy"]["url"] = origin
    config["pdpp"]["index"] = {
        "engine": "postgres", "dsn": f"postgresql://postgres@127.0.0.1:{relay.port}/test",
        **index}
    config["pdpp"]["refresh_seconds"] = 3600
    return config, origin


def _drop_schemas() -> None:
    with psycopg.connect(CONNINFO, autocommit=True) as conn:
        schemas = [row[0] for row in conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'aigw_ix_messages%'")]
        for schema in schemas:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def timed(client: httpx.Client, url: str, **options: Any) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = client.get(url, **options)
    return response, time.monotonic() - started


def long_ticks() -> float:
    """Ticks of the event loop that ran a second late or more, in this process (the registry
    is shared by every in-process gateway: compare before and after). One collection, so the
    two buckets are of one moment; a second is far past what a busy machine delays a tick,
    and what a wait for the database on the loop (1 s and more) would."""
    buckets = {sample.labels["le"]: sample.value
               for metric in REGISTRY.collect() if metric.name == "aigw_event_loop_lag_seconds"
               for sample in metric.samples if sample.name.endswith("_bucket")}
    return buckets.get("+Inf", 0.0) - buckets.get("1.0", 0.0)


def test_an_index_outage_costs_only_searches_answered_fast_and_searches_recover(
        relay: Relay, inprocess_factory: Any) -> None:
    config, origin = outage_config(relay)
    gateway = inprocess_factory(config, {origin: KeysetApi()})
    search = f"{gateway.url}/v1/search"
    headers = {"X-API-Key": SECRET}
    try:
        with httpx.Client(timeout=30) as client:
            ok, _ = timed(client, search, params={"q": "record"}, headers=headers)
            assert ok.status_code == 200, ok.text
            assert ok.json()["data"]
            held = long_ticks()
            relay.down()
            for attempt in range(3):
                response, took = timed(client, search, params={"q": f"record {attempt}"},
                                       headers=headers)
                assert response.status_code == 503, (attempt, response.text)
                assert response.json()["error"]["code"] == "index_unavailable", attempt
                assert response.headers["retry-after"]
                assert "request_id" in response.json()["error"]
                assert took < FAST, took
                for url in (f"{gateway.url}/v1/streams", f"{gateway.admin_url}/healthz",
                            f"{gateway.url}/v1/streams/messages/records?limit=5"):
                    other, took = timed(client, url, headers=headers)
                    assert other.status_code == 200, (url, other.text)
                    assert took < 1.0, (url, took)
            assert long_ticks() == held  # the loop never waited for the database
            ready, _ = timed(client, f"{gateway.admin_url}/readyz")
            assert ready.status_code == 200, ready.text  # kept in rotation by default
            assert ready.json()["storage"] == {"pdpp.index": "down"}
            relay.up()
            deadline = time.monotonic() + 30
            while True:
                response, _ = timed(client, search, params={"q": "record"}, headers=headers)
                if response.status_code == 200 or time.monotonic() > deadline:
                    break
                assert response.json()["error"]["code"] == "index_unavailable", attempt
                time.sleep(0.5)
            assert response.status_code == 200, response.text
            assert response.json()["data"] == ok.json()["data"]
    finally:
        relay.up()
        _drop_schemas()


def test_readyz_requires_the_index_when_configured_and_a_first_read_fails_fast(
        relay: Relay, inprocess_factory: Any) -> None:
    config, origin = outage_config(relay, required_for_ready=True)
    relay.down()  # before the stream was ever read: its first read cannot open the index
    gateway = inprocess_factory(config, {origin: KeysetApi()})
    try:
        with httpx.Client(timeout=30) as client:
            response, took = timed(client, f"{gateway.url}/v1/search", params={"q": "record"},
                                   headers={"X-API-Key": SECRET})
            assert response.status_code == 503, response.text
            assert response.json()["error"]["code"] == "index_unavailable"
            assert took < FAST, took
            ready, took = timed(client, f"{gateway.admin_url}/readyz")
            assert ready.status_code == 503, ready.text
            assert ready.json()["storage"] == {"pdpp.index": "down"}
            assert took < FAST, took
            relay.up()
            deadline = time.monotonic() + 30
            while ready.status_code != 200 and time.monotonic() < deadline:
                time.sleep(0.5)
                ready, _ = timed(client, f"{gateway.admin_url}/readyz")
            assert ready.status_code == 200, ready.text
            assert ready.json()["storage"] == {"pdpp.index": "up"}
            response, _ = timed(client, f"{gateway.url}/v1/search", params={"q": "record"},
                                headers={"X-API-Key": SECRET})
            assert response.status_code == 200, response.text
    finally:
        relay.up()
        _drop_schemas()
