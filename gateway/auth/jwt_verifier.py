"""Bearer JWT verification with pyjwt against configured issuers' JWKS."""

from __future__ import annotations

from typing import Any

import httpx
import jwt

from gateway.auth.config import Issuer
from gateway.auth.jwks import JwksCache

# Which key types may verify which algorithm families: an RSA public key never verifies an
# HMAC or EC signature, whatever the token header claims.
_KEY_TYPES = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}


class InvalidToken(Exception):
    """The token failed verification; the message is safe to show the caller."""


class NotOurs(Exception):
    """Not a JWT of a configured issuer: another verifier (introspection) may know it.
    `issuer`: the unverified `iss` of a JWT naming an issuer not configured here."""

    def __init__(self, issuer: str | None = None) -> None:
        super().__init__()
        self.issuer = issuer


_ISSUER_SHOWN = 100  # characters of an unknown issuer a refusal quotes


def untrusted_issuer(issuer: str) -> InvalidToken:
    """The refusal of a token from `issuer`, quoted short and in characters that fit the
    quoted `error_description` of a challenge (RFC 6750 §3), so it can carry nothing else."""
    shown = "".join(c if " " <= c <= "~" and c not in '"\\' else "?"
                    for c in issuer[:_ISSUER_SHOWN])
    if len(issuer) > _ISSUER_SHOWN:
        shown += "..."
    return InvalidToken(f"The token's issuer '{shown}' is not one this gateway trusts.")


class JwtVerifier:
    def __init__(self, issuers: list[Issuer], http: httpx.AsyncClient,
                 resource_audiences: list[str] | None = None) -> None:
        """`resource_audiences`: accepted from every issuer besides its own `audiences`
        (those of resources of the gateway's own: the caller decides where such a token
        may be used, gateway.auth.audiences)."""
        self._issuers = {issuer.issuer: (issuer, JwksCache(issuer, http)) for issuer in issuers}
        self._more = list(resource_audiences or ())

    async def verify(self, token: str) -> tuple[Issuer, dict[str, Any]]:
        """Verified claims; `NotOurs` when the token is no JWT of a configured issuer."""
        if token.count(".") != 2:
            raise NotOurs()
        try:
            header = jwt.get_unverified_header(token)
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            raise InvalidToken("The token is malformed.") from None
        issuer_claim = unverified.get("iss")
        entry = self._issuers.get(issuer_claim) if isinstance(issuer_claim, str) else None
        if entry is None:
            raise NotOurs(issuer_claim if isinstance(issuer_claim, str) else None)
        issuer, jwks = entry
        algorithm = header.get("alg")
        if algorithm not in issuer.algorithms:
            raise InvalidToken("The token's signing algorithm is not accepted.")
        key = await jwks.key(header.get("kid"))
        if key is None:
            raise InvalidToken("The token's signing key is unknown.")
        if key.key_type != _KEY_TYPES.get(algorithm[:2]):
            raise InvalidToken("The token's signing algorithm does not match its key.")
        return issuer, _decode(token, key, algorithm, issuer, [*issuer.audiences, *self._more])


_TIME_CLAIMS = ("exp", "nbf", "iat")


def _decode(token: str, key: jwt.PyJWK, algorithm: str, issuer: Issuer,
            audiences: list[str]) -> dict[str, Any]:
    claims = _verified_claims(token, key, algorithm, issuer, audiences)
    # RFC 7519 §2 makes these NumericDate values; PyJWT also takes "123" and leaves it a string.
    for name in _TIME_CLAIMS:
        value = claims.get(name)
        if name in claims and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise InvalidToken(f"The token's {name} claim is not a number.")
    return claims


def _verified_claims(token: str, key: jwt.PyJWK, algorithm: str, issuer: Issuer,
                     audiences: list[str]) -> dict[str, Any]:
    try:
        return jwt.decode(
            token, key.key, algorithms=[algorithm], audience=audiences,
            issuer=issuer.issuer, leeway=issuer.clock_skew,
            options={"require": ["exp", "iss", "aud"], "verify_iat": True},
        )
    except jwt.ExpiredSignatureError:
        raise InvalidToken("The token has expired.") from None
    except jwt.ImmatureSignatureError:
        raise InvalidToken("The token is not valid yet.") from None
    except jwt.InvalidAudienceError:
        raise InvalidToken("The token is not meant for this resource.") from None
    except jwt.PyJWTError:
        raise InvalidToken("The token could not be verified.") from None
