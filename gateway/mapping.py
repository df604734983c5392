"""Declared JMESPath mappings from upstream JSON to neutral `Hit`s, compiled once at load.

A mapping names where the list of items is and, for each item, where its id, text, score,
vector and other fields are:

    items: items
    id: id
    text: snippet
    score: score
    vector: embedding
    fields: {title: title, url: url}
    metadata: {updated_at: updated_at}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jmespath
from jmespath.exceptions import JMESPathError
from jmespath.parser import ParsedResult

from gateway.model import Hit

_SLOTS = ("items", "id", "text", "score", "vector")


class MappingError(ValueError):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


@dataclass(frozen=True, slots=True)
class HitMapping:
    items: ParsedResult | None
    id: ParsedResult
    text: ParsedResult | None
    score: ParsedResult | None
    vector: ParsedResult | None
    fields: dict[str, ParsedResult]
    metadata: dict[str, ParsedResult]

    def hits(self, document: Any) -> list[Hit]:
        """Every item of an upstream document as a Hit; items without an id are skipped."""
        items = self.items.search(document) if self.items is not None else document
        if isinstance(items, dict):
            items = [items]
        if not isinstance(items, list):
            return []
        return [hit for item in items if (hit := self.hit(item)) is not None]

    def hit(self, item: Any) -> Hit | None:
        identifier = self.id.search(item)
        if identifier is None:
            return None
        score = _search(self.score, item)
        vector = _search(self.vector, item)
        return Hit(
            id=str(identifier),
            fields={name: expr.search(item) for name, expr in self.fields.items()},
            text=_search(self.text, item),
            score=float(score) if isinstance(score, int | float) else None,
            vector=vector if isinstance(vector, list) else None,
            metadata={name: expr.search(item) for name, expr in self.metadata.items()},
        )


def compile_mapping(spec: dict[str, Any], where: str = "mapping") -> HitMapping:
    """Compile a mapping spec; `MappingError` names the dotted path of a bad expression."""
    if "id" not in spec:
        raise MappingError(f"{where}.id", "expected a JMESPath expression for the item id")
    unknown = set(spec) - {*_SLOTS, "fields", "metadata"}
    if unknown:
        raise MappingError(f"{where}.{sorted(unknown)[0]}", "unknown mapping key")
    compiled = {slot: _compile(spec[slot], f"{where}.{slot}") if spec.get(slot) else None
                for slot in _SLOTS}
    return HitMapping(
        **compiled,
        fields=_compile_group(spec.get("fields") or {}, f"{where}.fields"),
        metadata=_compile_group(spec.get("metadata") or {}, f"{where}.metadata"),
    )


def _compile_group(group: dict[str, Any], where: str) -> dict[str, ParsedResult]:
    if not isinstance(group, dict):
        raise MappingError(where, "expected a mapping of names to JMESPath expressions")
    return {name: _compile(expression, f"{where}.{name}") for name, expression in group.items()}


def _compile(expression: Any, where: str) -> ParsedResult:
    if not isinstance(expression, str) or not expression.strip():
        raise MappingError(where, "expected a JMESPath expression (a non-empty string)")
    try:
        return jmespath.compile(expression)
    except JMESPathError as exc:
        raise MappingError(where, f"invalid JMESPath expression: {exc}") from None


def _search(expression: ParsedResult | None, item: Any) -> Any:
    return expression.search(item) if expression is not None else None
