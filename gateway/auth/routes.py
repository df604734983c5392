"""Which routes need which scopes: the longest matching path prefix wins.

Route rules are policy rules of kind `route` (gateway.policy.kinds): those of the policy files
and those still written under `auth.routes` in the config file (ids `config:auth.routes[i]`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.auth.config import Auth
from gateway.caching import BoundedCache
from gateway.model import Principal
from gateway.policy.kinds import ROUTE, RouteRule, config_route_rules
from gateway.policy.rules import Ask, Outcome, Rule, evaluate


@dataclass(frozen=True, slots=True)
class Access:
    public: bool
    scopes: frozenset[str] = frozenset()
    rule: str | None = None  # the deciding rule's id; None: auth.default_access


# Decisions remembered per (path, method): paths are the caller's, so the memory is bounded (the
# least recently used forgotten: a caller varying paths cannot push out everyone else's).
_REMEMBERED = 1024


class RouteTable:
    def __init__(self, auth: Auth, public_paths: frozenset[str] = frozenset(),
                 rules: Sequence[Rule] | None = None) -> None:
        if rules is None:
            rules = [RouteRule.model_validate(raw) for raw in config_route_rules(auth)]
        self._rules = [rule for rule in rules if isinstance(rule, RouteRule)]
        self._enforced = [rule for rule in self._rules if rule.mode == "enforce"]
        self._has_shadow = len(self._enforced) != len(self._rules)
        self._default_access = auth.default_access
        self._public_paths = public_paths  # discovery documents: always public
        self._decided: BoundedCache[tuple[str, str], Access] = BoundedCache(_REMEMBERED)
        # An ask's attributes, one mapping per method, shared by its asks and never changed.
        self._attributes: dict[str, Mapping[str, Any]] = {}

    def access(self, path: str, method: str) -> Access:
        """What `method path` needs (the rules depend on nothing else, so it is remembered)."""
        key = (path, method)
        found = self._decided.get(key)
        if found is None:
            found = self._access(path, method)
            self._decided.put(key, found)
        return found

    def _access(self, path: str, method: str) -> Access:
        if path in self._public_paths:
            return Access(public=True)
        ask = self.ask(path, method, Principal())
        chosen = [rule for rule in self._enforced if rule.selects(ask)]
        if not chosen:
            return Access(public=self._default_access == "public")
        rule = max(chosen, key=lambda r: r.specificity())  # the first of the longest
        return Access(rule.public, frozenset(rule.when.scopes), rule.id)

    def is_document(self, path: str) -> bool:
        """Discovery documents: public whatever the rules say, so no rule decides them."""
        return path in self._public_paths

    def ask(self, path: str, method: str, principal: Principal) -> Ask:
        attributes = self._attributes.get(method)
        if attributes is None:
            attributes = {"method": method, "default_access": self._default_access}
            if len(self._attributes) < _REMEMBERED:  # methods are the caller's too
                self._attributes[method] = attributes
        return Ask("route", path, principal, attributes)

    def shadow(self, path: str, method: str, principal: Principal) -> Outcome | None:
        """What the route rules would decide with the shadow ones enforced (None: no shadow)."""
        if not self._has_shadow or path in self._public_paths:
            return None
        ask = self.ask(path, method, principal)
        return evaluate(self._rules, ask, ROUTE.default_for(ask), most_specific=True)

    def scopes(self) -> set[str]:
        return {scope for rule in self._enforced for scope in rule.when.scopes}

