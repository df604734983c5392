"""aigw's own HTTP/1.1 client on httptools behind the transport seam (`transport: httptools`).

Chosen by measurement (bench/README.md): per request it costs a fraction of aiohttp's CPU, and
unlike the faster Rust clients it sends the request target byte for byte and adds no header.

- The request goes out as given: method, raw target, header names and values, in order; Host is
  added only when absent. A body held in memory gets `Content-Length` if it has none and is
  written with the head in one write; a streamed body keeps the client's `Content-Length`, or
  is sent chunked.
- The response head arrives as raw `(name, value)` pairs, repeated fields kept, within the
  upstream's head caps; 1xx interim responses are skipped (a few, never a 101); HEAD, 204 and
  304 have no body; the body is de-framed (chunked, Content-Length, or until close) and never
  decoded.
- A connection goes back to the pool only when its exchange ended exactly, and leaves it only
  when nothing arrived while it was idle (h1_connection.py).
- A request whose reused keep-alive connection closed before any byte of an answer came back
  is sent once more on a new connection, when its method is idempotent and its body was not
  streamed; the upstream closing an idle connection is then invisible to the client. A timeout
  is never retried: the upstream may be working on the request, and would get it twice.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

from gateway.asgi import RawHeaders
from gateway.settings import Upstream
from gateway.upstream.base import Body, Transport, UpstreamError, UpstreamResponse
from gateway.upstream.h1_connection import H1Connection
from gateway.upstream.h1_pool import H1Pool
from gateway.upstream.headcaps import HeadCaps

IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"})
_FRAMING = frozenset({b"content-length", b"transfer-encoding"})


class H1Response(UpstreamResponse):
    def __init__(self, pool: H1Pool, connection: H1Connection, status: int,
                 headers: RawHeaders, bodyless: bool) -> None:
        self._pool = pool
        self._connection: H1Connection | None = connection
        self.status = status
        self.headers = headers
        self._bodyless = bodyless

    async def stream(self) -> AsyncIterator[bytes]:
        connection = self._connection
        if connection is None or self._bodyless:
            return
        while (chunk := await connection.next_chunk()) is not None:
            yield chunk

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.stream()])

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        # A HEAD answer that declares a body leaves the parser waiting for it: not finished.
        if connection.finished:
            self._pool.release(connection)
        else:
            self._pool.discard(connection)  # unread body: the connection cannot be reused


class H1Transport(Transport):
    def __init__(self, upstream: Upstream) -> None:
        super().__init__(upstream)
        parts = urlsplit(upstream.url)
        tls = ssl.create_default_context() if parts.scheme == "https" else None
        port = parts.port or (443 if tls else 80)
        timeouts = upstream.timeout
        self._pool = H1Pool(parts.hostname or "", port, tls, upstream.max_connections,
                            timeouts.connect, timeouts.read, HeadCaps.of(upstream))
        self._prefix = len(f"{parts.scheme}://{parts.netloc}")
        default_port = 443 if tls else 80
        host = parts.hostname or ""
        host = f"[{host}]" if ":" in host else host
        self._host = (host if port == default_port else f"{host}:{port}").encode("idna")

    async def request(
        self, method: str, url: str, headers: RawHeaders, body: Body | None
    ) -> UpstreamResponse:
        target = url[self._prefix:] or "/"
        streamed = body is not None and not isinstance(body, bytes)
        head = self._head(method, target, headers, body, streamed)
        held = body if isinstance(body, bytes) else None
        connection, reused = await self._pool.acquire()
        try:
            status, fields = await self._exchange(connection, head, held, body, streamed)
        except UpstreamError as error:
            self._pool.discard(connection)
            if not (reused and _closed_unanswered(error, connection, method, streamed)):
                raise
            connection = await self._pool.acquire_new()
            try:
                status, fields = await self._exchange(connection, head, held, body, False)
            except BaseException:
                self._pool.discard(connection)
                raise
        except BaseException:
            self._pool.discard(connection)
            raise
        bodyless = method == "HEAD" or status in (204, 304)
        return H1Response(self._pool, connection, status, fields, bodyless)

    async def _exchange(self, connection: H1Connection, head: bytes, held: bytes | None,
                        body: Body | None, streamed: bool) -> tuple[int, RawHeaders]:
        connection.send(head, held)
        if streamed:
            await _send_stream(connection, body, chunked=b"transfer-encoding: chunked" in head)
        connection.body_sent()
        return await connection.response_head()

    def _head(self, method: str, target: str, headers: RawHeaders, body: Body | None,
              streamed: bool) -> bytes:
        lines = [f"{method} {target} HTTP/1.1\r\n".encode("latin-1")]
        has_host = has_length = False
        for name, value in headers:
            lowered = name.lower()
            if lowered == b"host":
                has_host = True
            elif lowered in _FRAMING:
                if lowered == b"transfer-encoding":
                    continue  # the framing below is the one that holds for what is sent
                has_length = True
            lines.append(b"%s: %s\r\n" % (name, value))
        if not has_host:
            lines.insert(1, b"host: %s\r\n" % self._host)
        if isinstance(body, bytes) and not has_length:
            lines.append(b"content-length: %d\r\n" % len(body))
        elif streamed and not has_length:
            lines.append(b"transfer-encoding: chunked\r\n")
        lines.append(b"\r\n")
        return b"".join(lines)

    async def aclose(self) -> None:
        await self._pool.aclose()


def _closed_unanswered(error: UpstreamError, connection: H1Connection, method: str,
                       streamed: bool) -> bool:
    """The connection closed before any byte of an answer (an idle close racing the request),
    and the request is idempotent and held whole, so sending it again is safe."""
    return (error.kind == "protocol" and not connection.received_any and not streamed
            and method in IDEMPOTENT)


async def _send_stream(connection: H1Connection, body: Body | None, *, chunked: bool) -> None:
    assert body is not None and not isinstance(body, bytes)
    async for chunk in body:
        if chunk:
            await connection.send_chunk(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
    if chunked:
        await connection.send_chunk(b"0\r\n\r\n")
