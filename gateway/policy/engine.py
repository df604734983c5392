"""The policy stage: who may read which collection, and whether stored vectors may leave.

Every surface asks here, so a rule holds identically everywhere. The decision on optional
result parts is taken before the upstream is asked (`before`), and whatever it refused is
removed from the upstream's answer afterwards (`after`) even if the upstream sent it anyway.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from gateway.context import RequestContext
from gateway.model import Decision, Hit, Principal, Query, deny
from gateway.policy.aip import AipPolicy
from gateway.policy.config import PolicyPack, VectorReturnRule
from gateway.surfaces.retrieval import CompiledCollection

# Result parts no collection can produce: asking for them follows `denied_return`.
UNAVAILABLE_PARTS = frozenset({"semantic_payload"})


class PolicyEngine:
    def __init__(
        self,
        collections: dict[str, CompiledCollection],
        packs: list[PolicyPack],
        denied_return: Literal["ignore", "reject"] = "ignore",
    ) -> None:
        self.collections = collections
        self._vector_rules = [rule for pack in packs for rule in pack.vector_return]
        self._denied_return = denied_return
        self.aip = AipPolicy(packs)

    def can_read(self, principal: Principal, name: str | None) -> bool:
        collection = self.collections.get(name or "")
        if collection is None:
            return False
        if collection.public:
            return True
        return not principal.is_anonymous and set(collection.settings.scopes) <= principal.scopes

    def readable(self, principal: Principal) -> list[CompiledCollection]:
        return [c for name, c in self.collections.items() if self.can_read(principal, name)]

    def vectors_allowed(self, principal: Principal, name: str) -> bool:
        """Only an explicit rule allows vectors out; access-controlled collections included."""
        return self.can_read(principal, name) and any(
            _rule_admits(rule, principal) for rule in self._vector_rules
            if rule.collection == name)

    def vectors_possible(self) -> bool:
        """Whether any caller could ever get vectors back (for discovery's capabilities)."""
        with_vectors = {n for n, c in self.collections.items() if c.vector_search is not None}
        return any(rule.collection in with_vectors for rule in self._vector_rules)

    def before(self, ctx: RequestContext, query: Query) -> Query | Decision:
        if not self.can_read(ctx.principal, query.collection):
            # Unknown and forbidden look alike, so a refusal says nothing about existence.
            return deny(404, "not_found", "No such collection.",
                        details={"collection": query.collection})
        refused = set(query.fields & UNAVAILABLE_PARTS)
        if "vectors" in query.fields and not self.vectors_allowed(ctx.principal,
                                                                  query.collection or ""):
            refused.add("vectors")
        if refused and self._denied_return == "reject":
            return deny(400, "unsupported_return_field",
                        "A requested return field is not available to this caller.",
                        details={"fields": sorted(refused)})
        return replace(query, fields=query.fields - refused)

    def after(self, ctx: RequestContext, query: Query, hits: list[Hit]) -> list[Hit]:
        if "vectors" not in query.fields:
            for hit in hits:
                hit.vector = None
        return hits


def _rule_admits(rule: VectorReturnRule, principal: Principal) -> bool:
    return set(rule.scopes) <= principal.scopes and (not rule.scopes
                                                     or not principal.is_anonymous)
