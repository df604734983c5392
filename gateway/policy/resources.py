"""Rule kinds about stored resources, whichever surface serves them: who reads a resource
(`collection_read`), who gets its stored vectors back (`vector_return`), and who sees its records
of each visibility (`record_visibility`).

A resource is what a surface serves records from (a collection, a source, a stream...).
Surfaces declare theirs, as their config describes them, through `Surface.policy_resources`;
the config's own visibility and scopes become rules of these kinds (ids `config:<surface
section>...`), so a rule in `policies/` and a line in the config file are one and the same kind
of decision.

A rule names a resource, not a surface: where several surfaces serve the same name (a
collection of one and a stream of another, say), they serve one resource, and a rule naming it
holds on each (`visibility_of` judges a record alike everywhere). So they must agree on its
`visibility`, and at most one of them may leave who reads it to `collection_read` rules: the
config's reads are allow rules, and another surface's would open this one's
(`shared_name_problems`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from gateway.policy.kinds import RawRule, RuleKind, Sample
from gateway.policy.rules import Ask, Effect, Rule
from gateway.strict import Strict

if TYPE_CHECKING:
    from gateway.model import Principal
    from gateway.policy.config import PolicyPack
    from gateway.policy.engine import Resource
    from gateway.settings import Settings

RESOURCE_KINDS = ("collection_read", "vector_return", "record_visibility")


class RecordScopes(Strict):
    """Records carry their own visibility (mapped as `metadata.visibility`); this says who
    sees which. `public` records, and those of the resource's own visibility, need no scope
    beyond the resource's; a value named nowhere, or a record without one, is seen by nobody."""

    scopes: dict[str, list[str]] = Field(
        {}, description="Scopes a caller needs to see a record of each visibility.")


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """One resource as its config describes it, for rules, lint, the report and fixtures."""

    where: str  # its dotted path in the config file, e.g. `sources.help`
    surface: str  # the surface that serves it
    visibility: str = "public"
    scopes: tuple[str, ...] = ()
    record_scopes: Mapping[str, tuple[str, ...]] | None = None
    parts: tuple[str, ...] = ()  # what a reader gets in each result (report, fixtures)
    vectors: bool = False  # whether it can return stored vectors at all
    # Whether `collection_read` and `vector_return` decide who reads it (and `visibility` /
    # `scopes` are a read rule); False: the surface's own kinds do (a token's grant, say), and
    # of these kinds only `record_visibility` applies.
    read_rules: bool = True
    extra: Mapping[str, Any] = field(default_factory=dict)


class ResourceRule(Rule):
    collection: str = Field(description="A resource: an AI collection or source name.")

    def selects(self, ask: Ask) -> bool:
        return ask.resource == self.collection


class CollectionRead(ResourceRule):
    """Who may see and search a resource. The config's `visibility`/`scopes` of each are rules
    of this kind too (ids `config:...`)."""

    kind: Literal["collection_read"] = Field(
        description="`collection_read`: who may read a collection or source.",
    )


class VectorReturn(ResourceRule):
    """Stored vectors of the resource may leave the gateway (default: never)."""

    kind: Literal["vector_return"] = Field(
        description="`vector_return`: who may receive a collection's stored vectors.",
    )


class RecordVisibility(ResourceRule):
    """Who sees the records of one visibility in a resource, on every surface serving it."""

    kind: Literal["record_visibility"] = Field(
        description="`record_visibility`: who sees records of a visibility value in a collection, "
        "source or stream (on every surface serving it).",
    )
    visibility: str = Field(description="A record visibility value, e.g. internal.")

    def selects(self, ask: Ask) -> bool:
        return ask.resource == self.collection \
            and ask.attributes.get("visibility") == self.visibility


def visibility_of(resource: Resource, carried: object) -> str | None:
    """A record's visibility from the one it carries: its own, else the resource's; None
    (seen by nobody) when records must carry one and this one does not. Who sees which is
    the `record_visibility` rules' to say."""
    if carried is None and not resource.records_carry_visibility:
        return resource.visibility
    return carried if isinstance(carried, str) else None


def read_ask(principal: Principal, name: str) -> Ask:
    """The decision whether `principal` may read the named resource."""
    return Ask("collection_read", name, principal)


# Every declaration of each resource name, one per surface serving it (registry order).
Declarations = Mapping[str, Sequence[ResourceSpec]]
Declared = Callable[["Settings"], Declarations]


def reader(specs: Sequence[ResourceSpec]) -> ResourceSpec | None:
    """The declaration whose `collection_read` rules say who reads the resource, if any."""
    return next((spec for spec in specs if spec.read_rules), None)


def _read_names(declared: Declarations) -> list[str]:
    return sorted(name for name, specs in declared.items() if reader(specs) is not None)


def unknown_resources(declared: Declarations, pack: PolicyPack) -> list[tuple[str, str]]:
    """(dotted path in the policy file, message) for each rule naming no resource the config
    declares for its kind (any for `record_visibility`; one read by rules for the others)."""
    readable = _read_names(declared)
    read_expected = "expected one of the collections and sources the config declares " \
        f"({', '.join(readable) or 'none'})"
    any_expected = "expected one of the collections, sources and streams the config " \
        f"declares ({', '.join(sorted(declared)) or 'none'})"
    problems = [(f"vector_return[{index}].collection", read_expected)
                for index, rule in enumerate(pack.vector_return)
                if rule.collection not in readable]
    for index, rule in enumerate(pack.rules):
        if rule.kind == "record_visibility" and rule.collection not in declared:
            problems.append((f"rules[{index}].collection", any_expected))
        elif rule.kind in RESOURCE_KINDS and rule.kind != "record_visibility" \
                and rule.collection not in readable:
            problems.append((f"rules[{index}].collection", read_expected))
    return problems


def shared_name_problems(declared: Declarations) -> list[tuple[str, str]]:
    """(dotted path in the config file, message) for a name several surfaces serve that they
    cannot serve as one resource: two of them read by rules, or with different visibilities."""
    problems = []
    for name, specs in declared.items():
        first, read_by = specs[0], reader(specs)
        for spec in specs[1:]:
            if spec.read_rules and spec is not read_by and read_by is not None:
                problems.append((spec.where, f"the name {name!r} is also {read_by.where}, "
                                 "and collection_read rules would decide who reads both (the "
                                 "config's reads are allow rules): name one of them apart"))
            elif spec.visibility != first.visibility:
                problems.append((f"{spec.where}.visibility", f"{spec.visibility!r} is not the "
                                 f"visibility of {first.where} ({first.visibility!r}): a name "
                                 "several surfaces serve is one resource, with one visibility"))
    return problems


class _ResourceKinds:
    def __init__(self, declared: Declared) -> None:
        self.declared = declared

    def _reader(self, settings: Settings, name: str) -> ResourceSpec | None:
        return reader(self.declared(settings).get(name, ()))

    def _read_owner(self, settings: Settings, name: str) -> str | None:
        spec = self._reader(settings, name)
        return spec.surface if spec is not None else None

    def _owners(self, settings: Settings, name: str) -> str | None:
        """Every surface serving the resource (its records' visibility holds on each)."""
        specs = self.declared(settings).get(name, ())
        return ", ".join(dict.fromkeys(spec.surface for spec in specs)) or None

    def _names(self, settings: Settings) -> list[str]:
        return sorted(self.declared(settings))

    def _read_names(self, settings: Settings) -> list[str]:
        return _read_names(self.declared(settings))

    def _config_reads(self, settings: Settings) -> list[RawRule]:
        return [{"id": f"config:{spec.where}", "kind": "collection_read", "collection": name,
                 "effect": "allow",
                 "description": f"{spec.where} in the config file: {spec.visibility}",
                 "when": {} if spec.visibility == "public" else
                 {"scopes": list(spec.scopes), "kinds": ["owner", "client"]}}
                for name, specs in self.declared(settings).items()
                if (spec := reader(specs)) is not None]

    def _config_visibilities(self, settings: Settings) -> list[RawRule]:
        found = []
        for name, specs in self.declared(settings).items():
            for spec in specs:
                for value, scopes in (spec.record_scopes or {}).items():
                    found.append({
                        "id": f"config:{spec.where}.record_visibility.{value}",
                        "kind": "record_visibility", "collection": name, "visibility": value,
                        "description": f"record_visibility in the config file: {value} records",
                        "when": {"scopes": list(scopes)}})
        return found


    @staticmethod
    def _legacy_vectors(document: dict[str, Any], stem: str) -> list[RawRule]:
        return [{"id": f"{stem}.vector_return[{index}]", "kind": "vector_return",
                 "collection": rule["collection"], "when": {"scopes": rule.get("scopes", [])},
                 "description": rule.get("description") or "vector_return rule"}
                for index, rule in enumerate(document.get("vector_return") or [])]

    def _own_visibility(self, settings: Settings, ask: Ask) -> dict[str, Any]:
        specs = self.declared(settings).get(ask.resource)  # they agree on it
        return {"collection_visibility": specs[0].visibility} if specs else {}


    @staticmethod
    def _visibility_default(ask: Ask) -> Effect:
        """Unnamed visibilities: `public` and the resource's own are seen, any other is not."""
        own = ask.attributes.get("collection_visibility")
        return "allow" if ask.attributes.get("visibility") in ("public", own) else "deny"

    def _resource_samples(self, settings: Settings, rules: list[Rule]) -> list[Sample]:
        named = {getattr(rule, "collection", "") for rule in rules}
        return [(name, {}) for name in sorted(set(self._read_names(settings)) | named)]

    def _visibility_samples(self, settings: Settings, rules: list[Rule]) -> list[Sample]:
        declared = self.declared(settings)
        found: dict[tuple[str, str], str] = {}
        for name, specs in declared.items():
            own = specs[0].visibility  # they agree on it
            for value in {"public", own}:
                found[(name, value)] = own
        for rule in rules:
            if isinstance(rule, RecordVisibility):
                named = declared.get(rule.collection)
                found[(rule.collection, rule.visibility)] = named[0].visibility if named \
                    else "public"
        return [(name, {"visibility": value, "collection_visibility": own})
                for (name, value), own in sorted(found.items())]

    def _visible_parts(self, settings: Settings, bundle: Any, ask: Ask) -> list[str]:
        """What a reader of the resource gets in each result: its parts, vectors where a rule
        allows them; then the record visibilities it sees."""
        spec = self._reader(settings, ask.resource)
        if spec is None:
            return []
        parts = list(spec.parts)
        if spec.vectors and bundle.decide(
                Ask("vector_return", ask.resource, ask.principal)).effect == "allow":
            parts.append("vectors")
        for resource, attributes in self._visibility_samples(settings, list(bundle.rules)):
            if resource == ask.resource and bundle.decide(Ask(
                    "record_visibility", resource, ask.principal, attributes)).effect == "allow":
                parts.append(f"records:{attributes['visibility']}")
        return parts

    def kinds(self) -> tuple[RuleKind, ...]:
        return (
            RuleKind("collection_read", "gateway", CollectionRead,
                     "who may see and search a collection or source (default: nobody)",
                     from_config=self._config_reads, resources=self._read_names,
                     samples=self._resource_samples, projection=self._visible_parts,
                     owner=self._read_owner),
            RuleKind("vector_return", "gateway", VectorReturn,
                     "who gets stored vectors back from a collection (default: nobody)",
                     legacy=self._legacy_vectors, resources=self._read_names,
                     samples=self._resource_samples, owner=self._read_owner),
            RuleKind("record_visibility", "gateway", RecordVisibility,
                     "who sees records of a visibility, on every surface serving them "
                     "(default: public and the resource's own)",
                     default=self._visibility_default, from_config=self._config_visibilities,
                     resources=self._names, samples=self._visibility_samples,
                     context=self._own_visibility, owner=self._owners),
        )


def resource_kinds(declared: Declared) -> tuple[RuleKind, ...]:
    """The resource rule kinds, over the resources `declared` finds in a config (every
    surface's: the registry passes its own lookup, so this module imports no surface)."""
    return _ResourceKinds(declared).kinds()
