"""`aigw policy lint`: what a reviewer should know beyond the schema (which loading checks,
with every collection or stream a rule names): rules that never decide, rules that disagree
on the same caller and resource, deny rules wider than their authors likely meant, and
scopes nothing grants."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.paths import matches_prefix
from gateway.policy.bundle import PolicyBundle
from gateway.policy.kinds import RouteRule
from gateway.policy.matrix import asks, deciding_rules, known_scopes, matching_rules, personas


@dataclass(frozen=True, slots=True)
class Finding:
    level: str  # error | warning
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.level}: {self.rule}: {self.message}"


def lint(bundle: PolicyBundle, settings: Any) -> list[Finding]:
    return [*_never_deciding(bundle, settings), *_overlaps(bundle, settings),
            *_wide_denies(bundle), *_unknown_scopes(bundle, settings)]


def _never_deciding(bundle: PolicyBundle, settings: Any) -> list[Finding]:
    """A rule that decides no sampled request is shadowed by earlier ones or unreachable."""
    counts = deciding_rules(bundle, settings)
    found = []
    for rule in bundle.rules:
        if counts.get(rule.id) or rule.id not in bundle.files:
            continue
        found.append(Finding("error", rule.id, "never decides: every request it selects is "
                             "decided by an earlier or more specific rule (shadowed), or it "
                             "selects nothing the config serves (unreachable)"))
    return found


def _overlaps(bundle: PolicyBundle, settings: Any) -> list[Finding]:
    """Two rules that both match one request with different effects (deny overrides)."""
    seen: set[tuple[str, str]] = set()
    found = []
    for persona in personas(bundle, known_scopes(settings)):
        for ask in asks(bundle, settings, persona):
            matching = matching_rules(bundle, ask)
            for allow in (r for r in matching if r.effect == "allow"):
                for deny in (r for r in matching if r.effect == "deny"):
                    if (allow.id, deny.id) in seen:
                        continue
                    seen.add((allow.id, deny.id))
                    found.append(Finding("warning", deny.id, f"overlaps {allow.id} with the "
                                         f"opposite effect ({persona.label} on {ask.resource});"
                                         " deny overrides"))
    return found


def _wide_denies(bundle: PolicyBundle) -> list[Finding]:
    """A route deny for everyone over a prefix that public routes live under: a matching deny
    wins over any allow, so those routes are closed too, which is rarely what was meant."""
    routes = [rule for rule in bundle.of_kind("route", shadow=True)
              if isinstance(rule, RouteRule)]
    found = []
    for deny in routes:
        if deny.effect != "deny" or deny.when.model_dump(exclude_defaults=True) or \
                deny.id not in bundle.files:
            continue
        under = [rule.id for rule in routes if rule.effect == "allow" and rule.public
                 and matches_prefix(deny.path, rule.path) and _methods_meet(deny, rule)]
        if under:
            found.append(Finding("warning", deny.id, f"denies everyone under {deny.path}, "
                                 f"where public rules live ({', '.join(under)}): a matching deny "
                                 "wins over any allow, so they are closed too; give it a `when` "
                                 "or a narrower path"))
    return found


def _methods_meet(one: RouteRule, other: RouteRule) -> bool:
    if one.methods is None or other.methods is None:
        return True
    return bool({m.upper() for m in one.methods} & {m.upper() for m in other.methods})


def _unknown_scopes(bundle: PolicyBundle, settings: Any) -> list[Finding]:
    granted = known_scopes(settings) | {s for r in bundle.of_kind("route", shadow=True)
                                         for s in r.when.scopes}
    found = []
    for rule in bundle.rules:
        missing = sorted(set(rule.when.scopes) - granted)
        if missing and rule.id in bundle.files:
            found.append(Finding("warning", rule.id, f"scope {', '.join(missing)} is required "
                                 "by no route and granted by no key, client or scope grant"))
    return found
