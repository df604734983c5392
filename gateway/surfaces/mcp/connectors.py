"""The tools agent platforms expect of a retrieval connector, over AIDRE: `search(query)`
answers results with id, title and url; `fetch(id)` answers the document (id, title, text,
url, metadata). They wrap the AIDRE search and chunk routes that the `aidre_search` and
`aidre_chunk` capabilities name."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gateway.capability import Capability
from gateway.inner import InnerCall
from gateway.surfaces.mcp.tools import (
    Arguments,
    McpTool,
    as_object,
    object_schema,
    string_schema,
    text_value,
)

RESULTS: dict[str, Any] = {"type": "object", "required": ["results"], "properties": {"results": {
    "type": "array", "items": {"type": "object", "required": ["id", "title", "url"],
                               "properties": {"id": {"type": "string"},
                                              "title": {"type": "string"},
                                              "url": {"type": "string"}}}}}}
DOCUMENT: dict[str, Any] = {
    "type": "object", "required": ["id", "title", "text", "url", "metadata"],
    "properties": {"id": {"type": "string"}, "title": {"type": "string"},
                           "text": {"type": "string"}, "url": {"type": "string"},
                           "metadata": {"type": "object"}}}


def aidre_tools(capabilities: Iterable[Capability]) -> list[McpTool]:
    endpoints = {capability.id: capability.endpoint for capability in capabilities}
    search, chunk = endpoints.get("aidre_search"), endpoints.get("aidre_chunk")
    if search is None or chunk is None or not search.startswith("/"):
        return []
    return [
        McpTool("search", "Search the content this gateway serves; results carry ids for "
                "`fetch`.", object_schema({"query": string_schema("What to look for.")},
                                          ["query"]),
                "POST", search, _search_request(search), _results, RESULTS, surface="aidre",
                title="Search"),
        McpTool("fetch", "Read one search result's document by its id.",
                object_schema({"id": string_schema("A result id from `search`.", 512)},
                              ["id"]),
                "GET", chunk, _fetch_request(chunk.replace("{id:path}", "{id}")), _document,
                DOCUMENT, surface="aidre", title="Fetch"),
    ]


def _search_request(path: str) -> Any:
    def request(arguments: Arguments) -> InnerCall:
        return InnerCall("POST", path, json={"query": text_value(arguments.get("query"),
                                                                 "query")})
    return request


def _fetch_request(path: str) -> Any:
    def request(arguments: Arguments) -> InnerCall:
        return InnerCall("GET", path, {"id": text_value(arguments.get("id"), "id", 512)})
    return request


def _results(body: Any, request_id: str) -> dict[str, Any]:
    results = []
    for hit in _list(body, "results"):
        source = as_object(hit.get("source"))
        identifier = str(hit.get("id", ""))
        results.append({"id": identifier, "title": str(source.get("title") or identifier),
                        "url": str(source.get("url") or "")})
    return {"results": results}


def _document(body: Any, request_id: str) -> dict[str, Any]:
    chunk = as_object(body)
    source = as_object(chunk.get("source"))
    metadata = {name: chunk[name] for name in ("collection", "updated_at", "content_hash")
                if name in chunk}
    if isinstance(chunk.get("metadata"), dict):
        metadata.update(chunk["metadata"])
    identifier = str(chunk.get("id", ""))
    return {"id": identifier, "title": str(source.get("title") or identifier),
            "text": str(chunk.get("text") or ""), "url": str(source.get("url") or ""),
            "metadata": metadata}


def _list(body: Any, name: str) -> list[dict[str, Any]]:
    found = body.get(name) if isinstance(body, dict) else None
    return [item for item in found if isinstance(item, dict)] if isinstance(found, list) else []
