"""One HTTP/1.1 client connection: an asyncio protocol that parses responses with httptools.

A connection carries one exchange at a time. The response head is handed over as soon as it is
parsed (1xx interim responses are skipped); the body follows as chunks in a queue that pauses
reading when it holds more than `_HIGH_WATER` bytes. `read_timeout` bounds every wait for bytes
from the upstream, as a socket read timeout does.
"""

from __future__ import annotations

import asyncio
from collections import deque

import httptools

from gateway.upstream.base import RawHeaders, UpstreamError

_HIGH_WATER = 256 * 1024
_LOW_WATER = 64 * 1024


class H1Connection(asyncio.Protocol):
    def __init__(self, loop: asyncio.AbstractEventLoop, read_timeout: float) -> None:
        self.loop = loop
        self.read_timeout = read_timeout
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = False  # set when an exchange ended cleanly on a keep-alive connection
        self.received_any = False  # some byte of the current exchange arrived
        self._parser = httptools.HttpResponseParser(self)
        self._head: asyncio.Future[tuple[int, RawHeaders]] | None = None
        self._headers: RawHeaders = []
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._complete = False
        self._until_close = False  # no Content-Length, not chunked: the body ends at close
        self._error: UpstreamError | None = None
        self._wake: asyncio.Future[None] | None = None
        self._reading_paused = False
        self._writable: asyncio.Future[None] | None = None
        self._last_data = 0.0
        self._timer: asyncio.TimerHandle | None = None

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.received_any = True
        self._last_data = self.loop.time()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            self._fail(UpstreamError("protocol"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        if self._head is not None and not self._complete and self._until_close:
            self.on_message_complete()  # a body delimited by the close has ended
        else:
            self._fail(UpstreamError("protocol"))
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._cancel_timer()

    def pause_writing(self) -> None:
        self._writable = self.loop.create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._writable = None

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            self._headers = []  # an interim response: the final one follows
            return
        chunked = any(n.lower() == b"transfer-encoding" for n, _ in self._headers)
        sized = any(n.lower() == b"content-length" for n, _ in self._headers)
        self._until_close = not chunked and not sized and status not in (204, 304)
        if self._head is not None and not self._head.done():
            self._head.set_result((status, self._headers))

    def on_body(self, body: bytes) -> None:
        self._chunks.append(body)
        self._buffered += len(body)
        if self._buffered > _HIGH_WATER and not self._reading_paused and self.transport:
            self._reading_paused = True
            self.transport.pause_reading()
        self._wakeup()

    def on_message_complete(self) -> None:
        if self._head is None or not self._head.done():
            return  # the end of an interim (1xx) response
        self._complete = True
        self._cancel_timer()
        self.reusable = not self.closed and self._parser.should_keep_alive()
        self._wakeup()

    # the exchange
    def send(self, head: bytes, body: bytes | None) -> None:
        """Write the request head (and a body held in memory) in one write."""
        assert self.transport is not None
        self._start_exchange()
        self.transport.write(head + body if body else head)

    async def send_chunk(self, data: bytes) -> None:
        assert self.transport is not None
        if self.closed:
            raise UpstreamError("protocol")
        self.transport.write(data)
        if self._writable is not None:
            await self._writable

    async def response_head(self) -> tuple[int, RawHeaders]:
        assert self._head is not None
        return await self._head

    async def next_chunk(self) -> bytes | None:
        """The next piece of the body, or None once it has ended."""
        while not self._chunks:
            if self._complete:
                return None
            if self._error is not None:
                raise self._error
            self._wake = self.loop.create_future()
            await self._wake
        chunk = self._chunks.popleft()
        self._buffered -= len(chunk)
        if self._reading_paused and self._buffered < _LOW_WATER and self.transport:
            self._reading_paused = False
            self._last_data = self.loop.time()
            self.transport.resume_reading()
        return chunk

    @property
    def finished(self) -> bool:
        """The response has been read to its end."""
        return self._complete and not self._chunks

    def close(self) -> None:
        self.reusable = False
        if self.transport is not None and not self.closed:
            self.transport.close()

    def _start_exchange(self) -> None:
        self._head = self.loop.create_future()
        self._headers = []
        self._chunks.clear()
        self._buffered = 0
        self._complete = self._until_close = self.reusable = self.received_any = False
        self._error = None

    def body_sent(self) -> None:
        """The request is on its way: from now on the upstream has `read_timeout` per read."""
        if self._complete or self._error is not None:
            return
        self._last_data = self.loop.time()
        self._timer = self.loop.call_at(self._last_data + self.read_timeout, self._check_timeout)

    def _check_timeout(self) -> None:
        """Fire `timeout` once no byte has arrived for `read_timeout`; else look again later.
        While reading is paused the wait is ours, not the upstream's."""
        deadline = self._last_data + self.read_timeout
        if self._reading_paused:
            deadline = self.loop.time() + self.read_timeout
        if self.loop.time() < deadline:
            self._timer = self.loop.call_at(deadline, self._check_timeout)
            return
        self._timer = None
        self._fail(UpstreamError("timeout"))
        self.close()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fail(self, error: UpstreamError) -> None:
        if self._complete:
            return
        self._error = self._error or error
        self._cancel_timer()
        if self._head is not None and not self._head.done():
            self._head.set_exception(self._error)
        self._wakeup()

    def _wakeup(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)
        self._wake = None
