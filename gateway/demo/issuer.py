"""A local OAuth 2.0 token issuer for the aigw demo: the client credentials grant, and the
authorization-code grant with PKCE for clients with `redirect_uris` (authorize.py).

GET  /.well-known/jwks.json                   -> public JWK Set, cacheable for 5 minutes
GET  /.well-known/oauth-authorization-server  -> RFC 8414 metadata
GET  /authorize   the authorization-code grant's first step (authorize.py)
POST /token       grant_type=client_credentials [scope=...] [resource=...], or
                  grant_type=authorization_code (authorize.py)
     -> RFC 6749 §5.1 {access_token, token_type, expires_in, scope}: an RS256 JWT, or an
        opaque token (kept in memory) for clients with token_format "opaque"; its `aud` is the
        RFC 8707 `resource` asked for, else the configured audience
POST /introspect  token=...  -> RFC 7662 answer for this issuer's JWTs and opaque tokens

Both POST endpoints take application/x-www-form-urlencoded bodies and authenticate a configured
client by HTTP Basic or by client_id/client_secret form fields. Errors are RFC 6749 §5.2
{error, error_description}. Tokens and secrets are never logged.

    python -m gateway.demo.issuer --config config/demo.yaml
"""

from __future__ import annotations

import argparse
import base64
import hmac
import secrets
import sys
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.auth.config import DemoClient, DemoIssuer
from gateway.demo.authorize import (
    AuthorizeError,
    Codes,
    query_of,
    redeem,
    redirect,
    resource_of,
)
from gateway.demo.authorize import authorize as approve
from gateway.demo.keys import Key, load_or_create_key, public_jwks
from gateway.demo.tokens import mint_token, read_token, token_claims

NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
AUTH_METHODS = ["client_secret_basic", "client_secret_post"]
CHALLENGE = {"WWW-Authenticate": 'Basic realm="aigw-demo"'}
FORM = "application/x-www-form-urlencoded"
_INTROSPECTED = ("scope", "client_id", "sub", "exp", "iat", "iss", "aud", "pdpp_token_kind",
                 "authorization_details")


class OAuthError(Exception):
    """An RFC 6749 §5.2 error response."""

    def __init__(self, status: int, error: str, description: str,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(description)
        self.status, self.error, self.description = status, error, description
        self.headers = dict(headers or {})


class IssuerState:
    """The issuer's settings and key, and the opaque tokens it has issued (token -> claims)."""

    def __init__(self, settings: DemoIssuer, key: Key) -> None:
        self.settings, self.key = settings, key
        self.jwks = public_jwks(key)
        self.opaque: dict[str, dict[str, Any]] = {}
        self.codes = Codes()

    def issue(self, client_id: str, client: DemoClient, scopes: list[str],
              audience: str | None = None) -> str:
        settings = self.settings
        options: dict[str, Any] = {
            "issuer": settings.url, "audience": audience or settings.audience,
            "subject": client.subject or client_id,
            "client_id": client_id, "scopes": scopes, "kind": client.kind,
            "grant": client.grant, "ttl": settings.ttl,
        }
        if client.token_format == "jwt":
            return mint_token(self.key, **options)
        now = time.time()
        self.opaque = {token: claims for token, claims in self.opaque.items()
                       if claims["exp"] > now}
        token = secrets.token_urlsafe(32)
        self.opaque[token] = token_claims(**options)
        return token

    def claims(self, token: str) -> dict[str, Any] | None:
        """The claims of an active token from this issuer, else None."""
        if token in self.opaque:
            claims = self.opaque[token]
            return claims if claims["exp"] > time.time() else None
        return read_token(self.key, token, issuer=self.settings.url)


def _state(request: Request) -> IssuerState:
    return request.app.state.issuer


async def _form(request: Request) -> dict[str, str]:
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != FORM:
        raise OAuthError(400, "invalid_request", f"The request body must be {FORM}.")
    pairs = parse_qsl((await request.body()).decode("utf-8", "replace"), keep_blank_values=True)
    if len({name for name, _ in pairs}) != len(pairs):
        raise OAuthError(400, "invalid_request", "A request parameter is repeated.")
    return dict(pairs)


def _credentials(authorization: str | None, form: Mapping[str, str]) -> tuple[str, str]:
    """Client id and secret from HTTP Basic or else from the form.

    Basic credentials are taken as sent, not form-decoded: curl -u, httpx and authlib's client
    all send them unencoded, despite RFC 6749 §2.3.1.
    """
    if authorization is None:
        return form.get("client_id", ""), form.get("client_secret", "")
    scheme, _, encoded = authorization.partition(" ")
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except ValueError:
        return "", ""
    if scheme.lower() != "basic" or ":" not in decoded:
        return "", ""
    client_id, _, secret = decoded.partition(":")
    return client_id, secret


def _authenticate(request: Request, form: Mapping[str, str]) -> tuple[str, DemoClient]:
    client_id, secret = _credentials(request.headers.get("authorization"), form)
    client = _state(request).settings.clients.get(client_id)
    expected = client.secret.get_secret_value() if client is not None else ""
    matches = hmac.compare_digest(secret.encode(), expected.encode())
    if client is None or not matches:
        raise OAuthError(401, "invalid_client", "Client authentication failed.", CHALLENGE)
    return client_id, client


def _granted_scopes(client: DemoClient, requested: str | None) -> list[str]:
    """The requested scopes (all of the client's when none are requested)."""
    wanted = set((requested or "").split())
    if not wanted:
        return list(client.scopes)
    if not wanted <= set(client.scopes):
        raise OAuthError(400, "invalid_scope", "The requested scope exceeds the client's scopes.")
    return [scope for scope in client.scopes if scope in wanted]


def _metadata(settings: DemoIssuer) -> dict[str, Any]:
    base = settings.url.rstrip("/")
    return {
        "issuer": settings.url,
        "token_endpoint": f"{base}/token",
        "jwks_uri": f"{base}/.well-known/jwks.json",
        "introspection_endpoint": f"{base}/introspect",
        "authorization_endpoint": f"{base}/authorize",
        "grant_types_supported": ["client_credentials", "authorization_code"],
        "response_types_supported": ["code"],
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": True,
        "token_endpoint_auth_methods_supported": AUTH_METHODS,
        "introspection_endpoint_auth_methods_supported": AUTH_METHODS,
        "scopes_supported": sorted({s for c in settings.clients.values() for s in c.scopes}),
        "authorization_details_types_supported": ["pdpp_grant"],
    }


async def jwks(request: Request) -> Response:
    return JSONResponse(_state(request).jwks, headers={"Cache-Control": "public, max-age=300"})


async def metadata(request: Request) -> Response:
    return JSONResponse(_metadata(_state(request).settings))


async def token(request: Request) -> Response:
    form = await _form(request)
    client_id, client = _authenticate(request, form)
    if "grant_type" not in form:
        raise OAuthError(400, "invalid_request", "grant_type is missing.")
    state = _state(request)
    try:
        if form["grant_type"] == "client_credentials":
            scopes = _granted_scopes(client, form.get("scope"))
            audience = resource_of(form.get("resource"))
        elif form["grant_type"] == "authorization_code":
            approval = redeem(form, client_id, state.codes)
            scopes, audience = approval.scopes, approval.resource
        else:
            raise OAuthError(400, "unsupported_grant_type",
                             "Only client_credentials and authorization_code are supported.")
    except AuthorizeError as exc:
        raise OAuthError(400, exc.error, exc.description) from None
    access_token = state.issue(client_id, client, scopes, audience)
    return JSONResponse({"access_token": access_token, "token_type": "Bearer",
                         "expires_in": state.settings.ttl, "scope": " ".join(scopes)},
                        headers=NO_STORE)


async def authorize(request: Request) -> Response:
    settings = _state(request).settings
    query: dict[str, str] = {}
    try:
        query = query_of(request)
        uri, params = approve(query, settings.clients, _state(request).codes)
    except AuthorizeError as exc:
        if not exc.redirect:
            raise OAuthError(400, exc.error, exc.description) from None
        uri, params = query["redirect_uri"], {"error": exc.error,
                                              "error_description": exc.description}
    return redirect(uri, params, query.get("state"), settings.url)


async def introspect(request: Request) -> Response:
    form = await _form(request)
    _authenticate(request, form)
    if "token" not in form:
        raise OAuthError(400, "invalid_request", "token is missing.")
    claims = _state(request).claims(form["token"])
    if claims is None:
        return JSONResponse({"active": False}, headers=NO_STORE)
    answer = {key: claims[key] for key in _INTROSPECTED if key in claims}
    answer.update(active=True, token_type="Bearer", subject_id=claims["sub"])
    return JSONResponse(answer, headers=NO_STORE)


async def _oauth_error(request: Request, exc: OAuthError) -> Response:
    return JSONResponse({"error": exc.error, "error_description": exc.description},
                        status_code=exc.status, headers={**NO_STORE, **exc.headers})


ROUTES = [
    Route("/.well-known/jwks.json", jwks),
    Route("/.well-known/oauth-authorization-server", metadata),
    Route("/authorize", authorize),
    Route("/token", token, methods=["POST"]),
    Route("/introspect", introspect, methods=["POST"]),
]


def create_issuer_app(settings: DemoIssuer, key: Key) -> Starlette:
    """The issuer app; opaque tokens live in this app's memory only."""
    # Starlette types every handler as taking any Exception; this one gets an OAuthError.
    app = Starlette(routes=ROUTES,
                    exception_handlers={OAuthError: _oauth_error})  # type: ignore[dict-item]
    app.state.issuer = IssuerState(settings, key)
    return app


def load_issuer(config_path: str) -> tuple[DemoIssuer, Key]:
    """`demo.issuer` of a gateway config and its key (key_file is relative to the config).

    Prints the problem and exits with status 1 when the config or key cannot be used.
    """
    from gateway.console import load_or_exit

    loaded = load_or_exit(config_path)
    demo = loaded.settings.demo
    if demo is None or demo.issuer is None:
        print(f"{config_path}: no demo.issuer section; the demo token issuer is not configured",
              file=sys.stderr)
        raise SystemExit(1)
    key_path = loaded.path.parent / demo.issuer.key_file
    try:
        return demo.issuer, load_or_create_key(key_path)
    except (OSError, ValueError) as exc:
        print(f"{key_path}: cannot use the issuer key: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Run the aigw demo OAuth token issuer.")
    parser.add_argument("--config", "-c", default="config/demo.yaml")
    args = parser.parse_args(argv)
    settings, key = load_issuer(args.config)
    uvicorn.run(create_issuer_app(settings, key), host="127.0.0.1", port=settings.port)


if __name__ == "__main__":
    main()
