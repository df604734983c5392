"""Schema work off the event loop: a small pool of threads, a deadline to start by.

Two threads at most, so a burst of costly checks queues here instead of taking every core;
work that could not start before its deadline is dropped as `Overloaded`, so the queue never
holds more than a deadline's worth of waiting.

The common case never needs the thread: a schema compiled before (at registration, or by an
earlier request) checking a small input. `validate` first tries that on the loop with a budget
of a millisecond's work (`INLINE`); a check that would spend more is dropped and run again in
a thread with the whole budget, so the loop never spends more than that on one request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from jsonschema.exceptions import ValidationError

from gateway.untrusted_schema.compile import (
    DEFAULT_LIMITS,
    CompiledSchema,
    Limits,
    already_compiled,
    compiled,
)
from gateway.untrusted_schema.keywords import Budget, BudgetExceeded
from gateway.untrusted_schema.shape import measure

T = TypeVar("T")
_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="aigw-schema")


@dataclass(frozen=True, slots=True)
class InlineBudget:
    """What a check may spend on the event loop before it is moved to a thread."""

    max_values: int = 1_000  # JSON values of all the instances together
    steps: int = 2_000  # keyword evaluations
    seconds: float = 0.001


INLINE = InlineBudget()


class Overloaded(Exception):
    """The work waited past its deadline for a thread; nothing was checked."""


async def off_loop(work: Callable[[], T], start_within: float) -> T:
    """`work()` in a schema thread; `Overloaded` when no thread took it within `start_within`
    seconds."""
    deadline = time.monotonic() + start_within

    def job() -> T:
        if time.monotonic() > deadline:
            raise Overloaded()
        return work()

    return await asyncio.get_running_loop().run_in_executor(_POOL, job)


async def validate(schema: Any, instances: list[Any],
                   limits: Limits = DEFAULT_LIMITS) -> list[list[ValidationError]]:
    """Each instance's errors against `schema`, compiled (or found compiled) and run in a
    thread within one budget for all of them. Raises `SchemaRefused` for a schema that does
    not compile, `Unverifiable` for inputs past the limits, `Overloaded`."""

    checker = already_compiled(schema, limits)
    if checker is not None:
        found = _inline(checker, instances)
        if found is not None:
            return found

    def work() -> list[list[ValidationError]]:
        checker = compiled(schema, limits)
        budget = Budget(limits.steps, time.monotonic() + limits.seconds, limits.max_unique_items)
        return [checker.errors(instance, budget) for instance in instances]

    return await off_loop(work, limits.wait)


def _inline(checker: CompiledSchema, instances: list[Any]) -> list[list[ValidationError]] | None:
    """The errors, when small instances check within `INLINE`; None when they must go to a
    thread (too many values, or the budget ran out: what they spent is thrown away)."""
    limits = checker.limits
    room = INLINE.max_values - 1  # the list of instances counts as a value
    shapes = []
    for instance in instances:
        shape = measure(instance, limits.max_input_depth, min(room, limits.max_input_values))
        if shape.problem is not None:
            return None
        room -= shape.values
        shapes.append(shape)
    budget = Budget(INLINE.steps, time.monotonic() + INLINE.seconds, limits.max_unique_items)
    try:
        return [checker.errors(instance, budget, shape)
                for instance, shape in zip(instances, shapes, strict=True)]
    except BudgetExceeded:
        return None
