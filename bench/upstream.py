"""Benchmark upstream: a raw ASGI app answering every request with 1,024 bytes of JSON.

Run: uvicorn bench.upstream:app --loop uvloop --http httptools --no-access-log --log-level warning
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

BODY_SIZE = 1024

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def make_body(size: int = BODY_SIZE) -> bytes:
    """Return a JSON object whose encoding is exactly ``size`` bytes."""
    empty = json.dumps({"data": ""}, separators=(",", ":")).encode()
    body = json.dumps({"data": "x" * (size - len(empty))}, separators=(",", ":")).encode()
    assert len(body) == size
    return body


BODY = make_body()
HEADERS = [
    (b"content-type", b"application/json"),
    (b"content-length", str(len(BODY)).encode()),
]


async def _drain(receive: Receive) -> None:
    """Read the request body to its end so keep-alive connections stay usable."""
    more = True
    while more:
        message = await receive()
        more = message.get("type") == "http.request" and message.get("more_body", False)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """Answer any path and method with the same 1,024-byte JSON document."""
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    await _drain(receive)
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY})
