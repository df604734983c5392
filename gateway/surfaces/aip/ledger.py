"""What a posted citation event is checked against: the request ids this gateway answered `ok`
to each platform, and the event ids each platform already had stored.

Both live in a nonce store (nonces.py: memory, or Redis shared by replicas and kept across
reloads) with a time to live. A request id may be cited for `retention` seconds after its
answer; an event id is remembered a little longer than that, so a duplicate can never outlive
the request it cites. In the bounded memory store, eviction drops the entry closest to expiry,
hence a request id before any event id citing it: an evicted request id only makes a late
citation unknown, never lets a duplicate through. Names are hashed, so an id of any length or
character makes a key of fixed size.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Awaitable
from enum import Enum
from typing import TypeVar

from gateway.errors import GatewayError
from gateway.surfaces.aip.nonces import NonceStore, NonceStoreUnavailable

ISSUED, EVENTS = "issued", "event"
T = TypeVar("T")


class Claim(Enum):
    NEW = "new"  # first time: store the event
    RETRY = "retry"  # the same event again: already stored, answer as before
    CONFLICT = "conflict"  # another event under an event id already used


def events_unavailable() -> GatewayError:
    return GatewayError(503, "events_unavailable", "Events cannot be stored; retry later.")


class EventLedger:
    def __init__(self, store: NonceStore, retention: float) -> None:
        self._store = store
        self._retention = retention

    async def issue(self, platform: str, request_id: str) -> None:
        """Remember that `platform` was answered for `request_id` (again: no change)."""
        await self._call(self._store.add(ISSUED, _name(platform, request_id), self._retention))

    async def issued(self, platform: str, request_id: str) -> bool:
        found = await self._call(self._store.get(ISSUED, _name(platform, request_id)))
        return found is not None

    async def claim(self, platform: str, event_id: str, digest: bytes) -> Claim:
        """Reserve the platform's event id for an event whose content hashes to `digest`."""
        name = _name(platform, event_id)
        if await self._call(self._store.add(EVENTS, name, self._retention + 1, digest)):
            return Claim.NEW
        held = await self._call(self._store.get(EVENTS, name))
        return Claim.RETRY if held == digest else Claim.CONFLICT

    async def release(self, platform: str, event_id: str) -> None:
        """Give a claim back after the event could not be stored, so a retry is not taken for
        a duplicate (best effort: the store may be the part that failed)."""
        with contextlib.suppress(NonceStoreUnavailable):
            await self._store.discard(EVENTS, _name(platform, event_id))

    @staticmethod
    async def _call(pending: Awaitable[T]) -> T:
        try:
            return await pending
        except NonceStoreUnavailable:
            raise events_unavailable() from None

    async def aclose(self) -> None:
        await self._store.aclose()


def _name(platform: str, identifier: str) -> str:
    # A platform's normal form holds no newline (names.py), so the pair is unambiguous.
    return hashlib.sha256(f"{platform}\n{identifier}".encode()).hexdigest()
