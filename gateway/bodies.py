"""Reading a request body that a surface needs whole (a JSON body), within a size limit."""

from __future__ import annotations

from starlette.requests import ClientDisconnect, Request

from gateway.errors import request_too_large
from gateway.integers import ascii_int


async def read_capped(request: Request, limit: int) -> bytes:
    """The body's bytes; `request_too_large` past `limit`, declared or as sent."""
    declared = request.headers.get("content-length")
    size_declared = ascii_int(declared)
    if size_declared is not None and size_declared > limit:
        raise request_too_large(limit)
    if hasattr(request, "_body") or request._stream_consumed:  # Starlette's own cases
        return await _streamed(request, limit)
    chunks: list[bytes] = []
    size = 0
    # `request.stream()`'s loop, without an async generator around each body message.
    while True:
        message = await request.receive()
        if message["type"] == "http.request":
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise request_too_large(limit)
            if chunk:
                chunks.append(chunk)
            if not message.get("more_body", False):
                request._stream_consumed = True  # as `stream()` marks it: read once
                return b"".join(chunks)
        elif message["type"] == "http.disconnect":
            request._is_disconnected = True
            raise ClientDisconnect()


async def _streamed(request: Request, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise request_too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)
