"""Garbage-collector settings for a long-running server, applied once start-up is done.

Everything built at start-up (modules, config, compiled mappings, routes) lives as long as the
process; `gc.freeze()` moves it out of the collector's reach, so a full collection scans only
what requests created since. A young-generation threshold well above CPython's 700 makes
collections rarer: per-request objects mostly die by reference counting before the next one.
Memory cost: frozen objects are never collected (they are alive anyway), and at most about
`YOUNG_THRESHOLD` container objects in reference cycles wait for the next young collection.
A config generation frozen with the rest would keep its reference cycles once retired, so
`refreeze` runs when a generation retires: unfreeze, collect, freeze what is still alive.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 20_000
# A middle-generation collection every 2 young ones (it was 20): it scans what survived them,
# and at a young threshold of 20,000, twenty young collections' survivors (up to 400,000
# objects: a stream's records being indexed) held the interpreter, and so the event loop,
# for 100-250 ms.
OLDER_THRESHOLDS = (2, 20)


_tuned = [False]


def tune_after_startup() -> None:
    """Collect once, freeze the survivors, raise the young threshold."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
    _tuned[0] = True


def refreeze() -> None:
    """After a config generation has retired: let its cycles be collected, freeze the rest."""
    if _tuned[0]:
        gc.unfreeze()
        gc.collect()
        gc.freeze()
