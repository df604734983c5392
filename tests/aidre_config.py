"""A gateway config with AIDRE collections over the demo backend, for the AIDRE tests."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import yaml

# The demo backend's article vectors are WordLlama's (tests/demo_vectors.py embeds queries).
SPACE = {"id": "wordllama-l2_supercat-256", "embedder": {"provider": "wordllama"}}
# What the discovery document says of it: what the embedder gives.
ADVERTISED_SPACE = {"id": SPACE["id"], "dimensions": 256, "distance": "cosine",
                    "normalized": True, "provider": "wordllama", "model": "wordllama-l2_supercat"}
KEYS = {  # API key -> (subject, scopes)
    "reader-key": ("reader", []),
    "vector-key": ("vector-fan", ["vectors:read"]),
    "staff-key": ("staff", ["staff:read", "vectors:read"]),
}


def collection(upstream: str = "helpcentre", **extra: Any) -> dict[str, Any]:
    hit = {"id": "id", "text": "snippet", "score": "score",
           "fields": {"title": "title", "url": "url", "category": "category"},
           "metadata": {"updated_at": "updated_at"}}
    return {
        "description": "Help-centre articles: billing, login, shipping, returns and more.",
        "text_search": {"upstream": upstream, "path": "/api/v1/articles/search",
                        "query": {"q": "{query}", "limit": "{limit}", "offset": "{offset}"},
                        "mapping": {"items": "items", **hit}},
        "vector_search": {"upstream": upstream, "method": "POST",
                          "path": "/api/v1/articles/vector-search",
                          "body": {"vector": "{vector}", "k": "{fetch}"},
                          "embedding_space": SPACE["id"],
                          "mapping": {"items": "items", **hit, "vector": "embedding"}},
        "chunk": {"upstream": upstream, "path": "/api/v1/articles/{id}",
                  "mapping": {"id": "id", "text": "body",
                              "fields": {"title": "title", "url": "url"},
                              "metadata": {"updated_at": "updated_at",
                                           "content_hash": "content_hash"}}},
        **extra,
    }


def aidre_gateway_config(backend: str, workdir: Path, *, aidre: dict | None = None,
                         **top: Any) -> dict[str, Any]:
    policies = workdir / "policies"
    policies.mkdir(exist_ok=True)
    (policies / "vector-return.yaml").write_text(yaml.safe_dump(
        {"vector_return": [{"collection": "articles", "scopes": ["vectors:read"]}]}))
    keys = [{"sha256": hashlib.sha256(key.encode()).hexdigest(), "subject": subject,
             "client_id": subject, "scopes": scopes} for key, (subject, scopes) in KEYS.items()]
    settings = {
        "public_base_url": "https://ai.example.com",
        "policies": str(policies),
        "upstreams": {"helpcentre": {"url": backend}},
        "auth": {"default_access": "public", "api_keys": {"keys": keys}},
        "aidre": {
            "embedding_spaces": [SPACE],
            "max_top_k": 50,
            "collections": {
                "articles": collection(),
                "staff": collection(visibility="private", scopes=["staff:read"],
                                    description="Staff-only notes."),
            },
            **(aidre or {}),
        },
        **top,
    }
    return settings
