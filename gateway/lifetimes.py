"""Resources that outlive one config generation: upstream clients, rate-limit counters, Redis
stores, nonce stores, event sinks.

A reload builds the new generation before the old one retires, so a resource both acquire under
the same key is carried over: counts, nonces and queued events survive the reload, and a pooled
connection is reused. Each generation acquires through its own `Lease`; when the generation
retires (or the server shuts down) the lease releases everything it holds, and the last lease
holding a key closes that resource, exactly once. This is the one place such lifetimes are
kept, for the core and for surfaces (through `MountContext.shared`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")
Close = Callable[[Any], Awaitable[None]]
log = logging.getLogger("aigw.runtime")


async def close_resource(resource: Any) -> None:
    """The default way to close a resource: its `aclose()`, when it has one."""
    close = getattr(resource, "aclose", None)
    if close is not None:
        await close()


@dataclass(slots=True)
class _Held:
    resource: Any
    close: Close
    users: int


class Resources:
    """Every shared resource of one process, by key, with the number of leases holding it."""

    def __init__(self) -> None:
        self._held: dict[Hashable, _Held] = {}

    def lease(self) -> Lease:
        return Lease(self)

    def _acquire(self, key: Hashable, create: Callable[[], T], close: Close) -> T:
        held = self._held.get(key)
        if held is None:
            held = self._held[key] = _Held(create(), close, 0)
        held.users += 1
        resource: T = held.resource
        return resource

    async def _release(self, key: Hashable) -> None:
        held = self._held[key]
        held.users -= 1
        if held.users > 0:
            return
        del self._held[key]
        try:
            await held.close(held.resource)
        except Exception:  # one failing close must not keep the others open
            log.exception("closing a shared resource failed", extra={"fields": {
                "resource": type(held.resource).__name__}})

    def __len__(self) -> int:
        return len(self._held)


class Lease:
    """What one config generation holds; `release` gives all of it back at once."""

    def __init__(self, resources: Resources) -> None:
        self._resources = resources
        self._keys: list[Hashable] = []

    def acquire(self, key: Hashable, create: Callable[[], T],
                close: Close = close_resource) -> T:
        """The resource kept under `key`, created on first use, closed by the last release.
        A key names everything the resource is built from (its settings), so a generation
        whose settings differ gets a resource of its own."""
        resource = self._resources._acquire(key, create, close)
        self._keys.append(key)
        return resource

    async def release(self) -> None:
        keys, self._keys = self._keys, []
        for key in reversed(keys):
            await self._resources._release(key)
