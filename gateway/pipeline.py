"""The one request pipeline every surface runs through, in one stage order:

    admit:    [read body, verify its signature] -> authenticate -> [rate-limit key] -> limit
    retrieve: parse -> policy (pre) -> upstream -> map -> policy (post) -> render
    listing:  the surface's resources -> policy (read, each) -> render
    serve:    the surface parses, asks `permitted` (and `record_visibilities` of the records
              it keeps) and reads through `Stages`, renders

Routing and the error answers happen in `dispatch.py`; `admit` runs before a surface endpoint
as its route declares (`surface.Admission`), and the endpoint hands its request to `retrieve`
(or `listing`, or `serve` when its answer is not a page of hits). Authentication, rate
limiting, the policy engine and upstream calls are called from here only: a surface contributes
parsing and validation, the upstream plan, the envelope and the error dialect, and reaches the
upstream through the `Stages` it is handed. An endpoint outside retrieval asks the policy stage
through `permitted` and calls upstreams (or URLs its clients registered) through the `Calls` it
gets from `calls` (both handles: gateway/handles.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from starlette.requests import Request
from starlette.responses import Response

from gateway import errors, tracing
from gateway.asgi import Scope
from gateway.bodies import read_capped
from gateway.context import RequestContext
from gateway.handles import Calls, Stages
from gateway.model import ALLOW, ANONYMOUS, Decision, Hit, Principal, Query
from gateway.operations import Operation, Placeholders
from gateway.policy.decisions import Again, note_again
from gateway.proxy import ProxyTarget
from gateway.upstream_call import UpstreamCalls
from gateway.upstream_urls import UpstreamUrls

if TYPE_CHECKING:
    from typing_extensions import TypeIs

    from gateway.exchange import Exchange
    from gateway.loader import LoadedConfig
    from gateway.policy.engine import Resource
    from gateway.policy.rules import Ask
    from gateway.upstream.egress.client import EgressClient

K = TypeVar("K", bound=Placeholders)
# What a denied ask takes out of an answer (fields, result parts), as the decision log names it.
Removes = Callable[["Ask"], tuple[str, ...]]


class Authenticator(Protocol):
    async def authenticate(self, ctx: RequestContext, scope: Scope) -> Principal | Decision:
        """The caller's principal, or a denial."""

    def admits(self, principal: Principal, path: str, method: str) -> bool:
        """Whether the route rules let `principal` use `method path`."""

    async def aclose(self) -> None: ...


class RateLimiter(Protocol):
    async def check(self, ctx: RequestContext) -> Decision: ...


class BodyFirst(Protocol):
    """A route whose credential may cover its body (a signed request): the pipeline reads the
    body before it authenticates, and the rate limit may key on what the body says."""

    @property
    def reads_body_first(self) -> bool:
        """False: no signature is ever checked here, so authenticate before reading."""

    def body_limit(self, exchange: Exchange) -> int:
        """The largest body this route reads."""

    async def verify(self, exchange: Exchange, body: bytes) -> Principal | None:
        """The principal a valid signature proves; None when the request is not signed (the
        pipeline authenticates it instead). Raises `GatewayError` for a refused signature."""

    def learn_limit_key(self, exchange: Exchange) -> None:
        """Set what the rate limit keys on from `exchange.body` (never raises: a body that
        cannot be read is counted all the same, and refused by the endpoint)."""


class Policy(Protocol):
    def before(self, ctx: RequestContext, query: Query) -> Query | Decision:
        """Narrow the query to what the principal may ask, or deny it, before any upstream call."""

    def after(self, ctx: RequestContext, query: Query, hits: list[Hit]) -> list[Hit]:
        """Remove from the hits whatever the principal may not see."""

    def readable(self, ctx: RequestContext, names: Iterable[str]) -> list[str]:
        """Those of the named resources the principal may read."""

    def vectors_possible(self, names: Iterable[str] | None = None) -> bool:
        """Whether any caller could ever get stored vectors back from these resources."""

    def permitted(self, ctx: RequestContext, asks: Sequence[Ask],
                  removes: Removes | None = None) -> list[bool]:
        """Whether the rules allow each ask, each decision noted for the decision log (with
        `removes(ask)`, what a denied ask takes out of the answer)."""

    def record_visibilities(self, ctx: RequestContext, name: str,
                            resource: Resource) -> frozenset[str] | None:
        """The record visibilities the principal may see in a resource a surface serves as
        `name` from records it keeps (None: every record's), each decision noted."""


class AnonymousAuthenticator:
    """No `auth` section: nobody is authenticated, and nobody is refused for it."""

    async def authenticate(self, ctx: RequestContext, scope: Scope) -> Principal:
        return ANONYMOUS

    def admits(self, principal: Principal, path: str, method: str) -> bool:
        return True

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

    def readable(self, ctx: RequestContext, names: Iterable[str]) -> list[str]:
        return list(names)

    def vectors_possible(self, names: Iterable[str] | None = None) -> bool:
        return False

    def permitted(self, ctx: RequestContext, asks: Sequence[Ask],
                  removes: Removes | None = None) -> list[bool]:
        return [True for _ in asks]

    def record_visibilities(self, ctx: RequestContext, name: str,
                            resource: Resource) -> None:
        return None


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


@dataclass(frozen=True, slots=True)
class Listing:
    """What a caller may see of a surface's resources, decided by the policy stage."""

    readable: list[str]  # the names, in the surface's order
    vectors_possible: bool  # whether any caller could get stored vectors back from them


class ListingSurface(Protocol):
    name: str

    def listed(self) -> Sequence[str]:
        """The resources the listing is about, by name, in the order it shows them."""

    def render_listing(self, listing: Listing, exchange: Exchange) -> Response: ...


class AskingListing(ListingSurface, Protocol):
    """A listing of resources that a surface's own rule kind decides on (not the core's
    `collection_read`): the surface says what to ask about each."""

    def read_ask(self, name: str, principal: Principal) -> Ask:
        """The decision whether `principal` may read the named resource."""


class ServedSurface(Protocol):
    """A surface whose answer is not a page of hits (records it keeps between requests, say):
    it parses and renders itself, takes its own decisions through `Pipeline.permitted` and
    reads the upstream only through the `Stages` it is handed."""

    name: str

    async def respond(self, exchange: Exchange, stages: Stages) -> Response:
        """Parse (raise `GatewayError` for bad input), decide, read (`stages.items`,
        `stages.hits`), render."""


class CollectingSurface(RetrievalSurface, Protocol):
    async def collect(self, query: Query, ctx: RequestContext, stages: Stages) -> list[Hit]:
        """The hits, through `stages` (upstream calls, and `keep` as records are read)."""


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
        *, egress: Mapping[str, EgressClient] | None = None,
        urls: UpstreamUrls | None = None,
    ) -> None:
        self.authenticator = authenticator or AnonymousAuthenticator()
        self.limiter = limiter or Unlimited()
        self.policy = policy or OpenPolicy()
        self.identity = identity  # IdentityForwarding: who the caller is, told to upstreams
        # The only way surfaces call upstream operations.
        self.upstream = UpstreamCalls(targets or {}, identity, urls)
        self.egress = egress or {}  # by surface: the client for URLs its clients registered

    @classmethod
    def from_config(
        cls, loaded: LoadedConfig, public_paths: frozenset[str], storage: Any = None,
        resources: dict[str, Any] | None = None, failure_store: Any = None,
        targets: Mapping[str, ProxyTarget] | None = None,
        *, egress: Mapping[str, EgressClient] | None = None, urls: UpstreamUrls | None = None,
        own_resources: Sequence[str] = (),
        resource_audiences: Mapping[str, tuple[str, ...]] | None = None,
    ) -> Pipeline:
        """The stages a config asks for; `storage` is the rate-limit store to count in,
        `resources` the surfaces' collections and streams the policy decides on,
        `failure_store` the `limits` storage failed authentications are counted in, and
        `targets` the upstreams operations are called on, `egress` each surface's client for
        URLs its clients registered, `urls` what upstream URLs become in surface answers, and
        `own_resources` the path prefixes that are protected resources of their own, and
        `resource_audiences` the token audiences accepted at such a resource only."""
        settings = loaded.settings
        authenticator = limiter = None
        from gateway.policy.engine import PolicyEngine

        assert loaded.bundle is not None
        policy = PolicyEngine(resources or {}, loaded.bundle)
        if settings.auth is not None:
            from gateway.auth.audiences import ResourceAudiences
            from gateway.auth.authenticator import Authenticator as BearerAuthenticator
            from gateway.auth.metadata import MetadataUrls, resource_identifier

            resource = resource_identifier(settings.auth, settings.public_base_url)
            metadata = MetadataUrls(resource, tuple(own_resources))
            authenticator = BearerAuthenticator(settings.auth, metadata,
                                                public_paths, loaded.bundle, failure_store,
                                                ResourceAudiences(resource_audiences))
        if settings.rate_limits is not None and settings.rate_limits.rules:
            from gateway.ratelimit.limiter import Limiter

            limiter = Limiter(settings.rate_limits, storage)
        from gateway.auth.forwarding import IdentityForwarding

        return cls(authenticator, limiter, policy, IdentityForwarding(settings.auth), targets,
                   egress=egress, urls=urls)

    async def admit(self, ctx: RequestContext, scope: Scope, *,
                    credentials_optional: bool = False) -> None:
        """Authenticate, then rate-limit; raise `GatewayError` when either refuses.

        With `credentials_optional` (public documents that merely personalise for a caller), a
        credential that cannot be used makes the caller anonymous instead of refusing it.
        """
        await self.authenticate(ctx, scope, credentials_optional=credentials_optional)
        await self.limit(ctx)

    async def admit_body_first(self, exchange: Exchange, route: BodyFirst) -> None:
        """Admission for a route whose body a signature may cover: read the body (bounded),
        accept a verified signature or else authenticate, then rate-limit on what the body
        says. The body is kept on the exchange for the endpoint."""
        request, ctx = exchange.request, exchange.ctx
        limit = route.body_limit(exchange)
        body = await read_capped(request, limit) if route.reads_body_first else None
        verified = await route.verify(exchange, body) if body is not None else None
        if verified is None:
            await self.authenticate(ctx, request.scope)
        else:
            ctx.principal = verified
            tracing.annotate({"aigw.auth.result": "signed"})
        exchange.body = body if body is not None else await read_capped(request, limit)
        route.learn_limit_key(exchange)
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
        """Count the request (a body-first route has learnt its rate-limit key by now)."""
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

        stages = Stages(self.upstream, self.policy, ctx, narrowed)
        if _collects(surface):
            hits = await surface.collect(narrowed, ctx, stages)
        else:
            hits = await stages.hits(*surface.plan(narrowed, ctx))
        kept = hits if stages.filtered else stages.keep(hits)
        with tracing.span("aigw.render"):
            return surface.render(narrowed, kept, ctx)

    def listing(self, surface: ListingSurface, exchange: Exchange) -> Response:
        """A document about the surface's resources, as far as this caller may see them."""
        exchange.ctx.surface = surface.name
        names = surface.listed()
        with tracing.span("aigw.policy", {"aigw.policy.stage": "listing"}):
            if _asks(surface):
                principal = exchange.principal
                asked = self.policy.permitted(
                    exchange.ctx, [surface.read_ask(name, principal) for name in names])
                readable = [name for name, allowed in zip(names, asked, strict=True) if allowed]
            else:
                readable = self.policy.readable(exchange.ctx, names)
            listing = Listing(readable, self.policy.vectors_possible(names))
        with tracing.span("aigw.render"):
            return surface.render_listing(listing, exchange)

    def permitted(self, exchange: Exchange, asks: Sequence[Ask],
                  removes: Removes | None = None) -> list[bool]:
        """The policy stage for a surface's own asks outside retrieval (who may see or use one
        of its resources, which of its fields a caller is shown): whether the rules allow
        each, every decision noted in the decision log under the owning surface, a denied
        ask with `removes(ask)`, what it takes out of the answer."""
        if not asks:
            return []
        with tracing.span("aigw.policy", {"aigw.policy.stage": "asks"}):
            allowed = self.policy.permitted(exchange.ctx, asks, removes)
            tracing.annotate({"aigw.policy.denied": allowed.count(False)})
        return allowed

    def record_visibilities(self, exchange: Exchange, name: str,
                            resource: Resource) -> frozenset[str] | None:
        """The policy stage for records a surface keeps and serves itself, outside `retrieve`:
        the record visibilities this request's caller may see in `resource`, which the surface
        serves as `name` (a `record_visibility` rule naming it holds on every surface serving
        it), each decision noted; None: every record's (no policy stage)."""
        with tracing.span("aigw.policy", {"aigw.policy.stage": "visibilities"}):
            return self.policy.record_visibilities(exchange.ctx, name, resource)

    def permitted_again(self, exchange: Exchange, decisions: Again) -> None:
        """Decisions this pipeline's `permitted` took for an earlier request of the same
        principal, which a surface remembered with its answer (keyed by this pipeline: its
        policy is set once, a reloaded policy comes with another pipeline): noted and counted
        for this request as if taken again."""
        with tracing.span("aigw.policy", {"aigw.policy.stage": "asks"}):
            note_again(exchange.ctx, decisions)
            tracing.annotate({"aigw.policy.denied": decisions.denied})

    def admits(self, exchange: Exchange, method: str, path: str) -> bool:
        """Whether the route rules would admit this request's caller to `method path`: what a
        surface that wraps other routes (gateway.inner) offers the caller."""
        return self.authenticator.admits(exchange.principal, path, method)

    def calls(self, exchange: Exchange) -> Calls:
        """The upstream calls the endpoint of the surface owning this request may make."""
        return Calls(self.upstream, self.egress.get(exchange.ctx.surface), exchange.ctx)

    async def serve(self, surface: ServedSurface, exchange: Exchange) -> Response:
        """Run an admitted request that `retrieve` does not fit: the surface is handed this
        request's `Stages`, through which it reads the upstream (mapped operations)."""
        ctx = exchange.ctx
        ctx.surface = surface.name
        return await surface.respond(exchange, Stages(self.upstream, self.policy, ctx, Query()))

    async def aclose(self) -> None:
        await self.authenticator.aclose()


# Which protocol a surface follows is asked by attribute: `isinstance` against a runtime-checkable
# protocol walks all of the protocol's members, ~20 µs a request.
def _collects(surface: PlannedSurface | CollectingSurface) -> TypeIs[CollectingSurface]:
    return hasattr(surface, "collect")


def _asks(surface: ListingSurface) -> TypeIs[AskingListing]:
    return hasattr(surface, "read_ask")


def _stage(name: str, stage: object, idle: type) -> AbstractContextManager[Any]:
    """A span for a stage that does work; none for one that admits everything."""
    return tracing.OFF if isinstance(stage, idle) else tracing.span(name)
