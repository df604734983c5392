"""Protocol tests for aigw's own HTTP/1.1 upstream client (`transport: httptools`).

Each test runs a scripted upstream on a loopback socket that answers with exact bytes: split
chunks, 1xx, bad framing, early closes, slow bodies, closed keep-alive connections, answers no
request asked for, and heads over the caps.
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
              max_connections: int = 10, **settings: int) -> H1Transport:
    return H1Transport(Upstream.model_validate({
        "url": url, "transport": "httptools", "max_connections": max_connections,
        "timeout": {"connect": connect, "read": read}, **settings,
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


async def test_a_timeout_on_a_reused_connection_is_never_retried():
    async def handler(reader, writer):
        await script.head(reader)
        writer.write(answer(b"first"))
        await writer.drain()
        await script.head(reader)  # the upstream is working on it, slower than the timeout
        await asyncio.sleep(3)

    async with Script(handler) as script:
        client = transport(script.url, read=0.3)
        assert (await fetch(client, script.url + "/"))[2] == b"first"
        with pytest.raises(UpstreamError) as caught:
            await fetch(client, script.url + "/")
        await client.aclose()
    assert caught.value.kind == "timeout"
    assert (script.connections, len(script.heads)) == (1, 2)  # the upstream got it once


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


async def test_an_answer_sent_while_idle_closes_the_connection_and_never_reaches_a_client():
    async def handler(reader, writer):
        await script.head(reader)
        writer.write(answer(b"first"))
        await writer.drain()
        await asyncio.sleep(0.1)
        writer.write(answer(b"INJECTED-BODY"))  # while the connection sits idle in the pool
        await keep_answering(script, reader, writer, answer(b"poisoned"))

    async def fresh(reader, writer):
        await keep_answering(script, reader, writer, answer(b"own"))

    async def either(reader, writer):
        await (handler if script.connections == 1 else fresh)(reader, writer)

    async with Script(either) as script:
        client = transport(script.url)
        assert (await fetch(client, script.url + "/a"))[2] == b"first"
        await asyncio.sleep(0.3)
        assert (await fetch(client, script.url + "/b"))[2] == b"own"
        await client.aclose()
    assert script.connections == 2


async def test_an_answer_cut_short_by_the_idle_close_is_not_reused():
    async def handler(reader, writer):
        await script.head(reader)
        writer.write(answer(b"first"))
        await writer.drain()
        await asyncio.sleep(0.1)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nINJEC")  # half an answer
        await keep_answering(script, reader, writer, answer(b"poisoned"))

    async def either(reader, writer):
        if script.connections == 1:
            await handler(reader, writer)
        await keep_answering(script, reader, writer, answer(b"own"))

    async with Script(either) as script:
        client = transport(script.url)
        await fetch(client, script.url + "/a")
        await asyncio.sleep(0.3)
        assert (await fetch(client, script.url + "/b"))[2] == b"own"
        await client.aclose()
    assert script.connections == 2


async def test_bytes_beyond_the_declared_end_are_no_part_of_the_body_and_end_the_connection():
    async def handler(reader, writer):
        if script.connections == 1:
            await script.head(reader)
            writer.write(answer(b"ok") + answer(b"INJECTED-BODY"))  # one write, two answers
            await writer.drain()
        await keep_answering(script, reader, writer, answer(b"own"))

    async with Script(handler) as script:
        client = transport(script.url)
        status, headers, body = await fetch(client, script.url + "/a")
        assert (status, body) == (200, b"ok")
        assert (await fetch(client, script.url + "/b"))[2] == b"own"
        await client.aclose()
    assert headers == [(b"content-length", b"2")]
    assert script.connections == 2


async def test_an_answer_that_ends_before_the_request_was_sent_ends_the_connection():
    async def handler(reader, writer):  # answers each head at once, reading no body
        await keep_answering(script, reader, writer, answer(b"early"))

    async def stream() -> AsyncIterator[bytes]:
        yield b"a"
        await asyncio.sleep(0.1)  # the whole answer is in by now
        yield b"b"

    async with Script(handler) as script:
        client = transport(script.url)
        assert (await fetch(client, script.url + "/", "POST", body=stream()))[2] == b"early"
        assert (await fetch(client, script.url + "/"))[2] == b"early"
        await client.aclose()
    assert script.connections == 2


async def test_a_body_left_unread_is_not_reused():
    async def handler(reader, writer):
        await keep_answering(script, reader, writer, answer(b"x" * 1000))

    async with Script(handler) as script:
        client = transport(script.url)
        response = await client.request("GET", script.url + "/", [(b"host", b"up")], None)
        await response.close()
        await fetch(client, script.url + "/")
        await fetch(client, script.url + "/")
        await client.aclose()
    assert script.connections == 2  # the first was dropped; the second carried two exchanges


@pytest.mark.parametrize("extra", [
    b"x-long: " + b"a" * 2_000_000 + b"\r\n",  # one huge line, arriving over many reads
    b"x-long: " + b"a" * 70_000 + b"\r\n",
    b"".join(b"x-f%d: v\r\n" % i for i in range(50_000)),
    b"".join(b"x-f%d: v\r\n" % i for i in range(100)),  # with content-length: 101 fields
])
async def test_a_response_head_over_the_caps_is_a_protocol_error(extra: bytes):
    async def handler(reader, writer):
        await script.head(reader)
        writer.write(answer(b"ok", extra))
        await writer.drain()
        await reader.read()

    async with Script(handler) as script:
        client = transport(script.url)
        with pytest.raises(UpstreamError) as caught:
            await fetch(client, script.url + "/")
        await client.aclose()
    assert caught.value.kind == "protocol"


async def test_a_response_head_at_the_caps_passes():
    extra = b"".join(b"x-f%d: v\r\n" % i for i in range(99))

    async def handler(reader, writer):
        await keep_answering(script, reader, writer, answer(b"ok", extra))

    async with Script(handler) as script:
        client = transport(script.url)
        status, headers, _ = await fetch(client, script.url + "/")
        await client.aclose()
    assert status == 200 and len(headers) == 100


async def test_the_caps_are_set_per_upstream():
    extra = b"".join(b"x-f%d: %s\r\n" % (i, b"v" * 20) for i in range(120))  # 3 KB

    async def handler(reader, writer):
        await keep_answering(script, reader, writer, answer(b"ok", extra))

    async with Script(handler) as script:
        roomy = transport(script.url, max_response_headers=150)
        strict = transport(script.url, max_response_headers=150, max_response_header_bytes=1024)
        assert (await fetch(roomy, script.url + "/"))[0] == 200
        with pytest.raises(UpstreamError):
            await fetch(strict, script.url + "/")
        await roomy.aclose()
        await strict.aclose()


def chunked_with_trailers(trailers: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntrailer: x-t\r\n\r\n"
            b"2\r\nok\r\n0\r\n" + trailers + b"\r\n")


async def test_trailers_count_towards_the_caps_and_are_never_kept():
    async def handler(reader, writer):
        while True:
            head = await script.head(reader)
            count = 1 if b"/few" in head else 200
            trailers = b"".join(b"x-t%d: v\r\n" % i for i in range(count))
            writer.write(chunked_with_trailers(trailers))
            await writer.drain()

    async with Script(handler) as script:
        client = transport(script.url)
        status, headers, body = await fetch(client, script.url + "/few")
        with pytest.raises(UpstreamError) as caught:
            await fetch(client, script.url + "/many")
        await client.aclose()
    assert (status, body) == (200, b"ok")
    assert all(not name.startswith(b"x-t") for name, _ in headers)
    assert caught.value.kind == "protocol"


@pytest.mark.parametrize("framing", [
    b"2;ext=" + b"e" * 200_000 + b"\r\nok\r\n0\r\n\r\n",  # an endless chunk extension
    b"2\r\nok\r\n0\r\nx-t: " + b"a" * 200_000 + b"\r\n\r\n",  # an endless trailer line
])
async def test_framing_bytes_after_the_head_are_bounded_like_a_head(framing: bytes):
    async def handler(reader, writer):
        await script.head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        await writer.drain()
        for start in range(0, len(framing), 16384):
            writer.write(framing[start:start + 16384])
            await writer.drain()
            await asyncio.sleep(0.001)
        await reader.read()

    async with Script(handler) as script:
        client = transport(script.url)
        with pytest.raises(UpstreamError) as caught:
            await fetch(client, script.url + "/")
        await client.aclose()
    assert caught.value.kind == "protocol"


async def test_endless_interim_responses_are_a_protocol_error_soon():
    async def handler(reader, writer):
        await script.head(reader)
        while True:
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            await writer.drain()
            await asyncio.sleep(0.01)

    async with Script(handler) as script:
        client = transport(script.url, read=5)
        with pytest.raises(UpstreamError) as caught:
            async with asyncio.timeout(2):
                await fetch(client, script.url + "/")
        await client.aclose()
    assert caught.value.kind == "protocol"


async def test_interim_responses_do_not_extend_the_time_the_head_has():
    async def handler(reader, writer):
        await script.head(reader)
        for _ in range(5):  # few enough, but together later than the read timeout
            await asyncio.sleep(0.2)
            writer.write(b"HTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n")
            await writer.drain()
        writer.write(answer(b"late"))
        await reader.read()

    async with Script(handler) as script:
        client = transport(script.url, read=0.5)
        with pytest.raises(UpstreamError) as caught:
            await fetch(client, script.url + "/")
        await client.aclose()
    assert caught.value.kind == "timeout"


async def test_a_101_to_a_plain_request_is_a_protocol_error():
    async def handler(reader, writer):
        await script.head(reader)
        writer.write(b"HTTP/1.1 101 Switching Protocols\r\nupgrade: raw\r\nconnection: upgrade"
                     b"\r\n\r\nRAW-PROTOCOL-BYTES")
        await writer.drain()
        await reader.read()

    async with Script(handler) as script:
        client = transport(script.url)
        with pytest.raises(UpstreamError) as caught:
            async with asyncio.timeout(2):
                await fetch(client, script.url + "/")
        await client.aclose()
    assert caught.value.kind == "protocol"
