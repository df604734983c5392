"""The documents the gateway itself serves, by exact path, built once per config generation.

Spec surfaces add theirs here; every one is public (discovery stays readable without a token).
"""

from __future__ import annotations

from datetime import date

from gateway.endpoints import StaticDocument
from gateway.settings import Settings
from gateway.surfaces.aiendpoint import ai_endpoint_documents
from gateway.surfaces.catalog import surface_capabilities


def build_endpoints(
    settings: Settings, config_date: date | None = None
) -> dict[str, StaticDocument]:
    """`config_date`: when the config file last changed (the AI document's default date)."""
    endpoints: dict[str, StaticDocument] = ai_endpoint_documents(
        settings, config_date=config_date, extra_capabilities=surface_capabilities(settings))
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
