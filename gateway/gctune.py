"""Garbage-collector settings for a long-running server, applied once start-up is done.

Everything built at start-up (modules, config, compiled mappings, routes) lives as long as the
process; `gc.freeze()` moves it out of the collector's reach, so a full collection scans only
what requests created since. A young-generation threshold well above CPython's 700 makes
collections rarer: per-request objects mostly die by reference counting before the next one.
Memory cost: frozen objects are never collected (they are alive anyway), and at most about
`YOUNG_THRESHOLD` container objects in reference cycles wait for the next young collection.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 20_000
OLDER_THRESHOLDS = (20, 20)


def tune_after_startup() -> None:
    """Collect once, freeze the survivors, raise the young threshold."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
