"""Time limits on reading a request body, so a slow client cannot hold what it is given.

A body must keep coming (at most `body_idle_timeout` between chunks) and end within
`body_timeout` of the first read. Late, whoever is reading it gets `GatewayError` 408
`request_timeout` (answered in the dialect of the path's owner, with `Connection: close`), or,
when the response has already started, the connection is dropped. It wraps the ASGI `receive`
every reader goes through: the passthrough proxy and surface handlers alike.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Awaitable, Generator
from typing import Any, cast

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
        pending = receive()
        waits, step = _first_step(pending)
        if waits:
            try:
                async with asyncio.timeout(max(0.0, min(idle, deadline - now))):
                    message = await _driven_on(pending, step)
            except TimeoutError:
                raise body_timeout_error() from None
        else:
            message = step
        if message["type"] != "http.request" or not message.get("more_body", False):
            ended = True
        return message

    return timed



def _first_step(pending: Awaitable[Message]) -> tuple[bool, Any]:
    """Run `receive()`'s coroutine up to its first wait: (True, what it yielded) when it waits,
    (False, its message) when it finished without waiting. A body already read from the
    socket (most are, with the head) is so taken without arming a timer: the timer guards
    waiting for the client, and no wait has begun."""
    if not isinstance(pending, types.CoroutineType):  # another awaitable: timed as a whole
        return True, _Whole(pending)
    try:
        return True, pending.send(None)
    except StopIteration as finished:
        return False, finished.value


class _Whole:
    """An awaitable `_driven_on` awaits whole (it was never started)."""

    __slots__ = ("awaitable",)

    def __init__(self, awaitable: Awaitable[Message]) -> None:
        self.awaitable = awaitable


@types.coroutine
def _driven_on(pending: Any, yielded: Any) -> Generator[Any, Any, Message]:
    """The rest of a coroutine whose first step yielded `yielded`: each value it yields goes
    to the task, and each result or exception (a cancellation) back to it, as `await` does."""
    if isinstance(yielded, _Whole):
        return (yield from yielded.awaitable.__await__())
    try:
        while True:
            try:
                sent = yield yielded
            except GeneratorExit:
                raise
            except BaseException as exc:  # thrown in by the task: passed on as it is
                yielded = pending.throw(exc)
            else:
                yielded = pending.send(sent)
    except StopIteration as finished:
        return cast(Message, finished.value)
    finally:
        pending.close()
