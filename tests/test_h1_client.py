"""Protocol tests for aigw's own HTTP/1.1 upstream client (`transport: httptools`).

Each test runs a scripted upstream on a loopback socket that answers with exact bytes: split
chunks, 1xx, bad framing, early closes, slow bodies, closed keep-alive connections.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from gateway.settings import Upstream
from gateway.upstream import UpstreamError
from gateway.upstream.h1_transport import H1Transport

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Script:
    """A loopback upstream running `handler` per connection; records every request head."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.heads: list[bytes] = []
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> Script:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            try:
                await self.handler(reader, writer)
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                writer.close()

        self.server = await asyncio.start_server(serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def head(self, reader: asyncio.StreamReader) -> bytes:
        head = await reader.readuntil(b"\r\n\r\n")
        self.heads.append(head)
        return head


def transport(url: str, *, read: float = 2.0, connect: float = 2.0,
              max_connections: int = 10) -> H1Transport:
    return H1Transport(Upstream.model_validate({
        "url": url, "transport": "httptools", "max_connections": max_connections,
        "timeout": {"connect": connect, "read": read},
    }))


async def fetch(client: H1Transport, url: str, method: str = "GET",
                headers: list[tuple[bytes, bytes]] | None = None,
                body: bytes | AsyncIterator[bytes] | None = None) -> tuple[int, list, bytes]:
    response = await client.request(method, url, headers or [(b"host", b"up")], body)
    try:
        return response.status, response.headers, await response.read()
    finally:
        await response.close()


def answer(body: bytes = b"ok", extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n%s\r\n%s" % (len(body), extra, body)


async def keep_answering(script: Script, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter, reply: bytes) -> None:
    while True:
        await script.head(reader)
        writer.write(reply)
        await writer.drain()


async def test_target_and_headers_go_out_byte_for_byte():
    async def handler(reader, writer):
        await keep_answering(script, reader, writer, answer())

    async with Script(handler) as script:
        client = transport(script.url)
        target = "/a%20b/{x}|y?q='v'&z=%zz&e="
        headers = [(b"Host", b"example.org"), (b"X-Multi", b"1"), (b"x-multi", b"2")]
        status, _, _ = await fetch(client, script.url + target, headers=headers)
        await client.aclose()
    assert status == 200
    assert script.heads[0] == (b"GET /a%20b/{x}|y?q='v'&z=%zz&e= HTTP/1.1\r\nHost: example.org"
                               b"\r\nX-Multi: 1\r\nx-multi: 2\r\n\r\n")


async def test_repeated_response_fields_and_their_case_are_kept():
    reply = (b"HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nset-cookie: b=2\r\nX-Odd: v\r\n"
             b"content-length: 0\r\n\r\n")

    async def handler(reader, writer):
        await keep_answering(script, reader, writer, reply)

    async with Script(handler) as script:
        client = transport(script.url)
        _, headers, _ = await fetch(client, script.url + "/")
        await client.aclose()
    assert headers[:3] == [(b"Set-Cookie", b"a=1"), (b"set-cookie", b"b=2"), (b"X-Odd", b"v")]


async def test_chunked_body_split_across_many_writes_is_reassembled():
    async def handler(reader, writer):
        await script.head(reader)
        wire = (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
                b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
        for i in range(len(wire)):  # one byte at a time
            writer.write(wire[i:i + 1])
            await writer.drain()
            await asyncio.sleep(0)
        await reader.read()

    async with Script(handler) as script:
        client = transport(script.url)
        status, _, body = await fetch(client, script.url + "/")
        await client.aclose()
    assert (status, body) == (200, b"hello world")


async def test_body_until_close_without_length_or_chunking():
    async def handler(reader, writer):
        await script.head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\npart one, ")
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(b"part two")
        await writer.drain()

    async with Script(handler) as script:
        client = transport(script.url)
        status, _, body = await fetch(client, script.url + "/")
        await client.aclose()
    assert (status, body) == (200, b"part one, part two")


async def test_interim_1xx_responses_are_skipped():
    async def handler(reader, writer):
        await script.head(reader)
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n"
                     b"HTTP/1.1 103 Early Hints\r\nlink: </s.css>\r\n\r\n" + answer(b"final"))
        await reader.read()

    async with Script(handler) as script:
        client = transport(script.url)
        status, headers, body = await fetch(client, script.url + "/")
        await client.aclose()
    assert (status, body) == (200, b"final")
    assert (b"link", b"</s.css>") not in headers


@pytest.mark.parametrize(("method", "status"), [("HEAD", 200), ("GET", 204), ("GET", 304)])
async def test_head_204_and_304_have_no_body_and_the_next_request_still_works(method, status):
    async def handler(reader, writer):
        while True:
            head = await script.head(reader)
            if head.startswith(b"HEAD") or b"/first" in head:
                # A HEAD answer declares the length the GET would have, and sends no body.
                writer.write(b"HTTP/1.1 %d X\r\ncontent-length: 10\r\n\r\n" % status
                             if method == "HEAD" else b"HTTP/1.1 %d X\r\n\r\n" % status)
            else:
                writer.write(answer(b"second"))
            await writer.drain()

    async with Script(handler) as script:
        client = transport(script.url)
        first = await fetch(client, script.url + "/first", method)
        second = await fetch(client, script.url + "/second")
        await client.aclose()
    assert (first[0], first[2]) == (status, b"")
    assert (second[0], second[2]) == (200, b"second")


async def test_content_length_and_chunked_request_framing():
    received: list[bytes] = []

    async def handler(reader, writer):
        while True:
            head = await script.head(reader)
            if b"content-length: 3" in head.lower():
                received.append(await reader.readexactly(3))
            else:
                raw = b""
                while not raw.endswith(b"0\r\n\r\n"):
                    raw += await reader.read(1024)
                received.append(raw)
            writer.write(answer())
            await writer.drain()

    async def stream() -> AsyncIterator[bytes]:
        yield b"ab"
        yield b"c"

    async with Script(handler) as script:
        client = transport(script.url)
        await fetch(client, script.url + "/", "POST", body=b"xyz")
        await fetch(client, script.url + "/", "POST", body=stream())
        await client.aclose()
    assert b"content-length: 3" in script.heads[0]
    assert b"transfer-encoding: chunked" in script.heads[1]
    assert received == [b"xyz", b"2\r\nab\r\n1\r\nc\r\n0\r\n\r\n"]


async def test_a_large_response_is_streamed_not_buffered_whole():
    size = 8 * 1024 * 1024

    async def handler(reader, writer):
        await script.head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % size)
        for _ in range(size // 65536):
            writer.write(b"x" * 65536)
            await writer.drain()

    async with Script(handler) as script:
        client = transport(script.url)
        response = await client.request("GET", script.url + "/", [(b"host", b"up")], None)
        sizes = [len(chunk) async for chunk in response.stream()]
        await response.close()
        await client.aclose()
    assert sum(sizes) == size
    assert max(sizes) < size and len(sizes) > 1


@pytest.mark.parametrize("wire", [
    b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort",  # then the upstream closes
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",  # a bad chunk size
    b"NOT HTTP AT ALL\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\nab",
])
async def test_broken_framing_is_a_protocol_error(wire: bytes):
    async def handler(reader, writer):
        await script.head(reader)
        writer.write(wire)
        await writer.drain()

    async with Script(handler) as script:
        client = transport(script.url)
        with pytest.raises(UpstreamError) as caught:
            await fetch(client, script.url + "/")
        await client.aclose()
    assert caught.value.kind == "protocol"


async def test_a_slow_body_times_out_per_read_not_per_response():
    async def handler(reader, writer):
        await script.head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\n")
        for piece in (b"a", b"b", b"c"):  # each within the read timeout, together longer
            await asyncio.sleep(0.2)
            writer.write(piece)
            await writer.drain()
        await asyncio.sleep(2)  # the last byte never comes in time
        writer.write(b"d")

    async with Script(handler) as script:
        client = transport(script.url, read=0.4)
        response = await client.request("GET", script.url + "/", [(b"host", b"up")], None)
        got = b""
        with pytest.raises(UpstreamError) as caught:
            async for chunk in response.stream():
                got += chunk
        await response.close()
        await client.aclose()
    assert got == b"abc"
    assert caught.value.kind == "timeout"


async def test_no_answer_in_time_is_a_timeout():
    async def handler(reader, writer):
        await script.head(reader)
        await asyncio.sleep(3)

    async with Script(handler) as script:
        client = transport(script.url, read=0.3)
        with pytest.raises(UpstreamError) as caught:
            await fetch(client, script.url + "/")
        await client.aclose()
    assert caught.value.kind == "timeout"


async def test_nothing_listening_is_a_connect_error():
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    client = transport(f"http://127.0.0.1:{port}")
    with pytest.raises(UpstreamError) as caught:
        await fetch(client, f"http://127.0.0.1:{port}/")
    assert caught.value.kind == "connect"


@pytest.mark.parametrize(("method", "retried"), [("GET", True), ("PUT", True), ("POST", False)])
async def test_a_stale_keep_alive_connection_is_retried_for_idempotent_methods_only(
        method: str, retried: bool):
    async def handler(reader, writer):
        if script.connections > 1:
            await keep_answering(script, reader, writer, answer(b"again"))
        await script.head(reader)
        writer.write(answer(b"first"))
        await writer.drain()
        await script.head(reader)  # the second request arrives on the kept-alive connection
        # ... and the upstream closes it without an answer, as when an idle close races it

    async with Script(handler) as script:
        client = transport(script.url)
        assert (await fetch(client, script.url + "/", method, body=b"x"))[2] == b"first"
        if retried:
            assert (await fetch(client, script.url + "/", method, body=b"x"))[2] == b"again"
        else:
            with pytest.raises(UpstreamError):
                await fetch(client, script.url + "/", method, body=b"x")
        await client.aclose()
    assert script.connections == (2 if retried else 1)


async def test_connections_are_reused_and_capped_by_max_connections():
    active = [0]
    peak = [0]

    async def handler(reader, writer):
        while True:
            await script.head(reader)
            active[0] += 1
            peak[0] = max(peak[0], active[0])
            await asyncio.sleep(0.05)
            active[0] -= 1
            writer.write(answer())
            await writer.drain()

    async with Script(handler) as script:
        client = transport(script.url, max_connections=3, connect=5)
        results = await asyncio.gather(*(fetch(client, script.url + "/") for _ in range(12)))
        await client.aclose()
    assert all(status == 200 for status, _, _ in results)
    assert peak[0] == 3 and script.connections == 3


async def test_an_unread_body_does_not_leak_into_the_next_response():
    async def handler(reader, writer):
        while True:
            head = await script.head(reader)
            body = b"x" * 200_000 if b"/big" in head else b"small"
            writer.write(answer(body))
            await writer.drain()

    async with Script(handler) as script:
        client = transport(script.url)
        response = await client.request("GET", script.url + "/big", [(b"host", b"up")], None)
        await response.close()  # the client went away before reading it
        assert (await fetch(client, script.url + "/next"))[2] == b"small"
        await client.aclose()


async def test_tls_upstreams_verify_the_certificate():
    async def handler(reader, writer):
        await reader.read(1)

    async with Script(handler) as script:
        url = script.url.replace("http://", "https://")
        client = transport(url)
        with pytest.raises(UpstreamError) as caught:  # a plain-TCP peer fails the handshake
            await fetch(client, url + "/")
        await client.aclose()
    assert caught.value.kind in ("connect", "protocol")
    assert isinstance(client._pool.tls, ssl.SSLContext)
    assert client._pool.tls.verify_mode == ssl.CERT_REQUIRED
