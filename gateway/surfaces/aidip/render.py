"""AIDIP on the wire: JSON answers and the error object of §5.2,
`{"error": {"code", "message", "request_id", "details"?}}`, with a stable code list."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

from gateway.errors import GatewayError
from gateway.exchange import Exchange

# The gateway's own codes in AIDIP's vocabulary: (status, code). Codes a handler raises in
# AIDIP's vocabulary already (InvalidInput, AgentError, ...) pass through unchanged.
_CODES = {
    "invalid_request": (400, "InvalidInput"),
    "invalid_path": (400, "InvalidInput"),
    "websocket_not_supported": (400, "InvalidInput"),
    "missing_credentials": (401, "Unauthorized"),
    "invalid_token": (401, "Unauthorized"),
    "insufficient_scope": (403, "Forbidden"),
    "forbidden": (403, "Forbidden"),
    "not_found": (404, "NotFound"),
    "method_not_allowed": (405, "MethodNotAllowed"),
    "request_too_large": (413, "PayloadTooLarge"),
    "unsupported_media_type": (415, "UnsupportedMediaType"),
    "rate_limited": (429, "RateLimited"),
    "registry_unavailable": (503, "RegistryUnavailable"),
    "auth_unavailable": (503, "ServiceUnavailable"),
    "rate_limit_unavailable": (503, "ServiceUnavailable"),
    "upstream_unavailable": (503, "AgentUnavailable"),
    "upstream_timeout": (504, "AgentTimeout"),
    "upstream_error": (502, "AgentError"),
    "internal_error": (500, "InternalError"),
}

CODES = sorted({code for _, code in _CODES.values()} | {"EndpointRefused", "Conflict"})


def json_response(document: Any, status: int = 200,
                  headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(document), status, headers, "application/json")


def render_error(error: GatewayError, exchange: Exchange) -> Response:
    """Any failure of an AIDIP path, in AIDIP's error object."""
    return error_response(error, exchange.request_id)


def error_response(error: GatewayError, request_id: str) -> Response:
    status, code = _CODES.get(error.code, (error.status, error.code))
    if error.status == 401:
        status, code = 401, "Unauthorized"
    body: dict[str, Any] = {"code": code, "message": error.message, "request_id": request_id}
    if error.details:
        body["details"] = error.details
    headers = {"cache-control": "no-store", **dict(error.headers)}
    return json_response({"error": body}, status, headers)


def invalid_input(message: str, fields: list[dict[str, str]] | None = None) -> GatewayError:
    details = {"fields": fields[:50]} if fields else {}
    return GatewayError(400, "InvalidInput", message, details)


def fields_message(fields: list[dict[str, str]]) -> str:
    """"Invalid fields: 'name' (required field is missing), ...", short enough to read."""
    listed = ", ".join(f"'{f['field']}' ({f['problem']})" for f in fields[:5])
    more = f" and {len(fields) - 5} more" if len(fields) > 5 else ""
    return f"Invalid fields: {listed}{more}."


def busy() -> GatewayError:
    """Schema checks are queued past their wait: the gateway, not the request, is the limit."""
    return GatewayError(503, "ServiceUnavailable", "The gateway is busy; try again shortly.",
                        headers=(("retry-after", "1"),))
