"""httpx behind the transport seam, kept for comparison and for deployments that prefer it.

The response head is held to the upstream's head caps (httpcore's own bound on a head is 100
KiB, then the totals are checked) and to the head deadline (headcaps.py). httpcore already
closes a pooled connection that has turned readable while idle, instead of reusing it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from http.cookiejar import CookieJar, DefaultCookiePolicy

import httpx

from gateway.asgi import RawHeaders
from gateway.settings import Upstream
from gateway.upstream.base import Body, Transport, UpstreamError, UpstreamResponse
from gateway.upstream.headcaps import HeadCaps, HeadDeadline, check_final_head


class HttpxResponse(UpstreamResponse):
    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self.status = response.status_code
        self.headers = list(response.headers.raw)

    async def stream(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.aiter_raw():
                yield chunk
        except httpx.HTTPError as exc:
            raise _translate(exc) from exc

    async def close(self) -> None:
        await self._response.aclose()


class HttpxTransport(Transport):
    def __init__(self, upstream: Upstream) -> None:
        super().__init__(upstream)
        timeouts = upstream.timeout
        self._caps = HeadCaps.of(upstream)
        # A proxy must never carry one client's cookies to another: refuse to store any.
        no_cookies = CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))
        self._client = httpx.AsyncClient(
            limits=httpx.Limits(
                max_connections=upstream.max_connections,
                max_keepalive_connections=upstream.max_connections,
            ),
            timeout=httpx.Timeout(timeouts.read, connect=timeouts.connect),
            follow_redirects=False,
            trust_env=False,
            cookies=no_cookies,
        )

    async def request(
        self, method: str, url: str, headers: RawHeaders, body: Body | None
    ) -> UpstreamResponse:
        # Built directly, not with client.build_request, so no default headers are added.
        deadline = HeadDeadline(self.upstream.timeout, body)
        request = httpx.Request(method, url, headers=headers, content=deadline.body)
        try:
            async with deadline:
                response = await self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise _translate(exc) from exc
        try:
            check_final_head(response.status_code, response.headers.raw, self._caps)
        except UpstreamError:
            await response.aclose()
            raise
        return HttpxResponse(response)

    async def aclose(self) -> None:
        await self._client.aclose()


def _translate(exc: httpx.HTTPError) -> UpstreamError:
    if isinstance(exc, httpx.TimeoutException):
        return UpstreamError("timeout")
    if isinstance(exc, httpx.ConnectError):
        return UpstreamError("connect")
    return UpstreamError("protocol")
