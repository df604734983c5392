"""RFC 7662 token introspection through authlib, with short caches of its answers.

Positive answers are cached for min(token exp, `cache_ttl`), at most 60 s, so a revoked token
stops working within a minute; negative ones for `negative_cache_ttl` in a cache of their own,
so a flood of made-up tokens never evicts a good one. Both are keyed by the token's SHA-256.
Concurrent requests carrying one token share one introspection.
"""

from __future__ import annotations

import asyncio
import time
import warnings
from functools import partial
from typing import Any

from authlib.deprecate import AuthlibDeprecationWarning

from gateway.auth.cache import TtlCache, digest
from gateway.auth.config import Introspection
from gateway.observability import INTROSPECTIONS

with warnings.catch_warnings():  # authlib asks for httpx2; httpx is this project's chosen client
    warnings.simplefilter("ignore", AuthlibDeprecationWarning)
    from authlib.integrations.httpx_client import AsyncOAuth2Client


class IntrospectionUnavailable(Exception):
    """The introspection endpoint could not answer; the request fails closed."""


class Introspector:
    def __init__(self, settings: Introspection) -> None:
        self.settings = settings
        self._client = AsyncOAuth2Client(
            client_id=settings.client_id,
            client_secret=settings.client_secret.get_secret_value(),
            token_endpoint_auth_method="client_secret_basic",
            timeout=settings.timeout,
            trust_env=False,
        )
        self._active: TtlCache[dict[str, Any]] = TtlCache(10000)
        self._inactive: TtlCache[bool] = TtlCache(settings.negative_cache_size)
        self._asking: dict[bytes, asyncio.Future[dict[str, Any] | None]] = {}

    def _cached(self, token: str) -> tuple[bool, dict[str, Any] | None]:
        """(found, answer) from the caches alone: the active answer, or None when inactive."""
        found, answer = self._active.get(token)
        if found:
            return True, answer
        return self._inactive.get(token)[0], None

    async def introspect(self, token: str) -> dict[str, Any] | None:
        """The active token's introspection response, or None when it is not active."""
        found, answer = self._cached(token)
        if found:
            return answer
        key = digest(token)
        asking = self._asking.get(key)
        if asking is None:
            asking = asyncio.ensure_future(self._ask(token))
            self._asking[key] = asking
            asking.add_done_callback(partial(self._answered, key))
        return await asyncio.shield(asking)  # one caller giving up leaves it to the others

    def _answered(self, key: bytes, asking: asyncio.Future[Any]) -> None:
        del self._asking[key]
        if not asking.cancelled():
            asking.exception()  # retrieved here too, for when every caller gave up

    async def _ask(self, token: str) -> dict[str, Any] | None:
        try:
            response = await self._client.introspect_token(self.settings.endpoint, token=token)
            response.raise_for_status()
            answer = response.json()
        except Exception as exc:  # any transport, status or JSON failure: fail closed
            INTROSPECTIONS.labels("error").inc()
            raise IntrospectionUnavailable() from exc
        if not isinstance(answer, dict) or answer.get("active") is not True:
            INTROSPECTIONS.labels("inactive").inc()
            self._inactive.put(token, True, self.settings.negative_cache_ttl)
            return None
        INTROSPECTIONS.labels("active").inc()
        self._active.put(token, answer, self.positive_ttl(answer))
        return answer

    def positive_ttl(self, answer: dict[str, Any]) -> float:
        """How long an active answer may be trusted: min(its exp, `cache_ttl`)."""
        ttl = self.settings.cache_ttl
        exp = answer.get("exp")
        if isinstance(exp, int | float):
            ttl = min(ttl, exp - time.time())
        return max(ttl, 0.0)

    async def aclose(self) -> None:
        await self._client.aclose()
