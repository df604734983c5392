"""OAuth 2.0 Protected Resource Metadata (RFC 9728), generated from the auth config."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from gateway.auth.config import Auth
from gateway.paths import longest_prefix

WELL_KNOWN = "/.well-known/oauth-protected-resource"


def resource_identifier(auth: Auth, public_base_url: str | None) -> str:
    resource = auth.resource or public_base_url
    if resource is None:
        raise ValueError("auth needs `resource` or a top-level `public_base_url`")
    return resource.rstrip("/") if urlsplit(resource).path not in ("", "/") else resource


def metadata_paths(resource: str) -> list[str]:
    """The well-known path, with the resource's own path inserted after it (RFC 9728 §3.1)."""
    path = urlsplit(resource).path.rstrip("/")
    return [WELL_KNOWN, WELL_KNOWN + path] if path else [WELL_KNOWN]


def metadata_url(resource: str) -> str:
    parts = urlsplit(resource)
    return f"{parts.scheme}://{parts.netloc}{metadata_paths(resource)[-1]}"


def own_resource(resource: str, path: str) -> str:
    """The identifier of a resource of its own at `path` of the gateway's origin (RFC 9728
    §3.1): an agent protocol's endpoint, say, that its clients ask tokens for."""
    parts = urlsplit(resource)
    return f"{parts.scheme}://{parts.netloc}{path}"


@dataclass(frozen=True, slots=True)
class MetadataUrls:
    """Where a path's protected-resource metadata is: that of the resource of its own the path
    falls under (the longest such prefix), else the gateway's."""

    resource: str  # the gateway's identifier
    own_paths: Sequence[str] = ()  # path prefixes that are resources of their own

    def url_for(self, path: str) -> str:
        owning = longest_prefix(self.own_paths, path)
        if owning is None:
            return metadata_url(self.resource)
        return metadata_url(own_resource(self.resource, owning))


def protected_resource_metadata(auth: Auth, resource: str, scopes: set[str]) -> dict[str, Any]:
    servers = sorted({issuer.issuer for issuer in auth.issuers})
    document: dict[str, Any] = {
        "resource": resource,
        "bearer_methods_supported": ["header", "query"] if auth.allow_query_token else ["header"],
    }
    if servers:
        document["authorization_servers"] = servers
    if scopes:
        document["scopes_supported"] = sorted(scopes)
    if auth.authorization_details_types:
        document["authorization_details_types_supported"] = list(auth.authorization_details_types)
    return document
