"""Lexical and semantic search over the (stream, field) pairs a caller may match.

The matchable fields of each stream (declared AND granted) are decided before anything is
read or asked: a stream with none is skipped, an upstream search is sent only those, and
the gateway's own indexes score only those. A stream whose upstream searches answers from
the records that search returns, mapped as its records are: nothing of the stream is read or
kept beyond them. Only the records a caller may see, as
`Access.view` shows them, are ever scored, matched, filtered, counted or snipped; snippets are
checked again by `Access.snippet`.

What one stream's index gives for a query is remembered (`Searches`) by the copy of the stream
it searched (`Entry.serial`: a refresh makes a new copy), the query, the filters and the grant
shape (`Access.shape`: the readable fields, time window, record list and record visibilities,
all that `view`, `matchable` and `snippet` depend on): a caller is only ever given what a
search of the same records under the same view would give it, and nothing stays once the copy
is replaced."""

from __future__ import annotations

import functools
import heapq
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any

from gateway.caching import BoundedCache
from gateway.embeddings.base import Embedder, EmbeddingError
from gateway.embeddings.config import EmbedderSettings
from gateway.embeddings.hashing import tokenize
from gateway.embeddings.providers import embedder_for
from gateway.embeddings.running import clip, embed_off_loop
from gateway.errors import GatewayError
from gateway.index.base import IndexUnavailable
from gateway.surfaces.pdpp.filters import Filter, matches
from gateway.surfaces.pdpp.index import lexical_snippet, semantic_snippet
from gateway.surfaces.pdpp.projection import Access
from gateway.surfaces.pdpp.request import search_terms
from gateway.surfaces.pdpp.store import Entry, index_unavailable
from gateway.surfaces.pdpp.streams import CompiledStream, Record
from gateway.surfaces.pdpp.threads import in_thread, over_records

# Hits of one stream that get a snippet, the best first (a semantic one costs an embedding of
# its sentences): a page never goes deeper, and the rest would cost time for nothing.
SNIPPETS = 100
EntryFor = Callable[[CompiledStream], Awaitable[Entry]]
Searches = BoundedCache[Hashable, list["Found"]]
# An upstream search sent the matchable fields: the records it answered, and whether it
# answered as many as it was asked for (more may match).
UpstreamSearch = Callable[[CompiledStream, tuple[str, ...]], Awaitable[tuple[list[Record], bool]]]


@dataclass(frozen=True, slots=True)
class Found:
    access: Access
    record: Record
    score: float
    matched: tuple[str, ...]
    snippet: dict[str, str] | None


@dataclass(frozen=True, slots=True)
class Ranked:
    hits: list[Found]  # the best `wanted`, best first
    total: int  # every hit
    truncated: bool  # some stream's records were cut at max_records


async def lexical(q: str, accesses: list[Access], filters: list[Filter], entry_for: EntryFor,
                  upstream_search: UpstreamSearch, snippets: bool, wanted: int,
                  searches: Searches | None = None) -> Ranked:
    terms = search_terms(q)  # refused past its bounds, before anything is read or asked
    found: list[Found] = []
    truncated = False
    for access in accesses:
        fields = access.matchable("lexical")
        if not fields or not terms:
            continue  # nothing this caller may match here: the stream is not searched
        if access.stream.lexical_op is not None:
            records, full = await upstream_search(access.stream, fields)
            truncated |= full
            found += await in_thread(functools.partial(
                _lexical_upstream, records, access, terms, filters, snippets))
        else:
            entry = await entry_for(access.stream)
            truncated |= _truncated(entry, access)
            found += await _remembered(
                searches, (entry.serial, "lexical", access.shape, tuple(terms),
                           tuple(filters), snippets),
                functools.partial(_lexical_in_index, entry, access, terms, filters, snippets))
    return Ranked(await over_records(len(found), lambda: _rank(found, wanted)), len(found),
                  truncated)


def _lexical_upstream(records: list[Record], access: Access, terms: list[str],
                      filters: list[Filter], snippets: bool) -> list[Found]:
    """A stream's matches among the records its upstream search answered (in a PDPP thread:
    each record's matchable texts are tokenized)."""
    visible = _visible_of(records, access)
    scored = _upstream_scores([r.key for r in records], visible,
                              access.matchable("lexical"), set(terms))
    return _lexical_found(scored, visible, access, terms, filters, snippets)


def _lexical_in_index(entry: Entry, access: Access, terms: list[str], filters: list[Filter],
                      snippets: bool) -> list[Found]:
    """A stream's matches from the gateway's own index (in a PDPP thread: its cost grows
    with the stream and with the query)."""
    visible = _visible(entry, access)
    scored = _index_scores(entry, visible, access.matchable("lexical"), terms)
    return _lexical_found(scored, visible, access, terms, filters, snippets)


def _lexical_found(scored: list[tuple[int, dict[str, float]]], visible: dict[int, Record],
                   access: Access, terms: list[str], filters: list[Filter],
                   snippets: bool) -> list[Found]:
    fields = access.matchable("lexical")
    found = []
    # Snippets for the best-scored hits only: a common word matches the whole stream.
    best_scored = sorted(scored, key=lambda item: -sum(item[1].values()))[:SNIPPETS]
    snipped = {position for position, _ in best_scored} if snippets else set()
    for position, per_field in scored:
        record = visible[position]
        if not matches(record, filters, access):
            continue
        matched = tuple(f for f in fields if per_field.get(f, 0) > 0)
        if not matched:
            continue
        best = max(matched, key=lambda f: per_field[f])
        text = lexical_snippet(record.data.get(best) or "", set(terms)) \
            if position in snipped else None
        snippet = access.snippet(record, best, text or "", "lexical")
        found.append(Found(access, record, sum(per_field.values()), matched, snippet))
    return found


async def semantic(q: str, accesses: list[Access], filters: list[Filter], entry_for: EntryFor,
                   threshold: float, snippets: bool, embedder: EmbedderSettings,
                   wanted: int, searches: Searches | None = None) -> Ranked:
    """Records near the query by the embedder's vectors (the query embedded off the loop;
    raises EmbeddingError when the embedder cannot)."""
    try:
        vectors = await embed_off_loop(embedder_for(embedder), [clip(q, embedder)[0]], embedder)
    except EmbeddingError:
        raise GatewayError(503, "embedder_unavailable",
                           "Semantic search is unavailable; try again later.") from None
    query = vectors[0]
    model = embedder_for(embedder) if snippets else None
    found: list[Found] = []
    truncated = False
    for access in accesses:
        fields = access.matchable("semantic")
        if not fields or not any(query):
            continue
        entry = await entry_for(access.stream)
        truncated |= _truncated(entry, access)
        found += await _remembered(
            searches, (entry.serial, "semantic", access.shape, tuple(query), tuple(filters),
                       threshold, model is not None),
            functools.partial(_semantic_in_index, entry, access, query, filters, threshold,
                              model))
    return Ranked(await over_records(len(found), lambda: _rank(found, wanted)), len(found),
                  truncated)


def _semantic_in_index(entry: Entry, access: Access, query: list[float], filters: list[Filter],
                       threshold: float, embedder: Embedder | None) -> list[Found]:
    """A stream's records near the query (threads.py, as `_lexical_in_index`), the best
    SNIPPETS of them with a snippet when `embedder` is given (it embeds sentences)."""
    fields = access.matchable("semantic")
    visible = _visible(entry, access)
    only = None if access.whole else [entry.snapshot.records[i].key for i in visible]
    found = []
    for rank, scored in enumerate(entry.index.semantic(query, fields, only, len(visible))):
        position = entry.positions.get(scored.key)
        if position is None or position not in visible or not scored.scores:
            continue
        record = visible[position]
        if not matches(record, filters, access):
            continue
        best = max(scored.scores, key=lambda f: scored.scores[f])
        score = scored.scores[best]
        if score < threshold:
            continue
        text = semantic_snippet(record.data.get(best) or "", query, embedder) \
            if embedder is not None and rank < SNIPPETS else None
        snippet = access.snippet(record, best, text or "", "semantic")
        found.append(Found(access, record, score, (best,), snippet))
    return found


async def _remembered(searches: Searches | None, key: Hashable,
                      search: Callable[[], list[Found]]) -> list[Found]:
    """`search()` in a PDPP thread, whatever the stream's size (its cost grows with the query
    too), or what it gave for the same key (the caller's copy: the list is shared)."""
    found = searches.get(key) if searches is not None else None
    if found is None:
        try:
            found = await in_thread(search)
        except IndexUnavailable:
            raise index_unavailable() from None
        if searches is not None:
            searches.put(key, found, _size(found))
    return found


def _size(found: list[Found]) -> int:
    """About the bytes a remembered result holds of its own (its records are the copy's)."""
    return 200 + sum(300 + sum(len(v) for v in (f.snippet or {}).values()) for f in found)


def _visible(entry: Entry, access: Access) -> dict[int, Record]:
    """What the caller may see of each record it may see, by its position in the snapshot."""
    return _visible_of(entry.snapshot.records, access)


def _visible_of(records: list[Record], access: Access) -> dict[int, Record]:
    """What the caller may see of each record it may see, by its position in `records`."""
    if access.whole:
        return dict(enumerate(records))
    return {i: view for i, record in enumerate(records)
            if (view := access.view(record)) is not None}


def _truncated(entry: Entry, access: Access) -> bool:
    """Records may be missing: unless the grant lists its records and all were read."""
    return entry.snapshot.truncated and not access.names_only(entry.by_key)


def _index_scores(entry: Entry, visible: dict[int, Record], fields: tuple[str, ...],
                  terms: list[str]) -> list[tuple[int, dict[str, float]]]:
    """BM25 over the visible records only: the index takes its term statistics from the
    records in `only`, so records the caller may not see never sway the order."""
    only = None if len(visible) == len(entry.snapshot.records) \
        else [entry.snapshot.records[i].key for i in visible]
    found = entry.index.lexical(terms, fields, only, len(visible))
    positions = [(entry.positions.get(scored.key), scored.scores) for scored in found]
    return sorted(((position, scores) for position, scores in positions
                   if position is not None and position in visible), key=lambda item: item[0])


def _upstream_scores(keys: list[str], visible: dict[int, Record], fields: tuple[str, ...],
                     terms: set[str]) -> list[tuple[int, dict[str, float]]]:
    """Upstream hits in its order, ranked among the visible ones only; a field counts as
    matched only if it holds a query term (a hit the gateway cannot attribute to a matchable
    field is not shown)."""
    positions = {record.key: i for i, record in visible.items()}
    shown = [key for key in dict.fromkeys(keys) if key in positions]
    scored = []
    for rank, key in enumerate(shown):
        record = visible[positions[key]]
        gain = float(len(shown) - rank)
        scored.append((positions[key], {f: gain for f in fields
                                        if terms & set(tokenize(_text(record, f)))}))
    return scored


def _text(record: Record, field: str) -> str:
    value: Any = record.data.get(field)
    return value if isinstance(value, str) else ""


def _rank(found: list[Found], wanted: int) -> list[Found]:
    """The best `wanted` hits, best first: a partial sort whose comparisons are Python code,
    so a thread ranking tens of thousands of hits lets the event loop run between them (a
    whole sort compares in C, holding the interpreter for as long as it takes)."""
    return heapq.nsmallest(wanted, found, key=lambda f: (-f.score, f.access.stream.name,
                                                         f.record.key))
