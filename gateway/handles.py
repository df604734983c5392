"""The handles the pipeline gives a surface for one request, through which it reaches what
only the pipeline may call: `Stages` (mapped upstream reads and the post-policy, for
retrieval and served answers) and `Calls` (raw sends to configured upstreams and to URLs
clients registered, for endpoints that judge each answer themselves)."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from gateway import errors, tracing
from gateway.context import RequestContext
from gateway.model import Hit, Page, Query
from gateway.operations import Operation, Placeholders
from gateway.upstream_call import MAX_UPSTREAM_JSON_BYTES, RawAnswer, UpstreamCalls, too_long

if TYPE_CHECKING:
    from gateway.pipeline import Policy
    from gateway.upstream.egress.client import Answer, EgressClient

K = TypeVar("K", bound=Placeholders)


class Fetch(Protocol):
    """One upstream operation called with its kind's values, its answer mapped onto hits."""

    def __call__(self, operation: Operation[K], values: K) -> Awaitable[list[Hit]]: ...


class FetchPage(Protocol):
    """`Fetch`, with the upstream's token for the page after the answer."""

    def __call__(self, operation: Operation[K], values: K) -> Awaitable[Page[Hit]]: ...


class Stages:
    """The pipeline's stages a collecting surface may run for one request: upstream calls
    (mapped, with the caller's identity, failures as `GatewayError`) and the post-policy."""

    __slots__ = ("_ctx", "_policy", "_query", "_upstream", "filtered")

    def __init__(self, upstream: UpstreamCalls, policy: Policy, ctx: RequestContext,
                 query: Query) -> None:
        self._upstream, self._policy, self._ctx, self._query = upstream, policy, ctx, query
        self.filtered = False  # whether `keep` ran (else the pipeline runs it on the result)

    def hits(self, operation: Operation[K], values: K) -> Awaitable[list[Hit]]:
        """The operation's answer mapped onto hits."""
        return self._upstream.hits(operation, values, self._ctx)

    def page(self, operation: Operation[K], values: K) -> Awaitable[Page[Hit]]:
        """`hits`, with the upstream's `next` token (for operations that page by `{after}`)."""
        return self._upstream.page(operation, values, self._ctx)

    def page_without_vectors(self, operation: Operation[K], values: K) -> Awaitable[Page[Hit]]:
        """`page` for a caller the policy stage gives no stored vectors: the post-policy
        would drop them, so they are neither read nor checked (every hit's is None)."""
        return self._upstream.page(operation, values, self._ctx, vectors=False)

    def items(self, operation: Operation[K], values: K) -> Awaitable[list[Any]]:
        """The operation's answer as its mapped items, for a surface that reads records."""
        return self._upstream.items(operation, values, self._ctx)

    def item_page(self, operation: Operation[K], values: K) -> Awaitable[Page[Any]]:
        """`items`, with the upstream's `next` token."""
        return self._upstream.item_page(operation, values, self._ctx)

    def shared_item_page(self, operation: Operation[K], values: K) -> Awaitable[Page[Any]]:
        """`item_page` for an answer every caller shares (records that do not depend on who
        asks): sent without the caller's identity, so it cannot depend on it."""
        return self._upstream.item_page(operation, values, self._ctx, shared=True)

    def caller_key(self) -> bytes:
        """Who the upstream is told the caller is on this request's calls (the identity
        headers they carry), as a digest: what a surface remembers of an answer under it is
        what this caller's own call would have been answered."""
        return self._upstream.caller_key(self._ctx)

    def keep(self, hits: list[Hit]) -> list[Hit]:
        """The hits the caller may see (policy, post), as they are read."""
        self.filtered = True
        with tracing.span("aigw.policy", {"aigw.policy.stage": "after"}):
            kept = self._policy.after(self._ctx, self._query, hits)
            tracing.annotate({"aigw.policy.removed": len(hits) - len(kept)})
        return kept


class Calls:
    """The upstream calls a surface endpoint may make for one request outside retrieval,
    judging each answer itself: a request sent to a configured upstream (with the caller's
    identity, as every upstream call), and one to a URL a client registered, through the
    locked-down egress client the runtime built from the surface's `Mount.egress` rules. A GET
    carries no body; no URL longer than `MAX_UPSTREAM_URL_BYTES` is ever sent."""

    __slots__ = ("_ctx", "_egress", "_upstream")

    def __init__(self, upstream: UpstreamCalls, egress: EgressClient | None,
                 ctx: RequestContext) -> None:
        self._upstream, self._egress, self._ctx = upstream, egress, ctx

    def send(self, upstream: str, method: str, target: str, body: bytes | None, *,
             headers: Sequence[tuple[bytes, bytes]] = (),
             max_bytes: int = MAX_UPSTREAM_JSON_BYTES) -> Awaitable[RawAnswer]:
        """`body` (None for a GET) sent to `target` (a path and query) on a configured
        upstream (see `UpstreamCalls.send`): transport failures raise `UpstreamError`, an
        answer past `max_bytes` `AnswerTooLarge`, a URL too long a 400 `GatewayError`."""
        return self._upstream.send(upstream, method, target, body, self._ctx, headers=headers,
                                   max_bytes=max_bytes)

    def url_too_long(self, target: str, upstream: str | None = None) -> bool:
        """Whether a call would go to a URL longer than upstream servers accept: `target` (a
        path and query) on the configured `upstream`, or `target` itself (a registered URL)."""
        url = target if upstream is None else self._upstream.url(upstream, target)
        return too_long(url)

    def without_upstream_urls(self, document: Any, raw: bytes) -> Any:
        """`document`, parsed from an answer to `send` (`raw`), with the URLs of configured
        upstreams rewritten onto the public base or dropped, as in every other upstream
        answer (gateway.upstream_urls)."""
        urls = self._upstream.urls
        return urls.scrub(document, raw) if urls is not None else document

    def registered_url_problem(self, url: str) -> str | None:
        """Why the egress rules would refuse a call to `url`, or None (for checking a URL when
        it is registered, before any call)."""
        if self._egress is None:
            return "no registered URL may be called here"
        return self._egress.policy.url_problem(url)

    async def call_registered(self, method: str, url: str, body: bytes | None,
                              headers: dict[str, str]) -> Answer:
        """`method` (GET without a body; POST or PUT with one) to a registered URL:
        `EgressRefused` before anything is sent to a place the rules refuse, `EgressFailed`
        for a call that failed, a 400 `GatewayError` for a URL too long to send."""
        from gateway.upstream.egress.client import EgressRefused

        if self._egress is None:
            raise EgressRefused("no egress rules")
        if too_long(url):
            raise errors.upstream_url_too_long()
        return await self._egress.request(method, url, body, headers)
