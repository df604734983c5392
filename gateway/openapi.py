"""The OpenAPI 3.1 document of what the gateway itself serves, built once per config generation.

Each mounted surface contributes a fragment (`Surface.openapi`); the core adds its own
documents (RFC 9728 metadata, this document), the gateway's error dialect, and security
schemes and requirements derived from the `auth` section, so the document cannot drift from
what the gateway enforces. Passthrough paths belong to the upstream and are not described.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from gateway.auth.config import Auth
from gateway.auth.routes import RouteTable
from gateway.policy.bundle import PolicyBundle
from gateway.settings import Settings

PATH = "/.well-known/aigw/openapi.json"
GATEWAY_ERROR = "#/components/schemas/GatewayError"
_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_TEMPLATE = re.compile(r"\{[^}]*\}")

_GATEWAY_ERROR_SCHEMA: dict[str, Any] = {
    "description": "The gateway's own error dialect, where no spec surface owns the path.",
    "type": "object",
    "required": ["error"],
    "additionalProperties": False,
    "properties": {"error": {
        "type": "object",
        "required": ["code", "message", "request_id"],
        "additionalProperties": False,
        "properties": {
            "code": {"type": "string", "description": "Stable machine-readable code."},
            "message": {"type": "string"},
            "request_id": {"type": "string"},
            "details": {"type": "object"},
        },
    }},
}
_METADATA_SCHEMA: dict[str, Any] = {
    "description": "OAuth 2.0 Protected Resource Metadata (RFC 9728).",
    "type": "object",
    "required": ["resource"],
    "properties": {
        "resource": {"type": "string"},
        "authorization_servers": {"type": "array", "items": {"type": "string"}},
        "scopes_supported": {"type": "array", "items": {"type": "string"}},
        "bearer_methods_supported": {"type": "array", "items": {"type": "string"}},
        "authorization_details_types_supported": {"type": "array",
                                                  "items": {"type": "string"}},
    },
}


def json_content(schema: dict[str, Any], *media_types: str) -> dict[str, Any]:
    """A `content` object with the same schema under each media type."""
    return {media_type: {"schema": schema} for media_type in media_types or ("application/json",)}


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def document_operation(summary: str, schema: dict[str, Any], media_type: str,
                       tag: str) -> dict[str, Any]:
    """A public GET of a document: 200 (with an ETag), 304 for If-None-Match, 405 otherwise."""
    return {
        "summary": summary, "tags": [tag], "security": [],
        "parameters": [{"name": "If-None-Match", "in": "header", "required": False,
                        "schema": {"type": "string"}}],
        "responses": {
            "200": {"description": summary, "content": {media_type: {"schema": schema}},
                    "headers": {"ETag": {"schema": {"type": "string"}}}},
            "304": {"description": "Not modified (If-None-Match matched the ETag)."},
            "405": {"description": "Only GET and HEAD are served here.",
                    "content": json_content({"$ref": GATEWAY_ERROR})},
        },
    }


def build_openapi(settings: Settings, fragments: Iterable[dict[str, Any]],
                  bundle: PolicyBundle | None = None) -> dict[str, Any]:
    """Merge the surfaces' fragments with the core's documents into one OpenAPI document;
    the route decisions of `bundle` (default: `auth.routes` alone) give each operation its
    security requirement."""
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {"GatewayError": _GATEWAY_ERROR_SCHEMA}
    for fragment in fragments:
        paths.update(copy.deepcopy(fragment.get("paths", {})))
        schemas.update(copy.deepcopy(fragment.get("components", {}).get("schemas", {})))
    paths.update(_core_paths(settings))
    if settings.auth is not None:
        schemas["ProtectedResourceMetadata"] = _METADATA_SCHEMA
    _fill_security(paths, settings.auth, bundle)
    components: dict[str, Any] = {"schemas": schemas}
    schemes = security_schemes(settings.auth)
    if schemes:
        components["securitySchemes"] = schemes
    document: dict[str, Any] = {"openapi": "3.1.0", "info": _info(settings)}
    if settings.public_base_url:
        document["servers"] = [{"url": settings.public_base_url.rstrip("/")}]
    document["paths"] = dict(sorted(paths.items()))
    document["components"] = components
    return document


def security_schemes(auth: Auth | None) -> dict[str, Any]:
    """One scheme per kind of credential the config accepts; never a credential itself."""
    if auth is None:
        return {}
    schemes: dict[str, Any] = {}
    if auth.issuers or auth.introspection is not None:
        scheme: dict[str, Any] = {"type": "http", "scheme": "bearer"}
        if auth.issuers and auth.introspection is None:
            scheme["bearerFormat"] = "JWT"
        schemes["bearer"] = scheme
    if auth.api_keys is not None:
        schemes["apiKey"] = {"type": "apiKey", "in": "header", "name": auth.api_keys.header}
    return schemes


def _fill_security(paths: dict[str, Any], auth: Auth | None,
                   bundle: PolicyBundle | None) -> None:
    """Give every operation without one the requirement its `auth.routes` rule sets.

    `[{}]` from a surface means public with optional credentials: the schemes are added.
    """
    if auth is None:
        return
    names = list(security_schemes(auth))
    table = RouteTable(auth, bundle=bundle)
    for path, item in paths.items():
        concrete = _TEMPLATE.sub("x", path)
        for method in _METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            if operation.get("security") == [{}]:
                operation["security"] = [{}, *({name: []} for name in names)]
                continue
            if "security" in operation:
                continue
            access = table.access(concrete, method.upper())
            required = [{name: sorted(access.scopes)} for name in names]
            operation["security"] = [{}, *required] if access.public else required


def _core_paths(settings: Settings) -> dict[str, Any]:
    paths: dict[str, Any] = {PATH: {"get": document_operation(
        "This OpenAPI document", {"type": "object"}, "application/json", "gateway")}}
    if settings.auth is not None:
        from gateway.auth.metadata import metadata_paths, resource_identifier

        resource = resource_identifier(settings.auth, settings.public_base_url)
        operation = document_operation("Protected resource metadata (RFC 9728)",
                                       ref("ProtectedResourceMetadata"), "application/json",
                                       "gateway")
        for path in metadata_paths(resource):
            paths[path] = {"get": copy.deepcopy(operation)}
    return paths


def _info(settings: Settings) -> dict[str, Any]:
    try:
        release = version("aigw")
    except PackageNotFoundError:
        release = "0"
    info: dict[str, Any] = {"title": "aigw", "version": release}
    if settings.service is not None:
        info["title"] = f"{settings.service.name} (aigw)"
        info["description"] = settings.service.description
    return info
