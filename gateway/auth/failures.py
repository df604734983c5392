"""Failed authentications per client address, and the refusal once an address has too many.

Each failed credential (malformed, unknown, expired, badly signed, inactive) is counted against
the caller's address with the `limits` library. Past `auth.failure_limit.limit`, a credential
from that address is refused before the gateway verifies it, so a flood of made-up tokens
costs the identity provider at most that many introspections per window and address. IPv6
callers are counted by their /64, which one host usually holds whole.

The count lives in the store it is given: the rate-limit Redis when there is one, so replicas
share it, else process memory. When the store fails, authentication goes on uncounted (it
still fails closed on its own): the limit sheds load, it is not what keeps tokens honest.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from ipaddress import IPv6Address, ip_address, ip_network
from typing import Any

import limits
from limits.aio.strategies import SlidingWindowCounterRateLimiter
from limits.errors import StorageError

from gateway.auth.config import FailureLimit

log = logging.getLogger("aigw.auth")
_NAMESPACE = "auth:failures"  # a colon: no rate-limit rule can be named so


class TooManyFailures(Exception):
    """The caller's address is past the failure limit; `retry_after` seconds until it is not."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(retry_after)
        self.retry_after = retry_after


class FailureLimiter:
    def __init__(self, settings: FailureLimit, storage: Any) -> None:
        self._item = limits.parse(settings.limit)
        self._strategy = SlidingWindowCounterRateLimiter(storage)
        self._store_down = False
        # Per address: the distinct credentials being verified now, by digest. They count
        # against the limit too, so a burst of made-up tokens cannot outrun the failures the
        # first of them will record.
        self._verifying: dict[str, Counter[bytes]] = {}

    @asynccontextmanager
    async def verifying(self, address: str, credential: bytes) -> AsyncIterator[None]:
        """Hold a verification of `credential` (its digest) for `address`; raise
        `TooManyFailures` when the address's failures in the window, plus its other
        credentials under verification, leave no room for it."""
        key = address_key(address)
        current = self._verifying.get(key, Counter())
        await self._check(key, 1 + len(current) - (credential in current))
        held = self._verifying.setdefault(key, Counter())
        held[credential] += 1
        try:
            yield
        finally:
            held[credential] -= 1
            if not held[credential]:
                del held[credential]
            if not held:
                self._verifying.pop(key, None)

    async def record(self, address: str) -> None:
        """Count one failed authentication from `address`."""
        try:
            await self._strategy.hit(self._item, _NAMESPACE, address_key(address))
        except StorageError as exc:
            self._store_failed(exc)

    async def _check(self, key: str, cost: int) -> None:
        try:
            if await self._strategy.test(self._item, _NAMESPACE, key, cost=cost):
                self._store_recovered()
                return
            stats = await self._strategy.get_window_stats(self._item, _NAMESPACE, key)
        except StorageError as exc:
            self._store_failed(exc)
            return
        raise TooManyFailures(max(1, math.ceil(stats.reset_time - time.time())))

    def _store_failed(self, exc: StorageError) -> None:
        if not self._store_down:  # once per outage
            self._store_down = True
            log.error("auth failure store failed; failures go uncounted until it recovers",
                      extra={"fields": {"error": type(exc.storage_error).__name__}})

    def _store_recovered(self) -> None:
        if self._store_down:
            self._store_down = False
            log.info("auth failure store recovered")


def address_key(address: str) -> str:
    """The address as counted: IPv4 as is, IPv6 by its /64 network."""
    try:
        parsed = ip_address(address)
    except ValueError:
        return address
    if isinstance(parsed, IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ip_network((parsed, 64), strict=False))
    return str(parsed)
