"""gateway/untrusted_schema/fast.py: jsonschema-rs says "valid" only where the bounded validator
does, within the same bounds, and the errors a client reads are the bounded validator's."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from gateway.untrusted_schema import DEFAULT_LIMITS, Budget, Unverifiable, compile_schema
from gateway.untrusted_schema.compile import CompiledSchema
from gateway.untrusted_schema.fast import _MOST_NESTED, SUPPORTED
from gateway.untrusted_schema.keywords import RUNNING
from gateway.untrusted_schema.shape import measure


def budget(steps: int = 100_000, seconds: float = 5.0) -> Budget:
    return Budget(steps, time.monotonic() + seconds, DEFAULT_LIMITS.max_unique_items)


def bounded_only(checker: CompiledSchema) -> CompiledSchema:
    return dataclasses.replace(checker, fast=None)


def described(checker: CompiledSchema, instance: Any) -> list[tuple[Any, ...]]:
    return sorted((e.validator, e.message, tuple(e.absolute_path))
                  for e in checker.errors(instance, budget()))


def verdicts(checker: CompiledSchema, instance: Any) -> tuple[bool, bool]:
    """(jsonschema-rs's verdict, the bounded validator's) on `instance`."""
    assert checker.fast is not None
    token = RUNNING.set(budget())
    try:
        fast = checker.fast.validator.is_valid(instance)
        bounded = not list(checker.validator.iter_errors(instance))
    finally:
        RUNNING.reset(token)
    return fast, bounded


PERSON = {
    "type": "object", "required": ["name"], "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 3, "pattern": "^[a-z]+$"},
        "age": {"type": "integer", "minimum": 0, "exclusiveMaximum": 150},
        "score": {"type": "number", "multipleOf": 0.1},
        "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}, "uniqueItems": True,
                 "maxItems": 3},
        "pair": {"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
        "kind": {"enum": ["a", 1, None]},
        "fixed": {"const": [1, {"b": 2}]},
        "email": {"type": "string", "format": "email"},
        "child": {"$ref": "#"},
        "alias": {"$ref": "#anchored"},
        "extras": {"type": "object", "propertyNames": {"pattern": "^x-"},
                   "dependentRequired": {"x-a": ["x-b"]}, "minProperties": 1,
                   "maxProperties": 2},
        "choice": {"oneOf": [{"type": "string"}, {"type": "integer"}],
                   "not": {"const": "no"}},
        "counted": {"contains": {"const": 1}, "minContains": 2, "maxContains": 3},
        "cond": {"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "null"}},
        "spaces": {"type": "string", "pattern": "^\\s$"},
        "digits": {"type": "string", "pattern": "^\\d+$"},
        "word": {"type": "string", "pattern": "a\\b"},
        "limits": {"type": "array", "minItems": 1, "allOf": [{"maxItems": 2}],
                   "items": {"type": "number", "exclusiveMinimum": 0, "maximum": 10}},
        "more": {"type": ["object", "null"], "additionalProperties": {"type": "integer"}},
        "slash": {"$ref": "#/$defs/a~1b"}, "percent": {"$ref": "#/$defs/c%25d"},
    },
    "dependentSchemas": {"age": {"required": ["name"]}},
    "anyOf": [{"required": ["name"]}, {"required": ["age"]}],
    "$defs": {"tag": {"type": "string", "maxLength": 5},
              "named": {"$anchor": "anchored", "type": "string"},
              "a/b": {"type": "integer"}, "c%d": {"type": "boolean"}},
}

INSTANCES = [
    {"name": "ab"}, {"name": ""}, {"name": "abcd"}, {"name": "AB"}, {}, {"name": "a", "x": 1},
    {"name": "a", "age": 1.0}, {"name": "a", "age": 150}, {"name": "a", "age": True},
    {"name": "a", "age": -1}, {"name": "a", "age": 2**70},
    {"name": "a", "score": 0.3}, {"name": "a", "score": 0.07}, {"name": "a", "score": 3},
    {"name": "a", "tags": ["x", "y"]}, {"name": "a", "tags": ["x", "x"]},
    {"name": "a", "tags": ["toolong"]}, {"name": "a", "tags": [1]},
    {"name": "a", "pair": ["x", 1]}, {"name": "a", "pair": ["x", 1, 2]},
    {"name": "a", "pair": [1]}, {"name": "a", "kind": 1.0}, {"name": "a", "kind": True},
    {"name": "a", "kind": None}, {"name": "a", "fixed": [1.0, {"b": 2.0}]},
    {"name": "a", "fixed": [True, {"b": 2}]}, {"name": "a", "email": "not an address"},
    {"name": "a", "child": {"name": "b", "child": {"name": "c"}}},
    {"name": "a", "child": {"name": "b", "child": {"name": 1}}},
    {"name": "a", "alias": "s"}, {"name": "a", "alias": 1},
    {"name": "a", "extras": {"x-a": 1, "x-b": 2}}, {"name": "a", "extras": {"x-a": 1}},
    {"name": "a", "extras": {"y": 1}}, {"name": "a", "extras": {}},
    {"name": "a", "choice": "s"}, {"name": "a", "choice": "no"}, {"name": "a", "choice": 1.5},
    {"name": "a", "counted": [1, 1]}, {"name": "a", "counted": [1]},
    {"name": "a", "counted": [1, 1, 1, 1]}, {"name": "a", "counted": [1.0, 1, 2]},
    {"name": "a", "cond": "ab"}, {"name": "a", "cond": "a"}, {"name": "a", "cond": None},
    {"name": "a", "cond": 1},
    # Where Rust's regex crate and RE2 differ: the patterns run on RE2 all the same.
    {"name": "a", "spaces": " "}, {"name": "a", "spaces": "\u00a0"},
    {"name": "a", "spaces": "\v"}, {"name": "a", "digits": "123"},
    {"name": "a", "digits": "\u0661\u0662"}, {"name": "a", "word": "a\u00e9"},
    {"name": "a", "word": "a b"}, {"name": "a\n"}, {"name": "\u00e9"},
    {"name": "a", "limits": [1, 10]}, {"name": "a", "limits": []},
    {"name": "a", "limits": [0]}, {"name": "a", "limits": [10.5]},
    {"name": "a", "limits": [1, 2, 3]}, {"name": "a", "more": None},
    {"name": "a", "more": {"n": 1}}, {"name": "a", "more": {"n": 1.5}},
    {"name": "a", "more": "x"},
    {"name": "a", "slash": 1}, {"name": "a", "slash": "1"}, {"name": "a", "percent": True},
    {"name": "a", "percent": 1},
    [], "text", None, 1,
]


def test_the_fast_path_takes_the_schema_and_agrees_on_every_instance():
    checker = compile_schema(PERSON)
    assert checker.fast is not None
    disagreements = [(instance, *verdicts(checker, instance)) for instance in INSTANCES
                     if verdicts(checker, instance)[0] != verdicts(checker, instance)[1]]
    assert disagreements == []
    assert {verdicts(checker, instance)[1] for instance in INSTANCES} == {True, False}


@pytest.mark.parametrize("instance", INSTANCES)
def test_what_a_client_reads_is_the_bounded_validators_answer(instance):
    checker = compile_schema(PERSON)
    assert described(checker, instance) == described(bounded_only(checker), instance)


def test_a_top_level_id_changes_nothing_and_fetches_nothing():
    checker = compile_schema({**PERSON, "$id": "https://schemas.example/person"})
    assert checker.fast is not None
    for instance in INSTANCES:
        assert verdicts(checker, instance)[0] == verdicts(checker, instance)[1]


@pytest.mark.parametrize("keyword", [
    {"patternProperties": {"^a": {"type": "string"}}},
    {"unevaluatedProperties": False},
    {"unevaluatedItems": False, "prefixItems": [{}]},
])
def test_schemas_with_keywords_it_does_not_take_over_have_no_fast_path(keyword):
    assert compile_schema({"properties": {"a": keyword}}).fast is None


def test_every_keyword_the_bounded_validator_enforces_is_either_taken_over_or_refused():
    from jsonschema import Draft202012Validator

    from gateway.untrusted_schema import fast

    assert set(Draft202012Validator.VALIDATORS) == SUPPORTED | fast._UNSUPPORTED


def test_a_hostile_pattern_still_runs_in_linear_time_and_is_charged():
    checker = compile_schema({"type": "string", "pattern": "^(a+)+$"})
    assert checker.fast is not None
    text = "a" * 50_000
    spent = budget(steps=10**6)
    started = time.perf_counter()
    assert checker.errors(text, spent) == []
    assert checker.errors(text + "!", budget(steps=10**6))  # the bounded validator's error
    assert time.perf_counter() - started < 0.5
    charged = budget(steps=10**6)
    assert bounded_only(checker).errors(text, charged) == []
    assert spent.steps <= charged.steps < 10**6 - 10  # RE2's worst case, as the bounded one


def test_a_valid_input_is_charged_the_bound_of_its_cost():
    checker = compile_schema(PERSON)
    assert checker.fast is not None
    instance = {"name": "ab", "tags": ["x"]}
    spent = budget()
    assert checker.errors(instance, spent) == []
    cost = checker.fast.cost(measure(instance, 64, 1000))
    assert 0 < cost <= 100_000 - spent.steps
    token = RUNNING.set(counted := budget())
    try:
        assert list(checker.validator.iter_errors(instance)) == []
    finally:
        RUNNING.reset(token)
    assert 100_000 - counted.steps <= cost  # an upper bound of what the bounded one spends


def test_a_check_past_the_budget_is_left_to_the_bounded_validator():
    from gateway.untrusted_schema import BudgetExceeded

    checker = compile_schema({"type": "array", "items": {"type": "integer"}})
    with pytest.raises(BudgetExceeded):
        checker.errors(list(range(5_000)), budget(steps=1_000))
    assert checker.errors(list(range(5_000)), budget()) == []


def test_an_invalid_input_leaves_the_budget_as_it_was_for_the_bounded_validator():
    checker = compile_schema(PERSON)
    instance = {"name": "a", "tags": ["x", "x"]}
    with_fast, without = budget(), budget()
    checker.errors(instance, with_fast)
    bounded_only(checker).errors(instance, without)
    assert with_fast.steps == without.steps


def _chained(levels: int) -> dict[str, Any]:
    defs: dict[str, Any] = {f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}]}
                            for i in range(levels)}
    defs[f"d{levels}"] = {"properties": {"a": {"$ref": "#"}}}
    return {"$ref": "#/$defs/d0", "$defs": defs}


def _nested_value(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"a": value}
    return value


@pytest.mark.parametrize("levels", [0, 3, 7, 14])
def test_it_runs_only_on_inputs_the_bounded_validator_can_recurse_through(levels):
    checker = compile_schema(_chained(levels))
    assert checker.fast is not None
    deepest = _MOST_NESTED // checker.fast.chain - 1  # the input's depth counts the leaf
    assert checker.fast.runs_on(measure(_nested_value(deepest), 64, 1000))
    assert not checker.fast.runs_on(measure(_nested_value(deepest + 2), 64, 1000))
    assert bounded_only(checker).errors(_nested_value(deepest), budget()) == []
    if levels == 14:  # where Python's recursion ends, well past the bound
        with pytest.raises(Unverifiable, match="nested too deeply"):
            bounded_only(checker).errors(_nested_value(40), budget(steps=10**7))


def test_the_agreement_schema_uses_every_keyword_taken_over():
    from gateway.untrusted_schema.graph import Subschemas

    used = set().union(*(node.keys() for node in Subschemas(PERSON, 5000).nodes.values()))
    assert used >= SUPPORTED


async def test_invoke_problems_are_the_same_with_and_without_the_fast_path(monkeypatch):
    from gateway.surfaces.aidip.metadata import schema_problems
    from gateway.untrusted_schema.fast import FastCheck

    with_fast = await schema_problems(INSTANCES, PERSON)
    monkeypatch.setattr(FastCheck, "valid", lambda *args: False)
    assert await schema_problems(INSTANCES, PERSON) == with_fast
    assert any(with_fast) and not all(with_fast)
