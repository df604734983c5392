"""A reference page of every property of a JSON Schema made by pydantic (the config file's,
a policy file's): one table per top-level section, one row per property with its dotted path,
type, default and description. A model met again at another path is linked, not repeated."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from refgen.markdown import code, table, text

Schema = dict[str, Any]
_MAX_DEFAULT = 60


@dataclass(frozen=True, slots=True)
class Row:
    path: str
    schema: Schema
    required: bool
    variant: str | None = None  # the union member (a discriminator's value) it belongs to


@dataclass(slots=True)
class Walk:
    """The rows of one schema, and where each model was first listed."""

    defs: dict[str, Schema]
    anchors: dict[str, str] = field(default_factory=dict)  # model name -> path listed at

    def model(self, ref: str) -> tuple[str, Schema]:
        name = ref.rsplit("/", 1)[-1]
        return name, self.defs[name]

    def rows(self, node: Schema, path: str, variant: str | None = None) -> Iterator[Row]:
        required = set(node.get("required", ()))
        for name, prop in node.get("properties", {}).items():
            here = f"{path}.{name}" if path else name
            yield Row(here, prop, name in required, variant)
            yield from self.nested(prop, here)

    def nested(self, prop: Schema, path: str) -> Iterator[Row]:
        """The rows of the models a property holds (directly, in a list, a map or a union)."""
        for sub, member, variant in _members(prop, path):
            name, model = self.model(member["$ref"])
            if "properties" not in model:
                continue
            if name in self.anchors:
                continue
            self.anchors[name] = sub
            yield from self.rows(model, sub, variant)


def _members(prop: Schema, path: str) -> Iterator[tuple[str, Schema, str | None]]:
    """(path, {$ref}, variant) of each model reachable from one property."""
    if "$ref" in prop:
        yield path, prop, None
    for key in ("anyOf", "oneOf"):
        variants = prop.get(key, ())
        mapping = {v: k for k, v in prop.get("discriminator", {}).get("mapping", {}).items()}
        for member in variants:
            if "$ref" in member and len([m for m in variants if "$ref" in m]) > 1:
                yield path, member, mapping.get(member["$ref"], member["$ref"].rsplit("/")[-1])
            else:
                yield from _members(member, path)
    if prop.get("type") == "array" and isinstance(prop.get("items"), dict):
        yield from _members(prop["items"], f"{path}[]")
    for value in _map_values(prop):
        yield from _members(value, f"{path}.<name>")


def _map_values(prop: Schema) -> list[Schema]:
    values = list(prop.get("patternProperties", {}).values())
    if isinstance(prop.get("additionalProperties"), dict):
        values.append(prop["additionalProperties"])
    return values


def type_of(prop: Schema, defs: dict[str, Schema]) -> str:
    """The property's type as a reader says it: `integer, 1 to 65535`, `list of string`."""
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[-1]
        model = defs.get(name, {})
        return "object" if "properties" in model or model.get("type") == "object" \
            else type_of(model, defs)
    for key in ("anyOf", "oneOf"):
        if key in prop:
            parts = [type_of(member, defs) for member in prop[key]]
            return " or ".join(dict.fromkeys(parts))
    if "enum" in prop:
        return "one of " + ", ".join(code(v) for v in prop["enum"])
    if "const" in prop:
        return code(prop["const"])
    kind = prop.get("type")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "array":
        items = prop.get("items")
        shown = f"list of {type_of(items, defs)}" if isinstance(items, dict) else "list"
    elif kind == "object" and _map_values(prop):
        keys = list(prop.get("patternProperties", {}))
        values = " or ".join(dict.fromkeys(type_of(v, defs) for v in _map_values(prop)))
        shown = f"map of {values}" + (f" (keys {code(keys[0])})" if keys else "")
    else:
        shown = kind or "any"
    return shown + _constraints(prop)


def _constraints(prop: Schema) -> str:
    found = []
    if "format" in prop:
        found.append(f"format {prop['format']}")
    low = prop.get("minimum", prop.get("exclusiveMinimum"))
    high = prop.get("maximum", prop.get("exclusiveMaximum"))
    if low is not None and high is not None and "exclusiveMinimum" not in prop \
            and "exclusiveMaximum" not in prop:
        found.append(f"{low} to {high}")
    elif low is not None or high is not None:
        lower = "" if low is None else (f"> {low}" if "exclusiveMinimum" in prop else f"≥ {low}")
        upper = "" if high is None else (f"< {high}" if "exclusiveMaximum" in prop
                                          else f"≤ {high}")
        found.append(", ".join(p for p in (lower, upper) if p))
    for key, word in (("minLength", "at least {} characters"), ("maxLength", "at most {} "
                      "characters"), ("minItems", "at least {} items"),
                      ("maxItems", "at most {} items"), ("minProperties", "at least {} entries")):
        if key in prop:
            found.append(word.format(prop[key]))
    if "pattern" in prop:
        found.append(f"pattern {code(prop['pattern'])}")
    return (", " + ", ".join(found)) if found else ""


def default_of(row: Row, defs: dict[str, Schema]) -> str:
    if row.required:
        return "**required**"
    if "default" not in row.schema:
        return ""
    value = row.schema["default"]
    if isinstance(value, dict) and value and _holds_model(row.schema):
        return "(below)"
    shown = json.dumps(value, separators=(", ", ": "), ensure_ascii=False)
    if len(shown) > _MAX_DEFAULT:
        return "(long: see the schema)"
    return code(value)


def _holds_model(prop: Schema) -> bool:
    return "$ref" in prop or any("$ref" in m for m in prop.get("anyOf", ()))


def description_of(prop: Schema, defs: dict[str, Schema]) -> str:
    said = prop.get("description")
    if said is None and "$ref" in prop:
        said = defs.get(prop["$ref"].rsplit("/", 1)[-1], {}).get("description")
    return said or ""


def anchor(path: str) -> str:
    return "cfg-" + re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-")


def page(schema: Schema, title: str, intro: str) -> str:
    """The whole page: a table of the top-level scalars, then one section per object."""
    defs = schema.get("$defs", {})
    walk = Walk(defs)
    top, sections = [], []
    required = set(schema.get("required", ()))
    for name, prop in schema.get("properties", {}).items():
        if any(True for _ in _members(prop, name)):
            sections.append((name, prop))
        else:
            top.append(Row(name, prop, name in required))
    out = [f"# {title}\n", intro]
    if top:
        out += ["## Top level\n", _table(top, walk)]
    for name, prop in sections:
        out.append(f"## `{name}`\n")
        rows = [Row(name, prop, name in required), *walk.nested(prop, name)]
        out.append(_table(rows, walk))
    return "\n".join(out)


def _table(rows: list[Row], walk: Walk) -> str:
    cells = []
    for row in rows:
        said = description_of(row.schema, walk.defs)
        if row.variant is not None:
            said = f"({row.variant}) {said}"
        seen_at = _listed_elsewhere(row, walk)
        if seen_at:
            said += f" Its fields: as [`{seen_at}`](#{anchor(seen_at)})."
        path = f'<span id="{anchor(row.path)}"></span>`{row.path}`'
        cells.append((path, text(type_of(row.schema, walk.defs)),
                       default_of(row, walk.defs), text(said)))
    return table(("property", "type", "default", "description"), cells)


def _listed_elsewhere(row: Row, walk: Walk) -> str | None:
    """The path a model this property holds was listed at, when that is not under it."""
    for sub, member, _ in _members(row.schema, row.path):
        name = member["$ref"].rsplit("/", 1)[-1]
        first = walk.anchors.get(name)
        if first is not None and first != sub and "properties" in walk.defs.get(name, {}):
            return first
    return None


def undescribed(schema: Schema) -> list[str]:
    """Every property of the schema (at its model) without a description: its own, or, for a
    property that is one model, the model's (pydantic leaves out a field's description equal
    to its model's)."""
    defs = schema.get("$defs", {})
    missing = []
    for model_name, model in [("(root)", schema), *defs.items()]:
        for name, prop in model.get("properties", {}).items():
            if not description_of(prop, defs).strip():
                missing.append(f"{model_name}.{name}")
    return missing
