"""A tool's arguments checked against its input schema before the call.

Each schema is compiled once, when an endpoint's tools are built: jsonschema-rs tells whether
arguments conform in microseconds whatever their size (the JSON-RPC body is bounded, and a
keyword such as `maxItems` fails before any item is looked at). Only arguments that do not
conform are looked at further, to name the first argument (its path) and the constraint it
fails: one keyword at a time, each compiled once too, descending into the members and items
that fail. The offending value is never formatted: it could be a megabyte the caller sent, and
it is never repeated back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jsonschema_rs

# Keywords that say nothing about validity.
_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "$comment", "$schema",
                          "$id", "readOnly", "writeOnly", "deprecated"})
# Checked by walking the instance (descending), not as keywords of their own.
_STRUCTURE = frozenset({"properties", "required", "additionalProperties", "items"})
_FIRST = ("type", "enum", "const")  # what kind of value it is, before any bound on it
_MOST_ITEMS_WALKED = 1000  # past this, a failing `items` is named at the array
_MAX_NAME = 64  # an unknown argument's name is repeated only this long


@dataclass(frozen=True, slots=True)
class Problem:
    """The first argument that fails, as `a.b[2]`, and the constraint: a schema keyword, or
    `required` / `unknown` for a missing or unexpected member."""

    path: str
    constraint: str
    expected: Any = None  # the keyword's value in the schema (never the caller's value)

    def message(self) -> str:
        name = self.path or "the arguments"
        if self.constraint == "required":
            return f"{name} is required."
        if self.constraint == "unknown":
            return f"{name} is not an argument of this tool."
        if self.constraint == "type":
            expected = self.expected if isinstance(self.expected, str) else \
                " or ".join(str(kind) for kind in self.expected)
            return f"{name} must be of type {expected}."
        if self.expected is None or isinstance(self.expected, dict | list):
            return f"{name} does not satisfy {self.constraint}."
        return f"{name} does not satisfy {self.constraint} {str(self.expected)[:100]}."


class SchemaCheck:
    """One (sub)schema, compiled: whether a value conforms, and if not, its first problem."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self._whole = jsonschema_rs.validator_for(schema)
        self._keywords = [(name, schema[name], check) for name in _ordered(schema)
                          if (check := _alone({name: schema[name]})) is not None]
        properties = schema.get("properties")
        self._properties = {name: check for name, sub in properties.items()
                            if isinstance(sub, dict) and (check := _sub_check(sub))} \
            if isinstance(properties, dict) else {}
        required = schema.get("required")
        self._required = [name for name in required if isinstance(name, str)] \
            if isinstance(required, list) else []
        self._closed = schema.get("additionalProperties") is False
        items = schema.get("items")
        self._items = _sub_check(items) if isinstance(items, dict) else None

    def conforms(self, value: Any) -> bool:
        return bool(self._whole.is_valid(value))

    def problem(self, value: Any, path: str = "") -> Problem | None:
        """None when `value` conforms, else the first problem found."""
        if self._whole.is_valid(value):
            return None
        for name, expected, check in self._keywords:
            if name in _FIRST and not check.is_valid(value):
                return Problem(path, name, expected)
        if isinstance(value, dict) and (found := self._member_problem(value, path)):
            return found
        for name, expected, check in self._keywords:
            if name not in _FIRST and not check.is_valid(value):
                return Problem(path, name, expected)
        if isinstance(value, dict):
            for name, sub in self._properties.items():
                if name in value and (found := sub.problem(value[name], _join(path, name))):
                    return found
        if isinstance(value, list) and self._items is not None:
            for index, item in enumerate(value[:_MOST_ITEMS_WALKED]):
                if found := self._items.problem(item, f"{path}[{index}]"):
                    return found
            return Problem(path, "items")
        return Problem(path, "schema")

    def _member_problem(self, value: dict[Any, Any], path: str) -> Problem | None:
        for name in self._required:
            if name not in value:
                return Problem(_join(path, name), "required")
        if self._closed:
            unknown = next((name for name in value if name not in self._properties), None)
            if unknown is not None:
                return Problem(_join(path, str(unknown)[:_MAX_NAME]), "unknown")
        return None


def _alone(schema: dict[str, Any]) -> Any:
    """A keyword or subschema compiled on its own; None when it cannot be (a `$ref` into the
    whole schema's `$defs`): the whole schema still decides, only the naming is coarser."""
    try:
        return jsonschema_rs.validator_for(schema)
    except ValueError:
        return None


def _sub_check(schema: dict[str, Any]) -> SchemaCheck | None:
    return SchemaCheck(schema) if _alone(schema) is not None else None


def _ordered(schema: dict[str, Any]) -> list[str]:
    """The keywords checked one by one: the kind of value first, then its bounds."""
    names = [name for name in schema if name not in _ANNOTATIONS and name not in _STRUCTURE]
    return sorted(names, key=lambda name: _FIRST.index(name) if name in _FIRST else len(_FIRST))


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
