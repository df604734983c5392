"""One page of a search, gathered from the upstream: paged past its cap where the operation
takes an offset, marked truncated where it cannot be, and with each record's visibility learnt
when the search answer does not carry it. Which records the caller sees is policy's decision."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any

from gateway.errors import GatewayError
from gateway.model import Hit, Query
from gateway.pipeline import Fetch
from gateway.proxy import ProxyTarget
from gateway.surfaces.aidre.collections import CompiledCollection, Operation

# An item id goes into an upstream path: nothing that could change which path that is.
ITEM_ID = re.compile(r"[A-Za-z0-9._~-]{1,256}")


@dataclass(slots=True)
class Window:
    hits: list[Hit]  # the page, before policy removes what the caller may not see
    more: bool = False  # the upstream has results after this page
    truncated: bool = False  # the upstream's cap ends the results here; more may exist


def values(query: Query, offset: int, count: int) -> dict[str, Any]:
    """Placeholder values for a call asking for `count` items from `offset`."""
    return {"query": query.text, "vector": list(query.vector or ()), "top_k": query.top_k,
            "offset": offset, "limit": count, "fetch": offset + count,
            "visibility": ",".join(query.filters.get("visibility", ()))}


async def gather(operation: Operation, target: ProxyTarget, query: Query,
                 fetch: Fetch) -> Window:
    """Items [offset, offset + top_k] of the upstream's ranking (one more, to see if more
    follow), paged through the upstream's cap or cut by it."""
    wanted = query.top_k + 1
    if operation.paginates:
        hits = await _paged(operation, target, query, wanted, fetch)
        return Window(hits[:query.top_k], more=len(hits) > query.top_k)
    cap = operation.settings.max_items
    needed = query.offset + wanted
    asked = min(needed, cap) if cap else needed
    answered = await fetch(operation.call(target, values(query, 0, asked)))
    hits = answered[query.offset:]
    truncated = asked < needed and len(answered) >= asked
    return Window(hits[:query.top_k], more=len(hits) > query.top_k, truncated=truncated)


async def _paged(operation: Operation, target: ProxyTarget, query: Query, wanted: int,
                 fetch: Fetch) -> list[Hit]:
    cap = operation.settings.max_items or wanted
    hits: list[Hit] = []
    offset = query.offset
    while len(hits) < wanted:
        count = min(wanted - len(hits), cap)
        page = await fetch(operation.call(target, values(query, offset, count)))
        hits += page
        if len(page) < count:
            break  # the upstream has no more
        offset += len(page)
    return hits[:wanted]


async def learn_visibility(collection: CompiledCollection, target: ProxyTarget,
                           hits: list[Hit], query: Query, fetch: Fetch) -> None:
    """Read each hit without a visibility through the chunk operation, when configured."""
    rules = collection.settings.record_visibility
    if rules is None or rules.lookup != "chunk" or collection.chunk is None:
        return
    missing = [hit for hit in hits if hit.metadata.get("visibility") is None]
    found = await asyncio.gather(*(_visibility(collection.chunk, target, hit.id, query, fetch)
                                   for hit in missing))
    for hit, visibility in zip(missing, found, strict=True):
        hit.metadata["visibility"] = visibility


async def _visibility(chunk: Operation, target: ProxyTarget, item: str, query: Query,
                      fetch: Fetch) -> Any:
    if not ITEM_ID.fullmatch(item) or item in (".", ".."):
        return None  # unknown: seen by nobody
    try:
        records = await fetch(chunk.call(target, {**values(query, 0, 1), "id": item}))
    except GatewayError as error:
        if error.status == 404:
            return None  # gone since the search: unknown
        raise
    return records[0].metadata.get("visibility") if records else None
