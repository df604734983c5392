"""Documents the core serves itself, by exact path: the RFC 9728 protected-resource metadata.

Spec surfaces contribute theirs through their mounts; every one is public.
"""

from __future__ import annotations

from gateway.endpoints import StaticDocument
from gateway.settings import Settings


def core_documents(settings: Settings) -> dict[str, StaticDocument]:
    if settings.auth is None:
        return {}
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
    return dict.fromkeys(metadata_paths(resource), document)
