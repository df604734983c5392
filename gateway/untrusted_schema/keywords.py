"""A JSON Schema 2020-12 validator safe to run on a schema and an input that clients chose.

Every keyword spends one step of the running `Budget` (a step count and a deadline), so no
schema, however it fans out, runs longer than its budget. Regular expressions (`pattern`,
`patternProperties`, and the `patternProperties` that `additionalProperties` consults) run on
RE2, whose matching time is linear in the input; jsonschema's own use Python's backtracking
`re`. `uniqueItems` hashes each item once instead of comparing every pair.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

import re2
from jsonschema import Draft202012Validator, FormatChecker, validators
from jsonschema.exceptions import ValidationError


class Unverifiable(Exception):
    """The input cannot be checked within the limits; `problem` says why, for the client."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


class BudgetExceeded(Unverifiable):
    def __init__(self) -> None:
        super().__init__("too costly to check against the schema")


class Budget:
    """Steps and seconds one validation may use; `spend` raises `BudgetExceeded` past either.

    Every couple of milliseconds it also lets go of the GIL for a moment: the event loop's
    thread, when waiting for it, takes it then instead of after the interpreter's switch
    interval and the scheduler's delay (10 ms and more on a busy machine), so a long check in
    a thread costs the loop little.
    """

    _YIELD_EVERY = 0.002  # seconds

    def __init__(self, steps: int, deadline: float, max_unique_items: int) -> None:
        self.steps = steps
        self.deadline = deadline
        self.max_unique_items = max_unique_items
        self._yielded = time.monotonic()

    def spend(self, steps: int = 1) -> None:
        self.steps -= steps
        now = time.monotonic()
        if self.steps < 0 or now > self.deadline:
            raise BudgetExceeded()
        if now - self._yielded > self._YIELD_EVERY:
            time.sleep(0)
            self._yielded = time.monotonic()


RUNNING: ContextVar[Budget] = ContextVar("aigw_schema_budget")

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is the client's, not a log line of ours
_OPTIONS.never_capture = True  # JSON Schema only asks whether a pattern matches
_OPTIONS.max_mem = 1 << 20  # program and DFA cache of one pattern (RE2's default: 8 MiB)
# RE2's worst case (its NFA) costs a few nanoseconds per input character and instruction;
# a search is charged one step (about what a keyword costs) per this many of those.
_CHARACTER_INSTRUCTIONS_PER_STEP = 10_000


@functools.lru_cache(maxsize=256)
def regex(pattern: str) -> Any:
    """`pattern` compiled by RE2; raises `re2.error` for what RE2 cannot run (backreferences,
    lookaround) or a pattern past its memory limit."""
    return re2.compile(pattern, _OPTIONS)


def _matches(pattern: str, text: str) -> bool:
    """RE2 releases the GIL while it searches but cannot be stopped midway, so the search is
    paid for up front, at its worst-case cost."""
    compiled = regex(pattern)
    RUNNING.get().spend(len(text) * compiled.programsize // _CHARACTER_INSTRUCTIONS_PER_STEP)
    return compiled.search(text) is not None


def regex_problem(pattern: str) -> str | None:
    try:
        regex(pattern)
    except re2.error as exc:  # e.g. b"missing ): ((", b"pattern too large - compile failed"
        reason = exc.args[0] if exc.args else b""
        text = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        return text.split(":", 1)[0] or "not a regular expression"
    return None


def program_size(pattern: str) -> int:
    """RE2 instructions of a pattern that compiles: what matching it costs per character."""
    return int(regex(pattern).programsize)


REGEX_FORMAT = FormatChecker(formats=())


@REGEX_FORMAT.checks("regex", raises=re2.error)
def _is_regex(instance: object) -> bool:
    if isinstance(instance, str):
        regex(instance)
    return True


Check = Callable[[Any, Any, Any, dict[str, Any]], Iterator[ValidationError] | None]


def _pattern(validator: Any, pattern: str, instance: Any,
             schema: dict[str, Any]) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _matches(pattern, instance):
        yield ValidationError(f"does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any,
                        schema: dict[str, Any]) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for name, value in instance.items():
            if _matches(pattern, name):
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any,
                           schema: dict[str, Any]) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    declared = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    extras = [name for name in instance if name not in declared
              and not any(_matches(pattern, name) for pattern in patterns)]
    if validator.is_type(additional, "object"):
        for name in extras:
            yield from validator.descend(instance[name], additional, path=name)
    elif additional is False and extras:
        yield ValidationError("Additional properties are not allowed "
                              f"({len(extras)} unexpected)")


def _unique_items(validator: Any, unique: bool, instance: Any,
                  schema: dict[str, Any]) -> Iterator[ValidationError]:
    if not unique or not validator.is_type(instance, "array"):
        return
    budget = RUNNING.get()
    if len(instance) > budget.max_unique_items:
        yield ValidationError(f"more than {budget.max_unique_items} items to compare")
        return
    seen: set[Any] = set()
    for item in instance:
        key = _equality_key(item, budget)
        if key in seen:
            yield ValidationError("has non-unique elements")
            return
        seen.add(key)


def _equality_key(value: Any, budget: Budget) -> Any:
    """Equal keys exactly for JSON-equal values: 1 and 1.0 alike, true and 1 not, member order
    of objects ignored. The input's depth is bounded before validation starts."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, list):
        budget.spend()
        return ("array", tuple(_equality_key(item, budget) for item in value))
    if isinstance(value, dict):
        budget.spend()
        return ("object", frozenset((k, _equality_key(v, budget)) for k, v in value.items()))
    return (type(value).__name__, value)


def _spending(check: Check) -> Check:
    def spend_then_check(validator: Any, value: Any, instance: Any,
                         schema: dict[str, Any]) -> Iterator[ValidationError] | None:
        RUNNING.get().spend()
        return check(validator, value, instance, schema)

    return spend_then_check


# Each keyword's check before `_spending` (the fast path calls some of them from Rust).
PYTHON_CHECKS: dict[str, Check] = {
    **Draft202012Validator.VALIDATORS,
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "uniqueItems": _unique_items,
}

BoundedValidator = validators.extend(
    Draft202012Validator, {name: _spending(check) for name, check in PYTHON_CHECKS.items()})
