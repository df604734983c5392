"""The demo backend's request inputs, checked: query parameters and JSON body fields, each
refused as an `ApiError` (400 or 422, with a code) naming what is wrong."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import orjson
from starlette.requests import Request

from gateway.demo.data import iso

MAX_LIMIT = 100
MAX_TEXT_CHARS = 20_000


class ApiError(Exception):
    """An error reported to the client as ``{"message", "code"}``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def int_param(
    request: Request, name: str, default: int, minimum: int, maximum: int | None = None
) -> int:
    raw = request.query_params.get(name)
    try:
        value = default if raw in (None, "") else int(raw)
    except ValueError:
        raise ApiError(400, "BAD_PARAM", f"{name} must be an integer") from None
    if value < minimum:
        raise ApiError(400, "BAD_PARAM", f"{name} must be at least {minimum}")
    return value if maximum is None else min(value, maximum)


def since_param(request: Request) -> str | None:
    raw = request.query_params.get("updated_since")
    if not raw:
        return None
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise ApiError(400, "BAD_PARAM", "updated_since must be an ISO-8601 timestamp") from None
    return iso(moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC))


async def json_object(request: Request) -> dict[str, Any]:
    try:
        body = orjson.loads(await request.body())
    except orjson.JSONDecodeError:
        body = None
    if not isinstance(body, dict):
        raise ApiError(400, "BAD_JSON", "Request body must be a JSON object")
    return body


def text_field(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ApiError(400, "BAD_TEXT", f"{name} must be a non-empty string")
    if len(value) > MAX_TEXT_CHARS:
        raise ApiError(400, "BAD_TEXT", f"{name} is longer than {MAX_TEXT_CHARS} characters")
    return value


def vector_field(body: dict[str, Any], dimensions: int) -> list[float]:
    value = body.get("vector")
    if (
        not isinstance(value, list)
        or len(value) != dimensions
        or not all(
            isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
            for x in value
        )
    ):
        raise ApiError(422, "BAD_VECTOR", f"vector must be a list of {dimensions} finite numbers")
    return [float(x) for x in value]


def k_field(body: dict[str, Any]) -> int:
    k = body.get("k", 10)
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ApiError(422, "BAD_PARAM", "k must be a positive integer")
    return min(k, MAX_LIMIT)


def category_field(body: dict[str, Any]) -> str | None:
    category = body.get("category")
    if category is not None and not isinstance(category, str):
        raise ApiError(422, "BAD_PARAM", "category must be a string")
    return category
