"""Reading AIDIP requests: JSON bodies, search filters and the `top` limit."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request

from gateway.bodies import read_capped
from gateway.errors import GatewayError
from gateway.integers import ascii_int
from gateway.surfaces.aidip.config import Aidip
from gateway.surfaces.aidip.render import invalid_input
from gateway.surfaces.aidip.search import LIST_FILTERS, TEXT_FILTERS, Filters

# §10's example spells it "supported_language" (one value); the query string says "language".
_LANGUAGE_ALIASES = ("supported_language", "language")
_MAX_QUERY_CHARS = 2000


async def json_body(request: Request, limit: int) -> Any:
    return _parsed(await _json_read(request, limit))


async def json_bytes(request: Request, limit: int) -> bytes:
    """The body as sent, once checked to be JSON (for a reader that parses it again)."""
    body = await _json_read(request, limit)
    _parsed(body)
    return body


async def _json_read(request: Request, limit: int) -> bytes:
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json" and not media_type.endswith("+json"):
        raise GatewayError(415, "unsupported_media_type", "Send the body as application/json.")
    return await read_capped(request, limit)


def _parsed(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        raise invalid_input("The request body is not valid JSON.") from None


def filters_from(raw: Any) -> Filters:
    if raw is None:
        return Filters()
    if not isinstance(raw, dict):
        raise invalid_input("Field 'filters' must be an object.",
                            [{"field": "filters", "problem": "expected an object"}])
    lists: dict[str, frozenset[str]] = {}
    values: dict[str, str] = {}
    for name, value in raw.items():
        key = "supported_languages" if name in _LANGUAGE_ALIASES else name
        if key in LIST_FILTERS:
            wanted = [value] if isinstance(value, str) else value
            if not isinstance(wanted, list) or not all(isinstance(v, str) for v in wanted):
                raise _bad_filter(name, "expected a string or an array of strings")
            lists[key] = lists.get(key, frozenset()) | frozenset(wanted)
        elif key in TEXT_FILTERS:
            if not isinstance(value, str):
                raise _bad_filter(name, "expected a string")
            values[key] = value
        else:
            raise _bad_filter(name, "unknown filter")
    return Filters(lists, values)


def filters_from_query(request: Request) -> Filters:
    raw: dict[str, list[str]] = {}
    for name in ("capabilities", "tags", "language", "supported_languages"):
        for value in request.query_params.getlist(name):
            raw.setdefault(name, []).extend(v.strip() for v in value.split(",") if v.strip())
    for name in TEXT_FILTERS:
        if name in request.query_params:
            raw[name] = request.query_params[name]  # type: ignore[assignment]
    return filters_from(raw)


def top_from(raw: Any, settings: Aidip) -> int:
    if raw is None:
        return settings.default_top
    if isinstance(raw, str):
        raw = ascii_int(raw)
    if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= settings.max_top:
        raise invalid_input(f"Field 'top' must be an integer from 1 to {settings.max_top}.",
                            [{"field": "top", "problem": f"expected 1 to {settings.max_top}"}])
    return raw


def query_from(raw: Any) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, str) or len(raw) > _MAX_QUERY_CHARS:
        raise invalid_input(f"Field 'query' must be a string of at most {_MAX_QUERY_CHARS} "
                            "characters.", [{"field": "query", "problem": "expected a string"}])
    return raw.strip() or None


def _bad_filter(name: str, problem: str) -> GatewayError:
    return invalid_input(f"Filter '{name}': {problem}.",
                         [{"field": f"filters.{name}", "problem": problem}])
