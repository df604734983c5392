"""The documents the gateway itself serves, by exact path, built once per config generation.

Spec surfaces add theirs here; every one is public (discovery stays readable without a token).
"""

from __future__ import annotations

from datetime import date
from typing import Any

from gateway.endpoints import StaticDocument
from gateway.settings import Settings
from gateway.surfaces.aiendpoint import ai_endpoint_documents
from gateway.surfaces.catalog import surface_capabilities


def build_endpoints(
    settings: Settings, config_date: date | None = None, policies: dict[str, Any] | None = None
) -> dict[str, StaticDocument]:
    """`config_date`: when the config file last changed (the AI document's default date);
    `policies`: the loaded policy files, whose limits aip.json states."""
    endpoints: dict[str, StaticDocument] = ai_endpoint_documents(
        settings, config_date=config_date, extra_capabilities=surface_capabilities(settings))
    if settings.aip is not None and settings.aip.enabled:
        from gateway.policy.config import PolicyPack
        from gateway.surfaces.aip.declaration import aip_documents

        packs = [PolicyPack.model_validate(pack) for pack in (policies or {}).values()]
        endpoints.update(aip_documents(settings.aip, settings.public_base_url or "", packs,
                                       config_date))
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
