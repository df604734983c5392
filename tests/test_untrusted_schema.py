"""gateway/untrusted_schema in process: what a client's JSON Schema may not make the gateway do
(fetch, recurse forever, backtrack, compare every pair), and the budget that bounds the rest."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from processes import counting_http_server

from gateway.untrusted_schema import (
    DEFAULT_LIMITS,
    Budget,
    BudgetExceeded,
    CompiledSchema,
    Limits,
    Overloaded,
    SchemaRefused,
    Unverifiable,
    compile_schema,
    compiled,
    off_loop,
    shape_problem,
    validate,
)
from gateway.untrusted_schema.graph import registry_of
from gateway.untrusted_schema.keywords import BoundedValidator


@pytest.fixture
def target() -> Iterator[tuple[str, list[str]]]:
    """A loopback HTTP server counting the requests that reach it."""
    with counting_http_server(b'{"type": "string"}', "application/schema+json") as server:
        yield server


def budget(steps: int = 100_000, seconds: float = 5.0) -> Budget:
    return Budget(steps, time.monotonic() + seconds, DEFAULT_LIMITS.max_unique_items)


def errors(schema: Any, instance: Any, **limits: Any) -> list[str]:
    """The keywords `instance` fails, with the schema compiled as registration does."""
    checker = compile_schema(schema, Limits(**limits))
    return sorted(str(error.validator) for error in checker.errors(instance, budget()))


def refusal(schema: Any, **limits: Any) -> SchemaRefused:
    with pytest.raises(SchemaRefused) as refused:
        compile_schema(schema, Limits(**limits))
    return refused.value


def test_a_reference_that_slips_past_the_checks_still_fetches_nothing(target):
    url, hits = target
    schema = {"$ref": f"{url}/schema"}
    unchecked = CompiledSchema(schema, BoundedValidator(schema, registry=registry_of(schema)),
                               DEFAULT_LIMITS)  # what compile_schema would have refused
    with pytest.raises(Exception, match="Unresolvable"):
        unchecked.errors("text", budget())
    assert hits == []


@pytest.mark.parametrize("schema", [
    {"$ref": "{url}/a"},
    {"$ref": "{url}/a#/definitions/x"},
    {"$ref": "//127.0.0.1/a"},
    {"$ref": "other.json"},
    {"$id": "{url}/base", "$ref": "relative"},
    {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "{url}/via-defs"}}},
    {"$ref": "#/x", "x": {"$ref": "{url}/from-an-unknown-keyword"}},
    {"items": {"$ref": "{url}/nested"}},
    {"$ref": "https://json-schema.org/draft/2020-12/schema"},
])
def test_references_outside_the_document_are_refused(target, schema):
    url, hits = target
    schema = _formatted(schema, url)
    assert "only references inside the schema" in refusal(schema).problem
    assert hits == []


def _formatted(value: Any, url: str) -> Any:
    if isinstance(value, dict):
        return {key: _formatted(item, url) for key, item in value.items()}
    return value.replace("{url}", url) if isinstance(value, str) else value


@pytest.mark.parametrize(("schema", "where", "says"), [
    ({"$ref": "#"}, "", "loops back"),
    ({"allOf": [{"$ref": "#/$defs/a"}], "$defs": {"a": {"anyOf": [{"$ref": "#"}]}}},
     "/$defs/a/anyOf/0", "loops back"),
    ({"if": {"$ref": "#/$defs/b"}, "$defs": {"b": {"$anchor": "b", "not": {"$ref": "#b"}}}},
     "/$defs/b/not", "loops back"),
    ({"$ref": "#/nowhere"}, "/$ref", "points to nothing"),
    ({"$ref": "#/const", "const": 1}, "/$ref", "not a schema"),
    ({"$ref": "#/x", "x": {"minimum": "one"}}, "/$ref/minimum", "not valid JSON Schema"),
    ({"properties": {"a": {"$id": "https://example.com/a"}}}, "/properties/a/$id",
     "only at the top"),
    ({"items": {"$schema": "https://json-schema.org/draft/2020-12/schema"}}, "/items/$schema",
     "only at the top"),
    ({"$schema": "http://json-schema.org/draft-07/schema#"}, "/$schema", "2020-12"),
    ({"$dynamicRef": "#meta"}, "/$dynamicRef", "not supported"),
    ({"type": "nonsense"}, "/type", "not valid JSON Schema 2020-12"),
    ({"pattern": "(("}, "/pattern", "pattern '((' is refused (missing )"),
    ({"pattern": "(a)\\1"}, "/pattern", "refused (invalid escape sequence)"),
    ({"patternProperties": {"(?!x)": {}}}, "/patternProperties", "pattern '(?!x)' is refused"),
    ({"unevaluatedProperties": False, "allOf": [{"patternProperties": {"^a": {}}}]}, "",
     "cannot be combined with patternProperties"),
])
def test_schemas_that_would_misbehave_are_refused_naming_the_place(schema, where, says):
    refused = refusal(schema)
    assert (refused.where, says in refused.problem) == (where, True), refused


def _fan_out(levels: int, width: int = 2) -> dict:
    defs: dict[str, Any] = {f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}] * width}
                            for i in range(levels)}
    return {"$ref": "#/$defs/d0", "$defs": {**defs, f"d{levels}": {"type": "string"}}}


def test_fan_out_and_long_chains_of_references_are_bounded():
    assert "more than 512 subschemas" in refusal(_fan_out(20)).problem  # 2^20 otherwise
    compile_schema(_fan_out(7))  # 255 subschemas: fine
    assert "more than 32 references" in refusal(_fan_out(40, width=1)).problem
    compile_schema(_fan_out(15, width=1))


def _nested(levels: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def test_size_and_depth_are_bounded_before_anything_reads_the_schema():
    assert refusal(_nested(260)).problem == "too big: nested deeper than 32 levels"
    assert refusal({"enum": list(range(5000))}).problem == "too big: more than 5000 values"
    compile_schema(_nested(15))  # 31 levels: the deepest there is room for
    assert errors(_nested(15), _nested_value(15, 1)) == ["type"]


def _nested_value(levels: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


def test_the_metaschema_check_itself_runs_within_the_budget():
    big = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(1200)}}
    assert refusal(big, compile_steps=1000).problem == "too costly to check"
    compile_schema(big)


def test_ordinary_schemas_compile_and_validate():
    tree = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "urn:ex:tree",
            "type": "object", "required": ["name"],
            "properties": {"name": {"$ref": "#name"}, "children": {
                "type": "array", "items": {"$ref": "#"}, "maxItems": 10}},
            "$defs": {"name": {"$anchor": "name", "type": "string", "pattern": "^[a-z]+$"}}}
    good = {"name": "root", "children": [{"name": "leaf", "children": []}]}
    assert errors(tree, good) == []
    assert errors(tree, {"name": "root", "children": [{"name": "Leaf"}]}) == ["pattern"]


BACKTRACKING = "^(a+)+$"  # Python's re: 2^n steps for "aaa...a!"


@pytest.mark.parametrize("schema", [
    {"type": "string", "pattern": BACKTRACKING},
    {"$schema": "https://json-schema.org/draft/2020-12/schema",  # no switch of validator class
     "anyOf": [{"$ref": "#/$defs/p"}], "$defs": {"p": {"pattern": BACKTRACKING}}},
    {"type": "object", "properties": {"k": {"type": "object",
                                            "patternProperties": {BACKTRACKING: {}}}}},
    {"type": "object", "properties": {"k": {"type": "object", "additionalProperties": False,
                                            "patternProperties": {BACKTRACKING: {}}}}},
])
def test_patterns_run_in_linear_time(schema):
    text = "a" * 100_000 + "!"
    instance = {"k": {text: 1}} if "properties" in schema else text
    started = time.perf_counter()
    found = errors(schema, instance)
    assert time.perf_counter() - started < 0.5
    assert found in (["pattern"], ["anyOf"], [], ["additionalProperties"])


def test_a_search_is_paid_for_before_it_runs():
    """RE2 is linear, but a big program over a long string still takes seconds, in one call
    nothing can interrupt: it is charged its worst case up front."""
    checker = compile_schema({"pattern": "(a|b)*a(a|b){200}c"})  # 207 instructions
    text = "ab" * 1_000_000
    started = time.perf_counter()
    with pytest.raises(BudgetExceeded):
        checker.errors(text, budget(steps=20_000))  # charged 41,400 steps
    assert time.perf_counter() - started < 0.2
    assert [e.validator for e in checker.errors(text[:20_000], budget(steps=20_000))] == \
        ["pattern"]


def test_the_patterns_of_a_schema_are_bounded_in_size():
    many = {"properties": {f"p{i}": {"pattern": "x{1000}"} for i in range(60)}}
    assert "more than 50000 RE2 instructions" in refusal(many).problem
    assert "pattern too large" in refusal({"pattern": "\\pL{1000}"}).problem


@pytest.mark.parametrize(("items", "unique"), [
    ([1, 1.0], False),
    ([1, True], True),
    ([0, False], True),
    ([{"a": 1, "b": [1, 2]}, {"b": [1, 2.0], "a": 1}], False),
    ([[1, 2], [2, 1]], True),
    (["1", 1], True),
    ([None, None], False),
    ([{"a": {}}, {"a": []}], True),
])
def test_unique_items_keeps_json_equality(items, unique):
    assert errors({"uniqueItems": True}, items) == ([] if unique else ["uniqueItems"])


def test_unique_items_is_linear_and_bounded():
    distinct = [{"id": i, "tags": [str(i)]} for i in range(10_000)]
    started = time.perf_counter()
    assert errors({"uniqueItems": True}, distinct) == []
    assert time.perf_counter() - started < 1.0
    checker = compile_schema({"uniqueItems": True})
    [error] = checker.errors(list(range(10_001)), budget())
    assert error.message == "more than 10000 items to compare"


FAN_OUT_BY_DEPTH = {"allOf": [{"$ref": "#/$defs/step"}, {"$ref": "#/$defs/step"}],
                    "$defs": {"step": {"properties": {"a": {"$ref": "#"}}}}}


def test_the_budget_stops_work_that_grows_with_the_input():
    checker = compile_schema(FAN_OUT_BY_DEPTH)
    assert checker.errors(_nested_value(5, {}), budget()) == []
    started = time.perf_counter()
    with pytest.raises(BudgetExceeded):
        checker.errors(_nested_value(40, {}), budget(steps=20_000))
    assert time.perf_counter() - started < 1.0
    with pytest.raises(BudgetExceeded):
        checker.errors(_nested_value(40, {}), budget(steps=10**9, seconds=0.2))


def test_inputs_too_deep_to_check_are_refused_not_recursed_into():
    checker = compile_schema({"properties": {"a": {"$ref": "#"}}})
    with pytest.raises(Unverifiable, match="nested deeper than 64 levels"):
        checker.errors(_nested_value(500, 1), budget())
    chained = _fan_out(5, width=1)  # $ref hops at each level of the input: Python's recursion
    chained["$defs"]["d5"] = {"properties": {"a": {"$ref": "#"}}}  # limit comes first
    with pytest.raises(Unverifiable, match="nested too deeply to check"):
        compile_schema(chained).errors(_nested_value(60, 1), budget())


def test_shapes_are_measured_without_recursion():
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    assert shape_problem(deep, 64, 10**6) == "nested deeper than 64 levels"
    assert shape_problem({"a": [1, 2, {"b": None}]}, 3, 100) is None
    assert shape_problem({"a": [1, 2, {"b": None}]}, 2, 100) == "nested deeper than 2 levels"
    assert shape_problem(list(range(10)), 5, 10) == "more than 10 values"


def test_compiled_schemas_are_kept_by_content():
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    assert compiled(schema) is compiled(copy.deepcopy(schema))
    with pytest.raises(SchemaRefused):
        compiled({"$ref": "#"})
    with pytest.raises(SchemaRefused, match="loops back"):
        compiled({"$ref": "#"})  # remembered, raised afresh


async def test_validation_runs_off_the_loop_and_waits_a_bounded_time():
    assert await validate({"type": "string"}, ["x", 1]) != [[], []]
    release = threading.Event()
    busy = [off_loop(release.wait, 1.0) for _ in range(2)]  # both schema threads taken
    import asyncio

    tasks = [asyncio.ensure_future(job) for job in busy]
    await asyncio.sleep(0.05)
    late = asyncio.ensure_future(off_loop(lambda: "ran", 0.05))
    await asyncio.sleep(0.2)
    release.set()
    with pytest.raises(Overloaded):
        await late
    assert await asyncio.gather(*tasks) == [True, True]


async def test_small_checks_of_a_compiled_schema_stay_on_the_loop(monkeypatch):
    from gateway.untrusted_schema import running

    threads: list[str] = []
    real_off_loop = running.off_loop

    async def counted(work, start_within):
        threads.append("thread")
        return await real_off_loop(work, start_within)

    monkeypatch.setattr(running, "off_loop", counted)
    # Steps and values decide what moves to a thread here, never a busy machine's clock.
    monkeypatch.setattr(running, "INLINE", replace(running.INLINE, seconds=60.0))
    roomy = replace(DEFAULT_LIMITS, seconds=60.0)
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}},
              "required": ["n"], "x-test": "inline"}
    assert [len(found) for found in await validate(schema, [{"n": 1}, {"n": -1}])] == [0, 1]
    assert threads == ["thread"]  # never compiled before: compiled in a thread
    assert [len(found) for found in await validate(schema, [{"n": 1}, {}])] == [0, 1]
    assert threads == ["thread"]  # compiled: checked on the loop
    many = [{"n": index} for index in range(600)]  # 1,201 values: past the inline budget
    assert await validate(schema, many) == [[]] * 600
    assert threads == ["thread"] * 2
    costly = compile_schema(FAN_OUT_BY_DEPTH, roomy)
    compiled(FAN_OUT_BY_DEPTH, roomy)
    deep = _nested_value(12, {})  # few values, thousands of steps: moved to a thread
    assert await validate(FAN_OUT_BY_DEPTH, [deep], roomy) == \
        [costly.errors(deep, budget(seconds=60.0))]
    assert threads == ["thread"] * 3
