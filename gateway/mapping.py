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
    next: next_page

`next`, like `items`, is read from the whole answer: the upstream's opaque token for the page
after this one (keyset pagination), which the next call sends as `{after}`; a string or an
integer, at most `MAX_NEXT_TOKEN` characters, and null, absent or "" on the last page.

Each slot has the kind the neutral model promises every surface: the items are a list (or
one object), an id is a string or an integer (rendered as a string), text a string, a score a
number, a vector a list of numbers, and the source fields (`url`, `title`, `section`) and
`updated_at` strings; other fields and metadata may be any JSON value. A null is an absent
value. A value of another kind raises `UpstreamValueError`: the answer fails as a whole rather
than reaching a client half-mapped, since a wrong kind means the mapping and the upstream
disagree, on every item alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jmespath
from jmespath.exceptions import JMESPathError
from jmespath.parser import ParsedResult
from jmespath.visitor import TreeInterpreter

from gateway.model import Hit

_SLOTS = ("items", "id", "text", "score", "vector", "next")
MAX_NEXT_TOKEN = 2048  # sealed into the gateway's cursors: bounded like everything sent back
STRING_FIELDS = frozenset({"url", "title", "section"})
STRING_METADATA = frozenset({"updated_at"})


class MappingError(ValueError):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


class UpstreamValueError(Exception):
    """An upstream value of the wrong kind for its slot; carries the slot, never the value."""

    def __init__(self, slot: str, expected: str) -> None:
        super().__init__(f"{slot}: expected {expected}")
        self.slot = slot
        self.expected = expected


# One interpreter evaluates every expression: it keeps nothing between evaluations but the
# visit method it found for each node type.
_INTERPRETER = TreeInterpreter()


class Expression:
    """A compiled JMESPath expression, evaluated as `ParsedResult.search` does without what
    that costs per call (a new interpreter: ~2 µs, more than most evaluations, for a mapping
    that evaluates one per slot per item). A bare field name, what most slots are, is looked
    up directly, as JMESPath's interpreter looks it up."""

    __slots__ = ("_field", "_tree", "text")

    @property
    def field(self) -> str | None:
        """The field name when the expression is a bare one (looked up directly), else None."""
        return self._field

    def __init__(self, parsed: ParsedResult) -> None:
        self.text = parsed.expression
        self._tree = parsed.parsed
        self._field: str | None = self._tree["value"] if self._tree["type"] == "field" else None

    def search(self, value: Any) -> Any:
        if self._field is None:
            return _INTERPRETER.visit(self._tree, value)
        try:
            return value.get(self._field)
        except AttributeError:  # not an object
            return None


@dataclass(frozen=True, slots=True)
class HitMapping:
    items: Expression | None
    id: Expression
    text: Expression | None
    score: Expression | None
    vector: Expression | None
    fields: dict[str, Expression]
    metadata: dict[str, Expression]
    next: Expression | None = None
    # The names among `fields` and `metadata` whose values must be strings (found once).
    string_fields: tuple[str, ...] = ()
    string_metadata: tuple[str, ...] = ()
    # `fields` and `metadata` as (name, field name) pairs when every expression of the group
    # is a bare field name (looked up in an object item without an evaluation per slot).
    plain_fields: tuple[tuple[str, str], ...] | None = field(init=False, default=None,
                                                             repr=False, compare=False)
    plain_metadata: tuple[tuple[str, str], ...] | None = field(init=False, default=None,
                                                               repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "plain_fields", _plain(self.fields))
        object.__setattr__(self, "plain_metadata", _plain(self.metadata))

    def hits(self, document: Any, *, vectors: bool = True) -> list[Hit]:
        """Every item of an upstream document as a Hit; items without an id are skipped.
        Without `vectors` the vector slot is neither read nor checked (every hit's is None):
        for a caller that gets no stored vector back."""
        return [hit for item in self.items_of(document)
                if (hit := self.hit(item, vectors=vectors)) is not None]

    def items_of(self, document: Any) -> list[Any]:
        """The document's items: a list, or one object; none when absent (null)."""
        items = self.items.search(document) if self.items is not None else document
        if items is None:
            return []
        if isinstance(items, dict):
            return [items]
        if not isinstance(items, list):
            raise UpstreamValueError("items", "a list or an object")
        return items

    def next_token(self, document: Any) -> str | None:
        """The upstream's token for the page after this one; None on the last page, or when
        the mapping has no `next`."""
        token = _search(self.next, document)
        if token is None or token == "":
            return None
        if isinstance(token, bool) or not isinstance(token, str | int):
            raise UpstreamValueError("next", "a string or an integer")
        token = str(token)
        if len(token) > MAX_NEXT_TOKEN:
            raise UpstreamValueError("next", f"at most {MAX_NEXT_TOKEN} characters")
        return token

    def hit(self, item: Any, *, vectors: bool = True) -> Hit | None:
        """One item as a Hit, or None without an id; `UpstreamValueError` for a wrong kind."""
        identifier = self.id.search(item)
        if identifier is None:
            return None
        if isinstance(identifier, bool) or not isinstance(identifier, str | int):
            raise UpstreamValueError("id", "a string or an integer")
        score = _search(self.score, item)
        if score is not None and not _is_number(score):
            raise UpstreamValueError("score", "a number")
        vector = _search(self.vector, item) if vectors else None
        if vector is not None and not numbers(vector):
            raise UpstreamValueError("vector", "a list of numbers")
        return Hit(
            id=str(identifier),
            fields=_group(self.fields, item, "fields", self.string_fields, self.plain_fields),
            text=_string(_search(self.text, item), "text"),
            score=float(score) if score is not None else None,
            vector=vector,
            metadata=_group(self.metadata, item, "metadata", self.string_metadata,
                            self.plain_metadata),
        )


def compile_mapping(spec: dict[str, Any], where: str = "mapping") -> HitMapping:
    """Compile a mapping spec; `MappingError` names the dotted path of a bad expression."""
    if "id" not in spec:
        raise MappingError(f"{where}.id", "expected a JMESPath expression for the item id")
    unknown = set(spec) - {*_SLOTS, "fields", "metadata"}
    if unknown:
        raise MappingError(f"{where}.{sorted(unknown)[0]}", "unknown mapping key")
    fields = _compile_group(spec.get("fields") or {}, f"{where}.fields")
    metadata = _compile_group(spec.get("metadata") or {}, f"{where}.metadata")
    return HitMapping(
        items=_optional(spec, "items", where),
        id=_compile(spec["id"], f"{where}.id"),  # required: an empty one is refused, not skipped
        text=_optional(spec, "text", where),
        score=_optional(spec, "score", where),
        vector=_optional(spec, "vector", where),
        fields=fields,
        metadata=metadata,
        next=_optional(spec, "next", where),
        string_fields=tuple(sorted(STRING_FIELDS & fields.keys())),
        string_metadata=tuple(sorted(STRING_METADATA & metadata.keys())),
    )


def _optional(spec: dict[str, Any], slot: str, where: str) -> Expression | None:
    return _compile(spec[slot], f"{where}.{slot}") if spec.get(slot) else None


def _compile_group(group: dict[str, Any], where: str) -> dict[str, Expression]:
    if not isinstance(group, dict):
        raise MappingError(where, "expected a mapping of names to JMESPath expressions")
    return {name: _compile(expression, f"{where}.{name}") for name, expression in group.items()}


def _compile(expression: Any, where: str) -> Expression:
    if not isinstance(expression, str) or not expression.strip():
        raise MappingError(where, "expected a JMESPath expression (a non-empty string)")
    try:
        return Expression(jmespath.compile(expression))
    except JMESPathError as exc:
        raise MappingError(where, f"invalid JMESPath expression: {exc}") from None


def _search(expression: Expression | None, item: Any) -> Any:
    return expression.search(item) if expression is not None else None


def _plain(expressions: dict[str, Expression]) -> tuple[tuple[str, str], ...] | None:
    pairs = [(name, expr.field) for name, expr in expressions.items() if expr.field is not None]
    return tuple(pairs) if len(pairs) == len(expressions) else None


def _group(expressions: dict[str, Expression], item: Any, where: str,
           strings: tuple[str, ...], plain: tuple[tuple[str, str], ...] | None
           ) -> dict[str, Any]:
    if plain is not None and isinstance(item, dict):  # as `Expression.search` looks them up
        get = item.get
        values = {name: get(name_in_item) for name, name_in_item in plain}
    else:
        values = {name: expr.search(item) for name, expr in expressions.items()}
    for name in strings:
        if values[name] is not None and not isinstance(values[name], str):
            raise UpstreamValueError(f"{where}.{name}", "a string")
    return values


def _string(value: Any, slot: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise UpstreamValueError(slot, "a string")
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_NUMBER_TYPES = frozenset({int, float})


def numbers(vector: Any) -> bool:
    """Whether `vector` is a list of numbers: told by the set of its items' types (a pass in C,
    ten times faster than a check per item), item by item only when that set holds another
    type (a bool, or a subclass of int or float)."""
    return isinstance(vector, list) and (set(map(type, vector)) <= _NUMBER_TYPES
                                         or all(map(_is_number, vector)))
