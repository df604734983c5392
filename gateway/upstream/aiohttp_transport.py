"""aiohttp behind the transport seam: the default, measured fastest in bench/."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
from multidict import CIMultiDict
from yarl import URL

from gateway.settings import Upstream
from gateway.upstream.base import Body, RawHeaders, Transport, UpstreamError, UpstreamResponse

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


class AiohttpTransport(Transport):
    def __init__(self, upstream: Upstream) -> None:
        super().__init__(upstream)
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        timeouts = self.upstream.timeout
        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self.upstream.max_connections, limit_per_host=0),
            timeout=aiohttp.ClientTimeout(
                total=None, connect=timeouts.connect, sock_read=timeouts.read
            ),
            auto_decompress=False,
            skip_auto_headers=_SKIP_AUTO_HEADERS,
            cookie_jar=aiohttp.DummyCookieJar(),
            trust_env=False,
        )

    async def request(
        self, method: str, url: str, headers: RawHeaders, body: Body | None
    ) -> UpstreamResponse:
        if self._session is None:  # created lazily: it must belong to the running loop
            self._session = self._open()
        fields = CIMultiDict((k.decode("latin-1"), v.decode("latin-1")) for k, v in headers)
        try:
            response = await self._session.request(
                method, URL(url, encoded=True), headers=fields, data=body,
                allow_redirects=False, compress=None,
            )
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise _translate(exc) from exc
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
