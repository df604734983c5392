"""Gateway failures as values: a stable code, an HTTP status and a message safe to show.

Surfaces turn these into their own error dialect; the passthrough uses `json_error_body`.
Nothing here ever carries an upstream body, a credential or a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson


@dataclass(eq=False)  # mutable: raising sets __traceback__
class GatewayError(Exception):
    status: int
    code: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)
    headers: tuple[tuple[str, str], ...] = ()


def request_too_large(limit: int) -> GatewayError:
    return GatewayError(
        413, "request_too_large", f"Request body exceeds {limit} bytes.", {"limit": limit}
    )


def upstream_url_too_long() -> GatewayError:
    """The caller's values would make an upstream URL longer than servers accept: a client
    error, found before anything is sent (else the upstream's 414 / 431 would be a 502)."""
    return GatewayError(400, "invalid_request",
                        "The request's values are too long to send to the upstream service.")


def upstream_unavailable() -> GatewayError:
    return GatewayError(502, "upstream_unavailable", "The upstream service could not be reached.")


def upstream_timeout() -> GatewayError:
    return GatewayError(504, "upstream_timeout", "The upstream service did not answer in time.")


def upstream_protocol_error() -> GatewayError:
    return GatewayError(502, "upstream_error", "The upstream service sent an invalid response.")


def upstream_mapping_error(slot: str, expected: str) -> GatewayError:
    return GatewayError(502, "upstream_error",
                        "The upstream service sent a value the gateway cannot map.",
                        {"reason": "mapping", "field": slot, "expected": expected})


def no_route() -> GatewayError:
    return GatewayError(404, "not_found", "No route serves this path.")


def internal_error() -> GatewayError:
    return GatewayError(500, "internal_error", "The gateway failed to handle the request.")


def json_error_body(error: GatewayError, request_id: str) -> bytes:
    """The gateway's own dialect, used where no spec surface owns the path."""
    body: dict[str, Any] = {"code": error.code, "message": error.message, "request_id": request_id}
    if error.details:
        body["details"] = error.details
    return orjson.dumps({"error": body})
