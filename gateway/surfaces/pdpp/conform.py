"""Records held to the schema their stream advertises (`CompiledStream.schema()`), so the
gateway never sends a record that breaks it, whatever the upstream answers.

Each field's check is compiled once from its spec: a type test and, for strings with a
`format`, a cheap format test (no JSON Schema run per record). A value that fails it, or
null on a field that is not `nullable`, is not sent:

- a field that is not required is left out of the record (an absent field is valid);
- a required field (or the primary key) makes the whole record unusable: it is skipped.

Skipped records, and values of the wrong type or format left out, are counted in
`aigw_schema_violations_total` {surface="pdpp", collection=<stream>, field, action} and
logged once per read with their count, never with the value (a null left out is not
counted: the upstream has no value).
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any
from urllib.parse import urlsplit

from gateway.mapping import Expression
from gateway.observability import SCHEMA_VIOLATIONS
from gateway.surfaces.pdpp.config import FieldSpec

log = logging.getLogger("aigw.pdpp")

Check = Callable[[Any], bool]
OMITTED, SKIPPED = "field_omitted", "record_skipped"
# (field, action) -> how many times, over one read of the upstream
Tally = Counter[tuple[str, str]]


def _integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _number(value: Any) -> bool:
    # NaN and infinities are no JSON numbers (orjson would send them as null)
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


TYPES: dict[str, Check] = {
    "string": lambda value: isinstance(value, str),
    "integer": _integer,
    "number": _number,
    "boolean": lambda value: isinstance(value, bool),
    "array": lambda value: isinstance(value, list),
    "object": lambda value: isinstance(value, dict),
}

_DATE_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})", re.ASCII | re.IGNORECASE)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
# RFC 3986: a scheme, then only unreserved, reserved and percent-encoded characters
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]*")
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)


def _date_time(value: str) -> bool:
    """RFC 3339 `date-time`: full date, time with seconds, and an offset."""
    if _DATE_TIME.fullmatch(value) is None:
        return False
    try:
        datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _date(value: str) -> bool:
    if _DATE.fullmatch(value) is None:
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


def _uri(value: str) -> bool:
    """An absolute RFC 3986 URI (ASCII only: an IRI is not a `uri`)."""
    if _URI.fullmatch(value) is None or _BAD_PERCENT.search(value) is not None:
        return False
    try:
        urlsplit(value)  # refuses a malformed IPv6 literal
    except ValueError:
        return False
    return True


FORMATS: dict[str, Callable[[str], bool]] = {
    "date-time": _date_time,
    "date": _date,
    "uri": _uri,
    "email": lambda value: _EMAIL.fullmatch(value) is not None,
    "uuid": lambda value: _UUID.fullmatch(value) is not None,
}


def schema_of(spec: FieldSpec) -> dict[str, Any]:
    """The JSON Schema (Draft 2020-12) of one field: its type, null too when `nullable`."""
    schema: dict[str, Any] = {"type": [spec.type, "null"] if spec.nullable else spec.type}
    if spec.format is not None:
        schema["format"] = spec.format
    return schema


@dataclass(frozen=True, slots=True)
class FieldRule:
    """One field compiled: where it is in an upstream item and what values it may send."""

    name: str
    path: Expression  # not ParsedResult.search: a new interpreter per call, and a cycle
    accepts: Check  # a non-null value of the declared type and format
    nullable: bool
    required: bool  # schema-required: the record is skipped rather than sent without it


def compile_rule(name: str, spec: FieldSpec, path: Expression, required: bool) -> FieldRule:
    of_type = TYPES[spec.type]
    accepts = of_type
    if spec.format is not None:
        in_format = FORMATS[spec.format]
        accepts = lambda value: of_type(value) and in_format(value)  # noqa: E731
    return FieldRule(name, path, accepts, spec.nullable, required)


def conform(rules: tuple[FieldRule, ...], item: Any, tally: Tally) -> dict[str, Any] | None:
    """The fields of one upstream item that its schema admits; None when a required one
    fails (each failure counted in `tally`)."""
    data: dict[str, Any] = {}
    for rule in rules:
        value = rule.path.search(item)
        if (value is None and rule.nullable) or (value is not None and rule.accepts(value)):
            data[rule.name] = value
        elif rule.required:
            tally[rule.name, SKIPPED] += 1
            return None
        elif value is not None:  # null or absent: the field is absent, as upstream has none
            tally[rule.name, OMITTED] += 1
    return data


def report(stream: str, tally: Mapping[tuple[str, str], int]) -> None:
    """Count and log a read's violations: names and counts, never a value."""
    for (field, action), count in sorted(tally.items()):
        SCHEMA_VIOLATIONS.labels("pdpp", stream, field, action).inc(count)
        log.warning("pdpp stream %s: %d value(s) of field %s break its schema: %s",
                    stream, count, field, action.replace("_", " "))
