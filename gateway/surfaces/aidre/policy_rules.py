"""AIDRE's rule kinds: who reads a collection, who gets stored vectors back (§11.2), and who
sees records of each visibility (§12)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from gateway.policy.kinds import RawRule, RuleKind
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


def _visibility_default(ask: Ask) -> Effect:
    """Unnamed visibilities: `public` and the collection's own are seen, any other is not."""
    own = ask.attributes.get("collection_visibility")
    return "allow" if ask.attributes.get("visibility") in ("public", own) else "deny"


AIDRE_KINDS = [
    RuleKind("collection_read", "aidre", CollectionRead,
             "who may see and search a collection (default: nobody)",
             from_config=_config_reads, resources=_collections),
    RuleKind("vector_return", "aidre", VectorReturn,
             "who gets stored vectors back from a collection (default: nobody)",
             legacy=_legacy_vectors, resources=_collections),
    RuleKind("record_visibility", "aidre", RecordVisibility,
             "who sees records of a visibility (default: public and the collection's own)",
             default=_visibility_default, from_config=_config_visibilities,
             resources=_collections),
]
