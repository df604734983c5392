"""AIDRE's rule kinds: who reads a collection, who gets stored vectors back (§11.2), and who
sees records of each visibility (§12)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from gateway.policy.kinds import RawRule, RuleKind, Sample
from gateway.policy.rules import Ask, Effect, Rule
from gateway.settings import Settings


class CollectionRule(Rule):
    collection: str = Field(description="An AIDRE collection name.")

    def selects(self, ask: Ask) -> bool:
        return ask.resource == self.collection


class CollectionRead(CollectionRule):
    """Who may see and search a collection. The config's `visibility`/`scopes` of each
    collection are rules of this kind too (ids `config:aidre.collections.<name>`)."""

    kind: Literal["collection_read"]


class VectorReturn(CollectionRule):
    """Stored vectors of the collection may leave the gateway (default: never)."""

    kind: Literal["vector_return"]


class RecordVisibility(CollectionRule):
    """Who sees the records of one visibility in a collection."""

    kind: Literal["record_visibility"]
    visibility: str = Field(description="A record visibility value, e.g. internal.")

    def selects(self, ask: Ask) -> bool:
        return ask.resource == self.collection \
            and ask.attributes.get("visibility") == self.visibility


def _collections(settings: Settings) -> list[str]:
    aidre = getattr(settings, "aidre", None)
    return sorted(aidre.collections) if aidre is not None else []


def _config_reads(settings: Settings) -> list[RawRule]:
    aidre = getattr(settings, "aidre", None)
    if aidre is None:
        return []
    return [{"id": f"config:aidre.collections.{name}", "kind": "collection_read",
             "collection": name, "effect": "allow",
             "description": f"aidre.collections.{name} in the config file: {c.visibility}",
             "when": {} if c.visibility == "public" else
             {"scopes": list(c.scopes), "kinds": ["owner", "client"]}}
            for name, c in aidre.collections.items()]


def _config_visibilities(settings: Settings) -> list[RawRule]:
    aidre = getattr(settings, "aidre", None)
    found = []
    for name, c in (aidre.collections.items() if aidre is not None else ()):
        for value, scopes in (c.record_visibility.scopes if c.record_visibility else {}).items():
            found.append({
                "id": f"config:aidre.collections.{name}.record_visibility.{value}",
                "kind": "record_visibility", "collection": name, "visibility": value,
                "description": f"record_visibility in the config file: {value} records",
                "when": {"scopes": list(scopes)}})
    return found


def _legacy_vectors(document: dict[str, Any], stem: str) -> list[RawRule]:
    return [{"id": f"{stem}.vector_return[{index}]", "kind": "vector_return",
             "collection": rule["collection"], "when": {"scopes": rule.get("scopes", [])},
             "description": rule.get("description") or "vector_return rule"}
            for index, rule in enumerate(document.get("vector_return") or [])]


def _own_visibility(settings: Settings, ask: Ask) -> dict[str, Any]:
    aidre = getattr(settings, "aidre", None)
    collection = aidre.collections.get(ask.resource) if aidre is not None else None
    return {"collection_visibility": collection.visibility} if collection is not None else {}


def _visibility_default(ask: Ask) -> Effect:
    """Unnamed visibilities: `public` and the collection's own are seen, any other is not."""
    own = ask.attributes.get("collection_visibility")
    return "allow" if ask.attributes.get("visibility") in ("public", own) else "deny"


def _collection_samples(settings: Settings, rules: list[Rule]) -> list[Sample]:
    named = {getattr(rule, "collection", "") for rule in rules}
    return [(name, {}) for name in sorted(set(_collections(settings)) | named)]


def _visibility_samples(settings: Settings, rules: list[Rule]) -> list[Sample]:
    aidre = getattr(settings, "aidre", None)
    found: dict[tuple[str, str], str] = {}
    for name, collection in (aidre.collections.items() if aidre is not None else ()):
        for value in {"public", collection.visibility}:
            found[(name, value)] = collection.visibility
    for rule in rules:
        if isinstance(rule, RecordVisibility):
            own = aidre.collections[rule.collection].visibility \
                if aidre is not None and rule.collection in aidre.collections else "public"
            found[(rule.collection, rule.visibility)] = own
    return [(name, {"visibility": value, "collection_visibility": own})
            for (name, value), own in sorted(found.items())]


def _visible_parts(settings: Settings, bundle: Any, ask: Ask) -> list[str]:
    """What a reader of the collection gets in each result: its mapped fields, text, and
    vectors where a rule allows them; then the record visibilities it sees."""
    aidre = getattr(settings, "aidre", None)
    collection = aidre.collections.get(ask.resource) if aidre is not None else None
    if collection is None:
        return []
    parts = ["text", *sorted(collection.text_search.mapping.get("fields") or {})]
    if collection.vector_search is not None and bundle.decide(
            Ask("vector_return", ask.resource, ask.principal)).effect == "allow":
        parts.append("vectors")
    for resource, attributes in _visibility_samples(settings, list(bundle.rules)):
        if resource == ask.resource and bundle.decide(Ask(
                "record_visibility", resource, ask.principal, attributes)).effect == "allow":
            parts.append(f"records:{attributes['visibility']}")
    return parts


AIDRE_KINDS = [
    RuleKind("collection_read", "aidre", CollectionRead,
             "who may see and search a collection (default: nobody)",
             from_config=_config_reads, resources=_collections, samples=_collection_samples,
             projection=_visible_parts),
    RuleKind("vector_return", "aidre", VectorReturn,
             "who gets stored vectors back from a collection (default: nobody)",
             legacy=_legacy_vectors, resources=_collections, samples=_collection_samples),
    RuleKind("record_visibility", "aidre", RecordVisibility,
             "who sees records of a visibility (default: public and the collection's own)",
             default=_visibility_default, from_config=_config_visibilities,
             resources=_collections, samples=_visibility_samples, context=_own_visibility),
]
