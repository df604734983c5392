"""The rate-limit counter a config asks for."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from gateway.ratelimit.batched import BatchedWindow
from gateway.ratelimit.counters import LimitsCounter, limits_storage
from gateway.ratelimit.redis_window import RedisSlidingWindow


def create_counter(strategy: str, storage_url: str, key_prefix: str, timeout: float,
                   sync: str = "exact", sync_interval: float = 0.05,
                   local_share: float = 0.01) -> Any:
    """The counter for a store: the sliding window in Redis where it applies (counted there
    exactly, or `sync: batched` in this process and Redis together), else `limits`."""
    if strategy == "sliding-window-counter" and urlsplit(storage_url).scheme != "memory":
        window = RedisSlidingWindow(storage_url, key_prefix, timeout)
        if sync == "batched":
            return BatchedWindow(window, sync_interval, local_share)
        return window
    return LimitsCounter(strategy, limits_storage(storage_url, key_prefix, timeout))
