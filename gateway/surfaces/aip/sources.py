"""AIP sources compiled from config (each a resource the policy engine decides on), and the
upstream reads that turn a query into pieces of text: a search, then (when configured) each
hit's whole article, keeping only the hits the caller may see (the policy stage's
record-visibility decision) before any text is cut."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from gateway import errors
from gateway.handles import Stages
from gateway.model import Hit
from gateway.operations import Operation, Placeholders, compile_operation, placeholder
from gateway.record_cache import RecordCache
from gateway.surfaces.aip.config import Aip, Source


@dataclass(frozen=True, slots=True)
class SourceSearch(Placeholders):
    """A page of a source's search: the query text, how many hits this call asks for
    (`limit`, and the same number as `top_k`), where the page starts (`offset`, or `after`:
    the token the previous answer gave, "" at first) and `fetch` (offset + limit)."""

    configured = "aip.sources.<name>.search"
    query: str = placeholder("the request's `runtime.query_text`")
    limit: int = placeholder("how many hits this call asks for: the most chunks the answer may "
                             "hold (`max_chunks` after policy limits), less those already found "
                             "when reading on, at most `max_items`")
    top_k: int = placeholder("the same number as `{limit}`")
    fetch: int = placeholder("`{offset}` + `{limit}`")
    offset: int = placeholder("0, then (reading on) how many hits earlier pages gave")
    after: str = placeholder("empty, then (reading on) the `next` token of the previous "
                             "answer, as for AIDRE's `text_search`")


@dataclass(frozen=True, slots=True)
class ArticleRead(Placeholders):
    """One hit's whole article, by the hit's id."""

    configured = "aip.sources.<name>.article"
    id: str = placeholder("the search hit's mapped `id`")


@dataclass(frozen=True, slots=True)
class CompiledSource:
    name: str
    settings: Source
    search: Operation[SourceSearch]
    article: Operation[ArticleRead] | None
    articles: RecordCache[Hit] | None = None  # what `article` read, remembered

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
    def records_carry_visibility(self) -> bool:
        return self.settings.record_visibility is not None

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
        articles = RecordCache[Hit].of(source.article_cache) if article is not None else None
        compiled[name] = CompiledSource(name, source, search, article, articles)
    return compiled


# Search pages one retrieve may read while hits it may not show keep it short of the hits
# wanted (or the upstream's max_items is below them): the call budget of one answer.
MAX_SEARCH_PAGES = 5


async def read_hits(source: CompiledSource, query: str, hits_wanted: int,
                    stages: Stages) -> list[Hit]:
    """The hits the caller may see, best first, read through the pipeline's stages (upstream
    calls; the policy's record-visibility decision, `keep`); any upstream failure raises. An
    upstream that pages (by `{offset}` or `{after}`) is read on, page by page, while hidden
    hits or its page cap leave fewer than `hits_wanted`."""
    shown: list[Hit] = []
    offset, after = 0, ""
    for _ in range(MAX_SEARCH_PAGES):
        asked = _asked(source, hits_wanted - len(shown))
        page = await stages.page(source.search, SourceSearch(
            query=query, limit=asked, top_k=asked, fetch=offset + asked, offset=offset,
            after=after))
        hits = page.entries[:asked]
        shown += await _shown(source, hits, stages)
        pages_by = source.search.pages_by
        if len(shown) >= hits_wanted or pages_by is None:
            break
        if pages_by == "after":
            if page.next is None:
                break
            after = page.next
        elif len(page.entries) < asked:
            break
        offset += len(hits)
    return shown[:hits_wanted]


def _asked(source: CompiledSource, wanted: int) -> int:
    cap = source.search.settings.max_items
    return min(wanted, cap) if cap else wanted


async def _shown(source: CompiledSource, hits: list[Hit], stages: Stages) -> list[Hit]:
    """The hits of one page the caller may see, read whole when the source has articles."""
    if source.article is not None:
        # A hit the search already shows hidden is never read; the others are judged on the
        # article's visibility (or the search hit's, when the article does not give one).
        hits = _less_hidden_by_search(hits, stages)
        articles = await _articles(source, source.article, hits, stages)
        hits = [_judged(article, hit) for article, hit in zip(articles, hits, strict=True)
                if article is not None]
    return stages.keep(hits)


async def _articles(source: CompiledSource, operation: Operation[ArticleRead],
                    hits: list[Hit], stages: Stages) -> list[Hit | None]:
    """Each hit's article, as remembered (gateway.record_cache: per source and caller, while
    the hit's validators are the article's) or else read."""
    cache = source.articles
    scope = (source.name, stages.caller_key()) if cache is not None else None
    known = [cache.recall(scope, hit) if cache is not None else None for hit in hits]
    found = [_copy(article) if article is not None else None for article in known]
    missing = [index for index, article in enumerate(found) if article is None]
    if not missing:  # all remembered: no gather (a future, a loop look-up) to await
        return found
    read = await asyncio.gather(*(_article(operation, hits[index], stages)
                                  for index in missing))
    for index, article in zip(missing, read, strict=True):
        found[index] = article
        if cache is not None and article is not None:
            cache.learn(scope, hits[index], article, _copy(article), _size(article))
    return found


Text = tuple[str, str, str | None, str | None]  # a `Piece`'s fields: id, text, url, title


def texts(hits: list[Hit]) -> tuple[Text, ...]:
    """The texts an answer is cut from (each a `Piece`'s fields, as a tuple: cheap to make and
    to key on), in the hits' order; a hit without text gives none."""
    return tuple(text for hit in hits if (text := _text(hit)) is not None)


def _less_hidden_by_search(hits: list[Hit], stages: Stages) -> list[Hit]:
    """The hits, less those whose visibility the search gives and the caller may not see."""
    judged = [hit for hit in hits if "visibility" in hit.metadata]
    if not judged:
        return hits
    hidden = {id(hit) for hit in judged} - {id(hit) for hit in stages.keep(judged)}
    return [hit for hit in hits if id(hit) not in hidden]


async def _article(operation: Operation[ArticleRead], found_by: Hit,
                   stages: Stages) -> Hit | None:
    try:
        found = await stages.hits(operation, ArticleRead(id=found_by.id))
    except errors.GatewayError as error:
        if error.code == "not_found":  # gone since the search: leave it out
            return None
        raise
    return found[0] if found else None


def _judged(article: Hit, found_by: Hit) -> Hit:
    """The article with the search hit's visibility when it gives none of its own."""
    if "visibility" in found_by.metadata:
        article.metadata.setdefault("visibility", found_by.metadata["visibility"])
    return article


def _copy(article: Hit) -> Hit:
    """A remembered article as a hit of its own (the pipeline's stages change hits)."""
    return Hit(article.id, dict(article.fields), article.text, article.score, article.vector,
               dict(article.metadata))


def _size(article: Hit) -> int:
    """About the bytes an article takes, remembered."""
    values = [article.text, *article.fields.values(), *article.metadata.values()]
    return 64 * len(values) + sum(len(v) for v in values if isinstance(v, str)) \
        + 8 * len(article.vector or ())


def _text(hit: Hit) -> Text | None:
    if not isinstance(hit.text, str) or not hit.text.strip():
        return None
    url, title = hit.fields.get("url"), hit.fields.get("title")
    return (hit.id, hit.text, url if _is_url(url) else None,
            title if isinstance(title, str) else None)


def _is_url(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(("https://", "http://")) \
        and len(value) < 2048 and value.isprintable() and " " not in value
