"""Protocol upgrades: the gateway proxies no WebSockets and upgrades to nothing.

The listener hands an upgrade request to the app as plain HTTP (uvicorn's `ws="none"`), and a
WebSocket handshake is refused like any other failure: in the dialect of the path's owner, with
a stable code and the request id. Other upgrades (`h2c`) are ignored, as RFC 9110 §7.8 allows:
the request is answered over HTTP/1.1. Under an ASGI server that does speak WebSocket, a
`websocket` scope gets the same refusal through the ASGI denial-response extension.
"""

from __future__ import annotations

from gateway.asgi import Message, RawHeaders, Receive, Scope, Send
from gateway.errors import GatewayError

CODE = "websocket_not_supported"


def wants_websocket(headers: RawHeaders) -> bool:
    """Whether an `Upgrade` field names websocket (any case, any version suffix)."""
    for name, value in headers:
        if name == b"upgrade":
            for token in value.split(b","):
                if token.strip().split(b"/", 1)[0].lower() == b"websocket":
                    return True
    return False


def websocket_refused() -> GatewayError:
    return GatewayError(400, CODE, "This gateway does not serve WebSocket connections.",
                        headers=(("connection", "close"),))


def as_http_scope(scope: Scope) -> Scope:
    """A `websocket` scope as the `http` request its handshake was."""
    scheme = "https" if scope.get("scheme") == "wss" else "http"
    return {**scope, "type": "http", "method": "GET", "scheme": scheme}


def denial_channel(scope: Scope, send: Send) -> tuple[Receive, Send] | None:
    """`receive` and `send` for answering a `websocket` scope's handshake with an HTTP
    response (the ASGI `websocket.http.response` extension); None when the server lacks it."""
    if "websocket.http.response" not in scope.get("extensions", {}):
        return None

    async def as_denial(message: Message) -> None:
        await send({**message, "type": "websocket." + message["type"]})

    async def no_body() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    return no_body, as_denial
