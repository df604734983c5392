"""Route access, decided by the policy engine: who may call `method path`.

Route rules are policy rules of kind `route` (gateway.policy.kinds): those of the policy files
and those still written under `auth.routes` in the config file (ids `config:auth.routes[i]`).
This module decides nothing itself: every decision is the bundle's (`PolicyBundle.decide`), the
code `aigw policy test`, `explain`, `report` and `diff` run, for the principal the gateway
authenticated. What it adds is what the edge needs around a decision: the discovery documents
no rule governs, and what a route requires, for documents that describe it (OpenAPI, cards).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.auth.config import Auth
from gateway.model import ANONYMOUS, Principal
from gateway.policy.bundle import PolicyBundle
from gateway.policy.kinds import ROUTE, RouteRule, config_route_rules
from gateway.policy.rules import Ask, Outcome

# Ask attributes are one mapping per method, shared and never changed; methods are the
# caller's, so at most this many are kept.
_METHODS_KEPT = 64


@dataclass(frozen=True, slots=True)
class Access:
    """What a route requires, as documents describe it: public, else a token with `scopes`."""

    public: bool
    scopes: frozenset[str] = frozenset()
    rule: str | None = None  # the rule that says so; None: auth.default_access


class RouteTable:
    """One config generation's route decisions, taken by its policy bundle."""

    def __init__(self, auth: Auth, public_paths: frozenset[str] = frozenset(),
                 bundle: PolicyBundle | None = None) -> None:
        self.bundle = bundle if bundle is not None else config_bundle(auth)
        self._default_access = auth.default_access
        self._public_paths = public_paths  # discovery documents: always public
        self._attributes: dict[str, Mapping[str, Any]] = {}

    def is_document(self, path: str) -> bool:
        """Discovery documents: public whatever the rules say, so no rule decides them."""
        return path in self._public_paths

    def ask(self, path: str, method: str, principal: Principal) -> Ask:
        attributes = self._attributes.get(method)
        if attributes is None:
            attributes = {"method": method, "default_access": self._default_access}
            if len(self._attributes) < _METHODS_KEPT:
                self._attributes[method] = attributes
        return Ask("route", path, principal, attributes)

    def decide(self, path: str, method: str, principal: Principal) -> Outcome:
        return self.bundle.decide(self.ask(path, method, principal))

    def shadow(self, path: str, method: str, principal: Principal) -> Outcome | None:
        """What the route rules would decide with the shadow ones enforced (None: no shadow)."""
        if path in self._public_paths:
            return None
        return self.bundle.shadow(self.ask(path, method, principal))

    def admits(self, principal: Principal, path: str, method: str) -> bool:
        return self.is_document(path) or self.decide(path, method, principal).effect == "allow"

    def required_scopes(self, outcome: Outcome) -> frozenset[str]:
        """The scopes of the allow-listing rule that refused a caller (for the challenge)."""
        rule = self.bundle.rule(outcome.rule) if outcome.rule else None
        if isinstance(rule, RouteRule) and rule.effect == "allow":
            return frozenset(rule.when.scopes)
        return frozenset()

    def access(self, path: str, method: str) -> Access:
        """What `method path` requires, read from the engine's decision for an anonymous
        caller: public when it is allowed, else the scopes of the rule that refused it."""
        if path in self._public_paths:
            return Access(public=True)
        outcome = self.decide(path, method, ANONYMOUS)
        return Access(outcome.effect == "allow", self.required_scopes(outcome), outcome.rule)

    def scopes(self) -> set[str]:
        """Every scope an enforced route rule asks for (scopes_supported, cards)."""
        return {scope for rule in self.bundle.of_kind("route") for scope in rule.when.scopes}


def config_bundle(auth: Auth) -> PolicyBundle:
    """The route rules of `auth.routes` alone, for a gateway run without policy files."""
    rules = tuple(RouteRule.model_validate(raw) for raw in config_route_rules(auth))
    return PolicyBundle(rules, {"route": ROUTE})
