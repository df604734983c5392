"""RFC 7662 token introspection through authlib, with a short positive cache.

Positive answers are cached for min(token exp, `cache_ttl` <= 60 s), as PDPP §8 requires;
negative ones for a few seconds at most, so a freshly issued token is not refused for long.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

from authlib.deprecate import AuthlibDeprecationWarning

from gateway.auth.cache import TtlCache
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
        self._cache: TtlCache[dict[str, Any] | None] = TtlCache(10000)

    async def introspect(self, token: str) -> dict[str, Any] | None:
        """The active token's introspection response, or None when it is not active."""
        found, cached = self._cache.get(token)
        if found:
            return cached
        try:
            response = await self._client.introspect_token(self.settings.endpoint, token=token)
            response.raise_for_status()
            answer = response.json()
        except Exception as exc:  # any transport, status or JSON failure: fail closed
            INTROSPECTIONS.labels("error").inc()
            raise IntrospectionUnavailable() from exc
        if not isinstance(answer, dict) or answer.get("active") is not True:
            INTROSPECTIONS.labels("inactive").inc()
            self._cache.put(token, None, self.settings.negative_cache_ttl)
            return None
        INTROSPECTIONS.labels("active").inc()
        self._cache.put(token, answer, self._positive_ttl(answer))
        return answer

    def _positive_ttl(self, answer: dict[str, Any]) -> float:
        ttl = self.settings.cache_ttl
        exp = answer.get("exp")
        if isinstance(exp, int | float):
            ttl = min(ttl, exp - time.time())
        return max(ttl, 0.0)

    async def aclose(self) -> None:
        await self._client.aclose()
