"""Work over a whole stream (scoring, building an index, filtering and ordering a listing) in
PDPP threads: index searches always (their cost grows with the query too, search.py),
listings once the stream is big. They queue there instead of taking every core, and never
hold the event loop.

Two pools of two threads: one for work a request waits for (normal priority: searches,
listings, a stream's first read), one for its refreshes (`in_background`: lower priority,
gateway.background), so an index being refreshed yields the CPU to the loop and to the request
threads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from typing import TypeVar

from gateway.background import background_pool

T = TypeVar("T")
_THREADS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="aigw-pdpp")
_BACKGROUND = background_pool(2, "aigw-pdpp-index")
# Set in the task of a refresh (a task's context is its own copy): every
# thread hop that task makes goes to _BACKGROUND.
_IN_BACKGROUND: ContextVar[bool] = ContextVar("aigw_pdpp_in_background", default=False)
# Records below which a pass costs less than a thread handoff (~0.1 ms at ~50 ns a record).
ON_LOOP_MAX_RECORDS = 2_000


def in_background() -> None:
    """From here on, the calling task's thread work runs in the background pool."""
    _IN_BACKGROUND.set(True)


def _pool() -> ThreadPoolExecutor:
    return _BACKGROUND if _IN_BACKGROUND.get() else _THREADS


async def over_records(records: int, work: Callable[[], T]) -> T:
    """`work()`, on the loop for fewer than ON_LOOP_MAX_RECORDS records, else in a thread."""
    if records < ON_LOOP_MAX_RECORDS:
        return work()
    return await asyncio.get_running_loop().run_in_executor(_pool(), work)


async def in_thread(work: Callable[[], T]) -> T:
    """`work()` in a PDPP thread, whatever its size (it may block: disk, an index server)."""
    return await asyncio.get_running_loop().run_in_executor(_pool(), work)
