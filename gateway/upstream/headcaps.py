"""Caps on an upstream's response head, the same for every transport.

They mirror the listener's request-head caps (same defaults: 100 fields, 60 KiB of names and
values), so an upstream cannot make the gateway hold or relay a head that no client could have
sent it. Past a cap, or at a `101` (the gateway never asks an upstream to switch protocols), the
response is an `UpstreamError("protocol")`, which every surface answers as a 502. The head,
any 1xx interim responses before it included, is due within the read timeout of the request's
end, so an upstream cannot hold an exchange open with an endless run of interim responses.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from dataclasses import dataclass
from types import TracebackType

from gateway.settings import Timeouts, Upstream
from gateway.upstream.base import Body, UpstreamError

MAX_INTERIM = 10  # 1xx interim responses allowed before the final one


@dataclass(frozen=True, slots=True)
class HeadCaps:
    max_headers: int = 100
    max_header_bytes: int = 60 * 1024

    @classmethod
    def of(cls, upstream: Upstream) -> HeadCaps:
        return cls(upstream.max_response_headers, upstream.max_response_header_bytes)


def check_final_head(status: int, headers: Sequence[tuple[bytes, bytes]], caps: HeadCaps) -> None:
    """Raise for a head that is no final answer or is over a cap, for transports whose library
    parses the head whole (aigw's own client counts while it parses)."""
    if status < 200 or len(headers) > caps.max_headers:
        raise UpstreamError("protocol")
    if sum(len(name) + len(value) for name, value in headers) > caps.max_header_bytes:
        raise UpstreamError("protocol")


class HeadDeadline:
    """The head's deadline for transports whose library times each read only (aiohttp, httpx).

    A streamed body is wrapped so that its end starts the `read` clock; a body held in memory
    goes out at once, so the clock runs from the start, with the connect time added. Use:
    `async with deadline:` around the call that returns the head, sending `deadline.body`.
    """

    def __init__(self, timeouts: Timeouts, body: Body | None) -> None:
        self._read = timeouts.read
        self._timeout = asyncio.timeout(None)
        self._open = False
        if body is None or isinstance(body, bytes):
            self.body: Body | None = body
            self._first: float | None = timeouts.connect + timeouts.read
        else:
            self.body = self._started_at_end(body)
            self._first = None

    async def __aenter__(self) -> HeadDeadline:
        await self._timeout.__aenter__()
        self._open = True
        if self._first is not None:
            self._timeout.reschedule(asyncio.get_running_loop().time() + self._first)
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self._open = False
        try:
            await self._timeout.__aexit__(kind, exc, tb)
        except TimeoutError:
            raise UpstreamError("timeout") from None

    async def _started_at_end(self, body: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
        async for chunk in body:
            yield chunk
        if self._open:  # aiohttp sends the body from a task of its own, maybe after the head
            self._timeout.reschedule(asyncio.get_running_loop().time() + self._read)
