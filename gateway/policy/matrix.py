"""The decision matrix: what the rules decide for each kind of caller on each resource.

Callers ("personas") are anonymous, a client with no scope, a client with each scope set a
rule or route names, one with every such scope, each client a rule names, and an owner with
every scope where a rule names token kinds. Resources and
attributes come from each kind's `samples`. Every cell is decided by the bundle itself, so the
report, `lint` and `diff` can never disagree with the gateway.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gateway.model import Principal, TokenKind
from gateway.policy.bundle import PolicyBundle
from gateway.policy.rules import Ask, Outcome, Rule

_HIDDEN = frozenset({"collection_visibility", "default_access"})  # context, not the question


@dataclass(frozen=True, slots=True)
class Persona:
    label: str
    principal: Principal


@dataclass(frozen=True, slots=True)
class Cell:
    persona: str
    surface: str
    kind: str
    resource: str
    detail: str
    effect: str
    rule: str | None
    visible: tuple[str, ...] = ()
    answer: int | None = None  # the HTTP status the gateway refuses a route with

    @property
    def row(self) -> tuple[str, str, str, str]:
        return (self.surface, self.kind, self.resource, self.detail)


def personas(bundle: PolicyBundle, extra_scopes: Iterable[str] = ()) -> list[Persona]:
    sets: dict[frozenset[str], None] = {}
    for rule in bundle.rules:
        if rule.when.scopes:
            sets[frozenset(rule.when.scopes)] = None
    every = frozenset({s for found in sets for s in found} | set(extra_scopes))
    found = [Persona("anonymous", Principal()),
             Persona("client", Principal("client", scopes=frozenset(), kind=TokenKind.CLIENT))]
    for scopes in sorted(sets, key=lambda s: (len(s), sorted(s))):
        found.append(Persona("client " + " ".join(sorted(scopes)),
                             Principal("client", scopes=scopes, kind=TokenKind.CLIENT)))
    if every and every not in sets:
        found.append(Persona("client (every scope)",
                             Principal("client", scopes=every, kind=TokenKind.CLIENT)))
    clients = sorted({c for rule in bundle.rules for c in rule.when.clients or ()})
    found.extend(Persona(f"client_id {c}", Principal(c, c, every, TokenKind.CLIENT))
                 for c in clients)
    if any(rule.when.kinds for rule in bundle.rules):
        found.append(Persona("owner (every scope)",
                             Principal("owner", None, every, TokenKind.OWNER)))
    return found


def asks(bundle: PolicyBundle, settings: Any, persona: Persona,
         sample_rules: Iterable[Rule] | None = None) -> list[Ask]:
    """Every decision worth trying for this caller, kind by kind, from the resources and
    values `sample_rules` (default: the bundle's) and the config name."""
    every = list(sample_rules) if sample_rules is not None else list(bundle.rules)
    found = []
    for kind in bundle.kinds.values():
        if kind.samples is None:
            continue
        rules = [rule for rule in every if rule.kind == kind.name]
        for resource, attributes in dict.fromkeys(
                (r, _frozen(a)) for r, a in kind.samples(settings, rules)):
            found.append(Ask(kind.name, resource, persona.principal, dict(attributes)))
    return found


def decide_cell(bundle: PolicyBundle, settings: Any, persona: Persona, ask: Ask) -> Cell:
    kind = bundle.kinds[ask.kind]
    outcome = bundle.decide(ask)
    visible: tuple[str, ...] = ()
    if kind.projection is not None and outcome.effect == "allow":
        visible = tuple(kind.projection(settings, bundle, ask))
    return Cell(persona.label, kind.surface_for(settings, ask.resource), ask.kind,
                ask.resource, detail(ask), outcome.effect, outcome.rule, visible,
                route_refusal(ask) if ask.kind == "route" and outcome.effect == "deny" else None)


def route_refusal(ask: Ask) -> int:
    """What a refused route answers (gateway.auth.authenticator): 401 to a caller without a
    token, which one may let in, else 403."""
    return 401 if ask.principal.is_anonymous else 403


def matrix(bundle: PolicyBundle, settings: Any, people: list[Persona] | None = None,
           sample_rules: Iterable[Rule] | None = None) -> list[Cell]:
    people = people if people is not None else personas(bundle, known_scopes(settings))
    return [decide_cell(bundle, settings, persona, ask)
            for persona in people for ask in asks(bundle, settings, persona, sample_rules)]


def deciding_rules(bundle: PolicyBundle, settings: Any) -> dict[str, int]:
    """How many cells each rule decides (shadow rules as if enforced)."""
    counts = {rule.id: 0 for rule in bundle.rules}
    for persona in personas(bundle, known_scopes(settings)):
        for ask in asks(bundle, settings, persona):
            for outcome in (bundle.decide(ask), bundle.shadow(ask)):
                if outcome is not None and outcome.rule in counts:
                    counts[outcome.rule] += 1
    return counts


def matching_rules(bundle: PolicyBundle, ask: Ask) -> list[Rule]:
    """The rules that select `ask` and admit its principal, in file order."""
    return [rule for rule in bundle.rules if rule.kind == ask.kind and rule.selects(ask)
            and rule.admits(ask.principal)]


def known_scopes(settings: Any) -> set[str]:
    """Scopes something can grant: route rules, API keys, scope grants, demo clients."""
    auth = getattr(settings, "auth", None)
    found: set[str] = set()
    if auth is not None:
        found.update(s for route in auth.routes for s in route.scopes)
        found.update(auth.scope_grants)
        if auth.api_keys is not None:
            found.update(s for key in auth.api_keys.keys for s in key.scopes)
    demo = getattr(settings, "demo", None)
    if demo is not None and demo.issuer is not None:
        found.update(s for client in demo.issuer.clients.values() for s in client.scopes)
    return found


def detail(ask: Ask) -> str:
    parts = []
    for key, value in ask.attributes.items():
        if key in _HIDDEN:
            continue
        if isinstance(value, tuple | list):
            value = ",".join(value) or "-"
        parts.append(f"{key}={value}")
    return " ".join(parts)


def outcome_line(outcome: Outcome) -> str:
    return f"{outcome.effect} by {outcome.rule or 'the default'} ({outcome.why})"


def _frozen(attributes: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v)
                        for k, v in attributes.items()))
