"""AIDRE's endpoints as capabilities of the /.well-known/ai document, and the endpoints every
deployment must rate-limit."""

from __future__ import annotations

from gateway.capability import Capability
from gateway.ratelimit.coverage import covering_rules, uncovered_warning
from gateway.settings import Settings
from gateway.surfaces.aidre.config import Aidre


def surface_capabilities(aidre: Aidre | None) -> list[Capability]:
    if aidre is None or not aidre.enabled:
        return []
    base = aidre.base_path
    return [
        Capability(
            id="aidre_search", method="POST", endpoint=f"{base}/search",
            description="Search canonical content by text or by vector (AIDRE).",
            params=search_params(aidre),
            returns="results[] {id, score, source{url, title}, metadata, text}, "
                    "meta{returned, top_k, next_cursor}",
        ),
        Capability(
            id="aidre_collections", method="GET", endpoint=f"{base}/collections",
            description="List the content collections this caller may search.",
            returns="collections[] {name, description, visibility, updated_at}",
        ),
        Capability(
            id="aidre_chunk", method="GET", endpoint=f"{base}/chunks/{{id}}",
            description="Read one chunk by the id a search result gave.",
            params={"id": "string, required — result id from aidre_search"},
            returns="id, collection, text, content_hash, updated_at, source, metadata",
        ),
    ]


def search_params(aidre: Aidre) -> dict[str, str]:
    """`type, required|optional[, qualifiers] — meaning` (draft-aiendpoint-00 §3.3). Only
    public collections are named: the document is public (AIDRE §11.6)."""
    public = "|".join(sorted(name for name, c in aidre.collections.items()
                             if c.visibility == "public"))
    need = "optional" if aidre.default_collection else "required"
    params = {"query": "string, optional — text query; send query or query_vector, not both"}
    spaces = sorted({c.vector_search.embedding_space for c in aidre.collections.values()
                     if c.vector_search is not None})
    if spaces:
        params["query_vector"] = "array, optional — numbers (an embedding) instead of query"
        params["embedding_space"] = (f"string, optional, {'|'.join(spaces)} — "
                                     "required with query_vector")[:200]
    params["collection"] = (f"string, {need}{', ' + public if public else ''} — "
                            "collection to search")[:200]
    params["top_k"] = (f"integer, optional, default {aidre.default_top_k}, "
                       f"max {aidre.max_top_k}")
    params["cursor"] = "string, optional — meta.next_cursor of the previous page"
    return params


def endpoint_warnings(settings: Settings, aidre: Aidre | None) -> list[tuple[str, str]]:
    """AIDRE §11.1 and AI Discovery §6.3: each endpoint must be counted by a rate-limit rule."""
    if aidre is None or not aidre.enabled:
        return []
    base = aidre.base_path
    endpoints = (("AIDRE collections", f"{base}/collections", "GET"),
                 ("AIDRE search", f"{base}/search", "POST"),
                 ("AIDRE chunks", f"{base}/chunks/{{id}}", "GET"))
    return [uncovered_warning(what, path, method) for what, path, method in endpoints
            if not covering_rules(settings.rate_limits, path, method)]
