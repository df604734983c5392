"""The documents the gateway itself serves, by exact path, built once per config generation.

Spec surfaces add theirs here; every one is public (discovery stays readable without a token).
"""

from __future__ import annotations

from gateway.endpoints import StaticDocument
from gateway.settings import Settings


def build_endpoints(settings: Settings) -> dict[str, StaticDocument]:
    endpoints: dict[str, StaticDocument] = {}
    if settings.auth is not None:
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
        for path in metadata_paths(resource):
            endpoints[path] = document
    return endpoints
