"""Which routes need which scopes: the longest matching path prefix wins."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.auth.config import Auth
from gateway.paths import matches_prefix, method_covered


@dataclass(frozen=True, slots=True)
class Access:
    public: bool
    scopes: frozenset[str] = frozenset()


class RouteTable:
    def __init__(self, auth: Auth, public_paths: frozenset[str] = frozenset()) -> None:
        self._rules = sorted(auth.routes, key=lambda rule: len(rule.path), reverse=True)
        self._default = Access(public=auth.default_access == "public")
        self._public_paths = public_paths  # discovery documents: always public

    def access(self, path: str, method: str) -> Access:
        if path in self._public_paths:
            return Access(public=True)
        for rule in self._rules:
            if matches_prefix(rule.path, path) and method_covered(method, rule.methods):
                return Access(rule.public, frozenset(rule.scopes))
        return self._default

    def scopes(self) -> set[str]:
        return {scope for rule in self._rules for scope in rule.scopes}
