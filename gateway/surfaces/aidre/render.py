"""AIDRE on the wire: envelopes (§16), results (§7), chunks (§8, §9), discovery (§3, §24.1)
and the error dialect (§17) with the status codes of §15.4."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from starlette.responses import Response

from gateway.errors import GatewayError
from gateway.exchange import Exchange
from gateway.model import Hit
from gateway.surfaces.aidre.collections import CompiledCollection
from gateway.surfaces.aidre.config import Aidre

MEDIA_TYPE = "application/aidre+json"
_SOURCE = ("url", "title", "section")

# Gateway failures in AIDRE's vocabulary (§17.3), by the gateway's own code.
_ERROR_CODES = {
    "missing_credentials": (401, "unauthorized"),
    "invalid_token": (401, "unauthorized"),
    "insufficient_scope": (403, "forbidden"),
    "rate_limited": (429, "rate_limited"),
    "not_found": (404, "not_found"),
    "method_not_allowed": (405, "invalid_request"),
    "invalid_path": (400, "invalid_request"),
    "websocket_not_supported": (400, "invalid_request"),
    "request_timeout": (408, "invalid_request"),
    "upstream_unavailable": (503, "internal_error"),
    "upstream_timeout": (503, "internal_error"),
    "upstream_error": (503, "internal_error"),
    "auth_unavailable": (503, "internal_error"),
    "rate_limit_unavailable": (503, "internal_error"),
    "internal_error": (500, "internal_error"),
}


def json_response(document: Any, status: int = 200, headers: dict[str, str] | None = None,
                  media_type: str = MEDIA_TYPE) -> Response:
    return Response(orjson.dumps(document), status, headers, media_type)


def render_error(error: GatewayError, exchange: Exchange) -> Response:
    """Any failure of an AIDRE path, in AIDRE's error object (§27)."""
    return error_response(error, exchange.request_id)


def error_response(error: GatewayError, request_id: str) -> Response:
    status, code = _ERROR_CODES.get(error.code, (error.status, error.code))
    if error.status == 401 and error.code == "invalid_request":
        code = "unauthorized"  # a malformed credential is still an authentication failure
    details = dict(error.details)
    if code != error.code:
        details.setdefault("reason", error.code)
    body = {"error": code, "message": error.message, "details": details,
            "request_id": request_id}
    return json_response(body, status, dict(error.headers))


def result(hit: Hit, collection: CompiledCollection, fields: frozenset[str]) -> dict[str, Any]:
    item: dict[str, Any] = {}
    if "ids" in fields:
        item["id"] = f"{collection.name}:{hit.id}"
    if hit.score is not None:
        item["score"] = round(hit.score, 6)
    source = _source(hit)
    if source:
        item["source"] = source
    if "metadata" in fields:
        item["metadata"] = metadata(hit, collection)
    if "text" in fields and hit.text is not None:
        item["text"] = hit.text
    if "vectors" in fields and hit.vector is not None:
        item["vector"] = hit.vector
    return item


def metadata(hit: Hit, collection: CompiledCollection) -> dict[str, Any]:
    """The record's own visibility when it has one (never raised to the collection's)."""
    found = {k: v for k, v in hit.fields.items() if v is not None and k not in _SOURCE}
    for name, value in hit.metadata.items():  # over the fields of the same name
        if value is not None:
            found[name] = value
    if hit.metadata.get("visibility") is None:
        found["visibility"] = collection.settings.visibility
    return found


def _source(hit: Hit) -> dict[str, Any]:
    fields = hit.fields
    return {k: value for k in _SOURCE if (value := fields.get(k)) is not None}


def chunk(hit: Hit, collection: CompiledCollection, request_id: str) -> dict[str, Any]:
    text = hit.text or ""
    meta = metadata(hit, collection)
    content_hash = meta.get("content_hash")
    if not isinstance(content_hash, str) or not content_hash.isprintable():
        content_hash = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    meta["content_hash"] = content_hash
    document: dict[str, Any] = {
        "request_id": request_id, "id": f"{collection.name}:{hit.id}",
        "collection": collection.name, "text": text, "content_hash": content_hash}
    if meta.get("updated_at") is not None:
        document["updated_at"] = meta["updated_at"]
    source = _source(hit)
    if source:
        document["source"] = source
    document["metadata"] = meta
    return document


def collection_entry(collection: CompiledCollection) -> dict[str, Any]:
    entry = {"name": collection.name, "description": collection.settings.description,
             "visibility": collection.settings.visibility}
    if collection.settings.updated_at is not None:
        entry["updated_at"] = collection.settings.updated_at
    return entry


def discovery(settings: Aidre, base_url: str, organization: str | None,
              readable: list[CompiledCollection], vectors_possible: bool,
              auth: dict[str, Any]) -> dict[str, Any]:
    """What this caller may know: private collections appear only to those who can read them."""
    with_vectors = [c for c in readable if c.vector_search is not None]
    spaces = {c.space.id: c.space for c in with_vectors if c.space is not None}
    document: dict[str, Any] = {"version": "1", "service": "AIDRE"}
    if organization:
        document["organization"] = organization
    prefix = base_url.rstrip("/") + settings.base_path
    document["endpoints"] = {"collections": f"{prefix}/collections",
                             "search": f"{prefix}/search", "chunk": f"{prefix}/chunks/{{id}}"}
    document["capabilities"] = {
        "query_text": True, "query_vector": bool(with_vectors), "return_text": True,
        "return_semantic_payload": False, "return_vectors": vectors_possible,
        "pagination": True, "delta_sync": False,
    }
    document["embedding_spaces"] = [s.advertised() for s in spaces.values()]
    document["collections"] = [collection_entry(c) for c in readable]
    document["auth"] = auth
    return document
