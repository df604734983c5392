"""Per-request state shared by the pipeline stages, the access log and the metrics."""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass, field
from typing import Any

from gateway.asgi import RawHeaders
from gateway.model import ANONYMOUS, Principal

# What a trusted proxy's id may look like: short, and safe in headers, logs and JSON.
_SAFE_REQUEST_ID = re.compile(rb"[A-Za-z0-9._-]{1,128}")


def new_request_id() -> str:
    """A fresh id, unique across processes and restarts (128 random bits).

    An id is a label, not a secret, so the seeded PRNG serves (no system call per request);
    `random` reseeds itself in a forked child, so workers never share a sequence.
    """
    return f"{random.getrandbits(128):032x}"


def request_id_from(headers: RawHeaders, trusted: bool) -> str:
    """The id a trusted proxy sent, when there is exactly one and it is safe; else a new one."""
    if trusted:
        sent = [value for name, value in headers if name == b"x-request-id"]
        if len(sent) == 1 and _SAFE_REQUEST_ID.fullmatch(sent[0]):
            return sent[0].decode("ascii")
    return new_request_id()


@dataclass(slots=True)
class RequestContext:
    request_id: str
    method: str
    path: str
    client: str
    started: float = field(default_factory=time.perf_counter)
    surface: str = "passthrough"
    route: str | None = None  # the matched route's template (low cardinality), for traces
    upstream: str | None = None
    upstream_seconds: float | None = None
    upstream_error: str | None = None
    status: int = 0
    error_code: str | None = None
    principal: Principal = ANONYMOUS
    rate_limit: list[Any] | None = None  # quotas counted for this request, for the headers
    platform_id: str | None = None  # the calling platform a request declares; a rate-limit key
    decisions: list[Any] = field(default_factory=list)  # gateway.policy.decisions.Noted
    decision_id: str | None = None  # set with the first policy decision; sent as a header
    # The identity headers upstream calls carry, and the principal they were made for: made
    # once a request, not once a call (a search may make a dozen).
    upstream_identity: tuple[Principal, RawHeaders] | None = None
    # An inner request (gateway.inner) names the request it serves inside; that one counts them.
    parent: str | None = None
    inner_requests: int = 0
    # An inner request is made for the caller of the request it serves inside, at that one's
    # path: the resource its credential was presented to (gateway.auth.audiences).
    served_for: str | None = None
