"""Passthrough: forward a request to an upstream and stream the answer back, unchanged.

Small bodies are buffered in one piece (fewer ASGI messages, fewer syscalls); large ones and
those of unknown length are streamed both ways with the size limit enforced as they flow.
Upstream URLs are rewritten in redirect fields (`gateway.redirects`) and, for an upstream with
`rewrite_body_urls`, in JSON bodies up to its size bound (`gateway.body_urls`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TypeVar
from urllib.parse import unquote_to_bytes

from gateway import errors, tracing
from gateway.asgi import RawHeaders, Receive, Scope, Send
from gateway.body_urls import JsonBodyUrls, is_json, rewritten_headers
from gateway.context import RequestContext
from gateway.headers import (
    ClientInfo,
    client_response_headers,
    nearest_forwarded,
    upstream_request_headers,
)
from gateway.integers import ascii_int
from gateway.observability import BODY_URL_REWRITES
from gateway.offload import sized_job
from gateway.redirects import REWRITTEN_FIELDS, UpstreamOrigin, public_base, rewrite_field
from gateway.upstream import Transport, UpstreamError, UpstreamResponse

_NO_BODY_STATUS = frozenset({204, 304})
T = TypeVar("T")


class ClientDisconnected(Exception):
    pass


@dataclass(frozen=True, slots=True)
class ProxyTarget:
    name: str
    url: str  # base URL without trailing slash
    host: bytes  # Host header sent when the client's is not preserved
    preserve_host: bool
    transport: Transport
    add_headers: tuple[tuple[bytes, bytes], ...] = ()
    redirects: UpstreamOrigin | None = None  # rewrite URLs naming it; None: pass them as sent
    body_urls: JsonBodyUrls | None = None  # rewrite them in JSON bodies too; None: never
    add_names: frozenset[bytes] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "add_names", frozenset(name for name, _ in self.add_headers))


@dataclass(frozen=True, slots=True)
class ProxyOptions:
    max_body_bytes: int
    buffer_bytes: int
    via_name: str
    public_base_url: str | None = None


class BodyStream:
    """The client's request body as an async iterator that stops at the size limit."""

    def __init__(self, receive: Receive, limit: int) -> None:
        self._receive = receive
        self._limit = limit
        self.received = 0
        self.exceeded = False
        self.failure: errors.GatewayError | None = None  # why reading stopped (e.g. 408)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            try:
                message = await self._receive()
            except errors.GatewayError as error:
                self.failure = error  # the upstream client may hide it behind its own error
                raise
            if message["type"] == "http.disconnect":
                raise ClientDisconnected()
            chunk = message.get("body", b"")
            self.received += len(chunk)
            if self.received > self._limit:
                self.exceeded = True
                raise errors.request_too_large(self._limit)
            if chunk:
                yield chunk
            if not message.get("more_body", False):
                return

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self])


async def forward(
    ctx: RequestContext, scope: Scope, receive: Receive, send: Send,
    target: ProxyTarget, options: ProxyOptions, *, trusted: bool,
    drop_headers: frozenset[bytes] = frozenset(), identity: RawHeaders | None = None,
    drop_query: frozenset[bytes] = frozenset(),
) -> None:
    """Proxy one request; raise `GatewayError` for anything answered before the response starts."""
    ctx.upstream = target.name
    headers: RawHeaders = scope["headers"]
    body, stream = await _request_body(headers, receive, options)
    url = target.url + _target_path(scope, drop_query)
    client = _client_info(scope, headers)
    via = f"{scope.get('http_version', '1.1')} {options.via_name}".encode()
    with tracing.upstream_span(scope["method"], url, target.name):
        outgoing = upstream_request_headers(
            headers, client, trusted=trusted, via=via, request_id=ctx.request_id.encode(),
            host=client.host if target.preserve_host and client.host else target.host,
            drop_also=_union(_union(drop_headers, target.add_names), tracing.owned_fields()),
            add=[*target.add_headers, *(identity or ()), *tracing.outgoing_headers()],
        )
        started = time.perf_counter()
        try:
            response = await target.transport.request(scope["method"], url, outgoing, body)
        except UpstreamError as exc:
            ctx.upstream_error = exc.kind
            if stream is not None and stream.exceeded:
                raise errors.request_too_large(options.max_body_bytes) from None
            if stream is not None and stream.failure is not None:
                raise stream.failure from None
            raise _as_gateway_error(exc) from None
        finally:
            ctx.upstream_seconds = time.perf_counter() - started
        tracing.upstream_status(response.status)
        rewrite: Callable[[bytes, bytes], bytes] | None = None
        body_urls: _BodyUrls | None = None
        if target.redirects is not None or target.body_urls is not None:
            base = _public_base(options, headers, client, trusted)
            rewrite = _redirect_rewriter(target.redirects, base)
            body_urls = _BodyUrls(target.body_urls, base) if target.body_urls else None
        try:
            await _relay(ctx, scope, receive, send, response, options, via, rewrite, body_urls)
        finally:
            await response.close()


@lru_cache(maxsize=256)
def _union(first: frozenset[bytes], second: frozenset[bytes]) -> frozenset[bytes]:
    """One set object per pair, so the header cleaner's own cache finds it at once."""
    return first | second


async def _request_body(
    headers: RawHeaders, receive: Receive, options: ProxyOptions
) -> tuple[bytes | BodyStream | None, BodyStream | None]:
    length, chunked = _declared_length(headers)
    if length is None and not chunked:
        return None, None
    if length is not None and length > options.max_body_bytes:
        raise errors.request_too_large(options.max_body_bytes)
    stream = BodyStream(receive, options.max_body_bytes)
    if length is not None and length <= options.buffer_bytes:
        return await stream.read(), None
    return stream, stream


def _declared_length(headers: RawHeaders) -> tuple[int | None, bool]:
    length = None
    chunked = False
    for name, value in headers:
        if name == b"content-length":
            length = int(value)  # uvicorn's parser has already refused malformed values
        elif name == b"transfer-encoding":
            chunked = True
    return length, chunked


@dataclass(frozen=True, slots=True)
class _BodyUrls:
    """An upstream's body URL rewriting, for one request: the rule and the public base."""

    rule: JsonBodyUrls
    base: Callable[[], str]

    def rewrite(self, body: bytes) -> bytes:
        return self.rule.rewrite(body, self.base())

    def applies(self, response: UpstreamResponse, counted: bool = True) -> bool:
        """Whether the body is JSON to rewrite; an encoded or partial one is passed as it is,
        and counted if `counted` (the gateway asks for `identity`, so an upstream seldom
        encodes)."""
        content_type = encoding = b""
        for name, value in response.headers:
            lowered = name.lower()
            if lowered == b"content-type":
                content_type = value
            elif lowered == b"content-encoding":
                encoding = value
        if not is_json(content_type):
            return False
        refused = None
        if encoding.strip().lower() not in (b"", b"identity"):
            refused = "encoded"
        elif response.status == 206:  # a range: its offsets are those of the upstream's bytes
            refused = "partial"
        if refused is not None and counted:
            self.count(refused)
        return refused is None

    def count(self, result: str) -> None:
        BODY_URL_REWRITES.labels(self.rule.upstream, result).inc()


async def _relay(
    ctx: RequestContext, scope: Scope, receive: Receive, send: Send,
    response: UpstreamResponse, options: ProxyOptions, via: bytes,
    rewrite: Callable[[bytes, bytes], bytes] | None = None, body_urls: _BodyUrls | None = None,
) -> None:
    headers = client_response_headers(response.headers, via, rewrite, REWRITTEN_FIELDS)
    if scope["method"] == "HEAD" or response.status in _NO_BODY_STATUS:
        if body_urls is not None and scope["method"] == "HEAD" \
                and body_urls.applies(response, counted=False):
            # the length GET would have is unknown until its body is rewritten
            headers = [(name, value) for name, value in headers
                       if name.lower() != b"content-length"]
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        await send({"type": "http.response.body", "body": b""})
        return
    if body_urls is not None and body_urls.applies(response):
        await _relay_rewriting(ctx, receive, send, response, headers, body_urls)
        return
    length = _response_length(response.headers)
    if length is not None and length <= options.buffer_bytes:
        try:
            body = await response.read()
        except UpstreamError as exc:
            ctx.upstream_error = exc.kind
            raise _as_gateway_error(exc) from None
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await _stream_until_disconnect(ctx, receive, send, response.stream())


async def _relay_rewriting(
    ctx: RequestContext, receive: Receive, send: Send, response: UpstreamResponse,
    headers: RawHeaders, body_urls: _BodyUrls,
) -> None:
    """A JSON body read whole and rewritten when within the upstream's bound; past it, passed
    on unchanged as it streams (the part read so far first)."""
    limit = body_urls.rule.max_bytes
    length = _response_length(response.headers)
    start = {"type": "http.response.start", "status": response.status, "headers": headers}
    if length is not None and length > limit:
        body_urls.count("too_large")
        await send(start)
        await _stream_until_disconnect(ctx, receive, send, response.stream())
        return
    chunks = aiter(response.stream())
    held, complete = await _read(ctx, _read_up_to(chunks, limit))
    if not complete:
        body_urls.count("too_large")
        await send(start)
        await _stream_until_disconnect(ctx, receive, send, _prefixed(held, chunks))
        return
    body = b"".join(held)
    rewritten = await sized_job(len(body), lambda: body_urls.rewrite(body))
    if rewritten is body:
        body_urls.count("unchanged")
    else:
        body_urls.count("rewritten")
        start["headers"] = rewritten_headers(headers, len(rewritten))
    await send(start)
    await send({"type": "http.response.body", "body": rewritten})


async def _read_up_to(chunks: AsyncIterator[bytes], limit: int) -> tuple[list[bytes], bool]:
    """The chunks read until the body ends (True) or goes past `limit` bytes (False)."""
    held: list[bytes] = []
    size = 0
    async for chunk in chunks:
        held.append(chunk)
        size += len(chunk)
        if size > limit:
            return held, False
    return held, True


async def _prefixed(held: list[bytes], rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    for chunk in held:
        yield chunk
    async for chunk in rest:
        yield chunk


async def _read(ctx: RequestContext, reading: Awaitable[T]) -> T:
    """An upstream read before the response starts: a failure is still the gateway's answer."""
    try:
        return await reading
    except UpstreamError as exc:
        ctx.upstream_error = exc.kind
        raise _as_gateway_error(exc) from None


async def _stream_until_disconnect(
    ctx: RequestContext, receive: Receive, send: Send, chunks: AsyncIterable[bytes]
) -> None:
    """Copy the upstream body to the client; stop reading upstream if the client goes away."""
    copy = asyncio.ensure_future(_copy_body(send, chunks))
    watch = asyncio.ensure_future(_wait_for_disconnect(receive))
    try:
        await asyncio.wait({copy, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
        if not copy.done():
            copy.cancel()
            ctx.status = 499  # client closed the connection, as nginx records it
    if copy.done() and not copy.cancelled() and (exc := copy.exception()) is not None:
        if isinstance(exc, UpstreamError):
            ctx.upstream_error = exc.kind
        raise exc  # the response has started: aborting the connection is the only honest signal


async def _copy_body(send: Send, chunks: AsyncIterable[bytes]) -> None:
    async for chunk in chunks:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


async def _wait_for_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _response_length(headers: RawHeaders) -> int | None:
    for name, value in headers:
        if name.lower() == b"content-length":
            return ascii_int(value)
    return None


def _target_path(scope: Scope, drop_query: frozenset[bytes] = frozenset()) -> str:
    raw = scope.get("raw_path") or scope["path"].encode("utf-8")
    query = scope.get("query_string", b"")
    if drop_query and query:
        query = b"&".join(pair for pair in query.split(b"&")
                          if unquote_to_bytes(pair.split(b"=", 1)[0]) not in drop_query)
    target = raw.decode("latin-1")
    return f"{target}?{query.decode('latin-1')}" if query else target


def _public_base(options: ProxyOptions, headers: RawHeaders, client: ClientInfo,
                 trusted: bool) -> Callable[[], str]:
    """The public prefix of rewritten URLs, worked out on first use: most responses carry no
    upstream URL."""
    base: list[str] = []

    def public() -> str:
        if not base:
            proto = nearest_forwarded(headers, b"x-forwarded-proto") if trusted else None
            host = nearest_forwarded(headers, b"x-forwarded-host") if trusted else None
            base.append(public_base(options.public_base_url, client.scheme, client.host,
                                    proto, host))
        return base[0]

    return public


def _redirect_rewriter(upstream: UpstreamOrigin | None, base: Callable[[], str]
                       ) -> Callable[[bytes, bytes], bytes] | None:
    if upstream is None:
        return None

    def rewrite(name: bytes, value: bytes) -> bytes:
        return rewrite_field(name, value, upstream, base())

    return rewrite


def _client_info(scope: Scope, headers: RawHeaders) -> ClientInfo:
    host = next((value for name, value in headers if name == b"host"), b"")
    peer = scope.get("client")
    return ClientInfo(peer[0] if peer else "", scope.get("scheme", "http"), host)


def _as_gateway_error(exc: UpstreamError) -> errors.GatewayError:
    if exc.kind == "timeout":
        return errors.upstream_timeout()
    if exc.kind == "connect":
        return errors.upstream_unavailable()
    return errors.upstream_protocol_error()
