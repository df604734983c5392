"""The one way a surface calls an upstream: `UpstreamCalls.hits` (or `.items`) fills an
operation's placeholders from its kind's values, adds the caller's identity headers, makes the
JSON call and maps the answer, turning every failure (transport, status, size, JSON, a value of
the wrong kind) into a `GatewayError` that carries no upstream detail. `UpstreamCalls.send` is
for a surface that passes a body through and judges the answer itself (an agent call), with
the same request headers, identity and trace."""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlencode

import orjson

from gateway import errors, tracing
from gateway.context import RequestContext
from gateway.mapping import UpstreamValueError
from gateway.model import Hit, Page
from gateway.offload import sized_job
from gateway.operations import Operation, Placeholders, UpstreamCall
from gateway.proxy import ProxyTarget
from gateway.upstream import UpstreamError
from gateway.upstream_urls import UpstreamUrls

if TYPE_CHECKING:
    from gateway.auth.forwarding import IdentityForwarding

RawHeaders = list[tuple[bytes, bytes]]
K = TypeVar("K", bound=Placeholders)
T = TypeVar("T")
log = logging.getLogger("aigw.pipeline")
MAX_UPSTREAM_JSON_BYTES = 32 * 1024 * 1024
# The longest upstream URL sent: 8 KiB is the request line common servers accept (nginx's
# default large_client_header_buffers); past it they answer 414 or 431.
MAX_UPSTREAM_URL_BYTES = 8192


@dataclass(frozen=True, slots=True)
class RawAnswer:
    status: int
    headers: RawHeaders
    body: bytes

    @property
    def content_type(self) -> str:
        """The first Content-Type field's value, or "" without one."""
        return next((value.decode("latin-1") for name, value in self.headers
                     if name.lower() == b"content-type"), "")


class AnswerTooLarge(Exception):
    """The upstream's answer went past the size the caller reads."""


class UpstreamCalls:
    """One config generation's upstream targets, and who the caller is told to them as."""

    def __init__(self, targets: Mapping[str, ProxyTarget],
                 identity: IdentityForwarding | None = None,
                 urls: UpstreamUrls | None = None) -> None:
        self.targets = targets
        self.identity = identity
        self.urls = urls  # what upstream URLs in answers become (gateway.upstream_urls)

    async def hits(self, operation: Operation[K], values: K, ctx: RequestContext) -> list[Hit]:
        """The operation's answer mapped onto hits."""
        call = self._call(operation, values)
        document = await call_upstream_json(call, ctx, self._identity(ctx), self.urls)
        return map_hits(call, document, ctx)

    async def page(self, operation: Operation[K], values: K, ctx: RequestContext, *,
                   vectors: bool = True) -> Page[Hit]:
        """The operation's answer mapped onto hits, with the upstream's `next` token; without
        `vectors`, none read (`HitMapping.hits`)."""
        call = self._call(operation, values)
        document = await call_upstream_json(call, ctx, self._identity(ctx), self.urls)
        return Page(map_hits(call, document, ctx, vectors=vectors),
                    _mapped(call, ctx, lambda: call.mapping.next_token(document)))

    async def items(self, operation: Operation[K], values: K, ctx: RequestContext) -> list[Any]:
        """The items of the operation's answer as the upstream sent them (for a surface that
        maps each item itself)."""
        return (await self.item_page(operation, values, ctx)).entries

    async def item_page(self, operation: Operation[K], values: K, ctx: RequestContext, *,
                        shared: bool = False) -> Page[Any]:
        """`items`, with the upstream's `next` token. A `shared` read's answer serves every
        caller alike: it is sent without the caller's identity."""
        call = self._call(operation, values)
        identity = [] if shared else self._identity(ctx)
        document = await call_upstream_json(call, ctx, identity, self.urls)
        return _mapped(call, ctx, lambda: Page(call.mapping.items_of(document),
                                               call.mapping.next_token(document)))

    async def send(self, upstream: str, method: str, target: str, body: bytes | None,
                   ctx: RequestContext, *, headers: Sequence[tuple[bytes, bytes]] = (),
                   max_bytes: int = MAX_UPSTREAM_JSON_BYTES) -> RawAnswer:
        """One request to `target` (a path and query) on a configured upstream, with a JSON
        body (none for a GET), for a surface that judges the answer itself (its status, type
        and body); `headers` go after the caller's identity. A URL past
        `MAX_UPSTREAM_URL_BYTES` is a 400 before anything is sent; transport failures raise
        `UpstreamError`, an answer past `max_bytes` `AnswerTooLarge`."""
        if method == "GET" and body is not None:
            raise ValueError("a GET carries no body")
        url = self.url(upstream, target)
        if too_long(url):
            raise errors.upstream_url_too_long()
        return await _exchange(self.targets[upstream], method, url, body, ctx,
                               [*self._identity(ctx), *headers], max_bytes)

    def url(self, upstream: str, target: str) -> str:
        """The URL of `target` (a path and query) on a configured upstream."""
        return self.targets[upstream].url + target

    def caller_key(self, ctx: RequestContext) -> bytes:
        """A digest of the caller's identity headers (`Stages.caller_key`)."""
        return _identity_digest(tuple(self._identity(ctx)))

    def _call(self, operation: Operation[K], values: K) -> UpstreamCall:
        return operation.call(self.targets[operation.settings.upstream], values)

    def _identity(self, ctx: RequestContext) -> RawHeaders:
        """The caller's identity headers (shared by the request's calls: copy before changing)."""
        if self.identity is None:
            return []
        made = ctx.upstream_identity
        if made is None or made[0] is not ctx.principal:
            made = ctx.upstream_identity = (ctx.principal, self.identity.headers(ctx.principal))
        return made[1]


@functools.lru_cache(maxsize=1024)
def _identity_digest(headers: tuple[tuple[bytes, bytes], ...]) -> bytes:
    """The digest of a caller's identity headers (remembered: one caller asks many times)."""
    digest = hashlib.sha256()
    for name, value in headers:
        digest.update(b"%d:%s%d:%s" % (len(name), name, len(value), value))
    return digest.digest()


def map_hits(call: UpstreamCall, document: Any, ctx: RequestContext, *,
             vectors: bool = True) -> list[Hit]:
    """The upstream document as hits; a value of the wrong kind is a 502 `upstream_error`
    naming the slot, never echoing the value (it may be anything the upstream holds)."""
    return _mapped(call, ctx, lambda: call.mapping.hits(document, vectors=vectors))


def _mapped(call: UpstreamCall, ctx: RequestContext, mapping: Callable[[], T]) -> T:
    try:
        return mapping()
    except UpstreamValueError as exc:
        ctx.upstream_error = "mapping"
        log.warning("upstream value of the wrong kind", extra={"fields": {
            "request_id": ctx.request_id, "upstream": call.target.name, "slot": exc.slot}})
        raise errors.upstream_mapping_error(exc.slot, exc.expected) from None


async def call_upstream_json(
    call: UpstreamCall, ctx: RequestContext, identity: RawHeaders | None = None,
    urls: UpstreamUrls | None = None,
) -> Any:
    """Make one upstream JSON call; any failure becomes a `GatewayError` without upstream detail.
    The document comes back with upstream URLs rewritten or dropped by `urls`."""
    url = call.target.url + call.path
    if call.params:
        url += "?" + urlencode(call.params, doseq=True)
    if too_long(url):
        raise errors.upstream_url_too_long()
    body = orjson.dumps(call.json) if call.json is not None else None
    try:
        answer = await _exchange(call.target, call.method, url, body, ctx, identity or [],
                                 MAX_UPSTREAM_JSON_BYTES)
    except UpstreamError as exc:
        ctx.upstream_error = exc.kind
        raise (errors.upstream_timeout() if exc.kind == "timeout"
               else errors.upstream_unavailable()) from None
    except AnswerTooLarge:
        ctx.upstream_error = "too_large"
        raise errors.upstream_protocol_error() from None
    if answer.status == 404:
        raise errors.GatewayError(404, "not_found", "The requested item does not exist.")
    if answer.status >= 300:  # a redirect is not followed: no document either
        ctx.upstream_error = f"status_{answer.status}"
        raise errors.upstream_protocol_error()
    try:
        return await sized_job(len(answer.body), lambda: _document(answer.body, urls))
    except orjson.JSONDecodeError:
        ctx.upstream_error = "protocol"
        raise errors.upstream_protocol_error() from None


def _document(body: bytes, urls: UpstreamUrls | None) -> Any:
    """The answer parsed, with upstream URLs rewritten or dropped by `urls`."""
    document = orjson.loads(body)
    return urls.scrub(document, body) if urls is not None else document


def too_long(url: str) -> bool:
    """Whether `url` is longer than upstream servers accept (`MAX_UPSTREAM_URL_BYTES`)."""
    return len(url.encode()) > MAX_UPSTREAM_URL_BYTES


async def _exchange(target: ProxyTarget, method: str, url: str, body: bytes | None,
                    ctx: RequestContext, extra: Sequence[tuple[bytes, bytes]],
                    max_bytes: int) -> RawAnswer:
    """One request carrying what a passthrough request would: the gateway's own credentials
    (`add_headers`), `extra` (the caller's identity), `Via`, the request id and the trace.
    Transport failures raise `UpstreamError`, an answer past `max_bytes` `AnswerTooLarge`."""
    ctx.upstream = target.name
    headers: RawHeaders = [
        (b"host", target.host), (b"accept", b"application/json"),
        (b"x-request-id", ctx.request_id.encode()), (b"via", b"1.1 aigw"),
        *target.add_headers, *extra,
    ]
    if body is not None:
        headers.append((b"content-type", b"application/json"))
    started = time.perf_counter()
    with tracing.upstream_span(method, url, target.name):
        headers.extend(tracing.outgoing_headers())
        try:
            response = await target.transport.request(method, url, headers, body)
            try:
                payload = await _read_capped(response, max_bytes)
            finally:
                await response.close()
        finally:
            ctx.upstream_seconds = time.perf_counter() - started
        tracing.upstream_status(response.status)
    if payload is None:
        raise AnswerTooLarge()
    return RawAnswer(response.status, response.headers, payload)


async def _read_capped(response: Any, max_bytes: int) -> bytes | None:
    """The body, or None past `max_bytes` (a runaway upstream is not buffered)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.stream():
        size += len(chunk)
        if size > max_bytes:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
