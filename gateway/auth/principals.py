"""Verified claims (from a JWT or an introspection response) -> `Principal`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gateway.auth.config import GrantSpec
from gateway.auth.grants import grant_from_claims, grant_from_scopes
from gateway.model import Principal, TokenKind

_KINDS = {"owner": TokenKind.OWNER, "client": TokenKind.CLIENT}


class ClaimsError(ValueError):
    """The token is authentic but its claims cannot be honoured."""


def scopes_of(claims: Mapping[str, Any]) -> frozenset[str]:
    """OAuth `scope` (space-separated string) or `scp` (array or string)."""
    raw = claims.get("scope", claims.get("scp"))
    if raw is None:
        return frozenset()
    if isinstance(raw, str):
        return frozenset(raw.split())
    if isinstance(raw, list) and all(isinstance(s, str) for s in raw):
        return frozenset(raw)
    raise ClaimsError("scope claim has an unexpected type")


def kind_of(claims: Mapping[str, Any], claim: str | None, default: str) -> TokenKind:
    """The token kind from its claim; an unrecognised kind is refused."""
    value = claims.get(claim) if claim else None
    if value is None:
        return _KINDS[default]
    if not isinstance(value, str) or value not in _KINDS:
        raise ClaimsError("unrecognised token kind")
    return _KINDS[value]


def principal_from_claims(
    claims: Mapping[str, Any],
    *,
    kind_claim: str | None,
    default_kind: str,
    grant_claim: str | None,
    detail_types: Iterable[str],
    scope_grants: Mapping[str, GrantSpec],
) -> Principal:
    scopes = scopes_of(claims)
    grant = grant_from_claims(claims, detail_types, grant_claim)
    if grant is None:
        grant = grant_from_scopes(scopes, scope_grants)
    subject = claims.get("sub", claims.get("subject_id"))
    client_id = claims.get("client_id", claims.get("azp"))
    return Principal(
        subject=str(subject) if subject is not None else None,
        client_id=str(client_id) if client_id is not None else None,
        scopes=scopes,
        kind=kind_of(claims, kind_claim, default_kind),
        grant=grant,
    )
