"""PDPP on the wire: list envelopes, records, search results, and the error envelope of
spec-core §8 (`{"error": {type, code, message, param?, request_id}}`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import orjson
from starlette.responses import Response

from gateway.errors import GatewayError
from gateway.surfaces.pdpp.projection import Access
from gateway.surfaces.pdpp.search import Found
from gateway.surfaces.pdpp.streams import Record

VERSION_HEADER = "pdpp-version"
_VERSION = VERSION_HEADER.encode()
_NOT_STORED = ((b"cache-control", b"no-store"), (b"vary", b"Authorization"))

# The gateway's own failures in PDPP's vocabulary (spec-core §8), by the gateway's code.
_CODES = {
    "missing_credentials": "authentication_error",
    "invalid_token": "authentication_error",
    "rate_limited": "rate_limit_exceeded",
    "method_not_allowed": "invalid_request",
    "invalid_path": "invalid_request",
    "websocket_not_supported": "invalid_request",
    "request_too_large": "invalid_request",
}
# The gateway's own state, not an upstream's detail.
_OWN_5XX = frozenset({"index_building", "index_unavailable"})
_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          404: "not_found_error", 405: "invalid_request_error", 410: "gone_error",
          413: "invalid_request_error", 429: "rate_limit_error"}


def sent_version(scope: Mapping[str, Any]) -> str | None:
    """The request's PDPP-Version header, as `Request.headers` reads it (the first one sent),
    without making the mapping."""
    for name, value in scope["headers"]:
        if name == _VERSION:
            return str(value.decode("latin-1"))
    return None


def json_response(document: Any, request_id: str, version: str, status: int = 200,
                  headers: dict[str, str] | None = None) -> Response:
    return encoded_response(orjson.dumps(document), request_id, version, status, headers)


def encoded_response(body: bytes, request_id: str, version: str, status: int = 200,
                     headers: dict[str, str] | None = None) -> Response:
    """A JSON body already encoded, with PDPP's headers."""
    if headers:
        fields = {"request-id": request_id, "cache-control": "no-store", "vary": "Authorization",
                  **({VERSION_HEADER: version} if version else {}), **headers}
        return Response(body, status, fields, "application/json")
    # As Starlette makes them from a mapping, in the same order, without making one.
    response = Response(body, status, None, "application/json")
    raw = [(b"request-id", request_id.encode("latin-1")), *_NOT_STORED]
    if version:
        raw.append((_VERSION, version.encode("latin-1")))
    response.raw_headers = raw + response.raw_headers  # content-length, content-type
    return response


def error_response(error: GatewayError, request_id: str, version: str = "") -> Response:
    """Every failure: a stable type and code, the offending parameter, the request id."""
    status = error.status
    code = _CODES.get(error.code, error.code)
    if status == 401:
        code = "authentication_error"
    if status >= 500 and code not in _OWN_5XX:
        code = "api_error"  # never the upstream's own detail
    body: dict[str, Any] = {"type": _TYPES.get(status, "api_error"), "code": code,
                            "message": error.message, "request_id": request_id}
    if isinstance(error.details.get("param"), str):
        body["param"] = error.details["param"]
    return json_response({"error": body}, request_id, version, status, dict(error.headers))


def record(access: Access, item: Record, wanted: frozenset[str] | None,
           emitted_fallback: str) -> dict[str, Any]:
    return {"object": "record", "id": item.key, "stream": access.stream.name,
            "data": access.project(item, wanted),
            "emitted_at": access.emitted_at(item, emitted_fallback),
            "connector_id": access.stream.connector_id}


def search_result(found: Found, base_path: str, semantic: bool,
                  emitted_fallback: str) -> dict[str, Any]:
    stream = found.access.stream
    result: dict[str, Any] = {
        "object": "search_result", "stream": stream.name, "record_key": found.record.key,
        "connector_id": stream.connector_id,
        "emitted_at": found.access.emitted_at(found.record, emitted_fallback),
        "matched_fields": list(found.matched),
        "record_url": f"{base_path}/v1/streams/{stream.name}/records/"
                      f"{quote(found.record.key, safe='')}",
    }
    if semantic:
        result["retrieval_mode"] = "semantic"  # lexical_blending is false
    if found.snippet is not None:
        result["snippet"] = found.snippet
    return result


def page(url: str, data: list[dict[str, Any]], next_cursor: str | None,
         meta: dict[str, Any] | None = None) -> dict[str, Any]:
    document: dict[str, Any] = {"object": "list", "url": url, "data": data,
                                "has_more": next_cursor is not None}
    if next_cursor is not None:
        document["next_cursor"] = next_cursor
    if meta:
        document["meta"] = meta
    return document
