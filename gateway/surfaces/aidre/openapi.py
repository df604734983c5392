"""AIDRE's part of the gateway's OpenAPI document: its four routes, request bodies, envelopes
and error object, as the handlers answer them for one config.

The document is public, so it names public collections only (§11.6), as examples, never as an
enumeration: a caller with the scopes of a private collection may still name it.
"""

from __future__ import annotations

from typing import Any

from gateway.openapi import json_content, ref
from gateway.surfaces.aidre.config import Aidre
from gateway.surfaces.aidre.render import MEDIA_TYPE
from gateway.surfaces.aidre.request import MAX_VECTOR_LENGTH, RETURN_PARTS

_TAG = "aidre"
_ERRORS = {
    400: "Invalid request (`invalid_request`, `unsupported_embedding_space`, "
         "`unsupported_return_field`), including a forged or expired cursor and a refused path.",
    401: "No credential, or one that is invalid (`unauthorized`; the gateway's own code in "
         "`details.reason`).",
    403: "The credential lacks a scope this path needs (`forbidden`).",
    404: "No such collection, chunk or route, or one the caller may not read (`not_found`).",
    405: "Wrong method (`invalid_request`); `Allow` names the right one.",
    413: "The body is larger than `proxy.max_body_bytes`.",
    415: "The body is not application/aidre+json or application/json (`invalid_request`).",
    422: "The query vector's length does not match its embedding space "
         "(`invalid_embedding_dimension`).",
    429: "Rate limited (`rate_limited`); see `Retry-After`.",
    503: "The upstream, the token introspection or the rate-limit store is unavailable "
         "(`internal_error`); no upstream detail is passed on.",
}
_HEADERS = {
    401: {"WWW-Authenticate": {"schema": {"type": "string"}}},
    405: {"Allow": {"schema": {"type": "string"}}},
    429: {"Retry-After": {"schema": {"type": "string"}}},
}


def aidre_openapi(aidre: Aidre) -> dict[str, Any]:
    base = aidre.base_path
    return {
        "paths": {
            "/.well-known/ai-discovery": {"get": _discovery()},
            f"{base}/collections": {"get": _operation(
                "List the collections the caller may read", ref("AidreCollections"),
                (401, 403, 405, 429, 503))},
            f"{base}/search": {"post": _search(aidre)},
            f"{base}/chunks/{{id}}": {"get": _chunk()},
        },
        "components": {"schemas": _schemas(aidre)},
    }


def _operation(summary: str, schema: dict[str, Any], statuses: tuple[int, ...],
               media_type: str = MEDIA_TYPE, **extra: Any) -> dict[str, Any]:
    ok: dict[str, Any] = {"description": summary, "content": {media_type: {"schema": schema}}}
    responses: dict[str, Any] = {"200": ok}
    if 304 in statuses:
        ok["headers"] = {"ETag": {"schema": {"type": "string"}}}
        responses["304"] = {"description": "Not modified (If-None-Match matched the ETag)."}
    for status in statuses:
        if status != 304:
            responses[str(status)] = {"description": _ERRORS[status],
                                      "content": json_content(ref("AidreError"), MEDIA_TYPE),
                                      **({"headers": _HEADERS[status]}
                                         if status in _HEADERS else {})}
    return {"summary": summary, "tags": [_TAG], **extra, "responses": responses}


def _if_none_match() -> dict[str, Any]:
    return {"name": "If-None-Match", "in": "header", "required": False,
            "schema": {"type": "string"}}


def _discovery() -> dict[str, Any]:
    operation = _operation(
        "AIDRE discovery document (what this caller may know)", ref("AidreDiscovery"),
        (304, 401, 405, 429, 503), media_type="application/json",
        parameters=[_if_none_match()])
    operation["security"] = [{}]  # public whatever auth.routes say; a credential may widen it
    return operation


def _search(aidre: Aidre) -> dict[str, Any]:
    body: dict[str, Any] = {"schema": ref("AidreSearchRequest")}
    public = [name for name, c in aidre.collections.items() if c.visibility == "public"]
    if public:
        body["example"] = {"query": "refund for a damaged item", "collection": public[0],
                           "top_k": 3}
    return _operation(
        "Text or vector search in one collection", ref("AidreSearchResponse"),
        (400, 401, 403, 404, 405, 413, 415, 422, 429, 503),
        requestBody={"required": True,
                     "content": {MEDIA_TYPE: body, "application/json": dict(body)}})


def _chunk() -> dict[str, Any]:
    chunk_id = {"name": "id", "in": "path", "required": True,
                "description": "`collection:item`, as a search result's `id` gives it.",
                "schema": {"type": "string", "minLength": 1}}
    return _operation("One chunk by id", ref("AidreChunk"),
                      (304, 400, 401, 403, 404, 405, 429, 503),
                      parameters=[chunk_id, _if_none_match()])


def _schemas(aidre: Aidre) -> dict[str, Any]:
    strings = {"type": "string"}
    source = {"type": "object", "additionalProperties": False,
              "properties": {"url": strings, "title": strings, "section": strings}}
    # A record's visibility is its own (§12): the collection's, or any value its mapping gives.
    metadata = {"type": "object", "required": ["visibility"],
                "properties": {"visibility": strings}}
    return {
        "AidreError": _closed({
            "error": {"type": "string", "pattern": "^[a-z][a-z0-9_]*$",
                      "description": "Stable code (§17.3)."},
            "message": strings, "details": {"type": "object"}, "request_id": strings,
        }, ["error", "message", "details", "request_id"]),
        "AidreDiscovery": _discovery_schema(),
        "AidreCollection": _closed({
            "name": strings, "description": strings,
            "visibility": {"enum": ["public", "private"]}, "updated_at": strings,
        }, ["name", "description", "visibility"]),
        "AidreCollections": _closed({
            "request_id": strings,
            "collections": {"type": "array", "items": ref("AidreCollection")},
        }, ["request_id", "collections"]),
        "AidreEmbeddingSpace": _closed({
            "id": strings, "dimensions": {"type": "integer", "minimum": 1},
            "distance": {"enum": ["cosine", "dot", "euclidean"]}, "normalized": {"type": "boolean"},
            "provider": strings, "model": strings, "revision": strings,
        }, ["id", "dimensions", "distance"]),
        "AidreSearchRequest": _search_request(aidre),
        "AidreResult": _closed({
            "id": strings, "score": {"type": "number"}, "source": source,
            "metadata": metadata, "text": strings,
            "vector": {"type": "array", "items": {"type": "number"},
                       "description": "Only when a vector-return policy allows it."},
        }, []),
        "AidreSearchResponse": _closed({
            "request_id": strings, "collection": strings,
            "results": {"type": "array", "items": ref("AidreResult")},
            "meta": _closed({"returned": {"type": "integer", "minimum": 0},
                             "top_k": {"type": "integer", "minimum": 1,
                                       "maximum": aidre.max_top_k},
                             "next_cursor": strings}, ["returned", "top_k"]),
        }, ["request_id", "collection", "results", "meta"]),
        "AidreChunk": _closed({
            "request_id": strings, "id": strings, "collection": strings, "text": strings,
            "content_hash": strings, "updated_at": strings, "source": source,
            "metadata": metadata,
        }, ["request_id", "id", "collection", "text", "content_hash", "metadata"]),
    }


def _discovery_schema() -> dict[str, Any]:
    strings = {"type": "string"}
    flags = ("query_text", "query_vector", "return_text", "return_semantic_payload",
             "return_vectors", "pagination", "delta_sync")
    return _closed({
        "version": {"const": "1"}, "service": {"const": "AIDRE"}, "organization": strings,
        "endpoints": _closed({"collections": strings, "search": strings, "chunk": strings},
                             ["collections", "search", "chunk"]),
        "capabilities": _closed({flag: {"type": "boolean"} for flag in flags}, list(flags)),
        "embedding_spaces": {"type": "array", "items": ref("AidreEmbeddingSpace")},
        "collections": {"type": "array", "items": ref("AidreCollection")},
        "auth": _closed({"type": {"enum": ["none", "oauth2", "apikey"]},
                         "resource_metadata": strings}, ["type"]),
    }, ["version", "service", "endpoints", "capabilities", "embedding_spaces", "collections",
        "auth"])


def _search_request(aidre: Aidre) -> dict[str, Any]:
    """Exactly one of `query` and `query_vector`; unknown members are ignored (§20.3)."""
    top_k: dict[str, Any] = {"type": "integer", "minimum": 1,
                             "description": f"Default {aidre.default_top_k}; above "
                                            f"{aidre.max_top_k} it is {aidre.top_k_over_max}ed."}
    if aidre.top_k_over_max == "reject":
        top_k["maximum"] = aidre.max_top_k
    common: dict[str, Any] = {
        "collection": {"type": "string", "minLength": 1},
        "top_k": top_k,
        "return": {"type": "object", "properties": {
            part: {"type": "boolean"} for part in RETURN_PARTS}},
        "cursor": {"type": "string", "maxLength": 1024,
                   "description": "Opaque: the `meta.next_cursor` of the previous page."},
    }
    needs = [] if aidre.default_collection else ["collection"]
    text = {"type": "object", "required": ["query", *needs], "properties": {
        "query": {"type": "string", "minLength": 1, "maxLength": aidre.max_query_chars,
                  "pattern": r"\S"},
        "query_vector": False, **common}}
    vectors = [{"type": "object", "required": ["query_vector", "embedding_space", *needs],
                "properties": {
                    "query_vector": {"type": "array", "items": {"type": "number"},
                                     "minItems": space.dimensions,
                                     "maxItems": min(space.dimensions, MAX_VECTOR_LENGTH)},
                    "embedding_space": {"const": space.id},
                    "query": False, **common}}
               for space in aidre.embedding_spaces]
    return {"oneOf": [text, *vectors]}


def _closed(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties,
                              "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema
