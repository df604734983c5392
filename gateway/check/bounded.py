"""The one bound on what the checker reads from the checked origin.

Every HTTP client the checker uses (its own probe and the MCP SDK's) is built on
`BoundedTransport`, so an answer is cut at `MAX_BYTES` whichever code reads it: after
decoding, since a small gzip body can decode to gigabytes. The transport decodes gzip and
deflate itself, within the bound, and refuses other content codings the client would
otherwise decode without one.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator

import httpx2

MAX_BYTES = 2 * 1024 * 1024  # the largest answer read; past it the reading stops
_DECODED = {"gzip", "x-gzip", "deflate"}
_AUTO_HEADER = 32 + zlib.MAX_WBITS  # zlib's window bits that accept a gzip or zlib header


class Unreadable(Exception):
    """An answer the checker stopped reading; the message says why, in a few words."""


class TooLarge(Unreadable):
    def __init__(self) -> None:
        super().__init__(f"answer larger than {MAX_BYTES // (1024 * 1024)} MiB")


class BoundedTransport(httpx2.AsyncBaseTransport):
    """Wraps a transport so that every response body stops at `limit` bytes (decoded).

    `exceeded` is set once any answer went past the limit: an SDK may swallow the error
    and report something vaguer, and the checker still knows why it failed."""

    def __init__(self, inner: httpx2.AsyncBaseTransport | None = None,
                 limit: int = MAX_BYTES) -> None:
        # by default the origin is asked directly, never through a proxy from the environment
        self._inner = inner or httpx2.AsyncHTTPTransport(
            trust_env=False, limits=httpx2.Limits(max_connections=4))
        self.limit = limit
        self.exceeded = False

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        coding = response.headers.get("content-encoding", "identity").strip().lower()
        if coding not in ("identity", "", *_DECODED):
            await response.aclose()
            raise Unreadable(f"answer in Content-Encoding {coding[:40]}, not decoded")
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        if coding in _DECODED:  # the client must not decode it again, without a bound
            del response.headers["content-encoding"]
            response.headers.pop("content-length", None)
        response.stream = _Capped(response.stream, self, coding in _DECODED)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Capped(httpx2.AsyncByteStream):
    def __init__(self, raw: httpx2.AsyncByteStream, owner: BoundedTransport,
                 compressed: bool) -> None:
        self._raw, self._owner = raw, owner
        self._decoder = zlib.decompressobj(_AUTO_HEADER) if compressed else None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        room = received = self._owner.limit  # decoded bytes, and bytes as sent, still allowed
        async for chunk in self._raw:
            received -= len(chunk)
            data = self._decode(chunk, room + 1)
            if len(data) > room or received < 0:
                self._owner.exceeded = True
                raise TooLarge()
            room -= len(data)
            yield data

    def _decode(self, chunk: bytes, at_most: int) -> bytes:
        """The chunk decoded, at most `at_most` bytes of it (more would be past the limit)."""
        if self._decoder is None:
            return chunk
        try:
            data = self._decoder.decompress(chunk, at_most)
        except zlib.error:
            raise Unreadable("answer not in the Content-Encoding it names") from None
        if self._decoder.eof and self._decoder.unused_data:  # zlib would keep all that follows
            raise Unreadable("answer continues past its compressed stream")
        return data

    async def aclose(self) -> None:
        await self._raw.aclose()
