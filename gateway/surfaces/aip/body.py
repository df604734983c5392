"""Reading the JSON body of AIP's POST endpoints: bounded, and kept as bytes for signing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.errors import GatewayError
from gateway.surfaces.aip.bounds import Path, shape_problem, where
from gateway.surfaces.aip.request import MEDIA_TYPE, invalid


def parse_json(raw: bytes, content_type: str, string_limits: Mapping[Path, int] | None = None
               ) -> tuple[Any, GatewayError | None]:
    """The JSON body, or why it is refused; a body sent with the wrong media type, or of a
    shape past the bounds (too deep, a string too long: bounds.py, with `string_limits` for
    some paths), is still parsed, so its request_id can be echoed."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None, invalid("The request body is not valid JSON (UTF-8).")
    media_type = content_type.split(";")[0].strip().lower()
    if media_type != MEDIA_TYPE:
        return body, GatewayError(415, "invalid_request", "Send the body as application/json.")
    problem = shape_problem(body, string_limits, raw)
    if problem is not None:
        path, complaint = problem
        return body, invalid(f"The request body at {where(path, '/')} is {complaint}.")
    return body, None
