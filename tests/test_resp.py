"""The lean Redis client of the rate limiter's scripts (gateway.ratelimit.resp), against
redis-server processes of the test's own, and against servers that misbehave."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from gateway.ratelimit import resp
from gateway.ratelimit.redis_window import RedisSlidingWindow
from gateway.ratelimit.resp import LeanRedis, Script, ScriptError
from tests.processes import free_port
from tests.redis_topologies import Nodes

INCR = Script("return redis.call('INCRBY', KEYS[1], ARGV[1])")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[Nodes, int]]:
    nodes = Nodes(tmp_path)
    port = free_port()
    nodes.start(port, "--unixsocket", str(tmp_path / "redis.sock"))
    redis.Redis(port=port).config_set("requirepass", "s3cret")
    yield nodes, port
    nodes.stop()


def test_only_single_servers_without_tls_or_options_are_served():
    assert resp.serves("redis://127.0.0.1:6379/15")
    assert resp.serves("redis://user:pw@127.0.0.1:6379")
    assert resp.serves("unix:///run/redis.sock?db=2")
    assert resp.serves("redis+unix:///run/redis.sock")
    assert not resp.serves("rediss://127.0.0.1:6379")
    assert not resp.serves("redis+cluster://127.0.0.1:7000,127.0.0.1:7001")
    assert not resp.serves("redis+sentinel://127.0.0.1:26379/primary")
    assert not resp.serves("redis://127.0.0.1:6379?health_check_interval=5")


async def test_a_script_runs_in_the_urls_database_and_again_after_the_server_forgets_it(server):
    _, port = server
    client = LeanRedis(f"redis://:s3cret@127.0.0.1:{port}/3", timeout=2)
    assert await client.run(INCR, ["counted"], [2]) == 2
    redis.Redis(port=port, password="s3cret").script_flush()
    assert await client.run(INCR, ["counted"], [3]) == 5  # NOSCRIPT, then EVAL
    assert redis.Redis(port=port, password="s3cret", db=3).get("counted") == b"5"
    await client.aclose()


async def test_a_unix_socket_url_reaches_the_server(server, tmp_path):
    client = LeanRedis(f"unix://:s3cret@{tmp_path / 'redis.sock'}?db=1", timeout=2)
    assert await client.run(INCR, ["over-unix"], [1]) == 1
    await client.aclose()


async def test_a_wrong_password_is_refused_without_echoing_it(server):
    _, port = server
    client = LeanRedis(f"redis://:wrong-password@127.0.0.1:{port}", timeout=2)
    with pytest.raises(ScriptError) as refused:
        await client.run(INCR, ["k"], [1])
    assert "wrong-password" not in str(refused.value)


async def test_a_closed_client_refuses_calls(server):
    _, port = server
    client = LeanRedis(f"redis://:s3cret@127.0.0.1:{port}", timeout=2)
    assert await client.run(INCR, ["before-close"], [1]) == 1
    await client.aclose()
    with pytest.raises(ConnectionError):
        await client.run(INCR, ["after-close"], [1])


async def test_an_error_reply_is_a_script_error(server):
    _, port = server
    client = LeanRedis(f"redis://:s3cret@127.0.0.1:{port}", timeout=2)
    with pytest.raises(ScriptError):
        await client.run(Script("return redis.call('NOSUCHCOMMAND')"), [], [])
    assert await client.run(INCR, ["after-error"], [1]) == 1  # the connection is still good
    await client.aclose()


async def test_concurrent_calls_share_one_connection_and_get_their_own_replies(server):
    _, port = server
    client = LeanRedis(f"redis://:s3cret@127.0.0.1:{port}", timeout=2)
    replies = await asyncio.gather(*(client.run(INCR, ["shared"], [1]) for _ in range(200)))
    assert sorted(replies) == list(range(1, 201))
    assert redis.Redis(port=port, password="s3cret").client_list().__len__() == 2  # and ours
    await client.aclose()


async def test_a_restarted_server_is_reached_again(tmp_path):
    nodes = Nodes(tmp_path)
    port = free_port()
    nodes.start(port)
    client = LeanRedis(f"redis://127.0.0.1:{port}", timeout=2)
    assert await client.run(INCR, ["k"], [1]) == 1
    nodes.stop()
    with pytest.raises((ConnectionError, OSError)):
        await client.run(INCR, ["k"], [1])
    restarted = Nodes(tmp_path / "again")
    restarted.start(port)
    assert await client.run(INCR, ["k"], [1]) == 1  # a new connection (the server kept nothing)
    await client.aclose()
    restarted.stop()


async def test_a_server_that_never_answers_times_out_and_the_next_call_reconnects():
    silent = socket.create_server(("127.0.0.1", 0))
    port = silent.getsockname()[1]
    client = LeanRedis(f"redis://127.0.0.1:{port}", timeout=0.3)
    with pytest.raises(TimeoutError):
        await client.run(INCR, ["k"], [1])
    first, _ = silent.accept()
    with pytest.raises(TimeoutError):
        await client.run(INCR, ["k"], [1])
    second, _ = silent.accept()  # a second connection: the first was given up
    for connection in (first, second, silent):
        connection.close()


async def test_a_reply_that_is_not_resp_fails_the_call():
    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1024)
        writer.write(b"HTTP/1.1 200 OK\r\n\r\n")
        await writer.drain()

    server = await asyncio.start_server(garbage, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = LeanRedis(f"redis://127.0.0.1:{port}", timeout=2)
    with pytest.raises(ConnectionError):
        await client.run(INCR, ["k"], [1])
    server.close()


async def test_the_sliding_window_counts_through_the_lean_client(server):
    _, port = server
    window = RedisSlidingWindow(f"redis://:s3cret@127.0.0.1:{port}/2", "lean-test", 2)
    assert isinstance(window._client, LeanRedis)
    tallies = await asyncio.gather(*(window.count("k", 5, 60) for _ in range(8)))
    assert [tally.allowed for tally in tallies] == [True] * 5 + [False] * 3
    assert sorted(tally.used for tally in tallies if tally.allowed) == [1, 2, 3, 4, 5]
    await window.aclose()
