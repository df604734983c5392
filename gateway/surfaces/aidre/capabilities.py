"""AIDRE's endpoints as capabilities of the /.well-known/ai document."""

from __future__ import annotations

from gateway.capability import Capability
from gateway.surfaces.aidre.config import Aidre


def surface_capabilities(aidre: Aidre | None) -> list[Capability]:
    if aidre is None or not aidre.enabled:
        return []
    base = aidre.base_path
    # The document is public: private collections stay unnamed (§11.6).
    names = "|".join(sorted(name for name, collection in aidre.collections.items()
                            if collection.visibility == "public")) or "a name from /collections"
    return [
        Capability(
            id="aidre_search", method="POST", endpoint=f"{base}/search",
            description="Search canonical content by text or by vector (AIDRE).",
            params={"query": "string — text query, or query_vector + embedding_space",
                    "collection": f"string, required — {names}"[:200],
                    "top_k": f"integer, optional, default {aidre.default_top_k}, "
                             f"max {aidre.max_top_k}",
                    "cursor": "string, optional — meta.next_cursor of the previous page"},
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
