"""Requests a surface makes to the gateway itself, on its caller's behalf.

A surface that wraps other surfaces' routes (an agent protocol whose calls are their requests)
does not call their code: it sends the wrapped route an inner request, which the app serves exactly
as it serves one from the network, so the wrapped surface's admission (authentication, route
scopes, rate limits), parsing, policy, grants, upstream calls, decision log, metrics, access log
and error dialect all apply unchanged. The inner request carries the caller's own headers (its
credential among them) but not the outer request's body, representation or session headers; its
request id is the outer one with a suffix, its span a child of the outer request's, and
`RequestContext.parent` names the outer request. An inner request cannot make inner requests.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlencode

import anyio
import orjson

from gateway import errors
from gateway.asgi import RawHeaders, Scope

if TYPE_CHECKING:
    from gateway.exchange import Exchange

MAX_ANSWER_BYTES = 8 * 1024 * 1024  # an inner answer larger than this is refused, not buffered
# What the outer request says about its own body, representation, connection or session: none
# of it describes the inner request. The caller's credential and other headers are carried, but
# for those the calling surface names as its protocol's own (`call(..., own_headers=...)`).
_NOT_CARRIED = frozenset({
    b"content-length", b"content-type", b"content-encoding", b"transfer-encoding", b"accept",
    b"accept-encoding", b"expect", b"connection", b"upgrade", b"keep-alive", b"te", b"trailer",
    b"origin", b"cookie", b"x-request-id", b"last-event-id",
})
Query = Mapping[str, str | int | float | bool | Sequence[str]]


@dataclass(frozen=True, slots=True)
class InnerCall:
    """One request to a route of this gateway: `path` is a template whose `{name}` segments
    are filled from `path_values`, each percent-encoded whole (a value is never a separator)."""

    method: str
    path: str
    path_values: Mapping[str, str] | None = None
    query: Query | None = None
    json: Any = None  # the body, sent as application/json when not None


@dataclass(frozen=True, slots=True)
class InnerAnswer:
    status: int
    headers: Mapping[str, str]  # lower-case names
    body: bytes
    request_id: str

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        """The body as JSON, or None when it is not JSON."""
        try:
            return orjson.loads(self.body)
        except orjson.JSONDecodeError:
            return None


# How the app serves an inner request: (outer exchange, scope, receive, send) -> None.
Serve = Callable[["Exchange", Scope, Any, Any], Awaitable[None]]


async def call(exchange: Exchange, request: InnerCall,
               own_headers: frozenset[bytes] = frozenset()) -> InnerAnswer:
    """Serve `request` through this gateway as the caller of `exchange`, and its answer.

    `own_headers` (lower-case) are the outer protocol's own, not carried to the inner request.
    """
    if exchange.serve_inner is None or exchange.ctx.parent is not None:
        raise errors.GatewayError(500, "internal_error", "An inner request cannot be made here.")
    raw_path = fill(request.path, request.path_values or {})
    body = None if request.json is None else orjson.dumps(request.json)
    scope = inner_scope(exchange.request.scope, request.method, raw_path,
                        _query_string(request.query), body, _NOT_CARRIED | own_headers)
    answer = _Answer()
    await exchange.serve_inner(exchange, scope, answer.receive(body or b""), answer.send)
    return answer.result()


def fill(template: str, values: Mapping[str, str]) -> str:
    """The raw (percent-encoded) path of a route template filled with `values`."""
    path = template
    for name, value in values.items():
        path = path.replace("{" + name + "}", quote(value, safe=""))
    if "{" in path:
        raise ValueError(f"unfilled path template {template!r}")
    return path


def inner_scope(outer: Scope, method: str, raw_path: str, query_string: bytes,
                body: bytes | None, not_carried: frozenset[bytes] = _NOT_CARRIED) -> Scope:
    headers: RawHeaders = [(name, value) for name, value in outer["headers"]
                           if name not in not_carried]
    headers.append((b"accept", b"application/json"))
    if body is not None:
        headers += [(b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())]
    return {
        "type": "http", "asgi": outer.get("asgi", {"version": "3.0"}),
        "http_version": outer.get("http_version", "1.1"), "method": method,
        "scheme": outer.get("scheme", "http"), "path": unquote(raw_path),
        "raw_path": raw_path.encode("ascii"), "root_path": outer.get("root_path", ""),
        "query_string": query_string, "headers": headers, "client": outer.get("client"),
        "server": outer.get("server"), "extensions": {},
    }


def _query_string(query: Query | None) -> bytes:
    if not query:
        return b""
    pairs: list[tuple[str, str]] = []
    for name, value in query.items():
        if isinstance(value, bool):
            pairs.append((name, "true" if value else "false"))
        elif isinstance(value, str | int | float):
            pairs.append((name, str(value)))
        else:
            pairs.extend((name, str(item)) for item in value)
    return urlencode(pairs).encode("ascii")


class _Answer:
    """The inner request's channel: its body in one message, its answer collected (bounded)."""

    def __init__(self) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.chunks: list[bytes] = []
        self.size = 0
        self.done = anyio.Event()
        self.request_id = ""

    def receive(self, body: bytes) -> Callable[[], Awaitable[dict[str, Any]]]:
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await self.done.wait()  # nobody leaves before the answer is complete
            return {"type": "http.disconnect"}

        return receive

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            for name, value in message.get("headers", ()):
                self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")
        elif message["type"] == "http.response.body":
            chunk = message.get("body", b"")
            self.size += len(chunk)
            if self.size <= MAX_ANSWER_BYTES:
                self.chunks.append(chunk)
            if not message.get("more_body", False):
                self.done.set()

    def result(self) -> InnerAnswer:
        self.done.set()
        if self.size > MAX_ANSWER_BYTES:
            raise errors.GatewayError(502, "answer_too_large",
                                      "The wrapped route's answer is too large to relay.")
        return InnerAnswer(self.status, self.headers, b"".join(self.chunks),
                           self.headers.get("x-request-id", ""))
