"""One page of a search, gathered from the upstream: the first `top_k` records the caller may
see from the cursor's position on, read through as many upstream pages (and visibility
lookups) as that takes, within the request's call budget.

Records are filtered while the page is gathered, not after, so a page never comes back short
because something hidden sat in it, and whether a next page exists is decided by the records
the caller would see on it: neither the page size nor the cursor's presence says that hidden
records exist or where they rank.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway.errors import GatewayError
from gateway.handles import Fetch
from gateway.ids import addressable
from gateway.model import Hit, Query
from gateway.surfaces.aidre.collections import (
    ChunkRead,
    CompiledCollection,
    Operation,
    TextSearch,
    VectorSearch,
)

Visible = Callable[[list[Hit]], list[Hit]]  # the records of a batch the caller may see


@dataclass(slots=True)
class Window:
    hits: list[Hit]  # at most top_k records the caller may see, in the upstream's order
    next_offset: int | None = None  # the upstream position the next page starts from
    truncated: bool = False  # the page ends early: the upstream's cap or the call budget


class Budget:
    """Upstream calls one search may still make (search pages and visibility lookups)."""

    def __init__(self, calls: int) -> None:
        self.left = calls

    def take(self, wanted: int = 1) -> int:
        granted = min(wanted, self.left)
        self.left -= granted
        return granted


@dataclass(slots=True)
class Source:
    """Where the records come from: the search operation (a text or a vector search, as the
    query is) and, for lookups, the collection's chunk operation."""

    collection: CompiledCollection
    operation: Operation[Any]


def values(query: Query, offset: int, count: int) -> TextSearch | VectorSearch:
    """Placeholder values for a search call asking for `count` items from `offset`."""
    visibility = visible_values(query)
    if query.vector is not None:
        return VectorSearch(vector=list(query.vector), top_k=query.top_k, offset=offset,
                            limit=count, fetch=offset + count, visibility=visibility)
    return TextSearch(query=query.text or "", top_k=query.top_k, offset=offset, limit=count,
                      fetch=offset + count, visibility=visibility)


def chunk_values(query: Query, item: str) -> ChunkRead:
    return ChunkRead(id=item, visibility=visible_values(query))


def visible_values(query: Query) -> str:
    """The record visibilities the caller may see, comma-separated (policy narrowed them)."""
    return ",".join(query.filters.get("visibility", ()))


async def gather(source: Source, query: Query, fetch: Fetch, visible: Visible,
                 budget: Budget) -> Window:
    """The caller's page at `query.offset`, and one visible record more to know if more follow."""
    found: list[tuple[int, Hit]] = []  # (upstream position, record) of each visible record
    position = query.offset
    while len(found) <= query.top_k:
        if not budget.take():
            return _window(found, query, position, out_of_budget=True)
        batch, ended, capped = await _read(source.operation, query, position,
                                           query.top_k + 1 - len(found), fetch)
        resolved = await learn_visibility(source, batch, query, fetch, budget)
        kept = {id(hit) for hit in visible(batch[:resolved])}
        found += [(position + index, hit) for index, hit in enumerate(batch[:resolved])
                  if id(hit) in kept]
        position += resolved
        if resolved < len(batch):
            return _window(found, query, position, out_of_budget=True)
        if ended:
            return _window(found, query, None, capped=capped)
    return _window(found, query, None)


def _window(found: list[tuple[int, Hit]], query: Query, resume: int | None, *,
            out_of_budget: bool = False, capped: bool = False) -> Window:
    hits = [hit for _, hit in found[:query.top_k]]
    if len(found) > query.top_k:
        return Window(hits, next_offset=found[query.top_k][0])
    if out_of_budget:
        return Window(hits, next_offset=resume, truncated=True)
    return Window(hits, truncated=capped)


async def _read(operation: Operation[Any], query: Query, position: int, count: int,
                fetch: Fetch) -> tuple[list[Hit], bool, bool]:
    """(records from `position` on, the upstream has no more, its cap ended them)."""
    cap = operation.settings.max_items
    if operation.paginates:
        asked = min(count, cap) if cap else count
        batch = await fetch(operation, values(query, position, asked))
        return batch, len(batch) < asked, False
    needed = position + count  # no offset upstream: ask from the top, slice here
    asked = min(needed, cap) if cap else needed
    if asked <= position:
        return [], True, True
    answered = await fetch(operation, values(query, 0, asked))
    ended = len(answered) < asked or asked < needed
    return answered[position:], ended, asked < needed and len(answered) >= asked


async def learn_visibility(source: Source, hits: list[Hit], query: Query, fetch: Fetch,
                           budget: Budget) -> int:
    """Read each hit without a visibility through the chunk operation, when configured and
    within the budget; how many leading hits are ready for policy to decide on."""
    rules = source.collection.settings.record_visibility
    chunk = source.collection.chunk
    if rules is None or rules.lookup != "chunk" or chunk is None:
        return len(hits)
    missing = [index for index, hit in enumerate(hits)
               if hit.metadata.get("visibility") is None]
    granted = budget.take(len(missing))
    found = await asyncio.gather(*(_visibility(chunk, hits[index].id, query, fetch)
                                   for index in missing[:granted]))
    for index, visibility in zip(missing, found, strict=False):
        hits[index].metadata["visibility"] = visibility
    return missing[granted] if granted < len(missing) else len(hits)


async def _visibility(chunk: Operation[ChunkRead], item: str, query: Query,
                      fetch: Fetch) -> Any:
    if not addressable(item):
        return None  # unknown: seen by nobody
    try:
        records = await fetch(chunk, chunk_values(query, item))
    except GatewayError as error:
        if error.status == 404:
            return None  # gone since the search: unknown
        raise
    return records[0].metadata.get("visibility") if records else None
