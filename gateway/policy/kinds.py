"""Rule kinds: what each kind of rule selects, its default, and where older forms come from.

The core declares `route`; each surface declares its own through `Surface.policy_rules()`
(see gateway.registry.rule_kinds). A kind may also read rules still written in the config file
(`from_config`, ids `config:...`) or in an older policy-file key (`legacy`), so existing files
keep working while teams move them into `rules:`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from gateway.model import Principal
from gateway.paths import matches_prefix, method_covered
from gateway.policy.rules import Ask, Effect, Rule

if TYPE_CHECKING:
    from gateway.auth.config import Auth
    from gateway.settings import Settings

RawRule = dict[str, Any]
Sample = tuple[str, dict[str, Any]]  # (resource, attributes) of a decision to try


@dataclass(frozen=True, slots=True)
class RuleKind:
    name: str
    surface: str
    model: type[Rule]
    summary: str  # one line for the README, lint and the report
    default: Effect | Callable[[Ask], Effect] = "deny"
    most_specific: bool = False
    from_config: Callable[[Settings], list[RawRule]] | None = None
    legacy: Callable[[dict[str, Any], str], list[RawRule]] | None = None
    # The resources a config offers for this kind (lint, report, diff); None: any string.
    resources: Callable[[Settings], list[str]] | None = None
    # The decisions worth trying for this kind (lint, report, diff): every resource and
    # attribute value the config and the rules name, and one they do not.
    samples: Callable[[Settings, list[Rule]], list[Sample]] | None = None
    # What a caller allowed by this kind gets to see (report, fixtures), from the same rules.
    projection: Callable[[Settings, Any, Ask], list[str]] | None = None
    # Attributes the gateway adds from its config (fixtures and explain need not spell them).
    context: Callable[[Settings, Ask], dict[str, Any]] | None = None
    # The surface a resource of this kind belongs to, where the kind is shared (reports).
    owner: Callable[[Settings, str], str | None] | None = None

    def surface_for(self, settings: Settings, resource: str) -> str:
        return (self.owner(settings, resource) if self.owner else None) or self.surface

    def with_context(self, settings: Settings, ask: Ask) -> Ask:
        if self.context is None:
            return ask
        attributes = {**self.context(settings, ask), **ask.attributes}
        return Ask(ask.kind, ask.resource, ask.principal, attributes)

    def default_for(self, ask: Ask) -> Effect:
        return self.default(ask) if callable(self.default) else self.default


class RouteRule(Rule):
    """Who may call paths under a prefix. Allow rules: those of the longest matching prefix
    are the path's allow-list (`public`, or a token with `when`). Deny rules: refuse the
    callers `when` matches, under their prefix, whatever any allow rule says."""

    kind: Literal["route"] = Field(
        description="`route`: who may call a path prefix (a matching deny wins; else the "
        "allow rules of the most specific prefix decide).",
    )
    path: str = Field(pattern=r"^/", description="Path prefix: the rule covers it and every "
                      "path under it.")
    methods: list[str] | None = Field(None, description="GET also covers HEAD.")
    public: bool = Field(False, description="Anonymous callers allowed (a token is still "
                                            "checked); else a token with `when.scopes`.")

    def selects(self, ask: Ask) -> bool:
        methods = [m.upper() for m in self.methods] if self.methods else None
        return matches_prefix(self.path, ask.resource) and method_covered(
            str(ask.attributes.get("method", "GET")), methods)

    def specificity(self) -> int:
        return len(self.path)

    def admits(self, principal: Principal) -> bool:
        if self.effect == "deny":  # refuses whom `when` names, anonymous callers included
            return self.when.admits(principal)
        if self.public:
            return True
        return not principal.is_anonymous and self.when.admits(principal)

    def why_not(self, principal: Principal) -> str:
        if self.effect == "allow" and principal.is_anonymous and not self.when.scopes:
            return "needs a token"
        return self.when.why_not(principal)


def _config_routes(settings: Settings) -> list[RawRule]:
    return config_route_rules(settings.auth) if settings.auth is not None else []


def config_route_rules(auth: Auth) -> list[RawRule]:
    """`auth.routes` of the config file as route rules."""
    return [{"id": f"config:auth.routes[{index}]", "kind": "route",
             "description": f"auth.routes in the config file: {rule.path}",
             "path": rule.path, "methods": rule.methods, "public": rule.public,
             "when": {"scopes": list(rule.scopes)}}
            for index, rule in enumerate(auth.routes)]


def _route_default(ask: Ask) -> Effect:
    """`auth.default_access`: public lets everyone in; authenticated, any token."""
    if ask.attributes.get("default_access") == "public":
        return "allow"
    return "deny" if ask.principal.is_anonymous else "allow"


@dataclass(frozen=True, slots=True)
class ServedRoute:
    """A path a surface serves under a config, as a template ("/agents/{id}/invoke"), with its
    methods (gateway.registry.served_routes)."""

    surface: str
    path: str
    methods: tuple[str, ...]


Served = Callable[["Settings"], Sequence[ServedRoute]]
_METHOD_ORDER = ("GET", "POST", "PUT", "PATCH", "DELETE")


def serves_under(template: str, prefix: str) -> bool:
    """Whether a route template serves some path under a rule's path prefix: segment by
    segment, a `{parameter}` matching any one."""
    want = [part for part in prefix.split("/") if part]
    have = [part for part in template.split("/") if part]
    return len(have) >= len(want) and all(
        found == wanted or found.startswith("{")
        for wanted, found in zip(want, have[:len(want)], strict=True))


def route_kind(served: Served | None = None) -> RuleKind:
    """The `route` kind; with `served` (the registry's), a rule naming no methods is tried
    with the methods the surfaces serve under its path (POST for an invoke path), and a path
    belongs to the one surface serving it (reports group by it); else GET and the gateway."""

    def under(settings: Settings, prefix: str) -> list[ServedRoute]:
        return [route for route in (served(settings) if served else ())
                if serves_under(route.path, prefix)]

    def samples(settings: Settings, rules: list[Rule]) -> list[Sample]:
        default = settings.auth.default_access if settings.auth else "public"
        found: list[Sample] = []
        for rule in rules:
            if isinstance(rule, RouteRule):
                methods = rule.methods or _in_order(
                    {m for route in under(settings, rule.path) for m in route.methods}) or ["GET"]
                found.extend((rule.path, {"method": method.upper(), "default_access": default})
                             for method in methods)
        return found

    def owner(settings: Settings, path: str) -> str | None:
        surfaces = {route.surface for route in under(settings, path)}
        return surfaces.pop() if len(surfaces) == 1 else None

    return RuleKind("route", "gateway", RouteRule,
                    "who may call a path: public, or a token with scopes (a matching deny wins; "
                    "else the longest prefix's allow rules)",
                    default=_route_default, most_specific=True, from_config=_config_routes,
                    samples=samples, owner=owner, context=lambda settings, ask: {
                        "default_access": settings.auth.default_access if settings.auth
                        else "public"})


def _in_order(methods: set[str]) -> list[str]:
    return sorted(methods, key=lambda m: (_METHOD_ORDER.index(m) if m in _METHOD_ORDER
                                          else len(_METHOD_ORDER), m))


ROUTE = route_kind()  # without the surfaces' routes: for deciding (gateway.auth.routes)
