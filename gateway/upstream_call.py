"""The one way a surface calls an upstream operation: `UpstreamCalls.hits` (or `.items`) fills
the operation's placeholders from its kind's values, adds the caller's identity headers, makes
the JSON call and maps the answer, turning every failure (transport, status, size, JSON, a
value of the wrong kind) into a `GatewayError` that carries no upstream detail."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlencode

import orjson

from gateway import errors, tracing
from gateway.context import RequestContext
from gateway.mapping import UpstreamValueError
from gateway.model import Hit
from gateway.operations import Operation, Placeholders, UpstreamCall
from gateway.proxy import ProxyTarget
from gateway.upstream import UpstreamError

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


class UpstreamCalls:
    """One config generation's upstream targets, and who the caller is told to them as."""

    def __init__(self, targets: Mapping[str, ProxyTarget],
                 identity: IdentityForwarding | None = None) -> None:
        self.targets = targets
        self.identity = identity

    async def hits(self, operation: Operation[K], values: K, ctx: RequestContext) -> list[Hit]:
        """The operation's answer mapped onto hits."""
        call = self._call(operation, values)
        document = await call_upstream_json(call, ctx, self._identity(ctx))
        return map_hits(call, document, ctx)

    async def items(self, operation: Operation[K], values: K, ctx: RequestContext) -> list[Any]:
        """The items of the operation's answer as the upstream sent them (for a surface that
        maps each item itself)."""
        call = self._call(operation, values)
        document = await call_upstream_json(call, ctx, self._identity(ctx))
        return _mapped(call, ctx, lambda: call.mapping.items_of(document))

    def _call(self, operation: Operation[K], values: K) -> UpstreamCall:
        return operation.call(self.targets[operation.settings.upstream], values)

    def _identity(self, ctx: RequestContext) -> RawHeaders:
        return self.identity.headers(ctx.principal) if self.identity is not None else []


def map_hits(call: UpstreamCall, document: Any, ctx: RequestContext) -> list[Hit]:
    """The upstream document as hits; a value of the wrong kind is a 502 `upstream_error`
    naming the slot, never echoing the value (it may be anything the upstream holds)."""
    return _mapped(call, ctx, lambda: call.mapping.hits(document))


def _mapped(call: UpstreamCall, ctx: RequestContext, mapping: Callable[[], T]) -> T:
    try:
        return mapping()
    except UpstreamValueError as exc:
        ctx.upstream_error = "mapping"
        log.warning("upstream value of the wrong kind", extra={"fields": {
            "request_id": ctx.request_id, "upstream": call.target.name, "slot": exc.slot}})
        raise errors.upstream_mapping_error(exc.slot, exc.expected) from None


async def call_upstream_json(
    call: UpstreamCall, ctx: RequestContext, identity: RawHeaders | None = None
) -> Any:
    """Make one upstream JSON call; any failure becomes a `GatewayError` without upstream detail.

    The upstream gets what a passthrough request would carry: the gateway's own credentials
    (`add_headers`), the caller's identity headers, `Via` and the request id.
    """
    ctx.upstream = call.target.name
    url = call.target.url + call.path
    if call.params:
        url += "?" + urlencode(call.params, doseq=True)
    if len(url.encode()) > MAX_UPSTREAM_URL_BYTES:
        raise errors.upstream_url_too_long()
    headers: RawHeaders = [
        (b"host", call.target.host), (b"accept", b"application/json"),
        (b"x-request-id", ctx.request_id.encode()), (b"via", b"1.1 aigw"),
        *call.target.add_headers, *(identity or ()),
    ]
    body = None
    if call.json is not None:
        body = orjson.dumps(call.json)
        headers.append((b"content-type", b"application/json"))
    with tracing.upstream_span(call.method, url, call.target.name):
        headers.extend(tracing.outgoing_headers())
        payload, status = await _send(call, ctx, url, headers, body)
        tracing.upstream_status(status)
    if payload is None:
        ctx.upstream_error = "too_large"
        raise errors.upstream_protocol_error()
    if status == 404:
        raise errors.GatewayError(404, "not_found", "The requested item does not exist.")
    if status >= 400:
        ctx.upstream_error = f"status_{status}"
        raise errors.upstream_protocol_error()
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:
        ctx.upstream_error = "protocol"
        raise errors.upstream_protocol_error() from None


async def _send(call: UpstreamCall, ctx: RequestContext, url: str, headers: RawHeaders,
                body: bytes | None) -> tuple[bytes | None, int]:
    """The upstream's body (None past the cap) and status; transport failures as errors."""
    started = time.perf_counter()
    try:
        response = await call.target.transport.request(call.method, url, headers, body)
        try:
            return await _read_capped(response), response.status
        finally:
            await response.close()
    except UpstreamError as exc:
        ctx.upstream_error = exc.kind
        raise (errors.upstream_timeout() if exc.kind == "timeout"
               else errors.upstream_unavailable()) from None
    finally:
        ctx.upstream_seconds = time.perf_counter() - started


async def _read_capped(response: Any) -> bytes | None:
    """The body, or None past MAX_UPSTREAM_JSON_BYTES (a runaway upstream is not buffered)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.stream():
        size += len(chunk)
        if size > MAX_UPSTREAM_JSON_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
