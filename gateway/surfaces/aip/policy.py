"""AIP decisions taken before any upstream call, in the spec's order: access, scope, then the
policy packs' constraints, then what the publisher can serve. Limits are the strictest of the
declaration and every pack."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from gateway.context import RequestContext
from gateway.model import ANONYMOUS
from gateway.policy.bundle import PolicyBundle
from gateway.policy.decisions import note
from gateway.policy.rules import Ask
from gateway.surfaces.aip.config import Aip
from gateway.surfaces.aip.policy_rules import AipLimit
from gateway.surfaces.aip.request import RetrieveRequest


@dataclass(frozen=True, slots=True)
class Denial:
    reason: str  # a canonical AIP denial reason
    message: str


@dataclass(frozen=True, slots=True)
class Limits:
    max_chunks: int
    max_tokens: int


def covers(editorial: str, intent: str) -> bool:
    """`finance` covers `finance` and `finance.markets`, never `finance2` or `financex`."""
    return intent == editorial or intent.startswith(editorial + ".")


def in_scope(domains: list[str], intent: str) -> bool:
    return any(covers(domain, intent) for domain in domains)


class AipPolicy:
    """Decides with the bundle's `aip_retrieve` and `aip_limit` rules (policy_rules.py)."""

    def __init__(self, bundle: PolicyBundle | None) -> None:
        self.bundle = bundle
        limits = bundle.of_kind("aip_limit") if bundle is not None else []
        self._limits = [rule for rule in limits if isinstance(rule, AipLimit)]

    def limits(self, declared_chunks: int, declared_tokens: int) -> Limits:
        chunks = [declared_chunks, *(r.max_chunks for r in self._limits if r.max_chunks)]
        tokens = [declared_tokens, *(r.max_tokens for r in self._limits if r.max_tokens)]
        return Limits(min(chunks), min(tokens))

    def decide(self, aip: Aip, request: RetrieveRequest, today: date,
               ctx: RequestContext | None = None) -> Denial | None:
        """The first denial that applies, or None when the request may be served."""
        return (_access(aip, today) or _scope(aip, request)
                or self._violation(request, ctx) or _unsupported(aip, request))

    def _violation(self, request: RetrieveRequest, ctx: RequestContext | None) -> Denial | None:
        if self.bundle is None:
            return None
        ask = Ask("aip_retrieve", "retrieve", ctx.principal if ctx else ANONYMOUS, {
            "platform": request.platform, "placement": request.placement,
            "uses": request.uses})
        outcome = self.bundle.decide(ask)
        note(ctx, "aip", ask, outcome, self.bundle.shadow(ask))
        if outcome.effect == "allow":
            return None
        rule = self.bundle.rule(outcome.rule) if outcome.rule else None
        return Denial("policy_violation", getattr(rule, "message", None)
                      or "This retrieval is not permitted by the publisher's policy.")


def _access(aip: Aip, today: date) -> Denial | None:
    access, sunset = aip.intent_access, aip.compliance.sunset
    if not access.enabled or access.state != "active":
        return Denial("access_disabled", "AI access to this publisher is not active.")
    if sunset is not None and today > sunset:
        return Denial("access_disabled", "This publisher's AIP declaration has expired.")
    return None


def _scope(aip: Aip, request: RetrieveRequest) -> Denial | None:
    # Every intent path the platform declares must lie inside the editorial domains.
    if all(in_scope(aip.editorial_domains, intent) for intent in request.intent_domains):
        return None
    return Denial("out_of_scope", "Requested intent is outside declared editorial domains.")


def _unsupported(aip: Aip, request: RetrieveRequest) -> Denial | None:
    supports = aip.retrieval.supports
    if request.mode == "full_article" and not supports.full_article:
        return Denial("unsupported", "Full articles are not offered; ask for chunks.")
    if request.mode not in ("chunks", "full_article") or not supports.chunks:
        return Denial("unsupported", "This retrieval mode is not offered.")
    if request.source is not None and request.source not in aip.sources:
        return Denial("unsupported", "No such source is offered.")
    if not request.query_text or not request.query_text.strip():
        return Denial("unsupported", "Retrieval needs runtime.query_text.")
    if pick_source(aip, request) is None:
        return Denial("unsupported", "No source offered covers this intent.")
    return None


def pick_source(aip: Aip, request: RetrieveRequest) -> str | None:
    """The source named by the request, else the first one whose domains cover the intent."""
    names = [request.source] if request.source is not None else list(aip.sources)
    for name in names:
        domains = aip.sources[name].domains or aip.editorial_domains
        if in_scope(domains, request.domain):
            return name
    return None
