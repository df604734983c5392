"""The common case, told cheaply: an input that a compiled schema accepts.

jsonschema-rs (Rust) answers whether an input is valid; only "valid" is taken from it. Any
other answer (invalid, or it could not run) sends the input to the bounded validator with the
budget as it was, so every error a client reads is the bounded validator's, worded as before.

It runs only where its verdict cannot be laxer than the bounded validator's:
- the same dialect (2020-12) and keywords: a schema with a keyword the bounded validator
  enforces and this path does not take over as-is (`patternProperties`, `unevaluated*`, ...)
  gets no fast path, and `format` is an annotation in both (no format checker, formats off);
- `pattern`, `multipleOf` and `uniqueItems` are the bounded validator's own code, called from
  Rust: RE2 and its charge on the budget, Python's float arithmetic, the item limit;
- references resolve inside the document (the compile step refused any other), and the Rust
  validator is given a retriever that fetches nothing.

Its work is bounded before it starts: `FastCheck.cost` is an upper bound of the steps the
bounded validator would spend on the keywords (values x in-place keywords, times the
descent fan-out per level), and the fast path runs only when that fits in what is left of the
budget; a "valid" verdict is charged that bound. A failed attempt is not charged, so at worst
an input costs its budget twice, the first time in Rust. Nor does it run where the bounded
validator would hit Python's recursion limit (`FastCheck.runs_on`): that input stays
unverifiable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator

from gateway.untrusted_schema.graph import Subschemas
from gateway.untrusted_schema.keywords import PYTHON_CHECKS, Budget
from gateway.untrusted_schema.shape import Shape

# Keywords whose verdicts agree (tests/test_untrusted_schema_fast.py compares the two).
SUPPORTED = frozenset({
    "$ref", "additionalProperties", "allOf", "anyOf", "const", "contains", "dependentRequired",
    "dependentSchemas", "enum", "exclusiveMaximum", "exclusiveMinimum", "format", "if", "items",
    "maxItems", "maxLength", "maxProperties", "maximum", "minItems", "minLength",
    "minProperties", "minimum", "multipleOf", "not", "oneOf", "pattern", "prefixItems",
    "properties", "propertyNames", "required", "type", "uniqueItems",
})
# Everything else the bounded validator enforces turns the fast path off for that schema.
_UNSUPPORTED = frozenset(Draft202012Validator.VALIDATORS) - SUPPORTED
_BY_PYTHON = ("pattern", "multipleOf", "uniqueItems")
_TYPES = Draft202012Validator({})  # `is_type` for the Python checks
# Subschemas applied one inside another (input depth x in-place chain). The bounded validator
# runs into Python's recursion limit past ~400 of them (tests/test_untrusted_schema_fast.py);
# the margin is for the frames already on the stack when it starts.
_MOST_NESTED = 128


@dataclass(frozen=True, slots=True)
class FastCheck:
    validator: Any  # jsonschema_rs.Draft202012Validator
    keywords: int  # most keywords one value meets in place from one subschema
    fan_out: int  # most subschemas one value's member (or name) gets from one subschema
    chain: int  # most in-place subschemas in a row

    def runs_on(self, shape: Shape) -> bool:
        """Whether the bounded validator would reach the end of this value: its recursion
        grows with the input's depth times the in-place chain and, past Python's recursion
        limit, makes the input unverifiable, which Rust's would not."""
        return shape.depth * self.chain <= _MOST_NESTED

    def cost(self, shape: Shape) -> int:
        """An upper bound of the bounded validator's keyword steps on a value of `shape`."""
        per_value = self.keywords * max(self.fan_out, 1) ** max(shape.depth - 1, 0)
        return (shape.values + shape.names) * per_value

    def valid(self, instance: Any, shape: Shape, budget: Budget) -> bool:
        """True when the instance is valid, its cost charged to `budget`; False when the
        bounded validator must say (the budget then as it was)."""
        cost = self.cost(shape)
        if cost > budget.steps or not self.runs_on(shape):
            return False
        before = budget.steps
        try:
            valid = bool(self.validator.is_valid(instance))
        except Exception:  # e.g. a value Rust cannot take: the bounded validator decides
            valid = False
        if not valid:
            budget.steps = before  # what a Python check spent before failing
            return False
        budget.spend(cost)
        return True


def fast_check(graph: Subschemas, runnable: Any) -> FastCheck | None:
    """The fast path for a compiled schema (its `Subschemas`, then the schema that runs), or
    None when the schema uses what it cannot take over."""
    if any(_UNSUPPORTED.intersection(node) for node in graph.nodes.values()):
        return None
    try:
        validator = jsonschema_rs.Draft202012Validator(
            runnable, validate_formats=False, retriever=_retrieve_nothing,
            pattern_options=jsonschema_rs.RegexOptions(),  # no Rust regex runs; if one did
            keywords={name: _python_keyword(name) for name in _BY_PYTHON})
    except Exception:  # e.g. an `$id` it reads otherwise: no fast path
        return None
    return FastCheck(validator, *_in_place_totals(graph))


def _retrieve_nothing(uri: str) -> Any:
    raise ValueError(f"{uri} is not fetched")


def _python_keyword(name: str) -> type:
    check = PYTHON_CHECKS[name]

    class PythonKeyword:
        """The bounded validator's own check of `name`, for jsonschema-rs."""

        def __init__(self, parent: dict[str, Any], value: Any, path: Any) -> None:
            self.parent = parent
            self.value = value

        def validate(self, instance: Any) -> None:
            for _error in check(_TYPES, self.value, instance, self.parent) or ():
                raise ValueError(name)

    return PythonKeyword


_OBJECT_DESCENT = ("properties", "additionalProperties")  # one of them per member
_ARRAY_DESCENT = ("prefixItems", "items")  # one of them per item


def _descents(node: dict[str, Any]) -> int:
    """Subschemas `node` applies to one member (or member name) of a value."""
    return (any(k in node for k in _OBJECT_DESCENT) + any(k in node for k in _ARRAY_DESCENT)
            + ("contains" in node) + ("propertyNames" in node))


def _in_place_totals(graph: Subschemas) -> tuple[int, int, int]:
    """Of the subschemas one subschema brings in place (itself included, every path counted,
    as validation visits them): the most keywords, the most descents, the longest chain. The
    in-place graph has no cycle and chains of at most `Limits.max_chain`: the recursion ends."""
    totals: dict[int, tuple[int, int, int]] = {}

    def total(node: Any) -> tuple[int, int, int]:
        if not isinstance(node, dict):
            return (1, 0, 1)
        known = totals.get(id(node))
        if known is None:
            below = [total(child) for child in graph.in_place[id(node)]]
            known = (max(len(node), 1) + sum(k for k, _, _ in below),
                     _descents(node) + sum(d for _, d, _ in below),
                     1 + max((c for _, _, c in below), default=0))
            totals[id(node)] = known
        return known

    measured = [total(node) for node in graph.nodes.values()]  # none for `true` or `false`
    return (max((k for k, _, _ in measured), default=1),
            max((d for _, d, _ in measured), default=0),
            max((c for _, _, c in measured), default=1))
