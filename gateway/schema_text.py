"""A JSON Schema written as a capability's compact texts (gateway.capability), so that what
the discovery document says a route takes and answers is made from the schema the route
enforces and cannot drift from it.

A parameter: `type, required|optional[, qualifiers] — meaning {member: type, optional?: type}`;
the qualifiers are the allowed values (`a|b`), `min N`, `max N` and `default N`. A shape (a
capability's `returns`): `name, list[] {member, ...}, object {member, ...}`, nested as far as
the 300 characters a `returns` may have allow. Local `$ref`s (`#/$defs/...`) are followed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MAX_RETURNS = 300
_MAX_DEPTH = 2  # members of members of a top-level member, at most


def params_text(schema: Mapping[str, Any],
                meanings: Mapping[str, str] | None = None) -> dict[str, str]:
    """Each top-level property of an object schema as a parameter; `meanings` replace the
    schema's descriptions where the schema's own are not written for a caller."""
    required = set(schema.get("required", ()))
    return {name: param_text(_resolved(schema, sub), name in required,
                             (meanings or {}).get(name), schema)
            for name, sub in schema.get("properties", {}).items()}


def param_text(schema: Mapping[str, Any], required: bool, meaning: str | None = None,
               root: Mapping[str, Any] | None = None) -> str:
    head = [kind(schema), "required" if required else "optional", *_qualifiers(schema)]
    meaning = meaning if meaning is not None else _sentence(schema.get("description"))
    members = _members(schema, root or schema)
    tail = " ".join(part for part in (meaning, members) if part)
    return ", ".join(head) + (f" — {tail}" if tail else "")


def kind(schema: Mapping[str, Any]) -> str:
    """The JSON type a caller sends (the first one not null, when several are allowed)."""
    declared = schema.get("type")
    kinds = declared if isinstance(declared, list) else [declared] if declared else []
    kinds = [name for name in kinds if name != "null"]
    if kinds:
        return str(kinds[0])
    if "properties" in schema:
        return "object"
    if "const" in schema or "enum" in schema:
        values = [schema["const"]] if "const" in schema else schema["enum"]
        return "string" if all(isinstance(value, str) for value in values) else "JSON"
    return "JSON"


def shape_text(schema: Mapping[str, Any], note: str = "") -> str:
    """What a JSON document of `schema` holds, then `note`, as compact as `returns` must be:
    its members (required ones first), each opened up to show its own members (and theirs)
    in turn while the text fits in MAX_RETURNS characters."""
    members = _ordered(schema, schema)
    labels = [_label(name, sub, schema, 0, top=True) for name, sub in members]
    for depth in range(1, _MAX_DEPTH + 1):
        for index, (name, sub) in enumerate(members):
            wider = _label(name, sub, schema, depth, top=True)
            fits = len(note) + len(", ".join([*labels[:index], wider, *labels[index + 1:]]))
            if fits <= MAX_RETURNS:
                labels[index] = wider
    text = ", ".join(labels)
    if len(text) + len(note) > MAX_RETURNS:
        text = text[:MAX_RETURNS - len(note) - 3] + "..."
    return text + note


def _label(name: str, schema: Mapping[str, Any], root: Mapping[str, Any], depth: int,
           top: bool = False) -> str:
    """`name`, `name[]` for an array, its allowed values (a top-level member's), and its
    members `depth` deep."""
    items = _resolved(root, schema.get("items", {})) if kind(schema) == "array" else None
    inner = items if items is not None else schema
    label = f"{name}[]" if items is not None else name
    if top and "enum" in schema and kind(schema) == "string":
        label += " " + "|".join(str(value) for value in schema["enum"])
    if depth > 0 and inner.get("properties"):
        label += " {" + ", ".join(_label(member, sub, root, depth - 1)
                                  for member, sub in _ordered(inner, root)) + "}"
    return label


def _ordered(schema: Mapping[str, Any], root: Mapping[str, Any]
             ) -> list[tuple[str, Mapping[str, Any]]]:
    """An object's members, required ones first, each `$ref` followed."""
    required = schema.get("required", ())
    members = [(name, _resolved(root, sub)) for name, sub in schema.get("properties", {}).items()]
    return sorted(members, key=lambda member: member[0] not in required)


def _members(schema: Mapping[str, Any], root: Mapping[str, Any]) -> str:
    """An object parameter's members, `{name: type, optional?: type}`."""
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        return ""
    required = set(schema.get("required", ()))
    listed = [f"{name}{'' if name in required else '?'}: {kind(_resolved(root, sub))}"
              for name, sub in properties.items()]
    return "{" + ", ".join(listed) + "}"


def _qualifiers(schema: Mapping[str, Any]) -> list[str]:
    found = []
    if "const" in schema:
        found.append(str(schema["const"]))
    elif "enum" in schema:
        found.append("|".join(str(value) for value in schema["enum"]))
    if "default" in schema:
        found.append(f"default {schema['default']}")
    for keyword, word in (("minimum", "min"), ("maximum", "max")):
        if keyword in schema:
            found.append(f"{word} {schema[keyword]}")
    return found


def _sentence(description: Any) -> str:
    return description.strip().rstrip(".") if isinstance(description, str) else ""


def _resolved(root: Mapping[str, Any], schema: Any) -> Mapping[str, Any]:
    """`schema`, or what its local `$ref` names (`#/$defs/name`)."""
    if not isinstance(schema, Mapping):
        return {}
    reference = schema.get("$ref")
    if isinstance(reference, str) and reference.startswith("#/"):
        target: Any = root
        for part in reference[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, Mapping) else {}
        return target if isinstance(target, Mapping) else {}
    return schema
