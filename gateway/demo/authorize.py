"""The demo issuer's authorization-code grant (RFC 6749 §4.1), for clients that sign in the way
MCP clients do: PKCE (RFC 7636, S256 only) and resource indicators (RFC 8707).

GET /authorize  response_type=code client_id redirect_uri state code_challenge
                code_challenge_method=S256 [scope] [resource]
     -> 302 to redirect_uri?code=...&state=...&iss=<issuer> (RFC 9207). A client configured
        with `redirect_uris` is approved at once, for its configured subject: the demo has no
        users to ask. An unknown client or a redirect URI it did not register is answered 400
        here, never redirected; any other error is redirected (§4.1.2.1).
POST /token     grant_type=authorization_code code redirect_uri code_verifier [resource]
     -> a token for the scopes approved, whose `aud` is the `resource` asked for (else the
        issuer's audience). A code is good once, for 60 s, to the client it was issued to.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from gateway.auth.config import DemoClient

CODE_SECONDS = 60
_MOST_CODES = 1000  # outstanding codes kept; past it the oldest go
_VERIFIER = re.compile(r"[A-Za-z0-9._~-]{43,128}")  # RFC 7636 §4.1
_CHALLENGE = re.compile(r"[A-Za-z0-9_-]{43}")  # a base64url SHA-256, unpadded


class AuthorizeError(Exception):
    """An RFC 6749 error: `redirect` says whether it may be sent to the client's redirect URI."""

    def __init__(self, error: str, description: str, *, redirect: bool = True) -> None:
        super().__init__(description)
        self.error, self.description, self.redirect = error, description, redirect


@dataclass(frozen=True, slots=True)
class Approval:
    client_id: str
    redirect_uri: str
    challenge: str
    scopes: list[str]
    resource: str | None
    expires: float


class Codes:
    """Outstanding authorization codes, in memory, each redeemable once."""

    def __init__(self) -> None:
        self._codes: dict[str, Approval] = {}

    def issue(self, approval: Approval) -> str:
        now = time.time()
        self._codes = {code: kept for code, kept in self._codes.items() if kept.expires > now}
        while len(self._codes) >= _MOST_CODES:
            del self._codes[next(iter(self._codes))]
        code = secrets.token_urlsafe(32)
        self._codes[code] = approval
        return code

    def redeem(self, code: str) -> Approval | None:
        approval = self._codes.pop(code, None)
        return approval if approval is not None and approval.expires > time.time() else None


def authorize(query: Mapping[str, str], clients: Mapping[str, DemoClient],
              codes: Codes) -> tuple[str, dict[str, str]]:
    """The redirect URI and the parameters to send there, for a valid request."""
    client = clients.get(query.get("client_id", ""))
    redirect_uri = query.get("redirect_uri", "")
    if client is None or redirect_uri not in client.redirect_uris:
        raise AuthorizeError("invalid_request", "Unknown client, or a redirect_uri it did not "
                             "register.", redirect=False)
    if query.get("response_type") != "code":
        raise AuthorizeError("unsupported_response_type", "Only response_type=code is served.")
    if query.get("code_challenge_method") != "S256" or \
            not _CHALLENGE.fullmatch(query.get("code_challenge", "")):
        raise AuthorizeError("invalid_request", "PKCE is required: an S256 code_challenge.")
    approval = Approval(query["client_id"], redirect_uri, query["code_challenge"],
                        approved_scopes(client, query.get("scope")),
                        resource_of(query.get("resource")), time.time() + CODE_SECONDS)
    return redirect_uri, {"code": codes.issue(approval)}


def redeem(form: Mapping[str, str], client_id: str, codes: Codes) -> Approval:
    """The approval a valid code exchange redeems (its client already authenticated)."""
    approval = codes.redeem(form.get("code", ""))
    if approval is None or approval.client_id != client_id \
            or approval.redirect_uri != form.get("redirect_uri"):
        raise AuthorizeError("invalid_grant", "The code is unknown, used, expired, or not "
                             "this client's.")
    verifier = form.get("code_verifier", "")
    digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=")
    if not _VERIFIER.fullmatch(verifier) or not hmac.compare_digest(digest,
                                                                      approval.challenge.encode()):
        raise AuthorizeError("invalid_grant", "The code_verifier does not match the challenge.")
    asked = resource_of(form.get("resource"))
    if asked is not None and asked != approval.resource:
        raise AuthorizeError("invalid_target", "The resource differs from the one authorized.")
    return approval


def approved_scopes(client: DemoClient, requested: str | None) -> list[str]:
    """The requested scopes the client has (RFC 6749 §3.3 lets a server grant fewer); all of
    the client's when none are requested."""
    wanted = set((requested or "").split())
    granted = [scope for scope in client.scopes if not wanted or scope in wanted]
    if wanted and not granted:
        raise AuthorizeError("invalid_scope", "None of the requested scopes is the client's.")
    return granted


def resource_of(value: str | None) -> str | None:
    """An RFC 8707 resource indicator: an absolute URI without a fragment."""
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.fragment \
            or "#" in value:
        raise AuthorizeError("invalid_target", "resource must be an absolute http(s) URI "
                             "without a fragment.")
    return value


def query_of(request: Request) -> dict[str, str]:
    pairs = parse_qsl(request.url.query, keep_blank_values=True)
    if len({name for name, _ in pairs}) != len(pairs):
        raise AuthorizeError("invalid_request", "A request parameter is repeated.",
                             redirect=False)
    return dict(pairs)


def redirect(uri: str, params: dict[str, str], state: str | None, issuer: str) -> Response:
    sent = {**params, **({"state": state} if state is not None else {}), "iss": issuer}
    joiner = "&" if urlsplit(uri).query else "?"
    return RedirectResponse(f"{uri}{joiner}{urlencode(sent)}", status_code=302,
                            headers={"Cache-Control": "no-store"})
