"""Reading the JSON body of AIP's POST endpoints: bounded, and kept as bytes for signing."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request

from gateway.errors import GatewayError, request_too_large
from gateway.surfaces.aip.request import MEDIA_TYPE, invalid


async def read_raw(request: Request, limit: int) -> bytes:
    """The body's bytes; `request_too_large` past `limit`, declared or sent."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise request_too_large(limit)
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            raise request_too_large(limit)
    return raw


def parse_json(raw: bytes, content_type: str) -> tuple[Any, GatewayError | None]:
    """The JSON body, or why it is refused; a body sent with the wrong media type is still
    parsed, so its request_id can be echoed."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None, invalid("The request body is not valid JSON (UTF-8).")
    media_type = content_type.split(";")[0].strip().lower()
    if media_type != MEDIA_TYPE:
        return body, GatewayError(415, "invalid_request", "Send the body as application/json.")
    return body, None
