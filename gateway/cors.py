"""CORS for the public discovery documents, so that agents running in a browser can read them.

Only the documents and the exact paths a surface serves without a token (`Mount.public_paths`)
get these fields; the gateway adds none to any other path (a passthrough answer keeps what
the upstream sent). A preflight is an OPTIONS request with `Origin` and
`Access-Control-Request-Method`; any other OPTIONS stays a 405.
"""

from __future__ import annotations

from gateway.asgi import Message, RawHeaders, Scope, Send
from gateway.settings import Discovery

_METHODS = b"GET, HEAD"
_EXPOSED = (b"ETag, X-Request-Id, Retry-After, RateLimit, RateLimit-Policy, RateLimit-Limit, "
            b"RateLimit-Remaining, RateLimit-Reset")


class DocumentCors:
    def __init__(self, settings: Discovery, api_key_header: str | None = None) -> None:
        self.any_origin = "*" in settings.cors_origins
        self.origins = frozenset(o.encode() for o in settings.cors_origins if o != "*")
        self.enabled = self.any_origin or bool(self.origins)
        allowed = ["Authorization", "If-None-Match", "Accept", "X-Request-Id"]
        if api_key_header:
            allowed.append(api_key_header)
        self._preflight = [
            (b"access-control-allow-methods", _METHODS),
            (b"access-control-allow-headers", ", ".join(allowed).encode("latin-1")),
            (b"access-control-max-age", str(settings.cors_max_age).encode()),
        ]

    def is_preflight(self, scope: Scope) -> bool:
        if scope["method"] != "OPTIONS" or not self.enabled:
            return False
        names = {name for name, _ in scope["headers"]}
        return b"origin" in names and b"access-control-request-method" in names

    async def preflight(self, scope: Scope, send: Send) -> None:
        """204; the allow fields only for an allowed origin (the browser refuses the rest)."""
        headers = self._origin_fields(scope["headers"])
        if any(name == b"access-control-allow-origin" for name, _ in headers):
            headers.extend(self._preflight)
        await send({"type": "http.response.start", "status": 204, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    def wrap(self, scope: Scope, send: Send) -> Send:
        """`send` with the CORS fields added to the response, whatever its status."""
        if not self.enabled:
            return send
        fields = self._origin_fields(scope["headers"])
        if any(name == b"access-control-allow-origin" for name, _ in fields):
            fields.append((b"access-control-expose-headers", _EXPOSED))

        async def with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *fields]
            await send(message)

        return with_cors

    def _origin_fields(self, headers: RawHeaders) -> RawHeaders:
        if self.any_origin:
            return [(b"access-control-allow-origin", b"*")]
        origin = next((value for name, value in headers if name == b"origin"), None)
        fields = [(b"vary", b"Origin")]
        if origin is not None and origin in self.origins:
            fields.insert(0, (b"access-control-allow-origin", origin))
        return fields
