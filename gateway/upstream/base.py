"""The transport seam: what the gateway needs from an HTTP client, and nothing more.

Headers travel as raw `(name, value)` byte pairs so repeated fields survive, and bodies as raw
bytes so `Content-Encoding` passes through untouched.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncIterable, AsyncIterator
from urllib.parse import urlsplit

from gateway.asgi import RawHeaders
from gateway.settings import Upstream

Body = bytes | AsyncIterable[bytes]


class UpstreamError(Exception):
    """The upstream failed; `kind` is one of connect, timeout, protocol."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


class UpstreamResponse(ABC):
    status: int
    headers: RawHeaders

    @abstractmethod
    def stream(self) -> AsyncIterator[bytes]:
        """The body as it arrived on the wire, chunk by chunk."""

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.stream()])

    @abstractmethod
    async def close(self) -> None:
        """Release the connection back to the pool (or drop it if the body was not read)."""


class Transport(ABC):
    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream

    @abstractmethod
    async def request(
        self, method: str, url: str, headers: RawHeaders, body: Body | None
    ) -> UpstreamResponse:
        """Send one request; raise `UpstreamError` on failure. The caller closes the response."""

    @abstractmethod
    async def aclose(self) -> None: ...

    async def probe(self) -> bool:
        """True when the upstream answers: its health path below 500, or a TCP connect."""
        try:
            async with asyncio.timeout(self.upstream.timeout.connect):
                if self.upstream.health_path is None:
                    return await _can_connect(self.upstream.url)
                url = self.upstream.url + self.upstream.health_path
                response = await self.request("GET", url, [], None)
                await response.close()
                return response.status < 500
        except (UpstreamError, TimeoutError, OSError):
            return False


async def _can_connect(url: str) -> bool:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    _, writer = await asyncio.open_connection(parts.hostname, port)
    writer.close()
    await writer.wait_closed()
    return True
