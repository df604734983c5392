"""Work over a whole stream (scoring, building an index, filtering and ordering a listing) in
one of two PDPP threads once the stream is big: searches and listings of big streams queue there
instead of taking every core, and never hold the event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
_THREADS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="aigw-pdpp")
# Records below which a pass costs less than a thread handoff (~0.1 ms at ~50 ns a record).
ON_LOOP_MAX_RECORDS = 2_000


async def over_records(records: int, work: Callable[[], T]) -> T:
    """`work()`, on the loop for fewer than ON_LOOP_MAX_RECORDS records, else in a thread."""
    if records < ON_LOOP_MAX_RECORDS:
        return work()
    return await asyncio.get_running_loop().run_in_executor(_THREADS, work)


async def in_thread(work: Callable[[], T]) -> T:
    """`work()` in a PDPP thread, whatever its size (it may block: disk, an index server)."""
    return await asyncio.get_running_loop().run_in_executor(_THREADS, work)
