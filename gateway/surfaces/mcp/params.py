"""A `/.well-known/ai` capability's parameters as a tool's JSON Schema input: the schema its
route enforces, where the capability keeps one (`Capability.request_schema`), else one read
from its parameter texts.

A capability writes each parameter as "type, required|optional[, qualifiers] — meaning"
(gateway.capability). The type is one of JSON Schema's when it names one (`JSON` and anything
else accept any value); `required` makes it required; `max N` bounds an integer; the meaning is
the description.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_TYPES = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean",
          "object": "object", "array": "array"}
_MAX = re.compile(r"^max\s+(\d+)$")
_DEFAULT = re.compile(r"^default\s+(\S+)$")


def enforced_input(schema: dict[str, Any], path_params: frozenset[str]) -> dict[str, Any]:
    """The route's own schema, with the path parameters it does not name (required strings)."""
    missing = sorted(path_params - set(schema.get("properties", {})))
    if not missing:
        return schema
    return {**schema, "properties": {**schema.get("properties", {}), **{
        name: {"type": "string", "minLength": 1} for name in missing}},
        "required": [*schema.get("required", ()), *missing]}


def input_schema(params: Mapping[str, str], path_params: frozenset[str]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, text in params.items():
        schema, needed = parameter(text)
        properties[name] = schema
        if needed:
            required.append(name)
    for name in sorted(path_params - set(properties)):  # a path parameter the text forgot
        properties[name] = {"type": "string", "minLength": 1}
        required.append(name)
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


def parameter(text: str) -> tuple[dict[str, Any], bool]:
    """One parameter's schema, and whether it is required."""
    head, _, meaning = text.partition("—")
    qualifiers = [part.strip() for part in head.split(",")]
    kind = _TYPES.get(qualifiers[0].lower()) if qualifiers else None
    schema: dict[str, Any] = {"type": kind} if kind else {}
    if kind == "string":
        schema["minLength"] = 1
    for qualifier in qualifiers[1:]:
        if (found := _MAX.match(qualifier)) and kind in ("integer", "number"):
            schema["maximum"] = int(found.group(1))
        elif (found := _DEFAULT.match(qualifier)) and kind == "integer" \
                and found.group(1).isdigit():
            schema["default"] = int(found.group(1))
    if meaning.strip():
        schema["description"] = meaning.strip()
    return schema, "required" in qualifiers[1:]
