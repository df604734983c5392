"""Documents the core serves itself, by exact path: the RFC 9728 protected-resource metadata
and the OpenAPI document of everything the gateway serves itself.

Spec surfaces contribute theirs through their mounts; every one is public.
"""

from __future__ import annotations

from gateway import openapi, registry
from gateway.endpoints import StaticDocument
from gateway.settings import Settings


def core_documents(settings: Settings) -> dict[str, StaticDocument]:
    fragments = (surface.openapi(settings) for surface in registry.surfaces())
    documents = {openapi.PATH: StaticDocument("gateway",
                                              openapi.build_openapi(settings, fragments))}
    if settings.auth is None:
        return documents
    from gateway.auth.metadata import (
        metadata_paths,
        protected_resource_metadata,
        resource_identifier,
    )
    from gateway.auth.routes import RouteTable

    auth = settings.auth
    resource = resource_identifier(auth, settings.public_base_url)
    scopes = RouteTable(auth).scopes() | set(auth.scope_grants)
    document = StaticDocument("oauth-protected-resource",
                              protected_resource_metadata(auth, resource, scopes))
    return {**documents, **dict.fromkeys(metadata_paths(resource), document)}
