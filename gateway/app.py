"""The public ASGI application.

For each HTTP request it builds the request context (request id, client address), bounds the
time a body may take, and refuses what no request may carry (an oversized head, an ambiguous
path, a WebSocket upgrade). A path with an owner, a public document or a surface's route, is
served through gateway.dispatch (public paths with CORS); any other path is admitted by the
pipeline and passed through to the default upstream. Every response carries X-Request-Id and,
when the request has them, the policy decision id and the rate-limit fields; errors raised
outside an owner's path are answered in the gateway's JSON dialect. When the request ends it
is recorded: metrics, the decision log, the access log and the trace span.

A WebSocket handshake is refused with an HTTP answer where the server can send one, else
closed. Lifespan starts the event-loop lag probe and, on shutdown, closes the runtime.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from functools import partial
from typing import Any

from starlette.requests import Request

from gateway import errors, observability, tracing
from gateway.asgi import Scope
from gateway.bodytimer import has_body, timed_receive
from gateway.context import RequestContext, request_id_from
from gateway.dispatch import answer_error, serve_document, serve_surface
from gateway.exchange import Exchange
from gateway.headers import client_address, is_trusted
from gateway.headlimits import check_head
from gateway.paths import ambiguity
from gateway.policy.decisions import HEADER as DECISION_HEADER
from gateway.proxy import ClientDisconnected, forward
from gateway.ratelimit.fields import with_rate_limit_fields
from gateway.runtime import Generation, Runtime
from gateway.upgrades import as_http_scope, denial_channel, wants_websocket, websocket_refused

log = logging.getLogger("aigw.app")


class GatewayApp:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "websocket":
            await self._websocket(scope, send)

    async def _websocket(self, scope: Scope, send: Any) -> None:
        """Under a server that speaks WebSocket: the handshake is refused as an HTTP upgrade
        request would be, or, where the server cannot send an HTTP answer, closed (its 403)."""
        channel = denial_channel(scope, send)
        if channel is None:
            await send({"type": "websocket.close", "code": 1008})
            return
        await self._http(as_http_scope(scope), *channel)

    async def _http(self, scope: Scope, receive: Any, send: Any, *,
                    outer: Exchange | None = None) -> None:
        generation = self.runtime.current if outer is None else outer.generation
        generation.enter()
        peer = scope["client"][0] if scope.get("client") else ""
        trusted = is_trusted(peer, generation.trusted_networks)
        ctx = RequestContext(
            request_id_from(scope["headers"], trusted) if outer is None else _inner_id(outer),
            scope["method"], scope["path"],
            client_address(peer, scope["headers"], generation.trusted_networks),
        )
        if outer is not None:
            ctx.parent = outer.request_id
            ctx.served_for = outer.ctx.served_for or outer.ctx.path
        tagged_send = _tagging_send(send, ctx, generation)
        if has_body(scope["headers"]):
            listen = generation.settings.listen
            receive = timed_receive(receive, listen.body_idle_timeout, listen.body_timeout)
        span = _request_span(ctx, scope, trusted, outer) if tracing.enabled() else tracing.OFF
        with span:
            try:
                await self._handle(generation, ctx, scope, receive, tagged_send, trusted)
            except errors.GatewayError as error:
                if ctx.status:
                    raise
                await _send_error(tagged_send, ctx, error)
            except ClientDisconnected:
                ctx.status = 499
            except Exception:
                if ctx.status:  # the response has started; let the server drop the connection
                    raise
                log.exception("unhandled error", extra={"fields": {"request_id": ctx.request_id}})
                await _send_error(tagged_send, ctx, errors.internal_error())
            finally:
                generation.leave()
                elapsed = observability.observe(ctx)
                self.runtime.decision_log.submit(ctx, generation.revision)
                if generation.settings.logging.access_log:
                    observability.write_access_log(ctx, elapsed,
                                                   generation.settings.log_subjects)
                if tracing.recording():
                    tracing.finish_request(*_span_end(ctx))

    async def _serve_inner(self, outer: Exchange, scope: Scope, receive: Any, send: Any) -> None:
        """An inner request (gateway.inner): served as one from the network, for `outer`'s
        caller, with `outer`'s config generation."""
        await self._http(scope, receive, send, outer=outer)

    async def _handle(self, generation: Generation, ctx: RequestContext, scope: Scope,
                      receive: Any, send: Any, trusted: bool) -> None:
        path = scope["path"]
        document = generation.owners.documents.get(path)
        owner = document.owner if document is not None else generation.owners.owner(path)
        if owner is None and document is None:
            refusal = _refusal(generation, scope)
            if refusal is not None:
                await _send_error(send, ctx, refusal)
                return
            await self._passthrough(generation, ctx, scope, receive, send, trusted)
            return
        if owner is not None:
            ctx.surface = owner.name
        exchange = Exchange(Request(scope, receive, send), ctx, generation,
                            serve_inner=self._serve_inner)
        refusal = _refusal(generation, scope, forwarded=False)
        if refusal is not None:
            await answer_error(owner, refusal, exchange, send)
            return
        if path in generation.cors_paths:
            if generation.cors.is_preflight(scope):
                await generation.cors.preflight(scope, send)
                return
            send = generation.cors.wrap(scope, send)
        if document is not None:
            await serve_document(document, exchange, send)
        elif owner is not None:
            await serve_surface(owner, exchange, send)

    async def _passthrough(self, generation: Generation, ctx: RequestContext, scope: Scope,
                           receive: Any, send: Any, trusted: bool) -> None:
        target = generation.default_target
        if target is None:
            raise errors.no_route()
        await generation.pipeline.admit(ctx, scope)
        await forward(
            ctx, scope, receive, send, target, generation.proxy_options, trusted=trusted,
            drop_headers=generation.identity.drop,
            identity=generation.identity.headers(ctx.principal),
            drop_query=generation.identity.drop_query,
        )

    async def _lifespan(self, receive: Any, send: Any) -> None:
        lag: asyncio.Task[None] | None = None
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                lag = asyncio.ensure_future(observability.measure_event_loop_lag())
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if lag is not None:
                    lag.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await lag
                await self.runtime.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return


def _refusal(generation: Generation, scope: Scope,
             forwarded: bool = True) -> errors.GatewayError | None:
    """What no request may carry whoever serves it: an oversized head (the listener checks it
    first; any server too), an ambiguous path, a WebSocket handshake.

    A path a surface serves is decided on as decoded, once, and never forwarded raw, so its
    encoded slashes and dots are data (an upstream's id), not separators an upstream might
    read differently; only a `forwarded` path is refused for them."""
    listen = generation.settings.listen
    try:
        check_head(scope, listen.max_headers, listen.max_header_bytes)
    except errors.GatewayError as error:
        return error
    reason = ambiguity(scope["path"], scope.get("raw_path") if forwarded else None)
    if reason is not None:
        return errors.GatewayError(400, "invalid_path", f"Refused: {reason}.")
    if wants_websocket(scope["headers"]):
        return websocket_refused()
    return None


def _tagging_send(send: Any, ctx: RequestContext, generation: Generation) -> Any:
    """Add X-Request-Id and the rate-limit fields to every response; note the status."""
    request_id = ctx.request_id.encode()
    limits = generation.settings.rate_limits

    async def tagged(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            ctx.status = message["status"]
            headers = [*message.get("headers", ()), (b"x-request-id", request_id)]
            if ctx.decision_id is not None:
                headers.append((DECISION_HEADER, ctx.decision_id.encode()))
            if ctx.rate_limit and limits is not None:
                headers = with_rate_limit_fields(headers, ctx.rate_limit, limits.headers)
            message["headers"] = headers
        await send(message)

    return tagged


def _inner_id(outer: Exchange) -> str:
    """An inner request's id: its outer request's, with the inner request's number."""
    outer.ctx.inner_requests += 1
    return f"{outer.request_id[:120]}.{outer.ctx.inner_requests}"


def _request_span(ctx: RequestContext, scope: Scope, trusted: bool,
                  outer: Exchange | None) -> Any:
    """The request's span: a server span, or for an inner request a child of its outer one."""
    if outer is None:  # its attributes are made only when the request is sampled
        return tracing.request_span(ctx.method, scope, trusted, partial(_span_start, ctx, scope))
    return tracing.span(ctx.method, {**_span_start(ctx, scope),
                                     "aigw.parent_request_id": outer.request_id})


def _span_start(ctx: RequestContext, scope: Scope) -> dict[str, Any]:
    """HTTP semantic-convention attributes known when a request arrives (no query string: it
    may carry credentials)."""
    method = ctx.method if ctx.method in observability.METHODS else "_OTHER"
    return {"http.request.method": method, "url.path": ctx.path,
            "url.scheme": scope.get("scheme", "http"), "client.address": ctx.client,
            "network.protocol.version": scope.get("http_version", "1.1"),
            "aigw.request_id": ctx.request_id}


def _span_end(ctx: RequestContext) -> tuple[str, dict[str, Any], bool]:
    """The server span's name, its closing attributes, and whether it failed (5xx)."""
    attributes: dict[str, Any] = {"http.response.status_code": ctx.status,
                                  "aigw.surface": ctx.surface}
    if ctx.route is not None:
        attributes["http.route"] = ctx.route
    if ctx.upstream is not None:
        attributes["aigw.upstream"] = ctx.upstream
    if ctx.error_code is not None:
        attributes["aigw.error_code"] = ctx.error_code
    failed = ctx.status >= 500
    if failed:
        attributes["error.type"] = ctx.error_code or str(ctx.status)
    name = f"{ctx.method} {ctx.route}" if ctx.route else ctx.method
    return name, attributes, failed


async def _send_error(send: Any, ctx: RequestContext, error: errors.GatewayError) -> None:
    ctx.error_code = error.code
    body = errors.json_error_body(error, ctx.request_id)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
        *((name.encode("latin-1"), value.encode("latin-1")) for name, value in error.headers),
    ]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
