"""Serving a path with an owner: a public document (the core's or a surface's) or a surface's
routes, every failure answered once, here, in the owner's dialect.

A document answers GET and HEAD only. A surface's path goes to the first of its routes that
matches (else 404, or 405 with `Allow`). A `SurfaceRoute` is admitted by the pipeline as it
declares (credentials required or optional, or the body read first for a signature to cover)
before its endpoint runs; a plain ASGI route gets the request as it is.

Endpoints raise `GatewayError`. This module records the error code on the request context
(logs, metrics and traces read it there) and has the owner render the error with the whole
exchange; a core document's errors use the gateway's own dialect. Any other exception is
logged and answered as an internal error. A failure after the response started is raised
again, so that the server drops the connection.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Match

from gateway import errors
from gateway.asgi import Send
from gateway.exchange import Exchange
from gateway.proxy import ClientDisconnected
from gateway.routing import Document
from gateway.surface import Admission, Mount, SurfaceRoute, gateway_error_response

log = logging.getLogger("aigw.app")


async def serve_document(document: Document, exchange: Exchange, send: Send) -> None:
    ctx, scope = exchange.ctx, exchange.request.scope
    if ctx.surface == "passthrough":
        ctx.surface = getattr(document.endpoint, "surface", "gateway")
    ctx.route = ctx.path
    if scope["method"] not in ("GET", "HEAD"):
        error = errors.GatewayError(405, "method_not_allowed", "Use GET or HEAD here.",
                                    {"allowed": ["GET", "HEAD"]}, (("allow", "GET, HEAD"),))
        await answer_error(document.owner, error, exchange, send)
        return
    try:
        await document.endpoint(scope, exchange.request.receive, send)
    except Exception as exc:
        await _answer_failure(document.owner, exc, exchange, send)


async def serve_surface(owner: Mount, exchange: Exchange, send: Send) -> None:
    """Hand the request to the owner's matching route; its 404 or 405 when none matches.

    A path may be served by several routes, one per method: the 405's `Allow` lists the
    methods of every route whose path matched (RFC 9110 §15.5.6)."""
    scope = exchange.request.scope
    allowed_methods: set[str] = set()
    for route in owner.routes:
        match, child = route.matches(scope)
        if match is Match.FULL:
            exchange.ctx.route = getattr(route, "path", None)
            exchange.request = Request({**scope, **child}, exchange.request.receive, send)
            await _run(owner, route, exchange, send)
            return
        if match is Match.PARTIAL:
            allowed_methods.update(getattr(route, "methods", None) or ())
    if not allowed_methods:
        error = errors.GatewayError(404, "not_found", "Nothing is served at this path.")
    else:
        allowed = sorted(allowed_methods)
        error = errors.GatewayError(405, "method_not_allowed", f"Use {', '.join(allowed)} here.",
                                    {"allowed": allowed}, (("allow", ", ".join(allowed)),))
    await answer_error(owner, error, exchange, send)


def surface_route(owner: Mount, method: str, path: str) -> SurfaceRoute | None:
    """The route `serve_surface` would hand `method path` to, when it is a `SurfaceRoute`: a
    surface wrapping others' routes asks it whom it serves (`SurfaceRoute.ways`)."""
    scope = {"type": "http", "method": method, "path": path, "root_path": ""}
    for route in owner.routes:
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return route if isinstance(route, SurfaceRoute) else None
    return None


async def _run(owner: Mount, route: Any, exchange: Exchange, send: Send) -> None:
    request = exchange.request
    try:
        if isinstance(route, SurfaceRoute):
            response = await _admitted(route, exchange)
            await response(request.scope, request.receive, send)
        else:  # a plain ASGI route (a surface's own sub-application)
            await route.handle(request.scope, request.receive, send)
    except Exception as exc:
        await _answer_failure(owner, exc, exchange, send)


async def _admitted(route: SurfaceRoute, exchange: Exchange) -> Response:
    """The pipeline admits the caller as the route declares, then the endpoint answers."""
    if route.body_first is not None:
        await exchange.pipeline.admit_body_first(exchange, route.body_first)
    else:
        await exchange.pipeline.admit(
            exchange.ctx, exchange.request.scope,
            credentials_optional=route.admission is Admission.OPTIONAL)
    return await route.run(exchange)


async def _answer_failure(owner: Mount | None, exc: Exception, exchange: Exchange,
                          send: Send) -> None:
    """A failure before the response started, in the owner's dialect; after, the server drops
    the connection (nothing else can be said on it)."""
    ctx = exchange.ctx
    if isinstance(exc, ClientDisconnect):
        raise ClientDisconnected() from None
    if ctx.status:
        raise exc
    if isinstance(exc, errors.GatewayError):
        await answer_error(owner, exc, exchange, send)
        return
    log.exception("unhandled error", extra={"fields": {"request_id": ctx.request_id}},
                  exc_info=exc)
    await answer_error(owner, errors.internal_error(), exchange, send)


async def answer_error(owner: Mount | None, error: errors.GatewayError, exchange: Exchange,
                       send: Send) -> None:
    """The one place an owned path's failure is recorded and rendered."""
    exchange.ctx.error_code = error.code
    render = owner.render_error if owner is not None else gateway_error_response
    response = render(error, exchange)
    request = exchange.request
    await response(request.scope, request.receive, send)

