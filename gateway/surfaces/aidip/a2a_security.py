"""What an A2A card says a call needs: the schemes from the auth section, the scopes from the
route rules.

A call over A2A is admitted twice by the route rules: at the A2A endpoint, then at the AIDIP
invoke route it is served through (gateway.inner). So a card requires the union of both paths'
scopes, and makes credentials optional only where both paths are public. An issuer with a
`token_url` is an OAuth 2.0 scheme (a client-credentials flow offering every scope the gateway
knows, and the issuer's RFC 8414 metadata URL); issuers without one, and introspection, a bearer
scheme; API keys an API-key scheme.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from gateway.auth.config import Auth, Issuer
from gateway.auth.routes import RouteTable
from gateway.policy.bundle import PolicyBundle

_METADATA = "/.well-known/oauth-authorization-server"


class CardSecurity:
    """One config generation's schemes and route rules, asked per card."""

    def __init__(self, auth: Auth | None, bundle: PolicyBundle | None = None) -> None:
        self.table: RouteTable | None = None
        self.schemes: dict[str, Any] = {}
        if auth is not None:
            self.table = RouteTable(auth, bundle=bundle)
            self.schemes = _schemes(auth, self.table)

    def members(self, *paths: str) -> dict[str, Any]:
        """`securitySchemes` and `securityRequirements` of a card whose calls POST to `paths`."""
        if self.table is None:
            return {}
        return {"securitySchemes": self.schemes,
                "securityRequirements": self.requirements(*paths)}

    def requirements(self, *paths: str) -> list[dict[str, Any]]:
        """Any one scheme with every scope the paths' route rules require; an empty
        requirement first when all of them are public."""
        if self.table is None:
            return []
        access = [self.table.access(path, "POST") for path in paths]
        scopes = sorted(set().union(*(entry.scopes for entry in access)))
        required = [{"schemes": {name: {"list": scopes}}} for name in self.schemes]
        return [{"schemes": {}}, *required] if all(entry.public for entry in access) \
            else required


def _schemes(auth: Auth, table: RouteTable) -> dict[str, Any]:
    scopes = {scope: "Required by the gateway's route rules." for scope in sorted(table.scopes())}
    for scope in sorted(auth.scope_grants):
        scopes.setdefault(scope, "Grants reading records (auth.scope_grants).")
    schemes: dict[str, Any] = {}
    issuers = [issuer for issuer in auth.issuers if issuer.token_url] if scopes else []
    for index, issuer in enumerate(issuers):
        name = "oauth2" if index == 0 else f"oauth2-{index + 1}"
        schemes[name] = {"oauth2SecurityScheme": _oauth2(issuer, scopes)}
    if auth.introspection is not None or len(issuers) < len(auth.issuers):
        schemes["bearer"] = {"httpAuthSecurityScheme": {"scheme": "Bearer"}}
    if auth.api_keys is not None:
        schemes["apiKey"] = {"apiKeySecurityScheme": {"location": "header",
                                                      "name": auth.api_keys.header}}
    return schemes


def _oauth2(issuer: Issuer, scopes: dict[str, str]) -> dict[str, Any]:
    scheme: dict[str, Any] = {
        "description": f"Access tokens of {issuer.issuer}.",
        "flows": {"clientCredentials": {"tokenUrl": issuer.token_url, "scopes": scopes}},
    }
    parts = urlsplit(issuer.issuer)
    if parts.scheme in ("http", "https") and parts.netloc:  # RFC 8414 §3.1
        scheme["oauth2MetadataUrl"] = \
            f"{parts.scheme}://{parts.netloc}{_METADATA}{parts.path.rstrip('/')}"
    return scheme
