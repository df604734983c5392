"""AIP's own decisions, in the spec's order around the policy engine's: access and scope
(`access_refusal`, `scope_refusal`, as the request is parsed), then the engine decides the
policy packs' `aip_retrieve` rules and who reads the source, then what the publisher can serve
(`unsupported`, before any upstream call). Limits are the strictest of the declaration and
every pack."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from gateway.policy.bundle import PolicyBundle
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
    """The static limits of the bundle's `aip_limit` rules (policy_rules.py), read at load."""

    def __init__(self, bundle: PolicyBundle | None) -> None:
        limits = bundle.of_kind("aip_limit") if bundle is not None else []
        self._limits = [rule for rule in limits if isinstance(rule, AipLimit)]

    def limits(self, declared_chunks: int, declared_tokens: int) -> Limits:
        chunks = [declared_chunks, *(r.max_chunks for r in self._limits if r.max_chunks)]
        tokens = [declared_tokens, *(r.max_tokens for r in self._limits if r.max_tokens)]
        return Limits(min(chunks), min(tokens))


def access_refusal(aip: Aip, today: date) -> Denial | None:
    access, sunset = aip.intent_access, aip.compliance.sunset
    if not access.enabled or access.state != "active":
        return Denial("access_disabled", "AI access to this publisher is not active.")
    if sunset is not None and today > sunset:
        return Denial("access_disabled", "This publisher's AIP declaration has expired.")
    return None


def scope_refusal(aip: Aip, request: RetrieveRequest) -> Denial | None:
    # Every intent path the platform declares must lie inside the editorial domains.
    if all(in_scope(aip.editorial_domains, intent) for intent in request.intent_domains):
        return None
    return Denial("out_of_scope", "Requested intent is outside declared editorial domains.")


def unsupported(aip: Aip, request: RetrieveRequest, picked: str | None) -> Denial | None:
    """Why the publisher cannot serve the request, if it cannot; `picked`: what `pick_source`
    gives for it."""
    supports = aip.retrieval.supports
    if request.mode == "full_article" and not supports.full_article:
        return Denial("unsupported", "Full articles are not offered; ask for chunks.")
    if request.mode not in ("chunks", "full_article") or not supports.chunks:
        return Denial("unsupported", "This retrieval mode is not offered.")
    if request.source is not None and request.source not in aip.sources:
        return Denial("unsupported", "No such source is offered.")
    if not request.query_text or not request.query_text.strip():
        return Denial("unsupported", "Retrieval needs runtime.query_text.")
    if picked is None:
        return Denial("unsupported", "No source offered covers this intent.")
    return None


def pick_source(aip: Aip, request: RetrieveRequest) -> str | None:
    """The source named by the request, else the first one whose domains cover the intent;
    None when no source offered does."""
    names = [request.source] if request.source is not None else list(aip.sources)
    for name in (name for name in names if name in aip.sources):
        domains = aip.sources[name].domains or aip.editorial_domains
        if in_scope(domains, request.domain):
            return name
    return None
