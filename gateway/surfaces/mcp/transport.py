"""What an MCP endpoint refuses before the SDK reads the request, raised as `GatewayError`s
so that they are answered in the endpoints' JSON-RPC dialect with the request id (the SDK's
own refusals are plain text): a Host or Origin the endpoint does not serve (its DNS-rebinding
protection, the SDK's rules: an exact value, or `host:*` for any port), a body that is not
JSON, a body over the size limit. The body read here is handed to the SDK as it was sent."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from gateway.bodies import read_capped
from gateway.errors import GatewayError


@dataclass(frozen=True, slots=True)
class TransportRules:
    hosts: tuple[str, ...]  # none: neither Host nor Origin is checked
    origins: tuple[str, ...]
    max_body_bytes: int

    async def admit(self, request: Request) -> bytes:
        """The request's body, once its headers are ones this endpoint serves."""
        headers = request.headers
        if self.hosts:
            if not _allowed(headers.get("host", ""), self.hosts):
                raise GatewayError(421, "misdirected_request",
                                   "This endpoint does not serve the host the request names.")
            origin = headers.get("origin")
            if origin and not _allowed(origin, self.origins):
                raise GatewayError(403, "origin_not_allowed",
                                   "Requests from this origin are not accepted here.")
        media_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media_type != "application/json":
            raise GatewayError(415, "unsupported_media_type",
                               "Send the JSON-RPC message as Content-Type: application/json.")
        return await read_capped(request, self.max_body_bytes)


def replaying(body: bytes, receive: Any) -> Any:
    """`receive` with the body, already read, given back as its first message."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Any:
        return pending.pop() if pending else await receive()

    return replay


def _allowed(value: str, allowed: Sequence[str]) -> bool:
    if not value:
        return False
    return any(value == pattern or (pattern.endswith(":*") and
                                    value.startswith(pattern[:-1]))
               for pattern in allowed)

