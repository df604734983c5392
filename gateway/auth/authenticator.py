"""The authenticate stage: credential -> verified Principal -> scope check, or a denial that
carries the RFC 6750 challenge pointing at the RFC 9728 metadata."""

from __future__ import annotations

import functools
import time
from typing import Any

import httpx

from gateway import tracing
from gateway.asgi import Scope
from gateway.auth.apikeys import ApiKeyStore
from gateway.auth.cache import TtlCache, digest
from gateway.auth.config import Auth
from gateway.auth.credentials import BadCredentials, Credential, OversizedToken, extract
from gateway.auth.failures import FailureLimiter, TooManyFailures
from gateway.auth.grants import GrantError
from gateway.auth.introspection import IntrospectionUnavailable, Introspector
from gateway.auth.jwt_verifier import InvalidToken, JwtVerifier, NotOurs
from gateway.auth.metadata import MetadataUrls
from gateway.auth.principals import ClaimsError, principal_from_claims
from gateway.auth.routes import Access, RouteTable
from gateway.context import RequestContext
from gateway.model import ANONYMOUS, Decision, Principal, deny
from gateway.observability import AUTH_FAILURES
from gateway.policy.bundle import PolicyBundle
from gateway.policy.decisions import note
from gateway.policy.rules import Effect, Outcome
from gateway.ratelimit.counters import limits_storage

_POLICY_REFUSALS = ("missing_credentials", "insufficient_scope")


class Authenticator:
    def __init__(self, auth: Auth, metadata: MetadataUrls, public_paths: frozenset[str],
                 bundle: PolicyBundle | None = None, failure_store: Any = None) -> None:
        self.auth = auth
        rules = bundle.of_kind("route", shadow=True) if bundle is not None else None
        self.routes = RouteTable(auth, public_paths, rules)
        self._metadata = metadata
        self._http = httpx.AsyncClient(trust_env=False, follow_redirects=False)
        self._jwt = JwtVerifier(auth.issuers, self._http) if auth.issuers else None
        self._introspector = Introspector(auth.introspection) if auth.introspection else None
        self.api_keys = ApiKeyStore(auth.api_keys) if auth.api_keys else None
        self._verified: TtlCache[Principal] = TtlCache(auth.verified_cache_size)
        self._failures = None if auth.failure_limit is None else FailureLimiter(
            auth.failure_limit, failure_store or limits_storage("memory://", "", 1.0))

    async def authenticate(self, ctx: RequestContext, scope: Scope) -> Principal | Decision:
        access = self.routes.access(ctx.path, ctx.method)
        outcome = await self._authenticate(ctx, scope, access)
        if isinstance(outcome, Principal) and not access.public and \
                not access.scopes <= outcome.scopes:
            refused = self._refuse(403, "insufficient_scope",
                                   "The token lacks a scope this route requires.",
                                   scope=" ".join(sorted(access.scopes)), path=ctx.path)
            self._note(ctx, access, refused, outcome)  # the caller refused, not an anonymous one
            return refused
        self._note(ctx, access, outcome)
        return outcome

    def admits(self, principal: Principal, path: str, method: str) -> bool:
        access = self.routes.access(path, method)
        return access.public or (not principal.is_anonymous and access.scopes <= principal.scopes)

    def _note(self, ctx: RequestContext, access: Access, outcome: Principal | Decision,
              caller: Principal = ANONYMOUS) -> None:
        """Record the route decision: not for discovery documents (no rule governs them) nor
        for credentials that failed (authentication, not policy). A refusal is noted for
        `caller`: anonymous without credentials, else the one whose token lacked a scope."""
        if self.routes.is_document(ctx.path):
            return
        if isinstance(outcome, Decision) and outcome.code not in _POLICY_REFUSALS:
            return
        if isinstance(outcome, Principal):
            principal, decided = outcome, _route_outcome(access.rule, "allow", "admitted")
        else:
            principal = caller
            decided = _route_outcome(access.rule, "deny", outcome.code or "refused")
        note(ctx, "gateway", self.routes.ask(ctx.path, ctx.method, principal), decided,
             self.routes.shadow(ctx.path, ctx.method, principal))

    async def _authenticate(self, ctx: RequestContext, scope: Scope,
                            access: Access) -> Principal | Decision:
        try:
            credential = extract(scope, self.auth, self.api_keys.header if self.api_keys else None)
            if credential is None:
                return ANONYMOUS if access.public else \
                    self._refuse(401, "missing_credentials", path=ctx.path)
            tracing.annotate({"aigw.auth.credential": credential.kind})
            return await self._resolve(ctx.client, credential)
        except BadCredentials as exc:
            return await self._failed(ctx, 401, "invalid_request", str(exc))
        except OversizedToken:
            return await self._failed(ctx, 401, "invalid_token", "The token is too large.")
        except (InvalidToken, ClaimsError, GrantError) as exc:
            return await self._failed(ctx, 401, "invalid_token", str(exc))
        except TooManyFailures as exc:
            return self._too_many_failures(exc.retry_after)
        except IntrospectionUnavailable:
            return self._refuse(503, "auth_unavailable",
                                "The token could not be checked right now; retry later.",
                                path=ctx.path)

    async def _resolve(self, address: str, credential: Credential) -> Principal:
        """The credential's principal: from the cache of verified ones, else verified now,
        which an address past its failure limit is refused (`TooManyFailures`)."""
        if credential.kind == "bearer":
            found, principal = self._verified.get(credential.value)
            tracing.annotate({"aigw.auth.cache": "hit" if found else "miss"})
            if found and principal is not None:
                return principal
        if self._failures is None:
            return await self._verify(credential)
        async with self._failures.verifying(address, digest(credential.value)):
            return await self._verify(credential)

    async def _verify(self, credential: Credential) -> Principal:
        if credential.kind == "api_key":
            principal = self.api_keys.principal(credential.value) if self.api_keys else None
            if principal is None:
                raise InvalidToken("The API key is not recognised.")
            return principal
        if self._jwt is not None:
            try:
                issuer, claims = await self._jwt.verify(credential.value)
            except NotOurs:
                pass
            else:
                principal = self._principal(claims, issuer.token_kind_claim,
                                            issuer.default_token_kind, issuer.grant_claim)
                self._verified.put(credential.value, principal, claims["exp"] - time.time())
                return principal
        if self._introspector is not None:
            return await self._introspect(credential.value)
        raise InvalidToken("The token is not recognised.")

    async def _introspect(self, token: str) -> Principal:
        assert self._introspector is not None
        answer = await self._introspector.introspect(token)
        if answer is None:
            raise InvalidToken("The token is not active.")
        settings = self._introspector.settings
        principal = self._principal(answer, settings.token_kind_field,
                                    settings.default_token_kind, None)
        self._verified.put(token, principal, self._introspector.positive_ttl(answer))
        return principal

    def _principal(self, claims: dict, kind_claim: str | None, default_kind: str,
                   grant_claim: str | None) -> Principal:
        try:
            return principal_from_claims(
                claims, kind_claim=kind_claim, default_kind=default_kind,
                grant_claim=grant_claim, detail_types=self.auth.authorization_details_types,
                scope_grants=self.auth.scope_grants,
            )
        except (TypeError, AttributeError, KeyError) as exc:
            # Claims of unexpected shapes: an authentic token we still cannot honour.
            raise ClaimsError("The token's claims cannot be used.") from exc

    async def _failed(self, ctx: RequestContext, status: int, code: str,
                      description: str) -> Decision:
        """A credential that did not authenticate: counted against the caller's address."""
        if self._failures is not None:
            await self._failures.record(ctx.client)
        return self._refuse(status, code, description, path=ctx.path)

    def _too_many_failures(self, retry_after: int) -> Decision:
        AUTH_FAILURES.labels("rate_limited").inc()
        return deny(429, "rate_limited", "Too many failed authentications from this address; "
                    "retry later.", (("retry-after", str(retry_after)),),
                    {"reason": "auth_failures"})

    def _refuse(self, status: int, code: str, description: str | None = None,
                scope: str | None = None, *, path: str) -> Decision:
        AUTH_FAILURES.labels(code).inc()
        headers = (("www-authenticate", self._challenge(code, description, scope, path)),) \
            if status in (401, 403) else ()
        return deny(status, code, description or "Authentication is required.", headers)

    def _challenge(self, code: str, description: str | None, scope: str | None,
                   path: str) -> str:
        params = [f'realm="{self.auth.realm}"']
        if code in ("invalid_request", "invalid_token", "insufficient_scope"):
            params.append(f'error="{code}"')
        if description and code != "missing_credentials":
            params.append(f'error_description="{description}"')
        if scope:
            params.append(f'scope="{scope}"')
        params.append(f'resource_metadata="{self._metadata.url_for(path)}"')
        return "Bearer " + ", ".join(params)

    async def aclose(self) -> None:
        await self._http.aclose()
        if self._introspector is not None:
            await self._introspector.aclose()


@functools.lru_cache(maxsize=1024)
def _route_outcome(rule: str | None, effect: Effect, why: str) -> Outcome:
    """A route decision's outcome (immutable, so one per rule and effect serves every request)."""
    return Outcome(effect, rule, "enforce", why)
