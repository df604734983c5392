"""Query parameters of each PDPP endpoint: what is allowed, for whom, and what is refused
(unknown and owner-only parameters are refused by name, never dropped)."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from starlette.requests import Request

from gateway.errors import GatewayError
from gateway.index.query import MAX_QUERY_CHARS, QueryTooLarge, query_terms
from gateway.integers import ascii_int
from gateway.surfaces.pdpp.filters import Filter, parse_filter

RECORDS_MAX_LIMIT = 100
RECORDS_DEFAULT_LIMIT = 25
_REMEMBERED_QUERY = 512  # bytes: a longer query string is parsed each time, never kept


@dataclass(slots=True)
class Params:
    values: dict[str, str] = field(default_factory=dict)
    streams: list[str] = field(default_factory=list)
    filters: list[Filter] = field(default_factory=list)
    warnings: list[dict[str, str]] = field(default_factory=list)

    def get(self, name: str) -> str | None:
        return self.values.get(name)


def invalid(message: str, param: str | None = None, code: str = "invalid_request") -> GatewayError:
    return GatewayError(400, code, message, {"param": param} if param else {})


def items(http: Request) -> tuple[tuple[str, str], ...]:
    """The query's parameters in order, as Starlette's `query_params` has them; a short query
    asked again (a busy caller's) is parsed once."""
    query: bytes = http.scope.get("query_string", b"")
    return _items(query) if len(query) <= _REMEMBERED_QUERY else _parsed(query)


@functools.lru_cache(maxsize=256)
def _items(query: bytes) -> tuple[tuple[str, str], ...]:
    return _parsed(query)


def _parsed(query: bytes) -> tuple[tuple[str, str], ...]:
    return tuple(parse_qsl(query.decode("latin-1"), keep_blank_values=True))


def parse(items: Iterable[tuple[str, str]], allowed: frozenset[str], *, owner: bool,
          filters: bool = False, streams: bool = False, records: bool = False) -> Params:
    """The parameters of one request; `allowed` are the plain names this endpoint takes."""
    params = Params()
    for name, value in items:
        if (f := parse_filter(name, value)) is not None and filters:
            params.filters.append(f)
        elif name in ("streams[]", "streams") and streams:
            if not value:
                raise invalid("streams[] names no stream.", name)
            params.streams.append(value)
        elif name in allowed:
            if name in params.values:
                raise invalid(f"{name} is given more than once.", name)
            params.values[name] = value
        else:
            raise _refusal(name, owner, records)
    return params


def _refusal(name: str, owner: bool, records: bool) -> GatewayError:
    base = name.split("[", 1)[0]
    if not records:
        return invalid(f"Unknown or unsupported parameter {name!r}.", name)
    if base in ("expand", "expand_limit") and owner:
        return invalid("This stream declares no expandable relation.", name, "invalid_expand")
    if base in ("filter", "expand", "expand_limit", "view") and not owner:
        return invalid(f"{base} is not available to client tokens.", name)
    if base == "changes_since":
        return invalid("changes_since is not supported by this resource server.", name)
    return invalid(f"Unknown or unsupported parameter {name!r}.", name)


def limit(params: Params, default: int, maximum: int) -> int:
    """The page size; above the maximum it is clamped with a `limit_clamped` warning."""
    raw = params.get("limit")
    if raw is None:
        return default
    value = ascii_int(raw)
    if value is None or value < 1:
        raise invalid("limit must be a positive integer.", "limit")
    if value > maximum:
        params.warnings.append({"code": "limit_clamped",
                                "message": f"limit was clamped to {maximum}."})
        return maximum
    return value


def search_query(params: Params) -> str:
    """`q` of a search: required, and within MAX_QUERY_CHARS (gateway.index.query)."""
    q = (params.get("q") or "").strip()
    if not q:
        raise invalid("q is required.", "q")
    if len(q) > MAX_QUERY_CHARS:
        raise _too_large(QueryTooLarge("chars", MAX_QUERY_CHARS))
    return q


def search_terms(q: str) -> list[str]:
    """The distinct terms a lexical search of `q` scores, refused past their bounds (its
    cost grows with them): before any stream is read or any upstream asked."""
    try:
        return query_terms(q)
    except QueryTooLarge as too_large:
        raise _too_large(too_large) from None


def _too_large(error: QueryTooLarge) -> GatewayError:
    return invalid(f"q has more than {error.limit} {error.what}.", "q",
                   "query_too_long" if error.bound == "chars" else "too_many_query_terms")


def order(params: Params) -> str:
    value = params.get("order") or "desc"
    if value not in ("asc", "desc"):
        raise invalid("order must be asc or desc.", "order")
    return value


def meta(params: Params) -> dict[str, Any]:
    return {"warnings": params.warnings} if params.warnings else {}
