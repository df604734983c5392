"""`filter[field]=v` (exact) and `filter[field][op]=v` (declared range) on records."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gateway.errors import GatewayError
from gateway.instants import instant
from gateway.surfaces.pdpp.projection import Access
from gateway.surfaces.pdpp.streams import Record

FILTER = re.compile(r"^filter\[([^\[\]]+)\](?:\[([^\[\]]+)\])?$")
_OPS = {"gte": lambda a, b: a >= b, "gt": lambda a, b: a > b,
        "lte": lambda a, b: a <= b, "lt": lambda a, b: a < b}


@dataclass(frozen=True, slots=True)
class Filter:
    field: str
    op: str | None  # None: exact
    value: str
    param: str


def parse_filter(name: str, value: str) -> Filter | None:
    """The filter a query parameter names, or None when it is not a filter."""
    match = FILTER.fullmatch(name)
    return Filter(match.group(1), match.group(2), value, name) if match else None


def check(filters: list[Filter], access: Access) -> None:
    """Refuse a filter on an unknown, non-scalar, ungranted or undeclared field or operator."""
    stream = access.stream
    for f in filters:
        if f.field not in stream.settings.fields:
            raise GatewayError(400, "unknown_field", f"No field {f.field!r} in this stream.",
                               {"param": f.param})
        if f.field not in stream.scalar_fields:
            raise GatewayError(400, "invalid_request", "Only top-level scalar fields filter.",
                               {"param": f.param})
        if f.field not in access.fields:
            raise GatewayError(403, "field_not_granted",
                               f"The grant does not include field {f.field!r}.",
                               {"param": f.param})
        if f.op is not None and f.op not in stream.settings.range_filters.get(f.field, ()):
            raise GatewayError(400, "invalid_request",
                               f"The stream declares no {f.op!r} range filter on {f.field!r}.",
                               {"param": f.param})


def matches(record: Record, filters: list[Filter], access: Access) -> bool:
    return all(_holds(record.data.get(f.field), f, access) for f in filters)


def _holds(value: Any, f: Filter, access: Access) -> bool:
    spec = access.stream.settings.fields[f.field]
    left, right = _comparable(value, spec.type, spec.format), \
        _comparable(f.value, spec.type, spec.format, parse=True)
    if left is None or right is None:
        return False
    if f.op is None:
        return left == right
    try:
        return bool(_OPS[f.op](left, right))
    except TypeError:
        return False


def _comparable(value: Any, kind: str, fmt: str | None, parse: bool = False) -> Any:
    if fmt == "date-time":
        return instant(value)
    if kind == "boolean":
        if parse:
            return {"true": True, "false": False}.get(value)
        return value if isinstance(value, bool) else None
    if kind in ("integer", "number"):
        try:
            number = float(value)
        except (TypeError, ValueError):
            return None
        return None if isinstance(value, bool) else number
    return value if isinstance(value, str) else None
