"""Whether a rate-limit tier is a higher tier some caller can actually reach.

`/.well-known/ai` says `agent_tier_available` only for such a tier. A tier is reachable when a
credential source the config accepts can produce a principal matching all of its conditions:

- an API key: its own client id, scopes and kind, as configured;
- the demo issuer (an issuer, or an introspection endpoint, under `demo.issuer.url`): its
  configured clients, with their scopes and kinds;
- any other JWT issuer or introspection endpoint: an outside authorization server may issue
  any client id and scope, but only the kinds it can express (one, without a kind claim).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import limits

from gateway.ratelimit.config import Rule, Tier
from gateway.settings import Settings

_KINDS = frozenset({"owner", "client"})


@dataclass(frozen=True, slots=True)
class _Source:
    """What one credential source can produce; None means anything."""

    client_id: str | None
    scopes: frozenset[str] | None
    kinds: frozenset[str]

    def can_match(self, tier: Tier) -> bool:
        return ((tier.client_id is None or self.client_id in (None, tier.client_id))
                and (tier.scope is None or self.scopes is None or tier.scope in self.scopes)
                and (tier.token_kind is None or tier.token_kind in self.kinds))


def higher_tier_reachable(rule: Rule, settings: Settings) -> bool:
    """Some tier of `rule` allows more than its default and some caller can reach it."""
    default = per_minute(rule.limit, rule.burst)
    return any(per_minute(tier.limit, tier.burst) > default
               and any(source.can_match(tier) for source in _sources(settings))
               for tier in rule.tiers)


def per_minute(limit: str, burst: str | None = None) -> int:
    """The stricter of a limit and its burst, in requests per minute (at least 1)."""
    return min(_one_per_minute(rate) for rate in (limit, burst) if rate is not None)


def _one_per_minute(rate: str) -> int:
    item = limits.parse(rate)
    return max(1, item.amount * 60 // item.get_expiry())


def _sources(settings: Settings) -> Iterator[_Source]:
    auth = settings.auth
    if auth is None:
        return
    if auth.api_keys is not None:
        for key in auth.api_keys.keys:
            yield _Source(key.client_id, frozenset(key.scopes), frozenset({key.kind}))
    demo = settings.demo.issuer if settings.demo else None
    demo_url = demo.url.rstrip("/") if demo else None

    def from_demo(url: str) -> bool:
        return demo_url is not None and (url == demo_url or url.startswith(demo_url + "/"))

    if demo is not None and (any(from_demo(i.issuer) for i in auth.issuers) or (
            auth.introspection is not None and from_demo(auth.introspection.endpoint))):
        for name, client in demo.clients.items():
            yield _Source(name, frozenset(client.scopes), frozenset({client.kind}))
    for issuer in auth.issuers:
        if not from_demo(issuer.issuer):
            kinds = _KINDS if issuer.token_kind_claim else frozenset({issuer.default_token_kind})
            yield _Source(None, None, kinds)
    if auth.introspection is not None and not from_demo(auth.introspection.endpoint):
        yield _Source(None, None, _KINDS)
