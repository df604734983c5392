"""The listener's HTTP/1.1 protocol: uvicorn's httptools protocol with the edge's own limits.

- Header count and size caps, counted while the head arrives (never buffered whole first):
  over either, the answer is a short JSON 431 and the connection closes.
- A header-read timeout: a request head must be complete within `header_timeout` of its first
  byte (of the connection's start, for its first request). Late, the connection gets a JSON
  408 when some of the head has arrived, or is simply closed when nothing has. Bodies are
  timed where they are read (bodytimer.py).
- After the head, bytes that carry no body (chunk framing, chunk extensions, trailers, which
  httptools also buffers until they end) are bounded like a head: more than a head's worth
  since the last body bytes is 431. Trailer fields count towards the header caps and are
  dropped: they never join the request's headers.
- Malformed HTTP is answered with a short JSON 400 `invalid_http` instead of uvicorn's text.
- Upgrades: uvicorn runs with `ws="none"`, so an upgrade request (a WebSocket handshake) is an
  ordinary request to the app, which refuses a WebSocket in the path owner's dialect
  (`gateway/upgrades.py`). What follows its head belongs to the protocol the client hoped
  for: it is dropped, and the connection closes after the answer. An upgrade request with a
  body is 400 `invalid_http`: the parser would hand the body to that other protocol.

Every such answer carries a fresh request id (body and `X-Request-Id`) and `Connection: close`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, ClassVar

import httptools
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from gateway import errors, observability
from gateway.asgi import RawHeaders
from gateway.bodytimer import has_body
from gateway.coalesce import CoalescingTransport
from gateway.context import new_request_id
from gateway.headlimits import HeadLimits, head_too_large, too_many_headers

log = logging.getLogger("aigw.edge")

# Room for what the byte count leaves out of the raw head: the method and version, ": " and CRLF
# around each field, and some optional whitespace.
_FRAMING_PER_FIELD = 4
_FRAMING_SLACK = 1024
_LINGER_SECONDS = 2.0


class _HeadRefused(Exception):
    def __init__(self, error: errors.GatewayError) -> None:
        self.error = error


def protocol_for(limits: HeadLimits) -> type[HttpToolsProtocol]:
    """An `EdgeProtocol` class bound to `limits`, for `uvicorn.Config(http=...)`."""
    return type("EdgeProtocol", (EdgeProtocol,), {"limits": limits})


def refusal(error: errors.GatewayError, request_id: str,
            default_headers: RawHeaders) -> bytes:
    """A complete, closing HTTP/1.1 response carrying the gateway's JSON error."""
    body = errors.json_error_body(error, request_id)
    lines = [STATUS_LINE[error.status]]
    lines.extend(name + b": " + value + b"\r\n" for name, value in default_headers)
    lines.extend([
        b"content-type: application/json\r\n",
        b"content-length: " + str(len(body)).encode() + b"\r\n",
        b"x-request-id: " + request_id.encode() + b"\r\n",
        b"connection: close\r\n\r\n",
        body,
    ])
    return b"".join(lines)


class EdgeProtocol(HttpToolsProtocol):
    limits: ClassVar[HeadLimits] = HeadLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True  # the next bytes belong to a request head
        self._head_started = False  # some of that head has arrived
        self._fresh_in_chunk = False  # a head began, a head ended or body bytes came in this read
        self._header_count = 0
        self._head_bytes = 0  # target + names + values seen so far
        self._raw_head_bytes = 0  # raw bytes of the head in progress, see _count_raw_head
        self._raw_allowance = (self.limits.max_header_bytes + _FRAMING_SLACK
                               + _FRAMING_PER_FIELD * self.limits.max_headers)
        self._head_timer: asyncio.TimerHandle | None = None
        self._refused = False
        self._linger_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        if self._linger_timer is not None:
            self._linger_timer.cancel()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        self._unset_keepalive_if_required()
        self._fresh_in_chunk = False
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._after_upgrade_request()
            return
        except httptools.HttpParserError as exc:
            cause = exc.__context__
            if isinstance(cause, _HeadRefused):
                self._refuse(cause.error)
            else:
                self._refuse(errors.GatewayError(400, "invalid_http", "Malformed HTTP request."))
            return
        self._count_raw_head(len(data))

    def _count_raw_head(self, size: int) -> None:
        """Bound a field still in progress, which httptools buffers until it ends: a head's, or
        after the head whatever carries no body bytes (chunk framing, extensions, trailers).

        A read in which a head began or ended, or body bytes came, may also hold bytes of
        something else, so it is not counted: the bound is then loose by at most one read,
        never falsely tight.
        """
        self._raw_head_bytes = 0 if self._fresh_in_chunk else self._raw_head_bytes + size
        if self._raw_head_bytes > self._raw_allowance:
            self._refuse(head_too_large(self.limits.max_header_bytes))

    # Parser callbacks
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = self._head_started = self._fresh_in_chunk = True
        self._header_count = self._head_bytes = self._raw_head_bytes = 0
        self._arm_head_timer()

    def on_url(self, url: bytes) -> None:
        self._add_head_bytes(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.limits.max_headers:
            raise _HeadRefused(too_many_headers(self.limits.max_headers))
        self._add_head_bytes(len(name) + len(value))
        if self._in_head:  # a trailer would join headers the app has already read
            super().on_header(name, value)

    def on_headers_complete(self) -> None:
        if self.parser.should_upgrade() and has_body(self.headers):
            raise _HeadRefused(errors.GatewayError(
                400, "invalid_http", "An upgrade request cannot carry a body."))
        self._in_head = self._head_started = False
        self._fresh_in_chunk = True
        self._cancel_head_timer()
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        self._fresh_in_chunk = True
        super().on_body(body)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True
        self._began_in_chunk = True  # the rest of this read is a new head: count from there

    def _add_head_bytes(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > self.limits.max_header_bytes:
            raise _HeadRefused(head_too_large(self.limits.max_header_bytes))

    def _after_upgrade_request(self) -> None:
        """The upgrade request is answered as HTTP, then the connection closes; the bytes after
        its head (another protocol's) are never parsed."""
        self._refused = True
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.keep_alive = False
        elif not self.transport.is_closing():
            self.transport.close()

    # Header-read timeout
    def _arm_head_timer(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.limits.header_timeout,
                                                    self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        if not self._head_started:  # nothing sent yet: there is no request to answer
            self._refused = True
            self.transport.close()
            return
        self._refuse(errors.GatewayError(408, "request_timeout",
                                         "The request head did not arrive in time."))

    def _refuse(self, error: errors.GatewayError) -> None:
        """Answer `error` and close, unless a response on this connection is under way."""
        self._refused = True
        self._cancel_head_timer()
        observability.EDGE_REFUSALS.labels(error.code).inc()
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            if not cycle.more_body:  # the fault is in a later, pipelined request
                cycle.keep_alive = False  # close after this response, never interleave
                return
            if cycle.response_started:  # this request's body is broken mid-response
                self.transport.close()
                return
        request_id = new_request_id()
        log.info("request refused by the listener",
                 extra={"fields": {"request_id": request_id, "status": error.status,
                                   "error": error.code}})
        if not self.transport.is_closing():
            self.transport.write(refusal(error, request_id, self.server_state.default_headers))
            self._close_lingering()

    def _close_lingering(self) -> None:
        """Half-close, then drop what the client still sends for a moment before closing.

        Closing with unread input makes the kernel send a reset, which can destroy the answer
        before the client reads it (a client that sent a huge head is still sending).
        """
        if not self.transport.can_write_eof():
            self.transport.close()
            return
        self.transport.write_eof()
        self._linger_timer = self.loop.call_later(_LINGER_SECONDS, self.transport.close)
