"""The one rule format of `policies/`, and how a decision is taken from rules.

Every rule has an id, a kind, a description, an owner, a mode (`enforce` or `shadow`), an
effect and a `when` (who it applies to). Its kind adds what it selects (a path, a collection,
a platform...). The semantics, stated once (docs/explanation/policy-model.md):

- The rules of the decision's kind that *select* the resource are consulted in file order
  (files by name); a rule *matches* a caller when it selects the resource and `when` holds.
- A matching `deny` decides: deny, whatever else selects the resource. A deny rule that does
  not match the caller does not decide for that caller.
- Else the `allow` rules decide: the resource's allow rules are its allow-list. A matching
  one allows; when allow rules select the resource but none matches, the caller is denied.
  Kinds marked `most_specific` (routes) take the allow-list of the most specific level only
  (the longest path), so a narrower path can open or close what a wider one says.
- When no allow rule selects the resource (and no deny matched), the kind's default applies.
- So deny rules only ever take away: adding one can never turn a decision into allow.
- `shadow` rules are evaluated the same way but only logged and counted; they change nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field

from gateway.model import Principal
from gateway.strict import Strict

Effect = Literal["allow", "deny"]
Mode = Literal["enforce", "shadow"]
RuleId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/#\[\]-]{0,127}$")]
KindName = Literal["anonymous", "owner", "client"]


class Who(Strict):
    """Who a rule applies to; every condition given must hold (none given: everyone)."""

    scopes: list[str] = Field([], description="Every one of these scopes; any means a token.")
    kinds: list[KindName] | None = Field(None, description="Token kinds (anonymous, owner, "
                                         "client).")
    clients: list[str] | None = Field(None, description="client_id values.")

    def admits(self, principal: Principal) -> bool:
        if self.scopes and (principal.is_anonymous or not set(self.scopes) <= principal.scopes):
            return False
        if self.kinds is not None and principal.kind.value not in self.kinds:
            return False
        return self.clients is None or principal.client_id in self.clients

    def why_not(self, principal: Principal) -> str:
        missing = sorted(set(self.scopes) - principal.scopes)
        if self.scopes and principal.is_anonymous:
            return "needs a token with " + ", ".join(self.scopes)
        if missing:
            return "lacks scope " + ", ".join(missing)
        if self.kinds is not None and principal.kind.value not in self.kinds:
            return f"token kind {principal.kind.value} is not {', '.join(self.kinds)}"
        return "client is not listed"


class Rule(Strict):
    """Fields every rule kind shares."""

    id: RuleId = Field(description="Unique across the policies folder; decisions name it.")
    kind: str
    description: str = Field(min_length=1, description="What the rule is for, for reviewers.")
    owner: str | None = Field(None, description="Who answers for it (team or person).")
    mode: Mode = Field("enforce", description="shadow: evaluated, logged, counted; no effect.")
    effect: Effect = Field(
        "allow",
        description="What the rule decides when it matches: allow or deny (a matching deny "
        "overrides).",
    )
    when: Who = Field(
        Who(),
        description="Who the rule applies to: callers with all of `scopes`, of one of `kinds`, or "
        "one of `clients`; empty: everyone.",
    )

    def admits(self, principal: Principal) -> bool:
        return self.when.admits(principal)

    def why_not(self, principal: Principal) -> str:
        return self.when.why_not(principal)

    def selects(self, ask: Ask) -> bool:
        """Whether this rule is about the asked resource (kinds narrow it)."""
        return True

    def specificity(self) -> int:
        return 0


@dataclass(frozen=True, slots=True)
class Ask:
    """A decision to take: of `kind`, about `resource`, for `principal`."""

    kind: str
    resource: str
    principal: Principal
    attributes: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Consulted:
    rule: str
    mode: str
    matched: bool
    why: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the rules decided; `rule` None means the kind's default decided."""

    effect: Effect
    rule: str | None
    mode: Mode
    why: str
    consulted: tuple[Consulted, ...] = ()


_DEFAULT_WHY = "no rule selects it: the default"


def evaluate(rules: Sequence[Rule], ask: Ask, default: Effect, *,
             most_specific: bool = False) -> Outcome:
    """The decision of `rules` (already filtered to one mode) on `ask`."""
    if not rules:  # the common case of a kind no policy file uses, once per field or record
        return Outcome(default, None, "enforce", _DEFAULT_WHY)
    selecting = [rule for rule in rules if rule.kind == ask.kind and rule.selects(ask)]
    consulted = tuple(_consult(rule, ask.principal) for rule in selecting)
    for rule, seen in zip(selecting, consulted, strict=True):
        if rule.effect == "deny" and seen.matched:
            return Outcome("deny", rule.id, rule.mode, rule.description, consulted)
    allow_list = _allow_list(selecting, consulted, most_specific)
    for rule, seen in allow_list:
        if seen.matched:
            return Outcome("allow", rule.id, rule.mode, rule.description, consulted)
    if allow_list:
        rule, seen = allow_list[0]
        return Outcome("deny", rule.id, rule.mode,
                       f"allow-listed, and the caller {seen.why}", consulted)
    return Outcome(default, None, "enforce", _DEFAULT_WHY, consulted)


def _allow_list(selecting: list[Rule], consulted: tuple[Consulted, ...],
                most_specific: bool) -> list[tuple[Rule, Consulted]]:
    """The allow rules that decide who is allowed: all of them, or the most specific level's."""
    allows = [(rule, seen) for rule, seen in zip(selecting, consulted, strict=True)
              if rule.effect == "allow"]
    if most_specific and allows:
        top = max(rule.specificity() for rule, _ in allows)
        allows = [(rule, seen) for rule, seen in allows if rule.specificity() == top]
    return allows


def _consult(rule: Rule, principal: Principal) -> Consulted:
    matched = rule.admits(principal)
    why = "matches" if matched else rule.why_not(principal)
    return Consulted(rule.id, rule.mode, matched, why)
