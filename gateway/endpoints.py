"""Documents the gateway serves itself (discovery and metadata), rendered once per config.

Each is public, cacheable and answers `If-None-Match` with 304. The app answers methods other
than GET and HEAD before a document is called.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from gateway.asgi import RawHeaders, Receive, Scope, Send


class StaticDocument:
    """An ASGI endpoint for one pre-rendered JSON document."""

    def __init__(self, surface: str, document: Any, *, max_age: int = 3600,
                 content_type: str = "application/json") -> None:
        self.surface = surface
        self.body = orjson.dumps(document)
        self.etag = b'"' + hashlib.sha256(self.body).hexdigest()[:32].encode() + b'"'
        self._headers = [
            (b"content-type", content_type.encode()),
            (b"cache-control", f"public, max-age={max_age}".encode()),
            (b"etag", self.etag),
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._matches(scope["headers"]):
            await _send(send, 304, self._headers, b"")
            return
        headers = [*self._headers, (b"content-length", str(len(self.body)).encode())]
        await _send(send, 200, headers, b"" if scope["method"] == "HEAD" else self.body)

    def _matches(self, headers: RawHeaders) -> bool:
        for name, value in headers:
            if name == b"if-none-match":
                tags = [tag.strip().removeprefix(b"W/") for tag in value.split(b",")]
                return self.etag in tags or b"*" in tags
        return False


async def _send(send: Send, status: int, headers: RawHeaders, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
