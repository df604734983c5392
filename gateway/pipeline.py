"""The one request pipeline every surface runs through:

    route -> authenticate -> rate limit -> validate -> policy (pre)
          -> upstream -> map -> policy (post) -> render

Routing happens in `app.py`. Authentication, rate limiting and policy are pluggable stages;
until their issues land they admit everything and change nothing. A surface contributes only
its own parts: parsing and validation, the upstream plan, the envelope and the error dialect.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from starlette.requests import Request
from starlette.responses import Response

from gateway import errors, tracing
from gateway.asgi import Scope
from gateway.context import RequestContext
from gateway.model import ALLOW, ANONYMOUS, Decision, Hit, Principal, Query
from gateway.operations import Operation, Placeholders
from gateway.proxy import ProxyTarget
from gateway.upstream_call import UpstreamCalls

if TYPE_CHECKING:
    from gateway.exchange import Exchange
    from gateway.loader import LoadedConfig

K = TypeVar("K", bound=Placeholders)


class Authenticator(Protocol):
    async def authenticate(self, ctx: RequestContext, scope: Scope) -> Principal | Decision:
        """The caller's principal, or a denial."""

    async def aclose(self) -> None: ...


class RateLimiter(Protocol):
    async def check(self, ctx: RequestContext) -> Decision: ...


class Policy(Protocol):
    def before(self, ctx: RequestContext, query: Query) -> Query | Decision:
        """Narrow the query to what the principal may ask, or deny it, before any upstream call."""

    def after(self, ctx: RequestContext, query: Query, hits: list[Hit]) -> list[Hit]:
        """Remove from the hits whatever the principal may not see."""


class AnonymousAuthenticator:
    """No `auth` section: nobody is authenticated, and nobody is refused for it."""

    async def authenticate(self, ctx: RequestContext, scope: Scope) -> Principal:
        return ANONYMOUS

    async def aclose(self) -> None:
        pass


class Unlimited:
    async def check(self, ctx: RequestContext) -> Decision:
        return ALLOW


class OpenPolicy:
    def before(self, ctx: RequestContext, query: Query) -> Query:
        return query

    def after(self, ctx: RequestContext, query: Query, hits: list[Hit]) -> list[Hit]:
        return hits


class Fetch(Protocol):
    """One upstream operation called with its kind's values, its answer mapped onto hits."""

    def __call__(self, operation: Operation[K], values: K) -> Awaitable[list[Hit]]: ...


class RetrievalSurface(Protocol):
    """Parse, then render: what every surface that retrieves through the pipeline defines,
    with `plan` (one upstream call) or `collect` (several)."""

    name: str

    async def parse(self, request: Request, ctx: RequestContext) -> Query:
        """Validate the request into a Query; raise `GatewayError` for bad input."""

    def render(self, query: Query, hits: list[Hit], ctx: RequestContext) -> Response: ...


class PlannedSurface(RetrievalSurface, Protocol):
    def plan(self, query: Query, ctx: RequestContext) -> tuple[Operation[Any], Placeholders]:
        """The one upstream operation that answers the query, and the values it is called with."""


@runtime_checkable
class CollectingSurface(RetrievalSurface, Protocol):
    async def collect(self, query: Query, ctx: RequestContext, fetch: Fetch) -> list[Hit]:
        """The hits, through `fetch` (one upstream call, its answer mapped) as often as needed."""


def denial(decision: Decision) -> errors.GatewayError:
    return errors.GatewayError(
        decision.status, decision.code or "forbidden", decision.reason or "Request denied.",
        details=dict(decision.details), headers=decision.headers,
    )


class Pipeline:
    def __init__(
        self,
        authenticator: Authenticator | None = None,
        limiter: RateLimiter | None = None,
        policy: Policy | None = None,
        identity: Any = None,
        targets: Mapping[str, ProxyTarget] | None = None,
    ) -> None:
        self.authenticator = authenticator or AnonymousAuthenticator()
        self.limiter = limiter or Unlimited()
        self.policy = policy or OpenPolicy()
        self.identity = identity  # IdentityForwarding: who the caller is, told to upstreams
        # The only way surfaces call upstream operations.
        self.upstream = UpstreamCalls(targets or {}, identity)

    @classmethod
    def from_config(
        cls, loaded: LoadedConfig, public_paths: frozenset[str], storage: Any = None,
        resources: dict[str, Any] | None = None, failure_store: Any = None,
        targets: Mapping[str, ProxyTarget] | None = None,
    ) -> Pipeline:
        """The stages a config asks for; `storage` is the rate-limit store to count in,
        `resources` the surfaces' collections and streams the policy decides on,
        `failure_store` the `limits` storage failed authentications are counted in, and
        `targets` the upstreams operations are called on."""
        settings = loaded.settings
        authenticator = limiter = None
        from gateway.policy.engine import PolicyEngine

        assert loaded.bundle is not None
        policy = PolicyEngine(resources or {}, loaded.bundle)
        if settings.auth is not None:
            from gateway.auth.authenticator import Authenticator as BearerAuthenticator
            from gateway.auth.metadata import metadata_url, resource_identifier

            resource = resource_identifier(settings.auth, settings.public_base_url)
            authenticator = BearerAuthenticator(settings.auth, metadata_url(resource),
                                                public_paths, loaded.bundle, failure_store)
        if settings.rate_limits is not None and settings.rate_limits.rules:
            from gateway.ratelimit.limiter import Limiter

            limiter = Limiter(settings.rate_limits, storage)
        from gateway.auth.forwarding import IdentityForwarding

        return cls(authenticator, limiter, policy, IdentityForwarding(settings.auth), targets)

    async def admit(self, ctx: RequestContext, scope: Scope, *,
                    credentials_optional: bool = False) -> None:
        """Authenticate, then rate-limit; raise `GatewayError` when either refuses.

        With `credentials_optional` (public documents that merely personalise for a caller), a
        credential that cannot be used makes the caller anonymous instead of refusing it.
        """
        await self.authenticate(ctx, scope, credentials_optional=credentials_optional)
        await self.limit(ctx)

    async def authenticate(self, ctx: RequestContext, scope: Scope, *,
                           credentials_optional: bool = False) -> None:
        with _stage("aigw.authenticate", self.authenticator, AnonymousAuthenticator):
            outcome = await self.authenticator.authenticate(ctx, scope)
            if isinstance(outcome, Decision):
                tracing.annotate({"aigw.auth.result": "denied"})
                if not credentials_optional:
                    raise denial(outcome)
                outcome = ANONYMOUS
            tracing.annotate({"aigw.auth.result": "anonymous" if outcome.is_anonymous
                              else "authenticated"})
            ctx.principal = outcome

    async def limit(self, ctx: RequestContext) -> None:
        """Count the request; surfaces whose rate-limit key is in the body call it once parsed."""
        with _stage("aigw.rate_limit", self.limiter, Unlimited):
            decision = await self.limiter.check(ctx)
            tracing.annotate({"aigw.ratelimit.result": "allowed" if decision.allowed
                              else "limited"})
            if not decision.allowed:
                raise denial(decision)

    async def retrieve(self, surface: PlannedSurface | CollectingSurface,
                       exchange: Exchange) -> Response:
        """Run every stage after admission for one retrieval request; failures raise (the app
        answers them once, in the owner's dialect)."""
        ctx = exchange.ctx
        ctx.surface = surface.name
        query = await surface.parse(exchange.request, ctx)
        if query.collection is not None:
            tracing.annotate({"aigw.collection": query.collection})
        with tracing.span("aigw.policy", {"aigw.policy.stage": "before"}):
            narrowed = self.policy.before(ctx, query)
            denied = isinstance(narrowed, Decision)
            tracing.annotate({"aigw.policy.effect": "deny" if denied else "allow"})
            if isinstance(narrowed, Decision):
                raise denial(narrowed)

        def fetch(operation: Operation[K], values: K) -> Awaitable[list[Hit]]:
            return self.upstream.hits(operation, values, ctx)

        hits = await surface.collect(narrowed, ctx, fetch) \
            if isinstance(surface, CollectingSurface) \
            else await fetch(*surface.plan(narrowed, ctx))
        with tracing.span("aigw.policy", {"aigw.policy.stage": "after"}):
            kept = self.policy.after(ctx, narrowed, hits)
            tracing.annotate({"aigw.policy.removed": len(hits) - len(kept)})
        with tracing.span("aigw.render"):
            return surface.render(narrowed, kept, ctx)

    async def aclose(self) -> None:
        await self.authenticator.aclose()


def _stage(name: str, stage: object, idle: type) -> AbstractContextManager[Any]:
    """A span for a stage that does work; none for one that admits everything."""
    return tracing.OFF if isinstance(stage, idle) else tracing.span(name)
