"""Pooled upstream clients behind one small seam (`Transport`)."""

from collections.abc import Callable

from gateway.settings import Upstream
from gateway.upstream.base import Body, Transport, UpstreamError, UpstreamResponse

__all__ = [
    "Body", "Transport", "TransportFactory", "UpstreamError", "UpstreamResponse",
    "create_transport",
]

# Builds the client of one upstream from its name and settings (see `Runtime`).
TransportFactory = Callable[[str, Upstream], Transport]


def create_transport(upstream: Upstream) -> Transport:
    if upstream.transport == "httptools":
        from gateway.upstream.h1_transport import H1Transport

        return H1Transport(upstream)
    if upstream.transport == "httpx":
        from gateway.upstream.httpx_transport import HttpxTransport

        return HttpxTransport(upstream)
    from gateway.upstream.aiohttp_transport import AiohttpTransport

    return AiohttpTransport(upstream)
