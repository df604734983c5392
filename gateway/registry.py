"""The installed spec surfaces, found through the `aigw.surfaces` entry-point group, and the
models and rule kinds they add up to.

Adding a surface means adding a package and one entry point; nothing in the core changes.
The config model is the core `Settings` plus one optional section per surface. The rule kinds
are the core's (resource kinds over every surface's declared resources among them), then each
surface's; the policy-pack model is the core `PolicyPack` with `rules` of every one of them,
plus each surface's own older section. Capabilities, config problems and warnings are every
surface's, in registry order; config problems also refuse a resource name two surfaces cannot
share (a name several surfaces serve is one resource, which every rule naming it decides on).
"""

from __future__ import annotations

import functools
from importlib.metadata import entry_points
from types import GenericAlias
from typing import Annotated, Any, Union

from pydantic import Field, TypeAdapter, create_model

from gateway.capability import Capability
from gateway.policy.config import PolicyPack
from gateway.policy.kinds import RuleKind, ServedRoute, route_kind
from gateway.policy.resources import ResourceSpec, resource_kinds, shared_name_problems
from gateway.settings import Settings
from gateway.surface import Problem, Surface

GROUP = "aigw.surfaces"


@functools.cache
def surfaces() -> tuple[Surface, ...]:
    """Every installed surface, ordered by entry-point name (the order of their capabilities)."""
    found = []
    for entry in sorted(entry_points(group=GROUP), key=lambda entry: entry.name):
        surface = entry.load()
        if not isinstance(surface, Surface):
            raise TypeError(f"entry point {entry.name} ({entry.value}) is not a Surface")
        found.append(surface)
    return tuple(found)


@functools.cache
def settings_model() -> type[Settings]:
    """`Settings` with each surface's config section as an optional field."""
    sections: dict[str, Any] = {
        surface.config_key: (surface.config_model | None,
                             Field(None, description=surface.config_description or None))
        for surface in surfaces() if surface.config_key and surface.config_model
    }
    return create_model("Settings", __base__=Settings, **sections)


def capabilities(settings: Settings) -> tuple[Capability, ...]:
    return tuple(c for surface in surfaces() for c in surface.capabilities(settings))


def config_problems(settings: Settings) -> list[Problem]:
    found = capabilities(settings)
    problems = [problem for surface in surfaces() for problem in surface.problems(settings, found)]
    return problems + shared_name_problems(policy_resources(settings))


def policy_resources(settings: Settings) -> dict[str, list[ResourceSpec]]:
    """The resources every surface serves records from, by name: each surface's declaration
    of it, in surface order (a name several surfaces serve is one resource; `config_problems`
    refuses those that cannot be: gateway.policy.resources.shared_name_problems)."""
    found: dict[str, list[ResourceSpec]] = {}
    for surface in surfaces():
        for name, spec in surface.policy_resources(settings).items():
            found.setdefault(name, []).append(spec)
    return found


_HTTP_METHODS = ("get", "post", "put", "patch", "delete")  # HEAD goes with GET
_served: list[tuple[Settings, tuple[ServedRoute, ...]]] = []  # the last settings' answer


def served_routes(settings: Settings) -> tuple[ServedRoute, ...]:
    """The paths and methods every surface serves under `settings`, from their OpenAPI
    fragments (which tests hold to the routes they mount): the tool tries a route rule with
    the methods served under its path. The last answer is kept, as a report asks per cell."""
    if _served and _served[0][0] is settings:
        return _served[0][1]
    found = tuple(
        ServedRoute(surface.name, path, tuple(m.upper() for m in _HTTP_METHODS if m in ops))
        for surface in surfaces()
        for path, ops in (surface.openapi(settings).get("paths") or {}).items())
    _served[:] = [(settings, found)]
    return found


def config_notes(settings: Settings) -> list[Problem]:
    """Every surface's explanations of the choices the config makes (`Surface.notes`)."""
    return [note for surface in surfaces() for note in surface.notes(settings)]


def config_warnings(settings: Settings) -> list[Problem]:
    found = capabilities(settings)
    return [warning for surface in surfaces() for warning in surface.warnings(settings, found)]


@functools.cache
def rule_kinds() -> dict[str, RuleKind]:
    """Every rule kind: the core's, then each surface's (`Surface.policy_rules`)."""
    kinds = {kind.name: kind for kind in (route_kind(served_routes),
                                          *resource_kinds(policy_resources))}
    for surface in surfaces():
        for kind in surface.policy_rules():
            if kind.name in kinds:
                raise TypeError(f"rule kind {kind.name} is declared twice")
            kinds[kind.name] = kind
    return kinds


def _rule_union() -> Any:
    models = tuple(kind.model for kind in rule_kinds().values())
    if len(models) == 1:
        return models[0]
    return Annotated[Union[models], Field(discriminator="kind")]  # noqa: UP007


@functools.cache
def rule_model() -> TypeAdapter[Any]:
    """Validates one rule of any kind."""
    return TypeAdapter(_rule_union())


@functools.cache
def policy_pack_model() -> type[PolicyPack]:
    """`PolicyPack` whose `rules` are those of every installed kind, with each surface's own
    section (`Surface.policy_key`) as an optional field."""
    rules: Any = GenericAlias(list, (_rule_union(),))  # list[...] of kinds known at run time
    sections: dict[str, Any] = {
        surface.policy_key: (surface.policy_model | None,
                             Field(None, description=surface.policy_description or None))
        for surface in surfaces() if surface.policy_key and surface.policy_model
    }
    return create_model("PolicyPack", __base__=PolicyPack,
                        rules=(rules, Field([], description=PolicyPack.model_fields[
                            "rules"].description)), **sections)
