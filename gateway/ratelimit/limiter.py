"""The rate-limit stage: count the request against every matching rule, refuse when one is
exhausted, and leave the quotas on the request context for the response's header fields."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

import limits

from gateway import tracing
from gateway.caching import BoundedCache
from gateway.context import RequestContext
from gateway.model import ALLOW, Decision, Principal, deny
from gateway.observability import RATE_LIMIT_DECISIONS, RATE_LIMIT_STORE_ERRORS
from gateway.paths import matches_prefix, method_covered
from gateway.ratelimit.config import RateLimits, Rule, Tier
from gateway.ratelimit.counters import StoreUnavailable, WindowCounter

log = logging.getLogger("aigw.ratelimit")
_REMEMBERED = 1024  # (path, method) pairs whose rules are kept found (least recently used go)


@dataclass(frozen=True, slots=True)
class Quota:
    """One limit's state after this request was counted."""

    policy: str
    limit: int
    window: int
    remaining: int
    reset: int  # seconds until the window frees quota


@dataclass(frozen=True, slots=True)
class _Limit:
    policy: str  # the name in the RateLimit fields: the rule's, or with -burst
    item: limits.RateLimitItem
    amount: int
    window: int  # seconds


@dataclass(frozen=True, slots=True)
class _Limits:
    items: tuple[_Limit, ...]


class CompiledRule:
    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        self.default = _compile(rule.name, rule.limit, rule.burst)
        self.tiers = [(tier, _compile(rule.name, tier.limit, tier.burst)) for tier in rule.tiers]
        self.allowed = RATE_LIMIT_DECISIONS.labels(rule.name, "allowed")
        self.limited = RATE_LIMIT_DECISIONS.labels(rule.name, "limited")

    def applies(self, path: str, method: str) -> bool:
        return method_covered(method, self.rule.methods) and any(
            matches_prefix(prefix, path) for prefix in self.rule.paths)

    def limits_for(self, principal: Principal) -> _Limits:
        for tier, compiled in self.tiers:
            if _tier_matches(tier, principal):
                return compiled
        return self.default

    def key(self, ctx: RequestContext) -> str:
        if self.rule.key == "platform" and not ctx.principal.is_anonymous:
            # A platform id is self-declared, so it narrows an authenticated caller's key, never
            # replaces it; an anonymous caller is counted by address alone, whatever it declares
            # (else each fresh platform id would be a fresh quota).
            platform = ctx.platform_id or "-"
            if len(platform) > 64:
                platform = hashlib.sha256(platform.encode()).hexdigest()
            return f"platform:{platform}|{self._caller(ctx, 'client')}"
        return self._caller(ctx, self.rule.key)

    @staticmethod
    def _caller(ctx: RequestContext, kind: str) -> str:
        principal = ctx.principal
        if not principal.is_anonymous:
            if kind in ("client", "client_id") and principal.client_id:
                return f"client:{principal.client_id}"
            if kind in ("client", "subject") and principal.subject:
                return f"subject:{principal.subject}"
        return f"address:{ctx.client}"


class Limiter:
    def __init__(self, settings: RateLimits, counter: WindowCounter) -> None:
        self.settings = settings
        self._counter = counter
        self._rules = [CompiledRule(rule) for rule in settings.rules]
        self._store_down = False
        self._found: BoundedCache[tuple[str, str], tuple[CompiledRule, ...]] = \
            BoundedCache(_REMEMBERED)

    def _counting(self, path: str, method: str) -> tuple[CompiledRule, ...]:
        """The rules that count `method path` (remembered: paths repeat)."""
        key = (path, method)
        found = self._found.get(key)
        if found is None:
            found = tuple(rule for rule in self._rules if rule.applies(path, method))
            self._found.put(key, found)
        return found

    async def check(self, ctx: RequestContext) -> Decision:
        quotas: list[Quota] = []
        for compiled in self._counting(ctx.path, ctx.method):
            try:
                refused = await self._count(compiled, ctx, quotas)
            except StoreUnavailable as exc:
                decision = self._store_failed(compiled.rule, exc)
                if decision is not None:
                    return decision
                continue
            self._store_recovered()
            if refused is not None:
                ctx.rate_limit = quotas
                compiled.limited.inc()
                tracing.annotate({"aigw.ratelimit.rule": compiled.rule.name})
                return deny(429, "rate_limited", "Too many requests; retry later.",
                            (("retry-after", str(max(refused.reset, 1))),))
            compiled.allowed.inc()
        ctx.rate_limit = quotas or None
        return ALLOW

    async def _count(self, compiled: CompiledRule, ctx: RequestContext,
                     quotas: list[Quota]) -> Quota | None:
        """Hit each limit of the rule in turn; the first one refused stops the counting."""
        identity = (compiled.rule.name, compiled.key(ctx))
        for limit in compiled.limits_for(ctx.principal).items:
            count = await self._counter.hit(limit.item, *identity)
            quota = Quota(limit.policy, limit.amount, limit.window, count.remaining, count.reset)
            quotas.append(quota)
            if not count.allowed:
                return quota
        return None

    def _store_failed(self, rule: Rule, exc: StoreUnavailable) -> Decision | None:
        RATE_LIMIT_STORE_ERRORS.labels(rule.name).inc()
        RATE_LIMIT_DECISIONS.labels(rule.name, f"store_error_{rule.on_store_error}").inc()
        if not self._store_down:  # logged once per outage, counted every time
            self._store_down = True
            log.error("rate-limit store failed; rules act on their on_store_error",
                      extra={"fields": {"error": str(exc)}})
        if rule.on_store_error == "allow":
            return None
        return deny(503, "rate_limit_unavailable",
                    "Rate limits cannot be checked right now; retry later.",
                    (("retry-after", "1"),))

    def _store_recovered(self) -> None:
        if self._store_down:
            self._store_down = False
            log.info("rate-limit store recovered")


def _compile(name: str, limit: str, burst: str | None) -> _Limits:
    """The burst is counted first: a request it refuses never costs the longer window."""
    items = [(name, limits.parse(limit))]
    if burst is not None:
        items.insert(0, (f"{name}-burst", limits.parse(burst)))
    return _Limits(tuple(_Limit(policy, item, item.amount, item.get_expiry())
                         for policy, item in items))


def _tier_matches(tier: Tier, principal: Principal) -> bool:
    return ((tier.scope is None or tier.scope in principal.scopes)
            and (tier.client_id is None or tier.client_id == principal.client_id)
            and (tier.token_kind is None or tier.token_kind == principal.kind.value)
            and not principal.is_anonymous)
