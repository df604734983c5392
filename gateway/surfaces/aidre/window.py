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
from gateway.handles import Fetch, FetchPage
from gateway.ids import addressable
from gateway.model import Hit, Query
from gateway.surfaces.aidre.collections import (
    ChunkRead,
    CompiledCollection,
    Operation,
    TextSearch,
    VectorSearch,
)
from gateway.surfaces.aidre.visibility import Memo

Visible = Callable[[list[Hit]], list[Hit]]  # the records of a batch the caller may see


@dataclass(frozen=True, slots=True)
class Position:
    """Where in the upstream's results a page starts. An upstream paged by `{offset}` (or not
    at all) has no tokens: there `offset` is the whole position. One paged by `{after}`: the
    page its token `after` starts ("": its first page), read `size` records long, and
    `offset` records into it; resuming reads that same page again (the same token and size,
    so the same records) and follows its `next`, rather than a longer page every time."""

    after: str = ""
    offset: int = 0
    size: int = 0  # 0: not read yet

    def moved(self, records: int) -> Position:
        """The position `records` further on (as `dataclasses.replace`, without its cost)."""
        return Position(self.after, self.offset + records, self.size)


@dataclass(slots=True)
class Window:
    hits: list[Hit]  # at most top_k records the caller may see, in the upstream's order
    next_position: Position | None = None  # where the next page starts
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
    query is) and, for lookups, the collection's chunk operation and what earlier lookups
    learnt (`memo`: none when the collection remembers nothing)."""

    collection: CompiledCollection
    operation: Operation[Any]
    memo: Memo | None = None


def values(query: Query, position: Position, count: int) -> TextSearch | VectorSearch:
    """Placeholder values for a search call asking for `count` items from `position`."""
    visibility = visible_values(query)
    offset, after = position.offset, position.after
    if query.vector is not None:
        return VectorSearch(vector=list(query.vector), top_k=query.top_k, offset=offset,
                            limit=count, fetch=offset + count, visibility=visibility,
                            after=after)
    return TextSearch(query=query.text or "", top_k=query.top_k, offset=offset, limit=count,
                      fetch=offset + count, visibility=visibility, after=after)


def chunk_values(query: Query, item: str) -> ChunkRead:
    return ChunkRead(id=item, visibility=visible_values(query))


def visible_values(query: Query) -> str:
    """The record visibilities the caller may see, comma-separated (policy narrowed them)."""
    return ",".join(query.filters.get("visibility", ()))


async def gather(source: Source, query: Query, start: Position, fetch: FetchPage,
                 visible: Visible, budget: Budget) -> Window:
    """The caller's page from `start`, and one visible record more to know if more follow."""
    # Each visible record, and where it was read: `index` records on from a batch's start
    # (its Position is made only for the one a next page starts at).
    found: list[tuple[Position, int, Hit]] = []
    position = start
    while len(found) <= query.top_k:
        if not budget.take():
            return _window(found, query, position, out_of_budget=True)
        batch = await _read(source.operation, query, position, query.top_k + 1 - len(found),
                            fetch)
        hits, at = batch.hits, batch.start
        resolved = await learn_visibility(source, hits, query, fetch_hits(fetch), budget)
        kept = {id(hit) for hit in visible(hits[:resolved])}
        found += [(at, index, hit)
                  for index, hit in enumerate(hits[:resolved]) if id(hit) in kept]
        if resolved < len(hits):
            resume = at.moved(resolved)
            return _window(found, query, resume, out_of_budget=True)
        if batch.following is None:
            return _window(found, query, None, capped=batch.capped)
        position = batch.following
    return _window(found, query, None)


@dataclass(slots=True)
class Batch:
    hits: list[Hit]  # the records read, in the upstream's order
    start: Position  # where the first of them is
    following: Position | None  # where the records after them start; None: no more
    capped: bool = False  # the upstream's cap ended them


def fetch_hits(fetch: FetchPage) -> Fetch:
    """`fetch` for reads that need only the hits (chunk lookups)."""
    async def hits(operation: Operation[Any], values: Any) -> list[Hit]:
        return (await fetch(operation, values)).entries
    return hits


def _window(found: list[tuple[Position, int, Hit]], query: Query, resume: Position | None,
            *, out_of_budget: bool = False, capped: bool = False) -> Window:
    hits = [hit for _, _, hit in found[:query.top_k]]
    if len(found) > query.top_k:
        at, index, _ = found[query.top_k]
        return Window(hits, next_position=at.moved(index))
    if out_of_budget:
        return Window(hits, next_position=resume, truncated=True)
    return Window(hits, truncated=capped)


async def _read(operation: Operation[Any], query: Query, position: Position, count: int,
                fetch: FetchPage) -> Batch:
    """About `count` records from `position` on."""
    if operation.pages_by == "after":
        return await _read_after(operation, query, position, count, fetch)
    cap = operation.settings.max_items
    if operation.pages_by == "offset":
        asked = min(count, cap) if cap else count
        page = await fetch(operation, values(query, position, asked))
        if len(page.entries) < asked:
            return Batch(page.entries, position, None)
        return Batch(page.entries, position,
                     Position(offset=position.offset + len(page.entries)))
    return await _read_sliced(operation, query, position, count, fetch)


async def _read_sliced(operation: Operation[Any], query: Query, position: Position,
                       count: int, fetch: FetchPage) -> Batch:
    """An upstream without paging: asked from the top every time, sliced here."""
    cap, start = operation.settings.max_items, position.offset
    needed = start + count
    asked = min(needed, cap) if cap else needed
    if asked <= start:
        return Batch([], position, None, capped=True)
    answered = (await fetch(operation, values(query, Position(), asked))).entries
    batch = answered[start:]
    if len(answered) < asked or asked < needed:
        return Batch(batch, position, None, capped=asked < needed and len(answered) >= asked)
    return Batch(batch, position, Position(offset=start + len(batch)))


async def _read_after(operation: Operation[Any], query: Query, position: Position,
                      count: int, fetch: FetchPage) -> Batch:
    """A page by the upstream's token: the page at `position.after` (read again at the size
    it was first read with, past the `position.offset` records already gone through, or
    `count` records long when new); the next page starts at the token this answer gives."""
    cap = operation.settings.max_items
    size = position.size or (min(count, cap) if cap else count)
    page = await fetch(operation, values(query, Position(position.after), size))
    start = Position(position.after, position.offset, size)
    following = Position(page.next) if page.next is not None else None
    return Batch(page.entries[position.offset:], start, following)


async def learn_visibility(source: Source, hits: list[Hit], query: Query, fetch: Fetch,
                           budget: Budget) -> int:
    """Read each hit without a visibility through the chunk operation (unless the memo
    still knows it), when configured and within the budget; how many leading hits are ready
    for policy to decide on."""
    rules = source.collection.settings.record_visibility
    chunk, memo = source.collection.chunk, source.memo
    if rules is None or rules.lookup != "chunk" or chunk is None:
        return len(hits)
    missing = [index for index, hit in enumerate(hits)
               if hit.metadata.get("visibility") is None
               and (memo is None or not memo.recall(hit))]
    granted = budget.take(len(missing))
    found = await asyncio.gather(*(_record(chunk, hits[index].id, query, fetch)
                                   for index in missing[:granted]))
    for index, record in zip(missing, found, strict=False):
        hits[index].metadata["visibility"] = \
            record.metadata.get("visibility") if record is not None else None
        if memo is not None:
            memo.learn(hits[index], record)
    return missing[granted] if granted < len(missing) else len(hits)


async def _record(chunk: Operation[ChunkRead], item: str, query: Query,
                  fetch: Fetch) -> Hit | None:
    """The record as the chunk operation reads it; None when unknown (seen by nobody)."""
    if not addressable(item):
        return None
    try:
        records = await fetch(chunk, chunk_values(query, item))
    except GatewayError as error:
        if error.status == 404:
            return None  # gone since the search: unknown
        raise
    return records[0] if records else None
