"""Access tokens of the demo issuer: RS256 JWTs carrying scopes, a token kind and a PDPP grant."""

from __future__ import annotations

import secrets
import time
import warnings
from typing import Any

from authlib.deprecate import AuthlibDeprecationWarning

from gateway.auth.config import GrantSpec

with warnings.catch_warnings():  # authlib.jose is deprecated in favour of joserfc, still works
    warnings.simplefilter("ignore", AuthlibDeprecationWarning)
    from authlib.jose import JsonWebToken, Key
    from authlib.jose.errors import JoseError

_JWT = JsonWebToken(["RS256"])


def token_claims(
    *, issuer: str, audience: str, subject: str, client_id: str | None, scopes: list[str],
    kind: str, grant: GrantSpec | None, ttl: int,
) -> dict[str, Any]:
    """The claims of a new access token, valid from now for `ttl` seconds."""
    now = int(time.time())
    claims: dict[str, Any] = {
        "iss": issuer, "aud": audience, "sub": subject, "scope": " ".join(scopes),
        "iat": now, "nbf": now, "exp": now + ttl, "jti": secrets.token_urlsafe(16),
        "pdpp_token_kind": kind,
    }
    if client_id is not None:
        claims["client_id"] = client_id
    if grant is not None:
        streams = [{"name": name, "fields": fields} for name, fields in grant.items()]
        claims["authorization_details"] = [{"type": "pdpp_grant", "streams": streams}]
    return claims


def mint_token(
    key: Key, *, issuer: str, audience: str, subject: str, client_id: str | None,
    scopes: list[str], kind: str, grant: GrantSpec | None, ttl: int,
) -> str:
    """An RS256 JWT access token signed with `key` (its `kid` in the header)."""
    claims = token_claims(issuer=issuer, audience=audience, subject=subject, client_id=client_id,
                          scopes=scopes, kind=kind, grant=grant, ttl=ttl)
    return sign_claims(key, claims)


def sign_claims(key: Key, claims: dict[str, Any]) -> str:
    """`claims` as an RS256 JWT access token signed with `key` (its `kid` in the header)."""
    header = {"alg": "RS256", "typ": "at+jwt", "kid": key.thumbprint()}
    return _JWT.encode(header, claims, key).decode("ascii")


def _required(issuer: str) -> dict[str, Any]:
    return {"iss": {"essential": True, "value": issuer}, "exp": {"essential": True}}


def read_token(key: Key, token: str, *, issuer: str) -> dict[str, Any] | None:
    """The claims of a JWT this issuer signed and that is valid now, else None."""
    try:
        # types-Authlib leaves a Key out of decode's key types; authlib takes one as it is
        claims = _JWT.decode(token, key, claims_options=_required(issuer))  # type: ignore[call-overload]
        claims.validate()
    except (JoseError, ValueError, TypeError):
        return None
    return dict(claims)
