"""AIP sources compiled from config, and the upstream reads that turn a query into pieces of
text: a search, then (when configured) each hit's whole article, keeping only the hits the
caller may see (the policy engine's record-visibility decision) before any text is cut."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from gateway import errors
from gateway.context import RequestContext
from gateway.mapping import HitMapping
from gateway.model import Hit, Principal
from gateway.operations import Operation, compile_operation
from gateway.pipeline import call_upstream_json
from gateway.policy.engine import may_see_record
from gateway.surfaces.aip.chunks import Piece
from gateway.surfaces.aip.config import Aip, Source


@dataclass(frozen=True, slots=True)
class CompiledSource:
    name: str
    settings: Source
    search: Operation
    article: Operation | None
    # None: hits are public unless their mapping says otherwise (then nobody sees them).
    visibility_rules: dict[str, frozenset[str]] | None

    @property
    def whole_articles(self) -> bool:
        """Whether the texts read are whole articles (so never returned whole)."""
        return self.article is not None or self.settings.search_texts == "articles"


def compile_sources(aip: Aip, upstreams: set[str]) -> dict[str, CompiledSource]:
    compiled = {}
    for name, source in aip.sources.items():
        where = f"aip.sources.{name}"
        article = (compile_operation(source.article, f"{where}.article", upstreams)
                   if source.article is not None else None)
        rules = source.record_visibility
        compiled[name] = CompiledSource(
            name, source, compile_operation(source.search, f"{where}.search", upstreams),
            article, None if rules is None else
            {value: frozenset(scopes) for value, scopes in rules.scopes.items()})
    return compiled


async def read_pieces(source: CompiledSource, query: str, hits_wanted: int,
                      generation: Any, ctx: RequestContext) -> list[Piece]:
    """The texts the answer is cut from, best hit first; any upstream failure raises."""
    identity = generation.pipeline.identity.headers(ctx.principal) \
        if generation.pipeline.identity else []
    values = {"query": query, "top_k": hits_wanted, "limit": hits_wanted,
              "fetch": hits_wanted, "offset": 0, "vector": [], "id": ""}
    call = source.search.call(generation.targets[source.search.settings.upstream], values)
    hits = _mapped(call.mapping, await call_upstream_json(call, ctx, identity))[:hits_wanted]
    if source.article is not None:
        # A hit the search already shows hidden is never read; the others are judged on the
        # article's visibility (or the search hit's, when the article does not give one).
        hits = [hit for hit in hits
                if "visibility" not in hit.metadata or visible(source, hit, ctx.principal)]
        articles = await asyncio.gather(*(_article(source.article, hit, generation, ctx,
                                                   identity) for hit in hits))
        hits = [hit for hit in articles if hit is not None]
    return [piece for hit in hits
            if visible(source, hit, ctx.principal) and (piece := _piece(hit)) is not None]


def visible(source: CompiledSource, hit: Hit, principal: Principal) -> bool:
    """Whether this caller may see the hit; a source without rules only shows public hits."""
    value = hit.metadata.get("visibility")
    if value is None and source.visibility_rules is None:
        value = "public"
    return may_see_record(value if isinstance(value, str) else None,
                          source.visibility_rules or {}, principal)


async def _article(operation: Operation, found_by: Hit, generation: Any,
                   ctx: RequestContext, identity: list) -> Hit | None:
    call = operation.call(generation.targets[operation.settings.upstream], {"id": found_by.id})
    try:
        document = await call_upstream_json(call, ctx, identity)
    except errors.GatewayError as error:
        if error.code == "not_found":  # gone since the search: leave it out
            return None
        raise
    found = _mapped(call.mapping, document)
    if not found:
        return None
    if "visibility" in found_by.metadata:
        found[0].metadata.setdefault("visibility", found_by.metadata["visibility"])
    return found[0]


def _mapped(mapping: HitMapping, document: Any) -> list[Hit]:
    """Hits of a document; a document the mapping cannot read is the upstream's fault."""
    items = mapping.items.search(document) if mapping.items is not None else document
    if not isinstance(items, list | dict):
        raise errors.upstream_protocol_error()
    return mapping.hits(document)


def _piece(hit: Hit) -> Piece | None:
    if not isinstance(hit.text, str) or not hit.text.strip():
        return None
    url, title = hit.fields.get("url"), hit.fields.get("title")
    return Piece(hit.id, hit.text, url if _is_url(url) else None,
                 title if isinstance(title, str) else None)


def _is_url(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(("https://", "http://")) \
        and len(value) < 2048 and value.isprintable() and " " not in value
