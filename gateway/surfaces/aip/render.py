"""RetrieveResponse on the wire: ok, denied and error envelopes, always `no-store`.

HTTP status per `status`: ok -> 200; denied -> 403, except `rate_limited` -> 429 with
Retry-After (a consent decision is a refusal, and throttling is one clients should back off
from); error -> the failure's own status (400 bad request, 401/403 authentication or
signature, 409 an event id reused for another event, 413, 415, 422 a bad event, 502/504
upstream, 500 gateway, 503 a store down).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import orjson
from starlette.responses import Response

from gateway.errors import GatewayError
from gateway.surfaces.aip.chunks import Chunk
from gateway.surfaces.aip.policy import Denial, Limits
from gateway.surfaces.aip.signing import SigningFailure, failure_body

VERSION = "0.1"
NO_STORE = {"cache-control": "no-store"}

# The gateway's failures as AIP error codes; the message never carries upstream detail.
_ERRORS = {
    "missing_credentials": ("auth_failed", "Authentication is required."),
    "invalid_token": ("auth_failed", "The credentials were not accepted."),
    "invalid_request": ("invalid_request", None),
    "invalid_path": ("invalid_request", None),
    "method_not_allowed": ("invalid_request", None),
    "insufficient_scope": ("auth_failed", "The credentials do not allow this request."),
    "upstream_unavailable": ("upstream_unavailable", "Temporary failure; retry later."),
    "upstream_timeout": ("upstream_timeout", "The content source did not answer in time."),
    "upstream_error": ("upstream_error", "Temporary failure; retry later."),
    "not_found": ("not_found", "Nothing is served here."),
    "request_too_large": ("request_too_large", None),
    "auth_unavailable": ("unavailable", "Temporary failure; retry later."),
    "rate_limit_unavailable": ("unavailable", "Temporary failure; retry later."),
    "rate_limited": ("rate_limited", "Too many requests; retry later."),
    "events_unavailable": ("unavailable", "Temporary failure; retry later."),
    "invalid_event": ("invalid_event", None),
    "duplicate_event": ("duplicate_event", None),
}


def ok(request_id: str, chunks: list[Chunk], publisher: str, limits: Limits,
       citations: bool, withheld: int = 0) -> Response:
    """An answer. `withheld` texts matched but gave no chunk, each too short to split and
    full articles not served: `extensions.aigw.withheld_whole` says so, and why."""
    document = _envelope(request_id, "ok")
    if chunks:
        document["content"] = {"chunks": [
            {"id": c.id, "text": c.text, "token_count": c.token_count} for c in chunks]}
        if citations and (cited := _citations(chunks, publisher)):
            document["citations"] = cited
    document["limits_applied"] = {"max_chunks": limits.max_chunks,
                                  "max_tokens": limits.max_tokens}
    if withheld:
        document["extensions"] = {"aigw": {"withheld_whole": {
            "texts": withheld,
            "reason": "These texts are shorter than one chunk, so a chunk would be the whole "
                      "text, and this publisher does not return full articles.",
        }}}
    return _Answer(orjson.dumps(document))


class _Answer(Response):
    """An `ok` answer: the headers `_response` gives one (`no-store`, length, JSON), encoded
    here rather than worked out by `Response.init_headers` from a dict on every answer."""

    media_type = "application/json"

    def __init__(self, body: bytes) -> None:
        self.status_code = 200
        self.background = None
        self.body = body
        self.raw_headers = [_NO_STORE_RAW, (b"content-length", b"%d" % len(body)),
                            _JSON_RAW]


_NO_STORE_RAW = (b"cache-control", b"no-store")
_JSON_RAW = (b"content-type", b"application/json")


def denied(request_id: str, denial: Denial, headers: dict[str, str] | None = None) -> Response:
    document = _envelope(request_id, "denied")
    document["denial"] = {"reason": denial.reason, "message": denial.message}
    return _response(document, 429 if denial.reason == "rate_limited" else 403, headers)


def error(request_id: str, failure: GatewayError) -> Response:
    """Any gateway failure as status `error`; its status, code and safe message."""
    known = failure.code in _ERRORS or 400 <= failure.status < 500
    code, message = _ERRORS.get(failure.code, ("invalid_request", None) if known else
                                ("internal_error", "Temporary failure; retry later."))
    if failure.status in (401, 403):
        code = "auth_failed"  # a malformed credential is still an authentication failure
    document = _envelope(request_id, "error")
    document["error"] = {"code": code, "message": message or failure.message}
    status = failure.status if known else 500
    return _response(document, status, dict(failure.headers))


def signing_failure(request_id: str, failure: SigningFailure) -> Response:
    """The signing page's minimal body (401/403 `auth_failed`, 503 when nonces cannot be kept),
    as a RetrieveResponse with status error."""
    return _response(failure_body(failure, request_id), failure.status)


def accepted(request_id: str, event_id: str) -> Response:
    """A stored event (the spec defines no body here; this one names what was kept)."""
    return _response({"aip_version": VERSION, "request_id": request_id, "status": "accepted",
                      "event_id": event_id}, 202)


def _envelope(request_id: str, status: str) -> dict[str, Any]:
    return {"aip_version": VERSION, "request_id": request_id, "timestamp": _clock.now(),
            "status": status}


class _Clock:
    """The time now to the second, as answers carry it (`2026-01-15T14:30:00Z`): formatted
    once a second, not once an answer."""

    def __init__(self) -> None:
        self._second = -1
        self._text = ""

    def now(self) -> str:
        second = time.time_ns() // 1_000_000_000
        if second != self._second:
            self._text = datetime.fromtimestamp(second, UTC).isoformat().replace("+00:00", "Z")
            self._second = second
        return self._text


_clock = _Clock()


def _citations(chunks: list[Chunk], publisher: str) -> list[dict[str, Any]]:
    """One citation per cited source, naming only chunks this response returns."""
    by_url: dict[str, dict[str, Any]] = {}
    for chunk in chunks:
        url = chunk.source.url
        if not url:
            continue
        citation = by_url.setdefault(url, {"source_url": url, "publisher": publisher,
                                           "chunk_ids": []})
        if chunk.source.title:
            citation.setdefault("title", chunk.source.title)
        citation["chunk_ids"].append(chunk.id)
    return list(by_url.values())


def _response(document: dict[str, Any], status: int,
              headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(document), status, {**(headers or {}), **NO_STORE},
                    "application/json")
