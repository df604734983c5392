"""Upstreams served by Python functions in this process: the gateway without a network.

For testing a config and its surfaces, as httpx's `MockTransport` is for an httpx client:

    def helpcentre(request: UpstreamRequest) -> Reply:
        return Reply.json({"items": []})

    upstreams = MemoryUpstreams({"helpcentre": helpcentre})
    app = GatewayApp(Runtime(load_config(path), transports=upstreams))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://gw") as c:
        await c.post("/search", json={"query": "refunds"})

A handler is a plain or async function of one `UpstreamRequest`; it returns a `Reply`, or raises
`UpstreamError("connect" | "timeout" | "protocol")` to fail as a network would. `asgi(app)` makes
a handler of any ASGI app. The upstream's own settings still apply: the head is due within the
connect plus read timeout, each body chunk within the read timeout, and the head caps hold.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from gateway.settings import Upstream
from gateway.upstream.base import Body, RawHeaders, Transport, UpstreamError, UpstreamResponse
from gateway.upstream.headcaps import HeadCaps, HeadDeadline, check_final_head

ReplyBody = bytes | Iterable[bytes] | AsyncIterable[bytes]


@dataclass(frozen=True)
class UpstreamRequest:
    """One request as the gateway sent it: raw header pairs, the whole body."""

    method: str
    url: str
    headers: RawHeaders
    body: bytes = b""

    @property
    def path(self) -> str:
        return unquote(urlsplit(self.url).path)

    @property
    def query(self) -> list[tuple[str, str]]:
        return parse_qsl(urlsplit(self.url).query, keep_blank_values=True)

    def header(self, name: str) -> str | None:
        """The first value of a field, or None."""
        wanted = name.lower().encode("latin-1")
        return next((v.decode("latin-1") for k, v in self.headers if k.lower() == wanted), None)

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Reply:
    """What a handler answers: a status, raw header pairs, and a body (bytes or chunks)."""

    status: int = 200
    headers: RawHeaders = field(default_factory=list)
    body: ReplyBody = b""

    @classmethod
    def json(cls, document: Any, status: int = 200,
             headers: Mapping[str, str] | None = None) -> Reply:
        fields = [(b"content-type", b"application/json"),
                  *((k.lower().encode(), v.encode()) for k, v in (headers or {}).items())]
        return cls(status, fields, json.dumps(document).encode())


Handler = Callable[[UpstreamRequest], Reply | Awaitable[Reply]]


class MemoryResponse(UpstreamResponse):
    def __init__(self, reply: Reply, read_timeout: float) -> None:
        self.status = reply.status
        self.headers = list(reply.headers)
        self._body = reply.body
        self._read_timeout = read_timeout
        self.closed = False

    async def stream(self) -> AsyncIterator[bytes]:
        if isinstance(self._body, bytes):
            if self._body:
                yield self._body
            return
        if not isinstance(self._body, AsyncIterable):
            for chunk in self._body:
                yield chunk
            return
        chunks = aiter(self._body)
        while True:
            try:
                async with asyncio.timeout(self._read_timeout):
                    chunk = await anext(chunks)
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise UpstreamError("timeout") from None
            yield chunk

    async def close(self) -> None:
        self.closed = True


class MemoryTransport(Transport):
    """One upstream answered by `handler`; every request it was sent is kept in `requests`."""

    def __init__(self, upstream: Upstream, handler: Handler) -> None:
        super().__init__(upstream)
        self.handler = handler
        self.requests: list[UpstreamRequest] = []
        self.closed = False
        self._caps = HeadCaps.of(upstream)

    async def request(
        self, method: str, url: str, headers: RawHeaders, body: Body | None
    ) -> UpstreamResponse:
        deadline = HeadDeadline(self.upstream.timeout, body)
        async with deadline:
            sent = await _read(deadline.body)
            request = UpstreamRequest(method, url, list(headers), sent)
            self.requests.append(request)
            reply = self.handler(request)
            if inspect.isawaitable(reply):
                reply = await reply
        check_final_head(reply.status, reply.headers, self._caps)
        return MemoryResponse(reply, self.upstream.timeout.read)

    async def probe(self) -> bool:
        if self.upstream.health_path is None:
            return True  # nothing to connect to: a handler is always there
        return await super().probe()

    async def aclose(self) -> None:
        self.closed = True


class MemoryUpstreams:
    """A transport factory for `Runtime(..., transports=...)`: each upstream of the config is
    answered by the handler registered under its name, or under its URL's origin
    (`http://host:port`). An upstream with neither is unreachable (`UpstreamError("connect")`)."""

    def __init__(self, handlers: Mapping[str, Handler] | None = None) -> None:
        self.handlers = dict(handlers or {})
        self.transports: dict[str, list[MemoryTransport]] = {}

    def __call__(self, name: str, upstream: Upstream) -> Transport:
        handler = self.handlers.get(name) or self.handlers.get(_origin(upstream.url), _refuse)
        transport = MemoryTransport(upstream, handler)
        self.transports.setdefault(name, []).append(transport)
        return transport

    def requests(self, name: str) -> list[UpstreamRequest]:
        """Every request sent to the upstream `name`, by every generation, oldest first."""
        return [r for transport in self.transports.get(name, []) for r in transport.requests]


def asgi(app: Callable[..., Awaitable[None]]) -> Handler:
    """A handler that answers with an ASGI application (a Starlette app, say), run to the end
    of its response for each request."""

    async def handle(request: UpstreamRequest) -> Reply:
        parts = urlsplit(request.url)
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": request.method, "scheme": parts.scheme, "path": unquote(parts.path),
            "raw_path": parts.path.encode("latin-1"), "root_path": "",
            "query_string": parts.query.encode("latin-1"),
            "headers": [(k.lower(), v) for k, v in request.headers],
            "server": (parts.hostname or "", parts.port or 80), "client": ("127.0.0.1", 0),
        }
        answer = Reply(body=b"")
        chunks: list[bytes] = []
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if sent:
                await asyncio.Event().wait()  # no disconnect while the app answers
            sent = True
            return {"type": "http.request", "body": request.body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                answer.status = message["status"]
                answer.headers = [(bytes(k), bytes(v)) for k, v in message.get("headers", [])]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await app(scope, receive, send)
        answer.body = b"".join(chunks)
        return answer

    return handle


async def _read(body: Body | None) -> bytes:
    if body is None or isinstance(body, bytes):
        return body or b""
    return b"".join([chunk async for chunk in body])


def _refuse(request: UpstreamRequest) -> Reply:
    raise UpstreamError("connect")


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"
