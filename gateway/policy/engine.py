"""The policy stage: who may read which collection and which of its records, and whether
stored vectors may leave.

Every surface asks here, so a rule holds identically everywhere. The decision on optional
result parts is taken before the upstream is asked (`before`), and whatever it refused is
removed from the upstream's answer afterwards (`after`) even if the upstream sent it anyway.
A surface that keeps and serves records itself (outside a retrieval) asks which record
visibilities its caller sees (`record_visibilities`) and judges each record by the same
`visibility_of` (gateway.policy.resources): a `record_visibility` rule names a resource, and
holds on every surface serving it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final, Protocol

from gateway.caching import BoundedCache
from gateway.context import RequestContext
from gateway.model import Decision, Hit, Principal, Query, deny
from gateway.policy.bundle import PolicyBundle
from gateway.policy.decisions import Again, note, note_again
from gateway.policy.resources import read_ask, visibility_of
from gateway.policy.rules import Ask, Rule

# Result parts no collection can produce: asking for them follows `Query.strict_fields`.
UNAVAILABLE_PARTS = frozenset({"semantic_payload"})
# What `before` allowed, remembered for this many (caller, query) pairs, least recently used out.
BEFORE_KEPT: Final = 1024


class Resource(Protocol):
    """A collection or stream a surface serves, as the policy engine sees it."""

    @property
    def public(self) -> bool: ...

    @property
    def scopes(self) -> frozenset[str]: ...

    @property
    def returns_vectors(self) -> bool: ...

    @property
    def visibility(self) -> str:
        """The resource's own visibility, which its records have unless they carry one."""

    @property
    def records_carry_visibility(self) -> bool:
        """Whether records must carry their own visibility (a record without one is seen by
        nobody); else a record without one has the resource's. Who sees which visibility is
        the `record_visibility` rules' to say."""


class PolicyEngine:
    def __init__(self, collections: Mapping[str, Resource], bundle: PolicyBundle) -> None:
        self.collections = collections
        self.bundle = bundle
        # The visibilities asked about for each resource name and own visibility (fixed by
        # the bundle), found once.
        self._asked: dict[tuple[str, str], tuple[str, ...]] = {}
        # What `before` allowed: key -> (the caller, parts refused, visibilities, decisions).
        self._before: BoundedCache[tuple[Any, ...], tuple[Principal, frozenset[str],
                                                          frozenset[str] | None, Again]] = \
            BoundedCache(BEFORE_KEPT)

    def can_read(self, principal: Principal, name: str | None,
                 ctx: RequestContext | None = None) -> bool:
        """Whether a collection is readable (`collection_read` rules); unknown ones never are."""
        if (name or "") not in self.collections:
            return False
        return self._decide(ctx, read_ask(principal, name or "")) == "allow"

    def readable(self, ctx: RequestContext, names: Iterable[str]) -> list[str]:
        """Those of the named resources the caller may read, each decision noted."""
        return [name for name in names if self.can_read(ctx.principal, name, ctx)]

    def visibilities(self, principal: Principal, name: str, ctx: RequestContext | None = None,
                     resource: Resource | None = None) -> frozenset[str]:
        """The record visibilities this caller may see in a resource it can read: `resource`
        when given (as the surface serving `name` has it), else the one named."""
        resource = resource if resource is not None else self.collections[name]
        seen = set()
        for value in self._asked_visibilities(name, resource):
            ask = Ask("record_visibility", name, principal,
                      {"visibility": value, "collection_visibility": resource.visibility})
            if self._decide(ctx, ask) == "allow":
                seen.add(value)
        return frozenset(seen)

    def record_visibilities(self, ctx: RequestContext, name: str,
                            resource: Resource) -> frozenset[str]:
        """The record visibilities the caller may see in `resource`, which a surface serves
        as `name` from records it keeps (they never pass `after`: it judges each by
        `visibility_of`), each decision noted."""
        return self.visibilities(ctx.principal, name, ctx, resource)

    def _asked_visibilities(self, name: str, resource: Resource) -> tuple[str, ...]:
        """Every visibility a record of the resource may have that a rule decides on."""
        key = (name, resource.visibility)
        found = self._asked.get(key)
        if found is None:
            named = _named_visibilities(self.bundle.of_kind("record_visibility", shadow=True),
                                        name)
            found = self._asked[key] = tuple(sorted({"public", resource.visibility} | named))
        return found

    def vectors_allowed(self, principal: Principal, name: str,
                        ctx: RequestContext | None = None) -> bool:
        """Only an explicit rule allows vectors out; access-controlled collections included."""
        return self.can_read(principal, name) and \
            self._decide(ctx, Ask("vector_return", name, principal)) == "allow"

    def vectors_possible(self, names: Iterable[str] | None = None) -> bool:
        """Whether any caller could ever get vectors back (for discovery's capabilities)."""
        with_vectors = {n for n, c in self.collections.items() if c.returns_vectors
                        and (names is None or n in names)}
        return any(getattr(rule, "collection", None) in with_vectors and rule.effect == "allow"
                   for rule in self.bundle.of_kind("vector_return"))

    def permitted(self, ctx: RequestContext, asks: Sequence[Ask],
                  removes: Callable[[Ask], tuple[str, ...]] | None = None) -> list[bool]:
        """Whether the rules allow each ask (a surface's own, outside retrieval), each
        decision noted; a denied one with `removes(ask)`, what it takes out of the answer."""
        found = []
        for ask in asks:
            outcome = self.bundle.decide(ask)
            allowed = outcome.effect == "allow"
            taken = removes(ask) if removes is not None and not allowed else ()
            note(ctx, ctx.surface, ask, outcome, self.bundle.shadow(ask), taken)
            found.append(allowed)
        return found

    def before(self, ctx: RequestContext, query: Query) -> Query | Decision:
        """The query narrowed to what the caller may have, or the denial. What it allows is
        remembered per caller (by identity, as `PolicyBundle` does) and what decides it (the
        surface, the query's asks, resource and asked-for parts): the same caller asking the
        same again has the same decisions noted again (`note_again`) without taking them."""
        key = _before_key(ctx, query)
        if key is not None:
            found = self._before.get(key)
            if found is not None and found[0] is ctx.principal:
                _, refused, visible, again = found
                note_again(ctx, again)
                if visible is None:
                    return query
                return query.narrowed(query.fields - refused, visible,
                                      {**query.filters, "visibility": sorted(visible)})
        start = len(ctx.decisions)
        decided = self._decide_before(ctx, query)
        if key is not None and isinstance(decided, Query):
            self._before.put(key, (ctx.principal, query.fields - decided.fields,
                                   decided.visible_records if query.collection is not None
                                   else None, Again.of(ctx.decisions[start:])))
        return decided

    def _decide_before(self, ctx: RequestContext, query: Query) -> Query | Decision:
        for ask in query.asks:
            denial = self._refusal(ctx, ask)
            if denial is not None:
                return denial
        if query.collection is None:  # nothing stored is asked for: the asks were all
            return query
        if not self.can_read(ctx.principal, query.collection, ctx):
            # Unknown and forbidden look alike, so a refusal says nothing about existence.
            return deny(404, "not_found", "No such collection.",
                        details={"collection": query.collection})
        refused = set(query.fields & UNAVAILABLE_PARTS)
        if "vectors" in query.fields and not self.vectors_allowed(
                ctx.principal, query.collection or "", ctx):
            refused.add("vectors")
        if refused and query.strict_fields:
            return deny(400, "unsupported_return_field",
                        "A requested return field is not available to this caller.",
                        details={"fields": sorted(refused)})
        if refused and ctx.decisions:
            ctx.decisions[-1] = replace(ctx.decisions[-1], removed=tuple(sorted(refused)))
        # Decided before the upstream call, so an upstream that can filter is told (and the
        # hits are still checked in `after`).
        visible = self.visibilities(ctx.principal, query.collection or "", ctx)
        return query.narrowed(query.fields - refused, visible,
                              {**query.filters, "visibility": sorted(visible)})

    def after(self, ctx: RequestContext, query: Query, hits: list[Hit]) -> list[Hit]:
        """Strip refused vectors; remove every record the caller may not see (§12)."""
        if "vectors" not in query.fields:
            for hit in hits:
                hit.vector = None
        resource = self.collections.get(query.collection or "")
        if resource is None:
            return []
        visible = query.visible_records  # decided once, before the upstream call
        if visible is None:
            visible = self.visibilities(ctx.principal, query.collection or "")
        return [hit for hit in hits if record_visibility(resource, hit) in visible]

    def _refusal(self, ctx: RequestContext, ask: Ask) -> Decision | None:
        """A denial of one of the query's own asks, with the deciding rule's message."""
        outcome = self.bundle.decide(ask)
        note(ctx, ctx.surface, ask, outcome, self.bundle.shadow(ask))
        if outcome.effect == "allow":
            return None
        rule = self.bundle.rule(outcome.rule) if outcome.rule else None
        return deny(403, "policy_violation", getattr(rule, "message", None)
                    or "This request is not permitted by policy.",
                    details={"kind": ask.kind})

    def _decide(self, ctx: RequestContext | None, ask: Ask) -> str:
        outcome = self.bundle.decide(ask)
        if ctx is not None:
            note(ctx, ctx.surface, ask, outcome, self.bundle.shadow(ask))
        return outcome.effect


def _before_key(ctx: RequestContext, query: Query) -> tuple[Any, ...] | None:
    """What `before` decides on, or None when it cannot be a key (an ask for another
    principal than the caller, an unhashable attribute)."""
    principal = ctx.principal
    if any(ask.principal is not principal for ask in query.asks):
        return None
    asks = tuple((ask.kind, ask.resource, tuple(ask.attributes.items())) for ask in query.asks)
    key = (id(principal), ctx.surface, query.collection, query.fields, query.strict_fields, asks)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def record_visibility(resource: Resource, hit: Hit) -> str | None:
    """The hit's visibility (`visibility_of` its `metadata.visibility`)."""
    return visibility_of(resource, hit.metadata.get("visibility"))


def _named_visibilities(rules: Iterable[Rule], collection: str) -> set[str]:
    """The visibilities `record_visibility` rules name for a resource (gateway.policy.resources;
    read by name, as a rule of any kind may be handed in)."""
    found = set()
    for rule in rules:
        visibility = getattr(rule, "visibility", None)
        if getattr(rule, "collection", None) == collection and isinstance(visibility, str):
            found.add(visibility)
    return found
