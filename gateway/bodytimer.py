"""Time limits on reading a request body, so a slow client cannot hold what it is given.

A body must keep coming (at most `body_idle_timeout` between chunks) and end within
`body_timeout` of the first read. Late, whoever is reading it gets `GatewayError` 408
`request_timeout` (answered in the dialect of the path's owner, with `Connection: close`), or,
when the response has already started, the connection is dropped. It wraps the ASGI `receive`
every reader goes through: the passthrough proxy and surface handlers alike.
"""

from __future__ import annotations

import asyncio

from gateway.asgi import Message, RawHeaders, Receive
from gateway.errors import GatewayError


def has_body(headers: RawHeaders) -> bool:
    for name, value in headers:
        if name == b"transfer-encoding" or (name == b"content-length" and value != b"0"):
            return True
    return False


def body_timeout_error() -> GatewayError:
    return GatewayError(408, "request_timeout", "The request body did not arrive in time.",
                        headers=(("connection", "close"),))


def timed_receive(receive: Receive, idle: float, total: float) -> Receive:
    """`receive`, failing with 408 when the body stalls for `idle` s or takes over `total` s.
    Once the body has ended, reads (waiting for a disconnect) are not timed."""
    loop = asyncio.get_running_loop()
    deadline: float | None = None
    ended = False

    async def timed() -> Message:
        nonlocal deadline, ended
        if ended:
            return await receive()
        now = loop.time()
        if deadline is None:
            deadline = now + total
        try:
            async with asyncio.timeout(max(0.0, min(idle, deadline - now))):
                message = await receive()
        except TimeoutError:
            raise body_timeout_error() from None
        if message["type"] != "http.request" or not message.get("more_body", False):
            ended = True
        return message

    return timed
