"""AIP's part of the gateway's OpenAPI document: aip.json, the capabilities document, retrieve
and the event endpoint, with the shipped AIP 0.1 JSON Schemas as components.

Every answer of retrieve, failures included, is a RetrieveResponse; the signing headers are
declared when `aip.signing` is enabled (required when unsigned requests are refused).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from gateway.openapi import document_operation, json_content, ref
from gateway.surfaces.aip.config import Aip
from gateway.surfaces.aip.declaration import DECLARATION_PATH
from gateway.surfaces.aip.signing import HEADERS

_TAG = "aip"
_SCHEMAS = {"AipDeclaration": "aip", "AipRetrieveRequest": "retrieve-request",
            "AipRetrieveResponse": "retrieve-response", "AipEvent": "access-citation-event"}
_ERRORS = {
    400: "`invalid_request`: not JSON, not a valid RetrieveRequest (the failing member), "
         "nested deeper than 32 levels, a string over its bound, or values too long for an "
         "upstream URL.",
    401: "`auth_failed`: no acceptable credential, or a signature that does not verify.",
    403: "`denied` (a consent decision), or `auth_failed`: a stale timestamp, a replayed "
         "nonce, or a platform.id other than the signing key's.",
    409: "`duplicate_event`: the platform already used this event_id for a different event "
         "(the same event again is answered 202).",
    405: "Wrong method (`invalid_request`); `Allow` names the right one.",
    413: "`request_too_large`: the body is larger than `aip.retrieve_max_bytes` (events: "
         "`aip.event.max_bytes`) or `proxy.max_body_bytes`.",
    415: "`invalid_request`: the body is not application/json.",
    422: "`invalid_event`: the event fails access-citation-event.schema.json, or cites a "
         "request_id not answered to its platform; the message names the field.",
    429: "`denied` with reason `rate_limited` (retrieve) or `rate_limited`; see Retry-After.",
    502: "`upstream_unavailable` or `upstream_error`; no upstream detail is passed on.",
    503: "`unavailable`: the auth, rate-limit, nonce or event store is down (fails closed).",
    504: "`upstream_timeout`: the content source did not answer in time.",
}


def aip_openapi(aip: Aip) -> dict[str, Any]:
    paths: dict[str, Any] = {
        DECLARATION_PATH: {"get": _document("AIP publisher declaration (aip.json)",
                                            ref("AipDeclaration"))},
        aip.capabilities_path: {"get": _document("AIP capabilities and limits",
                                                 {"type": "object"})},
        aip.retrieve_path: {"post": _post(
            aip, "Retrieve content chunks with citations for an intent", "AipRetrieveRequest",
            {"200": _answer("`ok`: chunks, citations and the limits applied.")},
            (400, 401, 403, 405, 413, 415, 429, 502, 503, 504))},
    }
    if aip.event is not None and aip.events is not None:
        accepted = {"description": "The citation event is stored.", "content": json_content(
            ref("AipEventAccepted"))}
        paths[aip.event.path] = {"post": _post(
            aip, "Report a citation event", "AipEvent", {"202": accepted},
            (400, 401, 403, 405, 409, 413, 415, 422, 429, 503))}
    return {"paths": paths, "components": {"schemas": _components()}}


def _document(summary: str, schema: dict[str, Any]) -> dict[str, Any]:
    operation = document_operation(summary, schema, "application/json", _TAG)
    operation["responses"]["405"]["content"] = json_content(ref("AipRetrieveResponse"))
    return operation


def _answer(description: str, status: int | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {"description": description,
                                "content": json_content(ref("AipRetrieveResponse"))}
    if status in (405, 429):
        name = "Allow" if status == 405 else "Retry-After"
        response["headers"] = {name: {"schema": {"type": "string"}}}
    return response


def _post(aip: Aip, summary: str, body: str, ok: dict[str, Any],
          statuses: tuple[int, ...]) -> dict[str, Any]:
    responses = {**ok, **{str(status): _answer(_ERRORS[status], status)
                          for status in statuses}}
    operation: dict[str, Any] = {
        "summary": summary, "tags": [_TAG],
        "requestBody": {"required": True, "content": json_content(ref(body))},
        "responses": responses,
    }
    signing = aip.signing
    if signing is not None and signing.enabled:
        operation["parameters"] = [
            {"name": header, "in": "header", "required": signing.required,
             "schema": {"type": "string"}} for header in HEADERS]
    return operation


def _components() -> dict[str, Any]:
    schemas = {name: _component(name, file) for name, file in _SCHEMAS.items()}
    schemas["AipEventAccepted"] = {
        "type": "object", "required": ["aip_version", "request_id", "status", "event_id"],
        "properties": {"aip_version": {"const": "0.1"}, "request_id": {"type": "string"},
                       "status": {"const": "accepted"}, "event_id": {"type": "string"}}}
    return schemas


@cache
def _component(name: str, file: str) -> dict[str, Any]:
    """A shipped schema as a component: no $id or $schema, its `#/...` refs made absolute."""
    text = (resources.files("gateway") / "schemas" / "aip" / f"{file}.schema.json").read_text(
        "utf-8")
    schema = json.loads(text)
    schema.pop("$id", None)
    schema.pop("$schema", None)
    return _rebase(schema, f"#/components/schemas/{name}")


def _rebase(node: Any, base: str) -> Any:
    if isinstance(node, dict):
        return {key: (base + value[1:] if key == "$ref" and isinstance(value, str)
                      and value.startswith("#") else _rebase(value, base))
                for key, value in node.items()}
    if isinstance(node, list):
        return [_rebase(item, base) for item in node]
    return node
