"""A JWKS cache per issuer: honours Cache-Control within a floor and a ceiling, refetches once
for an unknown key id (at most once per cooldown), and keeps serving cached keys while the
JWKS endpoint is down."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Any

import httpx
import jwt

from gateway.auth.config import Issuer
from gateway.observability import JWKS_FETCHES

log = logging.getLogger("aigw.auth.jwks")
_MAX_AGE = re.compile(r"(?:^|,)\s*max-age\s*=\s*(\d+)", re.IGNORECASE)


class JwksCache:
    def __init__(self, issuer: Issuer, http: httpx.AsyncClient) -> None:
        self.issuer = issuer
        self._http = http
        self._keys: dict[str, jwt.PyJWK] = {}
        self._expires_at = 0.0
        self._last_fetch = float("-inf")
        self._last_unknown_kid_fetch = float("-inf")
        self._lock = asyncio.Lock()
        self._outage = False

    async def key(self, kid: str | None) -> jwt.PyJWK | None:
        """The verification key for `kid`, refreshing the set when it is stale or lacks `kid`."""
        now = time.monotonic()
        cooldown = self.issuer.jwks_cache.refresh_cooldown
        # While the endpoint fails, a stale set is retried every few seconds, not per request.
        stale = now >= self._expires_at and now - self._last_fetch >= min(cooldown, 5.0)
        # Unknown kids are counted apart, so a routine refresh never delays a rotation.
        unknown = kid not in self._keys and now - self._last_unknown_kid_fetch >= cooldown
        if unknown and not stale:
            self._last_unknown_kid_fetch = now
        if stale or unknown:
            await self._refresh()
        elif self._lock.locked() and kid not in self._keys:
            async with self._lock:  # a fetch is under way (the first one, say): wait for it
                pass
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        return self._keys.get(kid) if kid is not None else None

    async def _refresh(self) -> None:
        started = self._last_fetch
        async with self._lock:
            if self._last_fetch != started:  # another request refreshed while we waited
                return
            self._last_fetch = time.monotonic()
            try:
                response = await self._http.get(self.issuer.jwks_uri,
                                                timeout=self.issuer.jwks_cache.timeout)
                response.raise_for_status()
                keys = _parse_keys(response.json())
            except (httpx.HTTPError, ValueError) as exc:
                self._record_failure(exc)
                return
            self._keys = keys
            self._expires_at = self._last_fetch + self._ttl(response.headers)
            JWKS_FETCHES.labels(self.issuer.issuer, "success").inc()
            if self._outage:
                log.info("JWKS endpoint recovered", extra={"fields": self._fields()})
                self._outage = False

    def _record_failure(self, exc: Exception) -> None:
        JWKS_FETCHES.labels(self.issuer.issuer, "failure").inc()
        if not self._outage:  # once per outage, not once per request
            fields = {**self._fields(), "error": type(exc).__name__, "cached_keys": len(self._keys)}
            log.warning("JWKS fetch failed; cached keys stay in use", extra={"fields": fields})
            self._outage = True

    def _ttl(self, headers: httpx.Headers) -> float:
        limits = self.issuer.jwks_cache
        match = _MAX_AGE.search(headers.get("cache-control", ""))
        if "no-store" in headers.get("cache-control", "") or match is None:
            return limits.min_ttl
        return max(limits.min_ttl, min(limits.max_ttl, float(match.group(1))))

    def _fields(self) -> dict[str, Any]:
        return {"issuer": self.issuer.issuer, "jwks_uri": self.issuer.jwks_uri}


def _parse_keys(document: Any) -> dict[str, jwt.PyJWK]:
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise ValueError("not a JWK set")
    keys = {}
    for entry in document["keys"]:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
            continue
        try:
            key = jwt.PyJWK(entry)
        except (jwt.PyJWKError, jwt.InvalidKeyError):
            continue  # a key we cannot use (unknown kty, symmetric) is skipped, not fatal
        if key.key_type == "oct":
            continue  # never verify with a shared secret published in a JWKS
        keys[entry.get("kid", "")] = key
    return keys
