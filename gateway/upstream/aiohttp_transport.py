"""aiohttp behind the transport seam (`transport: aiohttp`).

The response head is held to the upstream's head caps (aiohttp's own line, field and count
limits set from them, then the totals checked) and to the head deadline (headcaps.py). A pooled
connection that received anything while idle is closed instead of reused (`_CleanConnector`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from multidict import CIMultiDict
from yarl import URL

from gateway.asgi import RawHeaders
from gateway.settings import Upstream
from gateway.upstream.base import Body, Transport, UpstreamError, UpstreamResponse
from gateway.upstream.headcaps import HeadCaps, HeadDeadline, check_final_head

# aiohttp would otherwise add these itself; a proxy forwards only what the client sent.
_SKIP_AUTO_HEADERS = ("Accept", "Accept-Encoding", "User-Agent", "Content-Type")


class AiohttpResponse(UpstreamResponse):
    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status = response.status
        self.headers = list(response.raw_headers)

    async def stream(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise _translate(exc) from exc

    async def read(self) -> bytes:
        try:
            return await self._response.read()
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise _translate(exc) from exc

    async def close(self) -> None:
        self._response.release()


class _CleanConnector(aiohttp.TCPConnector):
    """aiohttp's connector, save that a pooled connection with anything pending (a message
    parsed while it sat idle, stray bytes, an unfinished body) is closed, not handed out:
    aiohttp itself only checks that the socket is still open."""

    async def connect(self, req: aiohttp.ClientRequest, traces: list[Any],
                      timeout: aiohttp.ClientTimeout) -> aiohttp.connector.Connection:
        for _ in range(self.limit + 1):  # each round closes an idle one, then a new one comes
            connection = await super().connect(req, traces, timeout)
            protocol = connection.protocol
            if protocol is not None and not protocol.should_close:
                return connection
            connection.close()
        raise aiohttp.ClientConnectionError("no clean connection")


class AiohttpTransport(Transport):
    def __init__(self, upstream: Upstream) -> None:
        super().__init__(upstream)
        self._session: aiohttp.ClientSession | None = None
        self._caps = HeadCaps.of(upstream)

    def _open(self) -> aiohttp.ClientSession:
        timeouts = self.upstream.timeout
        return aiohttp.ClientSession(
            connector=_CleanConnector(limit=self.upstream.max_connections, limit_per_host=0),
            timeout=aiohttp.ClientTimeout(
                total=None, connect=timeouts.connect, sock_read=timeouts.read
            ),
            auto_decompress=False,
            skip_auto_headers=_SKIP_AUTO_HEADERS,
            cookie_jar=aiohttp.DummyCookieJar(),
            trust_env=False,
            max_line_size=self._caps.max_header_bytes,
            max_field_size=self._caps.max_header_bytes,
            max_headers=self._caps.max_headers,
        )

    async def request(
        self, method: str, url: str, headers: RawHeaders, body: Body | None
    ) -> UpstreamResponse:
        if self._session is None:  # created lazily: it must belong to the running loop
            self._session = self._open()
        fields = CIMultiDict((k.decode("latin-1"), v.decode("latin-1")) for k, v in headers)
        deadline = HeadDeadline(self.upstream.timeout, body)
        try:
            async with deadline:
                response = await self._session.request(
                    method, URL(url, encoded=True), headers=fields, data=deadline.body,
                    allow_redirects=False, compress=None,
                )
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise _translate(exc) from exc
        try:
            check_final_head(response.status, response.raw_headers, self._caps)
        except UpstreamError:
            response.close()
            raise
        return AiohttpResponse(response)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _translate(exc: BaseException) -> UpstreamError:
    if isinstance(exc, aiohttp.ConnectionTimeoutError | TimeoutError):
        return UpstreamError("timeout")
    if isinstance(exc, aiohttp.ClientConnectorError):
        return UpstreamError("connect")
    return UpstreamError("protocol")
