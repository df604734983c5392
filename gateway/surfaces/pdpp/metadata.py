"""The PDPP members of the RFC 9728 protected-resource metadata: token kinds, and the
lexical and semantic retrieval advertisements, only when some stream can honestly serve them.
Global facts only: nothing here depends on the caller."""

from __future__ import annotations

from typing import Any

from gateway.surfaces.pdpp.config import Pdpp


def lexical_served(pdpp: Pdpp) -> bool:
    return any(_declared(s.fields, s.search.lexical_fields) for s in pdpp.streams.values())


def semantic_served(pdpp: Pdpp) -> bool:
    return pdpp.semantic is not None and pdpp.semantic.enabled and any(
        _declared(s.fields, s.search.semantic_fields) for s in pdpp.streams.values())


def resource_members(pdpp: Pdpp) -> dict[str, Any]:
    capabilities: dict[str, Any] = {}
    if lexical_served(pdpp):
        lexical = pdpp.lexical
        capabilities["lexical_retrieval"] = {
            "supported": True, "endpoint": f"{pdpp.base_path}/v1/search", "cross_stream": True,
            "snippets": lexical.snippets, "default_limit": lexical.default_limit,
            "max_limit": lexical.max_limit,
        }
    if semantic_served(pdpp) and pdpp.semantic is not None:
        semantic = pdpp.semantic
        spec = semantic.embedder.spec
        capabilities["semantic_retrieval"] = {
            "supported": True, "stability": "experimental",
            "endpoint": f"{pdpp.base_path}/v1/search/semantic", "cross_stream": True,
            "query_input": "text", "snippets": semantic.snippets, "lexical_blending": False,
            "model": spec.model, "dimensions": spec.dimensions, "distance_metric": "cosine",
            "default_limit": semantic.default_limit, "max_limit": semantic.max_limit,
            # Indexes are built from the current records with this model before a search
            # answers; no search is ever served from a building or other-model index.
            "index_state": "built",
        }
    members: dict[str, Any] = {"pdpp_token_kinds_supported": ["owner", "client"]}
    if capabilities:
        members["capabilities"] = capabilities
    return members


def _declared(fields: dict[str, Any], names: list[str]) -> bool:
    return any(name in fields and fields[name].type == "string" for name in names)
