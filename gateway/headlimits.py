"""Caps on a request's head: how many header fields, and how many bytes of target and fields.

The listener (`gateway/edge.py`) enforces them while the head is still arriving; the app checks
them again, so the caps hold under any ASGI server.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.asgi import Scope
from gateway.errors import GatewayError

CODE = "request_header_fields_too_large"


@dataclass(frozen=True, slots=True)
class HeadLimits:
    max_headers: int = 100
    max_header_bytes: int = 60 * 1024
    header_timeout: float = 10.0


def too_many_headers(limit: int) -> GatewayError:
    return GatewayError(431, CODE, f"More than {limit} header fields.", {"max_headers": limit})


def head_too_large(limit: int) -> GatewayError:
    return GatewayError(431, CODE, f"Request target and header fields exceed {limit} bytes.",
                        {"max_header_bytes": limit})


def check_head(scope: Scope, max_headers: int, max_header_bytes: int) -> None:
    """Raise 431 when the request's head is over either cap."""
    headers = scope["headers"]
    if len(headers) > max_headers:
        raise too_many_headers(max_headers)
    size = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
    size += sum(len(name) + len(value) for name, value in headers)
    if size > max_header_bytes:
        raise head_too_large(max_header_bytes)
