"""PDPP's part of the gateway's OpenAPI document: streams, records and the search endpoints,
with the reference server's response schemas (gateway/schemas/pdpp/responses.json) as
components and spec-core §8's `PdppError` for every failure.

Where aigw knowingly differs from the reference schemas (README: known disagreements), the
component says so rather than the answers breaking it: stream metadata without the reference
server's own field and expansion views, and `query.search` on stream metadata.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources
from typing import Any

from gateway.index.query import MAX_QUERY_CHARS, MAX_QUERY_TERMS
from gateway.openapi import json_content, ref
from gateway.surfaces.pdpp.config import Pdpp
from gateway.surfaces.pdpp.metadata import lexical_served, semantic_served
from gateway.surfaces.pdpp.render import VERSION_HEADER

_TAG = "pdpp"
_COMPONENTS = {"PdppError": "error", "PdppStreamList": "stream_list",
               "PdppStreamMetadata": "stream_metadata", "PdppRecordList": "record_list",
               "PdppRecord": "record", "PdppLexicalSearch": "lexical_search",
               "PdppSemanticSearch": "semantic_search"}
_ERRORS = {
    400: "`invalid_request_error`: an unknown, repeated or owner-only parameter (`param` "
         "names it), a bad cursor, filter or limit, a search query past its bounds, or an "
         "unsupported PDPP-Version.",
    401: "`authentication_error`: no owner or client token.",
    403: "`permission_error`: the grant does not cover the stream or field.",
    404: "`not_found_error`: no such stream (or not granted) or record.",
    405: "Wrong method (`invalid_request_error`).",
    429: "`rate_limit_error`, with Retry-After.",
    502: "`api_error`: the upstream failed; no upstream detail is passed on.",
    503: "`api_error`: the auth or rate-limit store, or the upstream, is unavailable.",
    504: "`api_error`: the upstream did not answer in time.",
}
_READ_STATUSES = (400, 401, 403, 404, 405, 429, 502, 503, 504)


def pdpp_openapi(pdpp: Pdpp) -> dict[str, Any]:
    base = pdpp.base_path
    stream = _path_parameter("stream", "A stream the caller's grant covers.")
    key = _path_parameter("key", "The record's primary key.")
    paths: dict[str, Any] = {
        f"{base}/v1/streams": {"get": _get(
            pdpp, "Streams the caller may read", "PdppStreamList", [])},
        f"{base}/v1/streams/{{stream}}": {"get": _get(
            pdpp, "One stream's metadata", "PdppStreamMetadata", [stream])},
        f"{base}/v1/streams/{{stream}}/records": {"get": _get(
            pdpp, "Records of a stream, newest first by its cursor field", "PdppRecordList",
            [stream, _query("limit", {"type": "integer", "minimum": 1, "maximum": 100}),
             _query("cursor", {"type": "string"}),
             _query("order", {"enum": ["asc", "desc"]}),
             _query("fields", {"type": "string"}, "Comma-separated fields to return.")])},
        f"{base}/v1/streams/{{stream}}/records/{{key}}": {"get": _get(
            pdpp, "One record", "PdppRecord",
            [stream, key, _query("fields", {"type": "string"})])},
    }
    if lexical_served(pdpp):
        paths[f"{base}/v1/search"] = {"get": _get(
            pdpp, "Lexical search over the fields the caller may match", "PdppLexicalSearch",
            _search_parameters(pdpp.lexical.max_limit, True))}
    semantic = pdpp.semantic
    if semantic is not None and semantic_served(pdpp):
        paths[f"{base}/v1/search/semantic"] = {"get": _get(
            pdpp, "Semantic search over the fields the caller may match",
            "PdppSemanticSearch", _search_parameters(semantic.max_limit, False))}
    return {"paths": paths, "components": {"schemas": _components()}}


def _path_parameter(name: str, description: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "description": description,
            "schema": {"type": "string", "minLength": 1}}


def _query(name: str, schema: dict[str, Any], description: str = "") -> dict[str, Any]:
    parameter = {"name": name, "in": "query", "required": False, "schema": schema}
    return {**parameter, "description": description} if description else parameter


def _search_parameters(max_limit: int, lexical: bool) -> list[dict[str, Any]]:
    bounds = f"At most {MAX_QUERY_CHARS} characters (`query_too_long`)" + (
        f" and {MAX_QUERY_TERMS} distinct search terms, words other than stopwords "
        "(`too_many_query_terms`)" if lexical else "") + "; a longer query is refused."
    return [
        {"name": "q", "in": "query", "required": True, "description": bounds,
         "schema": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS}},
        _query("limit", {"type": "integer", "minimum": 1, "maximum": max_limit}),
        _query("cursor", {"type": "string"}),
        _query("streams[]", {"type": "array", "items": {"type": "string"}},
               "Streams to search (default: every stream the caller may search)."),
    ]


def _get(pdpp: Pdpp, summary: str, schema: str,
         parameters: list[dict[str, Any]]) -> dict[str, Any]:
    version = {"name": "PDPP-Version", "in": "header", "required": False,
               "schema": {"enum": list(pdpp.versions)}}
    headers = {VERSION_HEADER: {"schema": {"type": "string"}}}
    responses: dict[str, Any] = {"200": {"description": summary, "headers": headers,
                                         "content": json_content(ref(schema))}}
    for status in _READ_STATUSES:
        responses[str(status)] = {"description": _ERRORS[status],
                                  "content": json_content(ref("PdppError"))}
    return {"summary": summary, "tags": [_TAG], "parameters": [*parameters, version],
            "responses": responses}


@cache
def _components() -> dict[str, Any]:
    text = (resources.files("gateway") / "schemas" / "pdpp" / "responses.json").read_text(
        "utf-8")
    shipped = json.loads(text)
    schemas = {name: _without_ids(copy.deepcopy(shipped[key]))
               for name, key in _COMPONENTS.items()}
    metadata = schemas["PdppStreamMetadata"]
    metadata["required"] = [name for name in metadata.get("required", [])
                            if name not in ("field_capabilities", "expand_capabilities")]
    query = metadata.get("properties", {}).get("query")
    if isinstance(query, dict):
        query.setdefault("properties", {})["search"] = {
            "type": "object", "additionalProperties": False,
            "properties": {name: {"type": "array", "items": {"type": "string"}, "minItems": 1}
                           for name in ("lexical_fields", "semantic_fields")}}
    return schemas


def _without_ids(node: Any) -> Any:
    """The reference schemas' relative `$id`s would move the base of every `$ref` near them."""
    if isinstance(node, dict):
        return {key: _without_ids(value) for key, value in node.items() if key != "$id"}
    if isinstance(node, list):
        return [_without_ids(item) for item in node]
    return node
