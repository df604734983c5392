"""One HTTP/1.1 client connection: an asyncio protocol that parses responses with httptools.

A connection carries one exchange at a time, and carries another only when this one ended
exactly: the request sent whole before the response ended, the response read to the end its
framing declares (Content-Length or the last chunk; a body that ends at the close never does),
keep-alive on both sides, and not one byte after it. A byte that comes while the connection is
idle, or after its response has ended, closes it at once: it is never handed out again.

The response head is handed over as soon as it is parsed. Up to `MAX_INTERIM` 1xx interim
responses before it are skipped; a 101 is refused (this client never asks to switch protocols).
The head, interim ones included, must arrive within `read_timeout` of the request's end, and
every head is held to the caps (`HeadCaps`): its trailers count towards them and are dropped.
The body follows as chunks in a queue that pauses reading when it holds more than `_HIGH_WATER`
bytes; `read_timeout` bounds every wait for body bytes, as a socket read timeout does.
"""

from __future__ import annotations

import asyncio
from collections import deque

import httptools

from gateway.asgi import RawHeaders
from gateway.upstream.base import UpstreamError
from gateway.upstream.headcaps import MAX_INTERIM, HeadCaps

_HIGH_WATER = 256 * 1024
_LOW_WATER = 64 * 1024
# Room for what the field count leaves out of a raw head: the status line, ": " and CRLF.
_FRAMING_PER_FIELD = 4
_FRAMING_SLACK = 1024

# Where the connection is in its exchange.
_IDLE, _HEAD, _BODY, _DONE = range(4)


class H1Connection(asyncio.Protocol):
    # Slots: an instance of this many attributes is near the point (30 in CPython 3.11) past
    # which its dict stops sharing the class's keys and every attribute read slows down.
    __slots__ = (
        "_buffered", "_chunks", "_error", "_field_bytes", "_fields", "_head", "_head_deadline",
        "_headers", "_interims", "_keep_alive", "_last_data", "_parser", "_progress",
        "_reading_paused", "_request_sent", "_state", "_timer", "_unframed",
        "_unframed_allowance", "_until_close", "_wake", "_writable", "caps", "closed", "loop",
        "read_timeout", "received_any", "transport",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop, read_timeout: float,
                 caps: HeadCaps) -> None:
        self.loop = loop
        self.read_timeout = read_timeout
        self.caps = caps
        self._unframed_allowance = (caps.max_header_bytes + _FRAMING_SLACK
                                    + _FRAMING_PER_FIELD * caps.max_headers)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.received_any = False  # some byte of the current exchange arrived
        self._state = _IDLE
        self._parser = httptools.HttpResponseParser(self)
        self._head: asyncio.Future[tuple[int, RawHeaders]] | None = None
        self._headers: RawHeaders = []
        self._fields = 0  # header fields of the message being parsed, trailers included
        self._field_bytes = 0
        self._interims = 0
        self._unframed = 0  # bytes in reads that neither began nor ended a head nor held body
        self._progress = False  # the current read began or ended a head, or held body bytes
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._until_close = False  # no Content-Length, not chunked: the body ends at close
        self._keep_alive = False
        self._request_sent = False
        self._error: UpstreamError | None = None
        self._wake: asyncio.Future[None] | None = None
        self._reading_paused = False
        self._writable: asyncio.Future[None] | None = None
        self._last_data = 0.0
        self._head_deadline = 0.0
        self._timer: asyncio.TimerHandle | None = None

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self._state == _IDLE or self._state == _DONE:
            self.close()  # bytes that answer no request: the connection is poisoned
            return
        self.received_any = True
        self._last_data = self.loop.time()
        self._progress = False
        try:
            self._parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            cause = exc.__context__
            self._fail(cause if isinstance(cause, UpstreamError) else UpstreamError("protocol"))
            self.close()
            return
        if self._state != _DONE:
            self._count_unframed(len(data))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._state == _BODY and self._until_close:
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

    # httptools callbacks; an UpstreamError raised in one fails the exchange (data_received)
    def on_message_begin(self) -> None:
        if self._state != _HEAD:
            raise UpstreamError("protocol")  # a second answer to one request
        self._fields = self._field_bytes = 0
        self._progress = True

    def on_header(self, name: bytes, value: bytes) -> None:
        self._fields += 1
        self._field_bytes += len(name) + len(value)
        if self._fields > self.caps.max_headers or self._field_bytes > self.caps.max_header_bytes:
            raise UpstreamError("protocol")
        if self._state == _HEAD:  # a trailer is counted, never kept
            self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        self._progress = True
        status = self._parser.get_status_code()
        if status < 200:
            self._skip_interim(status)
            return
        self._state = _BODY
        chunked = any(n.lower() == b"transfer-encoding" for n, _ in self._headers)
        sized = any(n.lower() == b"content-length" for n, _ in self._headers)
        self._until_close = not chunked and not sized and status not in (204, 304)
        assert self._head is not None
        if not self._head.done():
            self._head.set_result((status, self._headers))

    def on_body(self, body: bytes) -> None:
        self._progress = True
        self._chunks.append(body)
        self._buffered += len(body)
        if self._buffered > _HIGH_WATER and not self._reading_paused and self.transport:
            self._reading_paused = True
            self.transport.pause_reading()
        self._wakeup()

    def on_message_complete(self) -> None:
        if self._state == _HEAD:
            return  # the end of an interim (1xx) response
        self._state = _DONE
        self._keep_alive = self._request_sent and self._parser.should_keep_alive()
        self._cancel_timer()
        self._wakeup()

    def _skip_interim(self, status: int) -> None:
        self._interims += 1
        if status < 100 or status == 101 or self._interims > MAX_INTERIM:
            raise UpstreamError("protocol")
        self._headers = []  # the final response follows

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
            if self._state == _DONE:
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
        return self._state == _DONE and not self._chunks

    @property
    def reusable(self) -> bool:
        """The exchange ended exactly, nothing came after it, and both sides keep the connection."""
        return self.finished and self._keep_alive and not self._reading_paused \
            and not self.closing

    @property
    def ready(self) -> bool:
        """Idle in the pool with nothing received meanwhile (data or EOF would have closed it)."""
        return self._state == _IDLE and not self.closing

    @property
    def closing(self) -> bool:
        return self.closed or self.transport is None or self.transport.is_closing()

    def park(self) -> None:
        """Back to idle after a reusable exchange: from now on any byte received closes it."""
        self._state = _IDLE
        self._head = None
        self._headers = []

    def close(self) -> None:
        self._keep_alive = False
        if self.transport is not None and not self.closed:
            self.transport.close()

    def _start_exchange(self) -> None:
        assert self._state == _IDLE
        self._state = _HEAD
        self._head = self.loop.create_future()
        self._headers = []
        self._chunks.clear()
        self._buffered = self._interims = self._unframed = 0
        self._until_close = self._keep_alive = self._request_sent = self.received_any = False
        self._error = None

    def body_sent(self) -> None:
        """The request is on its way: the head is due within `read_timeout`, then each read."""
        self._request_sent = True
        if self._state == _DONE or self._error is not None:
            return
        self._last_data = self.loop.time()
        self._head_deadline = self._last_data + self.read_timeout
        self._timer = self.loop.call_at(self._head_deadline, self._check_timeout)

    def _check_timeout(self) -> None:
        """Fire `timeout` once the head is late or no body byte has arrived for `read_timeout`;
        else look again later. While reading is paused the wait is ours, not the upstream's."""
        if self._state == _HEAD:
            deadline = self._head_deadline  # interim responses do not extend it
        elif self._reading_paused:
            deadline = self.loop.time() + self.read_timeout
        else:
            deadline = self._last_data + self.read_timeout
        if self.loop.time() < deadline:
            self._timer = self.loop.call_at(deadline, self._check_timeout)
            return
        self._timer = None
        self._fail(UpstreamError("timeout"))
        self.close()

    def _count_unframed(self, size: int) -> None:
        """Bound what httptools buffers until it ends (a header line, chunk framing, trailers):
        reads that began or ended a head or held body bytes are not counted, so the bound is
        loose by at most one read, never falsely tight."""
        self._unframed = 0 if self._progress else self._unframed + size
        if self._unframed > self._unframed_allowance:
            self._fail(UpstreamError("protocol"))
            self.close()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fail(self, error: UpstreamError) -> None:
        if self._state == _DONE:
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
