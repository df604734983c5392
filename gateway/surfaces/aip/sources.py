"""AIP sources compiled from config, and the upstream reads that turn a query into pieces of
text: a search, then (when configured) each hit's whole article, keeping only the hits the
caller may see (the policy engine's record-visibility decision) before any text is cut."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from gateway import errors
from gateway.context import RequestContext
from gateway.model import Hit, Principal
from gateway.operations import Operation, Placeholders, compile_operation
from gateway.policy.engine import may_see_record
from gateway.surfaces.aip.chunks import Piece
from gateway.surfaces.aip.config import Aip, Source
from gateway.upstream_call import UpstreamCalls


@dataclass(frozen=True, slots=True)
class SourceSearch(Placeholders):
    """A source's search: the query text, and how many hits are wanted (`limit`, and the same
    number as `top_k` and `fetch`; `offset` is always 0)."""

    query: str
    limit: int
    top_k: int
    fetch: int
    offset: int


@dataclass(frozen=True, slots=True)
class ArticleRead(Placeholders):
    """One hit's whole article, by the hit's id."""

    id: str


@dataclass(frozen=True, slots=True)
class CompiledSource:
    name: str
    settings: Source
    search: Operation[SourceSearch]
    article: Operation[ArticleRead] | None

    # As a resource the policy engine decides on (gateway.policy.engine.Resource): public,
    # without stored vectors; its hits carry their own visibility when `record_visibility` is set.
    @property
    def public(self) -> bool:
        return True

    @property
    def scopes(self) -> frozenset[str]:
        return frozenset()

    @property
    def returns_vectors(self) -> bool:
        return False

    @property
    def visibility(self) -> str:
        return "public"

    @property
    def record_visibility(self) -> dict[str, frozenset[str]] | None:
        """None: a hit is public unless its mapping gives another visibility."""
        rules = self.settings.record_visibility
        if rules is None:
            return None
        return {value: frozenset(scopes) for value, scopes in rules.scopes.items()}

    @property
    def whole_articles(self) -> bool:
        """Whether the texts read are whole articles (so never returned whole)."""
        return self.article is not None or self.settings.search_texts == "articles"


def compile_sources(aip: Aip, upstreams: set[str]) -> dict[str, CompiledSource]:
    compiled = {}
    for name, source in aip.sources.items():
        where = f"aip.sources.{name}"
        search = compile_operation(source.search, f"{where}.search", upstreams, SourceSearch)
        article = (compile_operation(source.article, f"{where}.article", upstreams, ArticleRead)
                   if source.article is not None else None)
        compiled[name] = CompiledSource(name, source, search, article)
    return compiled


async def read_pieces(source: CompiledSource, query: str, hits_wanted: int,
                      generation: Any, ctx: RequestContext) -> list[Piece]:
    """The texts the answer is cut from, best hit first; any upstream failure raises."""
    upstream: UpstreamCalls = generation.pipeline.upstream
    wanted = SourceSearch(query=query, limit=hits_wanted, top_k=hits_wanted, fetch=hits_wanted,
                          offset=0)
    hits = (await upstream.hits(source.search, wanted, ctx))[:hits_wanted]
    if source.article is not None:
        # A hit the search already shows hidden is never read; the others are judged on the
        # article's visibility (or the search hit's, when the article does not give one).
        hits = [hit for hit in hits
                if "visibility" not in hit.metadata or visible(source, hit, ctx.principal)]
        articles = await asyncio.gather(*(_article(source.article, hit, upstream, ctx)
                                          for hit in hits))
        hits = [hit for hit in articles if hit is not None]
    return [piece for hit in hits
            if visible(source, hit, ctx.principal) and (piece := _piece(hit)) is not None]


def visible(source: CompiledSource, hit: Hit, principal: Principal) -> bool:
    """Whether this caller may see the hit; a source without rules only shows public hits."""
    value = hit.metadata.get("visibility")
    if value is None and source.record_visibility is None:
        value = "public"
    return may_see_record(value if isinstance(value, str) else None,
                          source.record_visibility or {}, principal)


async def _article(operation: Operation[ArticleRead], found_by: Hit, upstream: UpstreamCalls,
                   ctx: RequestContext) -> Hit | None:
    try:
        found = await upstream.hits(operation, ArticleRead(id=found_by.id), ctx)
    except errors.GatewayError as error:
        if error.code == "not_found":  # gone since the search: leave it out
            return None
        raise
    if not found:
        return None
    if "visibility" in found_by.metadata:
        found[0].metadata.setdefault("visibility", found_by.metadata["visibility"])
    return found[0]


def _piece(hit: Hit) -> Piece | None:
    if not isinstance(hit.text, str) or not hit.text.strip():
        return None
    url, title = hit.fields.get("url"), hit.fields.get("title")
    return Piece(hit.id, hit.text, url if _is_url(url) else None,
                 title if isinstance(title, str) else None)


def _is_url(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(("https://", "http://")) \
        and len(value) < 2048 and value.isprintable() and " " not in value
