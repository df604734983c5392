"""Compiling a JSON Schema a client sent: every check made once, before any input runs.

In order: its size (values, depth), its dialect and the metaschema (patterns compiled by RE2),
its references (inside the document only, each target a schema), its in-place graph (no cycle,
bounded fan-out). The result keeps a validator whose keywords spend a `Budget`.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import orjson
from jsonschema.exceptions import ValidationError, best_match

from gateway.untrusted_schema.fast import FastCheck, fast_check
from gateway.untrusted_schema.graph import (
    SchemaRefused,
    Subschemas,
    in_place_problem,
    registry_of,
)
from gateway.untrusted_schema.keywords import (
    RUNNING,
    BoundedValidator,
    Budget,
    BudgetExceeded,
    Unverifiable,
    program_size,
    regex_problem,
)
from gateway.untrusted_schema.metaschema import METASCHEMA, without_dialect
from gateway.untrusted_schema.shape import Shape, measure, shape_problem


@dataclass(frozen=True, slots=True)
class Limits:
    max_depth: int = 32  # nested arrays and objects in the schema
    max_values: int = 5000  # JSON values in the schema
    max_expansion: int = 512  # subschemas one input value meets in place ($ref, allOf, ...)
    max_chain: int = 32  # of those, one after another ($ref hops)
    max_pattern_instructions: int = 50_000  # RE2 program sizes of all its patterns together
    max_unique_items: int = 10_000  # longest array `uniqueItems` compares
    max_input_depth: int = 64
    max_input_values: int = 200_000
    steps: int = 100_000  # keyword evaluations for one request's inputs
    seconds: float = 1.0  # for one request's inputs
    compile_steps: int = 1_000_000  # keyword evaluations checking a schema (metaschema)
    compile_seconds: float = 3.0
    wait: float = 5.0  # longest wait for a schema thread


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True, slots=True)
class CompiledSchema:
    schema: Any
    validator: Any
    limits: Limits
    fast: FastCheck | None = None  # what says "valid" cheaply, when the schema allows it

    def errors(self, instance: Any, budget: Budget,
               shape: Shape | None = None) -> list[ValidationError]:
        """Every way `instance` fails the schema; `Unverifiable` when it is too big to check or
        its check runs past `budget`. `shape`: the instance's, when measured already within
        `limits` (it is not measured again)."""
        if shape is None:
            shape = measure(instance, self.limits.max_input_depth, self.limits.max_input_values)
        if shape.problem is not None:
            raise Unverifiable(shape.problem)
        token = RUNNING.set(budget)
        try:
            if self.fast is not None and self.fast.valid(instance, shape, budget):
                return []
            return list(self.validator.iter_errors(instance))
        except RecursionError:
            raise Unverifiable("nested too deeply to check") from None
        finally:
            RUNNING.reset(token)


def compile_schema(schema: Any, limits: Limits = DEFAULT_LIMITS) -> CompiledSchema:
    """The schema, checked and ready to validate inputs; `SchemaRefused` naming the problem."""
    problem = shape_problem(schema, limits.max_depth, limits.max_values)
    if problem is not None:
        raise SchemaRefused("", f"too big: {problem}")
    budget = Budget(limits.compile_steps, time.monotonic() + limits.compile_seconds,
                    limits.max_unique_items)
    token = RUNNING.set(budget)
    try:
        return _compile(schema, limits)
    except BudgetExceeded:
        raise SchemaRefused("", "too costly to check") from None
    except RecursionError:
        raise SchemaRefused("", "nested too deeply to check") from None
    finally:
        RUNNING.reset(token)


def _compile(schema: Any, limits: Limits) -> CompiledSchema:
    _check_against_metaschema(schema, "")
    graph = Subschemas(schema, limits.max_values)
    done = 0
    while done < len(graph.targets):  # targets outside the keywords' places: check them too
        where, target = graph.targets[done]
        done += 1
        if isinstance(target, dict) and id(target) not in graph.pointers:
            _check_against_metaschema(target, where)
            graph.walk(target, where)
    refused = in_place_problem(graph, limits.max_expansion, limits.max_chain)
    if refused is not None:
        raise refused
    _check_unevaluated(graph)
    _check_pattern_sizes(graph, limits.max_pattern_instructions)
    runnable = without_dialect(schema)  # 2020-12 by now; a `$schema` would change the class
    validator = BoundedValidator(runnable, registry=registry_of(runnable))
    return CompiledSchema(runnable, validator, limits, fast_check(graph, runnable))


def _check_against_metaschema(schema: Any, where: str) -> None:
    error = best_match(METASCHEMA.iter_errors(schema))
    if error is None:
        return
    at = where + "".join(f"/{str(part).replace('~', '~0').replace('/', '~1')}"
                         for part in error.absolute_path)
    if error.validator == "format" and error.validator_value == "regex":
        pattern = str(error.instance)
        reason = regex_problem(pattern) or "invalid"
        raise SchemaRefused(at, f"pattern {pattern[:60]!r} is refused ({reason}): patterns run "
                                "on RE2, in linear time, without backreferences or lookaround")
    raise SchemaRefused(at, f"not valid JSON Schema 2020-12: {error.message[:160]}")


def _check_unevaluated(graph: Subschemas) -> None:
    """jsonschema finds what `unevaluatedProperties` skips with Python's `re` on the
    `patternProperties` it meets in place; the two together are refused."""
    for node_id, node in graph.nodes.items():
        if "unevaluatedProperties" not in node:
            continue
        reached: set[int] = set()
        stack: list[Any] = [node]
        while stack:
            met = stack.pop()
            if not isinstance(met, dict) or id(met) in reached:
                continue
            reached.add(id(met))
            if "patternProperties" in met:
                raise SchemaRefused(graph.pointers[node_id], "unevaluatedProperties cannot be "
                                    "combined with patternProperties")
            stack.extend(graph.in_place[id(met)])


def _check_pattern_sizes(graph: Subschemas, most: int) -> None:
    total = 0
    for node_id, node in graph.nodes.items():
        patterns = [node["pattern"]] if isinstance(node.get("pattern"), str) else []
        patterns += list(node.get("patternProperties") or ())
        total += sum(program_size(pattern) for pattern in patterns)
        if total > most:
            raise SchemaRefused(graph.pointers[node_id], "its patterns together compile to more "
                                f"than {most} RE2 instructions")


_CACHE: OrderedDict[tuple[bytes, Limits], CompiledSchema | tuple[str, str]] = OrderedDict()
_CACHE_SIZE = 256
_LOCK = threading.Lock()


def compiled(schema: Any, limits: Limits = DEFAULT_LIMITS) -> CompiledSchema:
    """`compile_schema`, remembered (refusals too) by the digest of the schema's canonical
    JSON, so a request reuses what registration compiled."""
    key = _key(schema, limits)
    if key is None:  # deeper than orjson writes: compile_schema says why
        return compile_schema(schema, limits)
    known = _remembered(key)
    if known is None:
        try:
            known = compile_schema(schema, limits)
        except SchemaRefused as refused:
            known = (refused.where, refused.problem)
        with _LOCK:
            _CACHE[key] = known
            while len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
    if isinstance(known, tuple):
        raise SchemaRefused(*known)
    return known


def already_compiled(schema: Any, limits: Limits = DEFAULT_LIMITS) -> CompiledSchema | None:
    """The schema as `compiled` remembers it, or None when it was never compiled or was
    refused: a lookup that never compiles, cheap enough for the event loop."""
    key = _key(schema, limits)
    known = None if key is None else _remembered(key)
    return known if isinstance(known, CompiledSchema) else None


def _key(schema: Any, limits: Limits) -> tuple[bytes, Limits] | None:
    try:
        return (hashlib.sha256(orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)).digest(),
                limits)
    except orjson.JSONEncodeError:
        return None


def _remembered(key: tuple[bytes, Limits]) -> CompiledSchema | tuple[str, str] | None:
    with _LOCK:
        known = _CACHE.get(key)
        if known is not None:
            _CACHE.move_to_end(key)
    return known
