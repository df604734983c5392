"""Background work yields the CPU to the event loop that serves requests.

A gateway process serves every request from one event-loop thread; work no request waits for
(a stream's index being built or refreshed: reading pages, mapping records, comparing
versions, embedding) runs in threads of its own. On a busy core those threads compete with the
loop, and each moment the loop waits for the CPU is added to every request it holds. So:

- background threads run at a lower CPU priority (Linux: their own nice value raised by
  BACKGROUND_NICE), so the kernel runs the loop thread first whenever it is runnable; they
  still get every cycle the loop leaves idle. Threads that serve a waiting request (stream
  scoring, embedding a query, schema checks) keep the normal priority: lowering theirs would
  only make that request wait longer.
- the serving process tells Hugging Face's tokenizers (WordLlama's) not to start a thread pool
  of its own (`TOKENIZERS_PARALLELISM=false`, which the library reads on each call): a text is
  tokenized in the thread that embeds it, at that thread's priority, instead of in as many
  threads of normal priority as there are cores.
- a thread running Python holds the interpreter (the GIL) until another asks for it and
  `sys.getswitchinterval()` has passed: Python's 5 ms is a wait the loop may pay each time it
  comes back from the network while a worker thread computes; `interpreter.switch_interval`
  sets it (Python's 5 ms unless configured: with the above, a lower value gave no shorter
  tail in bench/tail.py).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

BACKGROUND_NICE = 10  # a CFS weight of 110 against the loop's 1024: ~10 % of a shared core
MAX_NICE = 19
TOKENIZERS_PARALLELISM = "TOKENIZERS_PARALLELISM"
log = logging.getLogger("aigw.background")


def lower_priority() -> None:
    """Lower the calling thread's CPU priority (Linux: its nice value, per thread); elsewhere,
    or where the system refuses, nothing."""
    if not sys.platform.startswith("linux"):
        return
    thread = threading.get_native_id()
    try:
        nice = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, min(MAX_NICE, nice + BACKGROUND_NICE))
    except OSError as exc:  # a sandbox may forbid it; the work runs anyway
        log.debug("background thread priority unchanged: %s", type(exc).__name__)


def background_pool(workers: int, name: str) -> ThreadPoolExecutor:
    """A pool of `workers` threads named `name`_N, each at the lower priority."""
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name,
                              initializer=lower_priority)


def serving_process(switch_interval: float) -> None:
    """What a process that serves requests sets before it starts: the tokenizers library
    without a thread pool (unless the environment already says otherwise), and how long a
    thread running Python may keep the interpreter from the loop (`interpreter.switch_interval`)."""
    os.environ.setdefault(TOKENIZERS_PARALLELISM, "false")
    sys.setswitchinterval(switch_interval)
