"""AIDRE's collections as the resources the core's rule kinds decide on (who reads a
collection, who gets its stored vectors back (§11.2), who sees its records of each visibility
(§12)): see gateway.policy.resources."""

from __future__ import annotations

from gateway.policy.resources import ResourceSpec
from gateway.surfaces.aidre.config import Aidre, Collection


def collection_resources(aidre: Aidre | None) -> dict[str, ResourceSpec]:
    if aidre is None:
        return {}
    return {name: _spec(name, c) for name, c in aidre.collections.items()}


def _spec(name: str, collection: Collection) -> ResourceSpec:
    rules = collection.record_visibility
    return ResourceSpec(
        where=f"aidre.collections.{name}", surface="aidre",
        visibility=collection.visibility, scopes=tuple(collection.scopes),
        record_scopes={value: tuple(scopes) for value, scopes in rules.scopes.items()}
        if rules is not None else None,
        parts=("text", *sorted(collection.text_search.mapping.get("fields") or {})),
        vectors=collection.vector_search is not None)
