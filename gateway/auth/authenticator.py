"""The authenticate stage: credential -> verified Principal -> the route decision (the policy
engine's, gateway.auth.routes), or a denial that carries the RFC 6750 challenge pointing at the
RFC 9728 metadata."""

from __future__ import annotations

import time
from typing import Any

import httpx

from gateway import tracing
from gateway.asgi import Scope
from gateway.auth.apikeys import ApiKeyStore
from gateway.auth.audiences import Limit, ResourceAudiences
from gateway.auth.cache import TtlCache, digest
from gateway.auth.config import Auth
from gateway.auth.credentials import BadCredentials, Credential, OversizedToken, extract
from gateway.auth.failures import FailureLimiter, TooManyFailures
from gateway.auth.grants import GrantError
from gateway.auth.introspection import IntrospectionUnavailable, Introspector
from gateway.auth.jwt_verifier import InvalidToken, JwtVerifier, NotOurs, untrusted_issuer
from gateway.auth.metadata import MetadataUrls
from gateway.auth.principals import ClaimsError, principal_from_claims
from gateway.auth.routes import RouteTable
from gateway.context import RequestContext
from gateway.model import ANONYMOUS, Decision, Principal, deny
from gateway.observability import AUTH_FAILURES
from gateway.policy.bundle import PolicyBundle
from gateway.policy.decisions import note
from gateway.policy.rules import Outcome
from gateway.ratelimit.counters import limits_storage


class Authenticator:
    def __init__(self, auth: Auth, metadata: MetadataUrls, public_paths: frozenset[str],
                 bundle: PolicyBundle | None = None, failure_store: Any = None,
                 audiences: ResourceAudiences | None = None) -> None:
        self.auth = auth
        self.routes = RouteTable(auth, public_paths, bundle)
        self._metadata = metadata
        self._audiences = audiences or ResourceAudiences()
        self._http = httpx.AsyncClient(trust_env=False, follow_redirects=False)
        self._jwt = JwtVerifier(auth.issuers, self._http, self._audiences.audiences) \
            if auth.issuers else None
        self._introspector = Introspector(auth.introspection) if auth.introspection else None
        self.api_keys = ApiKeyStore(auth.api_keys) if auth.api_keys else None
        # Each verified credential's caller, and where it may be used (audiences.py).
        self._verified: TtlCache[tuple[Principal, Limit]] = TtlCache(auth.verified_cache_size)
        self._failures = None if auth.failure_limit is None else FailureLimiter(
            auth.failure_limit, failure_store or limits_storage("memory://", "", 1.0))

    async def authenticate(self, ctx: RequestContext, scope: Scope) -> Principal | Decision:
        """The caller (anonymous without a credential), then the route rules' decision for
        it: a credential that fails is refused before any rule is asked."""
        principal = await self._authenticate(ctx, scope)
        if isinstance(principal, Decision) or self.routes.is_document(ctx.path):
            return principal
        outcome = self.routes.decide(ctx.path, ctx.method, principal)
        note(ctx, "gateway", self.routes.ask(ctx.path, ctx.method, principal), outcome,
             self.routes.shadow(ctx.path, ctx.method, principal))
        if outcome.effect == "allow":
            return principal
        return self._refused(ctx.path, principal, outcome)

    def admits(self, principal: Principal, path: str, method: str) -> bool:
        return self.routes.admits(principal, path, method)

    def _refused(self, path: str, principal: Principal, outcome: Outcome) -> Decision:
        """A denied route: 401 for a caller without a token (one may be let in), else 403,
        naming the scopes the path's allow-list asks for when that is what refused it."""
        if principal.is_anonymous:
            return self._refuse(401, "missing_credentials", path=path)
        scopes = self.routes.required_scopes(outcome)
        return self._refuse(403, "insufficient_scope",
                            "The token lacks a scope this route requires." if scopes else
                            "This token may not call this route.",
                            scope=" ".join(sorted(scopes)) or None, path=path)

    async def _authenticate(self, ctx: RequestContext, scope: Scope) -> Principal | Decision:
        try:
            credential = extract(scope, self.auth, self.api_keys.header if self.api_keys else None)
            if credential is None:
                return ANONYMOUS
            tracing.annotate({"aigw.auth.credential": credential.kind})
            principal, limit = await self._resolve(ctx.client, credential)
            # An inner request is served for the resource its outer request was made to.
            if self._audiences.admits(limit, ctx.served_for or ctx.path):
                return principal
            # A good token shown at another resource is no failed authentication (not counted
            # against the address); the public documents read it as no credential at all.
            if self.routes.is_document(ctx.path):
                return ANONYMOUS
            return self._refuse(401, "invalid_token", "The token is not meant for this "
                                "resource.", path=ctx.path)
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

    async def _resolve(self, address: str, credential: Credential) -> tuple[Principal, Limit]:
        """The credential's principal and where it may be used: from the cache of verified
        ones, else verified now, which an address past its failure limit is refused
        (`TooManyFailures`)."""
        if credential.kind == "bearer":
            found, verified = self._verified.get(credential.value)
            tracing.annotate({"aigw.auth.cache": "hit" if found else "miss"})
            if found and verified is not None:
                return verified
        if self._failures is None:
            return await self._verify(credential)
        async with self._failures.verifying(address, digest(credential.value)):
            return await self._verify(credential)

    async def _verify(self, credential: Credential) -> tuple[Principal, Limit]:
        if credential.kind == "api_key":
            principal = self.api_keys.principal(credential.value) if self.api_keys else None
            if principal is None:
                raise InvalidToken("The API key is not recognised.")
            return principal, None
        unknown_issuer = None
        if self._jwt is not None:
            try:
                issuer, claims = await self._jwt.verify(credential.value)
            except NotOurs as exc:
                unknown_issuer = exc.issuer
            else:
                verified = (self._principal(claims, issuer.token_kind_claim,
                                            issuer.default_token_kind, issuer.grant_claim),
                            self._audiences.limit(claims["aud"], issuer.audiences))
                self._verified.put(credential.value, verified, claims["exp"] - time.time())
                return verified
        if self._introspector is not None:
            return await self._introspect(credential.value, unknown_issuer)
        if unknown_issuer is not None:
            raise untrusted_issuer(unknown_issuer)
        raise InvalidToken("The token is not recognised.")

    async def _introspect(self, token: str, unknown_issuer: str | None
                          ) -> tuple[Principal, Limit]:
        """The introspected token; refused naming its issuer when it is a JWT of an issuer
        not configured here that the introspection endpoint does not know either."""
        assert self._introspector is not None
        answer = await self._introspector.introspect(token)
        if answer is None:
            if unknown_issuer is not None:
                raise untrusted_issuer(unknown_issuer)
            raise InvalidToken("The token is not active.")
        settings = self._introspector.settings
        verified = (self._principal(answer, settings.token_kind_field,
                                    settings.default_token_kind, None),
                    self._audiences.limit(answer.get("aud"), None))
        self._verified.put(token, verified, self._introspector.positive_ttl(answer))
        return verified

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

