"""`aigw policy lint`: what a reviewer should know beyond the schema (which loading checks,
with every collection or stream a rule names): rules that never decide, rules that disagree
on the same caller and resource, and scopes nothing grants."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.policy.bundle import PolicyBundle
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
            *_unknown_scopes(bundle, settings)]


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
                    if (allow.id, deny.id) in seen or bundle.kinds[ask.kind].most_specific:
                        continue
                    seen.add((allow.id, deny.id))
                    found.append(Finding("warning", deny.id, f"overlaps {allow.id} with the "
                                         f"opposite effect ({persona.label} on {ask.resource});"
                                         " deny overrides"))
    return found


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
