"""Schema work off the event loop: a small pool of threads, a deadline to start by.

Two threads at most, so a burst of costly checks queues here instead of taking every core;
work that could not start before its deadline is dropped as `Overloaded`, so the queue never
holds more than a deadline's worth of waiting.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from jsonschema.exceptions import ValidationError

from gateway.untrusted_schema.compile import DEFAULT_LIMITS, Limits, compiled
from gateway.untrusted_schema.keywords import Budget

T = TypeVar("T")
_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="aigw-schema")


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

    def work() -> list[list[ValidationError]]:
        checker = compiled(schema, limits)
        budget = Budget(limits.steps, time.monotonic() + limits.seconds, limits.max_unique_items)
        return [checker.errors(instance, budget) for instance in instances]

    return await off_loop(work, limits.wait)
