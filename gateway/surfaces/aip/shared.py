"""Nonce stores and event sinks shared by the config generations that name the same one.

A reload builds a new generation before the old one retires, so a store or sink acquired by
both is carried over: a nonce seen before a reload is still refused after it, and events queued
by the old generation are written by the same writer. Each is closed when the last generation
using it releases it (retirement, or shutdown), which is what flushes a file sink on SIGTERM.
The core keeps no such cache for surfaces (it never names one), hence this module.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

_live: dict[Hashable, tuple[Any, int]] = {}  # key -> (resource, generations using it)


def acquire(key: Hashable, create: Callable[[], Any]) -> Any:
    """The resource kept under `key`, created on first use; pair every call with `release`."""
    resource, users = _live.get(key, (None, 0))
    if users == 0:
        resource = create()
    _live[key] = (resource, users + 1)
    return resource


async def release(key: Hashable) -> None:
    """One user fewer; the last one closes the resource (`aclose`)."""
    resource, users = _live.get(key, (None, 0))
    if users <= 1:
        _live.pop(key, None)
        if resource is not None:
            await resource.aclose()
        return
    _live[key] = (resource, users - 1)
