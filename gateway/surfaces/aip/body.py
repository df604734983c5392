"""Reading the JSON body of AIP's POST endpoints: bounded, and kept as bytes for signing."""

from __future__ import annotations

from typing import Any

import orjson

from gateway.errors import GatewayError
from gateway.surfaces.aip.request import MEDIA_TYPE, invalid


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
