"""The one request pipeline every surface runs through:

    route -> authenticate -> rate limit -> validate -> policy (pre)
          -> upstream -> map -> policy (post) -> render

Routing happens in `app.py`. Authentication, rate limiting and policy are pluggable stages;
until their issues land they admit everything and change nothing. A surface contributes only
its own parts: parsing and validation, the upstream plan, the envelope and the error dialect.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import urlencode

import orjson
from starlette.requests import Request
from starlette.responses import Response

from gateway import errors, tracing
from gateway.asgi import RawHeaders, Scope
from gateway.context import RequestContext
from gateway.mapping import HitMapping, UpstreamValueError
from gateway.model import ALLOW, ANONYMOUS, Decision, Hit, Principal, Query
from gateway.proxy import ProxyTarget
from gateway.upstream import UpstreamError

if TYPE_CHECKING:
    from gateway.exchange import Exchange
    from gateway.loader import LoadedConfig

log = logging.getLogger("aigw.pipeline")
MAX_UPSTREAM_JSON_BYTES = 32 * 1024 * 1024
# The longest upstream URL sent: 8 KiB is the request line common servers accept (nginx's
# default large_client_header_buffers); past it they answer 414 or 431.
MAX_UPSTREAM_URL_BYTES = 8192


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


@dataclass(frozen=True, slots=True)
class UpstreamCall:
    """One JSON call to an upstream, and how its answer maps onto hits."""

    target: ProxyTarget
    method: str
    path: str
    mapping: HitMapping
    params: dict[str, Any] = field(default_factory=dict)
    json: Any = None


Fetch = Callable[[UpstreamCall], Awaitable[list[Hit]]]


class RetrievalSurface(Protocol):
    """Parse, then render: what every surface that retrieves through the pipeline defines,
    with `plan` (one upstream call) or `collect` (several)."""

    name: str

    async def parse(self, request: Request, ctx: RequestContext) -> Query:
        """Validate the request into a Query; raise `GatewayError` for bad input."""

    def render(self, query: Query, hits: list[Hit], ctx: RequestContext) -> Response: ...


class PlannedSurface(RetrievalSurface, Protocol):
    def plan(self, query: Query, ctx: RequestContext) -> UpstreamCall: ...


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
    ) -> None:
        self.authenticator = authenticator or AnonymousAuthenticator()
        self.limiter = limiter or Unlimited()
        self.policy = policy or OpenPolicy()
        self.identity = identity  # IdentityForwarding: who the caller is, told to upstreams

    @classmethod
    def from_config(
        cls, loaded: LoadedConfig, public_paths: frozenset[str], storage: Any = None,
        resources: dict[str, Any] | None = None, failure_store: Any = None,
    ) -> Pipeline:
        """The stages a config asks for; `storage` is the rate-limit store to count in,
        `resources` the surfaces' collections and streams the policy decides on, and
        `failure_store` the `limits` storage failed authentications are counted in."""
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

        return cls(authenticator, limiter, policy, IdentityForwarding(settings.auth))

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
        identity = self.identity.headers(ctx.principal) if self.identity else []

        async def fetch(call: UpstreamCall) -> list[Hit]:
            return map_hits(call, await call_upstream_json(call, ctx, identity), ctx)

        hits = await surface.collect(narrowed, ctx, fetch) \
            if isinstance(surface, CollectingSurface) else await fetch(surface.plan(narrowed, ctx))
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


def map_hits(call: UpstreamCall, document: Any, ctx: RequestContext) -> list[Hit]:
    """The upstream document as hits; a value of the wrong kind is a 502 `upstream_error`
    naming the slot, never echoing the value (it may be anything the upstream holds)."""
    try:
        return call.mapping.hits(document)
    except UpstreamValueError as exc:
        ctx.upstream_error = "mapping"
        log.warning("upstream value of the wrong kind", extra={"fields": {
            "request_id": ctx.request_id, "upstream": call.target.name, "slot": exc.slot}})
        raise errors.upstream_mapping_error(exc.slot, exc.expected) from None


async def call_upstream_json(
    call: UpstreamCall, ctx: RequestContext, identity: RawHeaders | None = None
) -> Any:
    """Make one upstream JSON call; any failure becomes a `GatewayError` without upstream detail.

    The upstream gets what a passthrough request would carry: the gateway's own credentials
    (`add_headers`), the caller's identity headers, `Via` and the request id.
    """
    ctx.upstream = call.target.name
    url = call.target.url + call.path
    if call.params:
        url += "?" + urlencode(call.params, doseq=True)
    if len(url.encode()) > MAX_UPSTREAM_URL_BYTES:
        raise errors.upstream_url_too_long()
    headers: RawHeaders = [
        (b"host", call.target.host), (b"accept", b"application/json"),
        (b"x-request-id", ctx.request_id.encode()), (b"via", b"1.1 aigw"),
        *call.target.add_headers, *(identity or ()),
    ]
    body = None
    if call.json is not None:
        body = orjson.dumps(call.json)
        headers.append((b"content-type", b"application/json"))
    with tracing.upstream_span(call.method, url, call.target.name):
        headers.extend(tracing.outgoing_headers())
        payload, status = await _send(call, ctx, url, headers, body)
        tracing.upstream_status(status)
    if payload is None:
        ctx.upstream_error = "too_large"
        raise errors.upstream_protocol_error()
    if status == 404:
        raise errors.GatewayError(404, "not_found", "The requested item does not exist.")
    if status >= 400:
        ctx.upstream_error = f"status_{status}"
        raise errors.upstream_protocol_error()
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:
        ctx.upstream_error = "protocol"
        raise errors.upstream_protocol_error() from None


async def _send(call: UpstreamCall, ctx: RequestContext, url: str, headers: RawHeaders,
                body: bytes | None) -> tuple[bytes | None, int]:
    """The upstream's body (None past the cap) and status; transport failures as errors."""
    started = time.perf_counter()
    try:
        response = await call.target.transport.request(call.method, url, headers, body)
        try:
            return await _read_capped(response), response.status
        finally:
            await response.close()
    except UpstreamError as exc:
        ctx.upstream_error = exc.kind
        raise (errors.upstream_timeout() if exc.kind == "timeout"
               else errors.upstream_unavailable()) from None
    finally:
        ctx.upstream_seconds = time.perf_counter() - started


async def _read_capped(response: Any) -> bytes | None:
    """The body, or None past MAX_UPSTREAM_JSON_BYTES (a runaway upstream is not buffered)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.stream():
        size += len(chunk)
        if size > MAX_UPSTREAM_JSON_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
