"""Reading a request body that a surface needs whole (a JSON body), within a size limit."""

from __future__ import annotations

from starlette.requests import Request

from gateway.errors import request_too_large
from gateway.integers import ascii_int


async def read_capped(request: Request, limit: int) -> bytes:
    """The body's bytes; `request_too_large` past `limit`, declared or as sent."""
    declared = request.headers.get("content-length")
    size_declared = ascii_int(declared)
    if size_declared is not None and size_declared > limit:
        raise request_too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise request_too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)
