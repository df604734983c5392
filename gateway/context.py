"""Per-request state shared by the pipeline stages, the access log and the metrics."""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from typing import Any

from gateway.model import ANONYMOUS, Principal

_VALID_REQUEST_ID = re.compile(rb"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")


def request_id_from(headers: list[tuple[bytes, bytes]]) -> str:
    """Keep a well-formed incoming X-Request-Id, else make a new one."""
    for name, value in headers:
        if name == b"x-request-id":
            if _VALID_REQUEST_ID.fullmatch(value):
                return value.decode("ascii")
            break
    return os.urandom(16).hex()


@dataclass(slots=True)
class RequestContext:
    request_id: str
    method: str
    path: str
    client: str
    started: float = field(default_factory=time.perf_counter)
    surface: str = "passthrough"
    upstream: str | None = None
    upstream_seconds: float | None = None
    upstream_error: str | None = None
    status: int = 0
    error_code: str | None = None
    principal: Principal = ANONYMOUS
    rate_limit: list[Any] | None = None  # quotas counted for this request, for the headers
    platform_id: str | None = None  # AIP: the platform the request declares, a rate-limit key
