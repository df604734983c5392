"""Documents the core serves itself, by exact path: the RFC 9728 protected-resource metadata
and the OpenAPI document of everything the gateway serves itself.

Spec surfaces contribute theirs through their mounts; every one is public.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway import openapi, registry
from gateway.endpoints import StaticDocument
from gateway.policy.bundle import PolicyBundle
from gateway.settings import Settings


def core_documents(settings: Settings, bundle: PolicyBundle | None = None,
                   own_resources: Sequence[str] = ()) -> dict[str, StaticDocument]:
    """The documents; `bundle` gives the route rules (default: `auth.routes` alone), and
    `own_resources` the path prefixes that are protected resources of their own (each gets its
    metadata document at the well-known path with its own path appended)."""
    fragments = (surface.openapi(settings) for surface in registry.surfaces())
    documents = {openapi.PATH: StaticDocument(
        "gateway", openapi.build_openapi(settings, fragments, bundle))}
    if settings.auth is None:
        return documents
    from gateway.auth.metadata import (
        metadata_paths,
        own_resource,
        protected_resource_metadata,
        resource_identifier,
    )
    from gateway.auth.routes import RouteTable

    auth = settings.auth
    resource = resource_identifier(auth, settings.public_base_url)
    scopes = RouteTable(auth, bundle=bundle).scopes() | set(auth.scope_grants)
    metadata = protected_resource_metadata(auth, resource, scopes)
    for surface in registry.surfaces():
        metadata = merge_members(metadata, surface.resource_metadata(settings))
    document = StaticDocument("oauth-protected-resource", metadata)
    documents.update(dict.fromkeys(metadata_paths(resource), document))
    for path in own_resources:
        own = own_resource(resource, path)
        documents[metadata_paths(own)[-1]] = StaticDocument(
            "oauth-protected-resource", {**metadata, "resource": own})
    return documents


def merge_members(document: dict[str, Any], members: dict[str, Any]) -> dict[str, Any]:
    """`members` added to `document`: objects under one name merge, existing values win."""
    merged = dict(document)
    for name, value in members.items():
        if isinstance(value, dict) and isinstance(merged.get(name), dict):
            merged[name] = {**value, **merged[name]}
        else:
            merged.setdefault(name, value)
    return merged
