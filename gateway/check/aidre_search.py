"""AIDRE search (§5, §6, §16, §18, §19): a text query, the top_k rules, query shape, vectors."""

from __future__ import annotations

import math
from typing import Any

from gateway.check.aidre_rules import (
    DIMENSION,
    EXACTLY_ONE,
    SEARCH,
    SEARCH_ENVELOPE,
    SEARCH_RULES,
    SEARCH_TYPE,
    TOP_K_BOUNDS,
    TOP_K_LIMIT,
    UNKNOWN_SPACE,
    UNSUPPORTED_TYPE,
    VECTOR,
    VECTORS_DEFAULT,
    Found,
)
from gateway.check.common import json_object
from gateway.check.context import Context
from gateway.check.http import Answer
from gateway.check.rules import Outcome, Sheet

QUERIES = ("help", "the")  # the second when the first finds nothing: a result to dereference
TOP_K = 2
UNKNOWN = "aigw-check-unknown-space"
VECTOR_KEYS = ("vector", "vectors", "embedding")


async def run(context: Context, found: Found, sheet: Sheet) -> None:
    url = found.endpoints["search"]
    if url is None:
        sheet.add(*(rule.skipped("search endpoint on another origin: not checked")
                    for rule in SEARCH_RULES))
        return
    search = _Search(context, found, url)
    await _text(search, sheet)
    sheet.add(await _top_k_bounds(search))
    sheet.add(await _exactly_one(search))
    await _vectors(search, sheet)
    sheet.add(await _unsupported_type(search))


class _Search:
    """POSTs to the search endpoint, each recorded with the others."""

    def __init__(self, context: Context, found: Found, url: str) -> None:
        self.context, self.found, self.url = context, found, url

    async def post(self, body: dict[str, Any], **options: Any) -> Answer:
        if self.found.collection is not None:
            body = {"collection": self.found.collection, **body}
        return await self.found.call(self.context, "POST", self.url, json_body=body, **options)


async def _text(search: _Search, sheet: Sheet) -> None:
    found = await _query(search)
    if isinstance(found, str):
        sheet.add(SEARCH.failed(found))
        return
    query, answer, document, results = found
    sheet.add(SEARCH.passed(f"{len(results)} result(s) for {query!r}"),
              SEARCH_TYPE.check(answer.media_type == "application/aidre+json",
                                f"Content-Type: {answer.headers.get('content-type')}"),
              _envelope(document),
              TOP_K_LIMIT.check(len(results) <= TOP_K, f"{len(results)} for top_k={TOP_K}"),
              _no_vectors(results))
    first = results[0] if results and isinstance(results[0], dict) else {}
    search.found.result_id = first.get("id") if isinstance(first.get("id"), str) else None


async def _query(search: _Search) -> tuple[str, Answer, dict[str, Any], list[Any]] | str:
    """The first of QUERIES with results (else the last), or why a search failed."""
    found: tuple[str, Answer, dict[str, Any], list[Any]] | str = "no query sent"
    for query in QUERIES:
        answer = await search.post({"query": query, "top_k": TOP_K})
        document, problem = json_object(answer) if answer.status == 200 \
            else (None, answer.describe())
        results = (document or {}).get("results")
        if document is None or not isinstance(results, list):
            return problem or f"{answer.describe()}: no results array"
        found = (query, answer, document, results)
        if results:
            break
    return found


def _envelope(document: dict[str, Any]) -> Outcome:
    lacking = [k for k in ("request_id", "collection", "meta") if k not in document]
    return SEARCH_ENVELOPE.check(not lacking, f"missing: {', '.join(lacking)}" if lacking
                                 else "request_id, collection and meta")


def _no_vectors(results: list[Any]) -> Outcome:
    carrying = [r for r in results if isinstance(r, dict) and any(k in r for k in VECTOR_KEYS)]
    return VECTORS_DEFAULT.check(not carrying, f"{len(carrying)} result(s) carry a vector"
                                 if carrying else "none carries a vector")


async def _top_k_bounds(search: _Search) -> Outcome:
    for top_k in (0, -1):
        answer = await search.post({"query": QUERIES[0], "top_k": top_k})
        if not 400 <= answer.status < 500:
            return TOP_K_BOUNDS.failed(f"top_k={top_k}: {answer.describe()}, not a 4xx")
    return TOP_K_BOUNDS.passed("0 and -1 rejected")


async def _exactly_one(search: _Search) -> Outcome:
    both = {"query": QUERIES[0], "query_vector": [0.6, 0.8]}
    for body, what in ((both, "both"), ({"top_k": TOP_K}, "neither")):
        answer = await search.post(body)
        if not 400 <= answer.status < 500:
            return EXACTLY_ONE.failed(f"{what}: {answer.describe()}, not a 4xx")
    return EXACTLY_ONE.passed("both and neither rejected")


async def _vectors(search: _Search, sheet: Sheet) -> None:
    capabilities = search.found.discovery.get("capabilities")
    space = _space(search.found.discovery)
    if not isinstance(capabilities, dict) or capabilities.get("query_vector") is not True:
        reason = "query_vector not advertised (capabilities.query_vector)"
    elif space is None:
        reason = "no embedding space with an id and dimensions"
    else:
        reason = ""
    if reason:
        sheet.add(DIMENSION.skipped(reason), VECTOR.skipped(reason),
                  UNKNOWN_SPACE.skipped(reason))
        return
    assert space is not None
    space_id, dimensions = space
    wrong = 2 if dimensions != 2 else 3
    answer = await search.post({"query_vector": _unit(wrong), "embedding_space": space_id})
    sheet.add(DIMENSION.check(answer.status == 422,
                              f"length {wrong} for {dimensions}: {answer.describe()}"))
    answer = await search.post({"query_vector": _unit(dimensions), "embedding_space": space_id,
                                "top_k": TOP_K})
    document = json_object(answer)[0] if answer.status == 200 else None
    sheet.add(VECTOR.check(isinstance((document or {}).get("results"), list),
                           f"length {dimensions}: {answer.describe()}"))
    answer = await search.post({"query_vector": _unit(dimensions), "embedding_space": UNKNOWN})
    sheet.add(UNKNOWN_SPACE.check(400 <= answer.status < 500, answer.describe()))


def _space(discovery: dict[str, Any]) -> tuple[str, int] | None:
    """The first advertised embedding space with an id and a usable dimension count."""
    spaces = discovery.get("embedding_spaces")
    for space in spaces if isinstance(spaces, list) else []:
        if not isinstance(space, dict):
            continue
        space_id, dimensions = space.get("id"), space.get("dimensions")
        if isinstance(space_id, str) and isinstance(dimensions, int) \
                and not isinstance(dimensions, bool) and 0 < dimensions <= 65536:
            return space_id, dimensions
    return None


def _unit(length: int) -> list[float]:
    """A normalized vector (§19.4: clients SHOULD send normalized vectors)."""
    return [round(1 / math.sqrt(length), 8)] * length


async def _unsupported_type(search: _Search) -> Outcome:
    answer = await search.post({"query": QUERIES[0]}, headers={"Content-Type": "text/plain"})
    return UNSUPPORTED_TYPE.check(answer.status == 415, answer.describe())
