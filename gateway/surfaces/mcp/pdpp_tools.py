"""The read tools the PDPP reference server defines on its own `/mcp` (`query_records`,
`search` with its lexical and semantic modes, `fetch`), with its parameter names, so PDPP
clients work unchanged. Each wraps a PDPP route of this gateway, so the grant's streams and
fields hold as on the HTTP surface. `schema` is not offered: the gateway serves no
`/v1/schema`.

Arguments the reference defines and the gateway's PDPP surface does not serve (`sort`,
`count`, `view`, `expand`, `expand_limit`, `changes_since`, `connection_id`) are not offered:
a tool's input schema lists only what its route takes, and a call naming one of them is
refused (-32602, "not an argument of this tool") rather than answered differently.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.index.query import MAX_QUERY_CHARS, MAX_QUERY_TERMS
from gateway.inner import InnerCall
from gateway.surfaces.mcp.connectors import DOCUMENT
from gateway.surfaces.mcp.tools import (
    Arguments,
    McpTool,
    ToolInputError,
    as_object,
    object_schema,
    string_schema,
    text_value,
)

_NAME = string_schema("Stream name.", 128)
_LIMIT = {"type": "integer", "minimum": 1, "maximum": 100, "description": "Page size."}
_CURSOR = string_schema("`next_cursor` of the previous page.", 4096)
_FIELDS = {"type": "array", "items": {"type": "string", "maxLength": 128}, "maxItems": 100,
           "description": "Fields to return (the grant still decides)."}
_FILTER = {"type": "object", "maxProperties": 32,
           "description": "field -> value, or field -> {operator: value} (gte, gt, lte, lt)."}
_QUERY = f"Search query: at most {MAX_QUERY_CHARS} characters and {MAX_QUERY_TERMS} distinct " \
    "words (lexical)."
_TEXT_FIELDS = ("text", "content", "body", "summary")
DATA: dict[str, Any] = {"type": "object", "required": ["data"], "properties": {
    "data": {"type": "object"}, "request_id": {"type": "string"}}}
SEARCH: dict[str, Any] = {"type": "object", "required": ["data", "results"], "properties": {
    **DATA["properties"], "results": {"type": "array", "items": {"type": "object"}}}}


def pdpp_tools(section: Any, public_base_url: str | None) -> list[McpTool]:
    if section is None or not getattr(section, "enabled", False):
        return []
    base = section.base_path
    origin = (public_base_url or "").rstrip("/")
    records = f"{base}/v1/streams/{{stream}}/records"
    modes = ["lexical", "semantic"] if section.semantic is not None else ["lexical"]
    return [
        McpTool("query_records", "Read records of a stream the grant covers, a page at a "
                "time; narrow with `fields`, page with `cursor`.",
                object_schema({"stream": _NAME, "limit": _LIMIT, "cursor": _CURSOR,
                               "order": {"enum": ["asc", "desc"]}, "fields": _FIELDS,
                               "filter": _FILTER}, ["stream"]),
                "GET", records, _records_request(records), _data, DATA, surface="pdpp",
                title="Query records"),
        McpTool("search", f"Search records the grant covers ({' or '.join(modes)}); result "
                "ids are `fetch` handles.",
                object_schema({"q": string_schema(_QUERY, MAX_QUERY_CHARS),
                               "streams": {"type": "array", "maxItems": 50,
                                           "items": {"type": "string", "maxLength": 128}},
                               "limit": _LIMIT, "cursor": _CURSOR,
                               "mode": {"enum": modes}, "filter": _FILTER}, ["q"]),
                "GET", f"{base}/v1/search", _search_request(base, modes),
                lambda body, rid: _search(body, rid, origin), SEARCH, surface="pdpp",
                title="Search records"),
        McpTool("fetch", "Read one record as a document, by a `search` result id "
                "(`stream:record_id`).",
                object_schema({"id": string_schema("`stream:record_id`.", 1024),
                               "fields": _FIELDS}, ["id"]),
                "GET", f"{records}/{{key}}", _fetch_request(f"{records}/{{key}}"),
                lambda body, rid: _document(body, origin), DOCUMENT, surface="pdpp",
                title="Fetch record"),
    ]


def _records_request(path: str) -> Any:
    def request(arguments: Arguments) -> InnerCall:
        stream = text_value(arguments.get("stream"), "stream", 128)
        query = _query(arguments, ("limit", "cursor", "order"))
        return InnerCall("GET", path, {"stream": stream}, query=query)
    return request


def _search_request(base: str, modes: list[str]) -> Any:
    def request(arguments: Arguments) -> InnerCall:
        mode = arguments.get("mode") or "lexical"
        if mode not in modes:
            raise ToolInputError(f"mode {mode!r} is not served here; use {' or '.join(modes)}.")
        query = _query(arguments, ("q", "limit", "cursor"))
        streams = arguments.get("streams") or []
        if streams:
            query["streams[]"] = [str(stream) for stream in streams]
        path = f"{base}/v1/search" + ("/semantic" if mode == "semantic" else "")
        return InnerCall("GET", path, query=query)
    return request


def _fetch_request(path: str) -> Any:
    def request(arguments: Arguments) -> InnerCall:
        stream, sep, key = text_value(arguments.get("id"), "id", 1024).partition(":")
        if not sep or not stream or not key:
            raise ToolInputError("id must be `stream:record_id`, as `search` gives it.")
        return InnerCall("GET", path, {"stream": stream, "key": key},
                         query=_query(arguments, ()))
    return request


def _query(arguments: Arguments, plain: tuple[str, ...]) -> dict[str, Any]:
    """The query of a PDPP read: the plain parameters, `fields` comma-joined, and `filter` in
    PDPP's bracket form."""
    query: dict[str, Any] = {name: arguments[name] for name in plain if name in arguments}
    if arguments.get("fields"):
        query["fields"] = ",".join(str(name) for name in arguments["fields"])
    for name, value in (arguments.get("filter") or {}).items():
        if isinstance(value, dict):
            for operator, bound in value.items():
                query[f"filter[{name}][{operator}]"] = _scalar(bound)
        else:
            query[f"filter[{name}]"] = _scalar(value)
    return query


def _scalar(value: Any) -> str | int | float | bool:
    if isinstance(value, str | int | float | bool):
        return value
    raise ToolInputError("filter values must be strings, numbers or booleans.")


def _data(body: Any, request_id: str) -> dict[str, Any]:
    return {"data": body if isinstance(body, dict) else {}, "request_id": request_id}


def _search(body: Any, request_id: str, origin: str) -> dict[str, Any]:
    hits = body.get("data") if isinstance(body, dict) else None
    results = []
    for hit in hits if isinstance(hits, list) else []:
        if not isinstance(hit, dict):
            continue
        stream, key = str(hit.get("stream", "")), str(hit.get("record_key", ""))
        snippet = hit.get("snippet")
        title = snippet.get("text") if isinstance(snippet, dict) else snippet
        results.append({"id": f"{stream}:{key}", "title": str(title or f"{stream} {key}"),
                        "url": origin + str(hit.get("record_url", "")),
                        "stream": stream, "record_key": key})
    return {"data": body if isinstance(body, dict) else {}, "results": results,
            "request_id": request_id}


def _document(body: Any, origin: str) -> dict[str, Any]:
    record = as_object(body)
    data = as_object(record.get("data"))
    stream, key = str(record.get("stream", "")), str(record.get("id", ""))
    texts = [str(data[name]) for name in _TEXT_FIELDS if isinstance(data.get(name), str)]
    title = data.get("title") or data.get("subject") or f"{stream} {key}"
    return {"id": f"{stream}:{key}", "title": str(title),
            "text": "\n\n".join(texts) if texts else orjson.dumps(data).decode(),
            "url": str(data.get("url") or ""),
            "metadata": {"stream": stream, "record_id": key,
                         "connector_id": record.get("connector_id"),
                         "emitted_at": record.get("emitted_at")}}
