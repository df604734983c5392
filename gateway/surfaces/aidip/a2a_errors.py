"""AIDIP's failures, as the errors A2A clients know.

An A2A call is served through an AIDIP route (gateway.inner), whose failures come back in
AIDIP's error object with a stable code. Each becomes an a2a-sdk error whose data (the
`ErrorInfo` metadata a2a-sdk clients read as the error's `data`) carries that code and the id
of the caller's request:

    400, 409, 413, 422 (the input)             InvalidParamsError (-32602), fields as `errors`
    404 (no such agent, skill or referent)     TaskNotFoundError (-32001), A2A's not-found error
    403 without a challenge (the agent's own   InternalError (-32603) with AIDIP's generic
        refusal of the gateway), 5xx, others       message
    401, 403 with a challenge, 429             the same HTTP answer (`refusal`): A2A leaves
                                               authentication and rate limits to HTTP

Only AIDIP's own messages are passed on, never an upstream's body or a stack trace. Errors
a2a-sdk makes itself (a malformed request, an unknown method, a missing A2A-Version) get the
code `InvalidInput` (`InternalError` for -32603) and the request id too (`with_error_data`).
"""

from __future__ import annotations

from typing import Any

import orjson
from a2a.utils.error_handlers import A2A_DOMAIN, ERROR_INFO_TYPE
from a2a.utils.errors import A2AError, InternalError, InvalidParamsError, TaskNotFoundError
from starlette.responses import Response

from gateway.errors import GatewayError
from gateway.inner import InnerAnswer

_INPUT = (400, 409, 413, 415, 422)
_CARRIED = ("www-authenticate", "retry-after")
_MAX_MESSAGE = 500
_MAX_FIELDS = 20
_INTERNAL = -32603
_FIELDS = {"operation": "metadata.skill"}  # AIDIP's path parameter, A2A's way to name it
# the A2A reasons of JSON-RPC errors the SDK makes without A2A details
_REASONS = {-32601: "METHOD_NOT_FOUND", _INTERNAL: "INTERNAL_ERROR"}


def error_data(code: str, request_id: str, **more: Any) -> dict[str, Any]:
    return {"code": code, "request_id": request_id, **more}


def answer_error(answer: InnerAnswer, request_id: str) -> A2AError:
    """The A2A error for a failed AIDIP answer (other than a `refusal`)."""
    code, message, details = _aidip_error(answer)
    data = error_data(code, request_id)
    if "retry-after" in answer.headers:
        data["retry_after"] = answer.headers["retry-after"]
    if answer.status in _INPUT:
        fields = details.get("fields")
        if isinstance(fields, list):
            data["errors"] = [{"field": _FIELDS.get(str(f.get("field")), str(f.get("field"))),
                               "message": str(f.get("problem"))}
                              for f in fields[:_MAX_FIELDS] if isinstance(f, dict)]
        if any(error["field"] in _FIELDS.values() for error in data.get("errors", ())):
            message = "This agent has several operations: name one as the message's skill."
        return InvalidParamsError(message, data)
    if answer.status == 404:
        return TaskNotFoundError(message, data)
    return InternalError(message, data)


def refusal(answer: InnerAnswer) -> GatewayError | None:
    """The caller's credential or rate limit refused: answered over HTTP, as at the door."""
    challenged = "www-authenticate" in answer.headers
    if not (answer.status == 429 or (answer.status in (401, 403) and challenged)):
        return None
    code, message, _ = _aidip_error(answer)
    headers = tuple((name, answer.headers[name]) for name in _CARRIED if name in answer.headers)
    return GatewayError(answer.status, code, message, headers=headers)


def _aidip_error(answer: InnerAnswer) -> tuple[str, str, dict[str, Any]]:
    """(code, message, details) of AIDIP's error object; generic ones for any other body."""
    document = answer.json()
    error = document.get("error") if isinstance(document, dict) else None
    if not isinstance(error, dict):
        return "InternalError", "The agent could not be invoked.", {}
    code, message, details = error.get("code"), error.get("message"), error.get("details")
    return (code if isinstance(code, str) else "InternalError",
            message[:_MAX_MESSAGE] if isinstance(message, str) and message
            else "The agent could not be invoked.",
            details if isinstance(details, dict) else {})


def with_error_data(response: Response, request_id: str) -> Response:
    """The SDK's JSON-RPC response, its error (if it is one) carrying a code and `request_id`
    in the ErrorInfo metadata."""
    body = getattr(response, "body", None)  # a stream (SSE) is never an error made here
    document = orjson.loads(body) if isinstance(body, bytes) else None
    error = document.get("error") if isinstance(document, dict) else None
    if not isinstance(error, dict):
        return response
    code, data = error.get("code"), error.get("data")
    details: list[Any] = data if isinstance(data, list) else []
    info = next((item for item in details if isinstance(item, dict)
                 and item.get("@type") == ERROR_INFO_TYPE), None)
    if info is None:
        reason = _REASONS.get(code, "INVALID_REQUEST") if isinstance(code, int) \
            else "INVALID_REQUEST"
        info = {"@type": ERROR_INFO_TYPE, "reason": reason, "domain": A2A_DOMAIN}
        details = [info, *details]
    metadata = info.setdefault("metadata", {})
    metadata.setdefault("code", "InternalError" if code == _INTERNAL else "InvalidInput")
    metadata["request_id"] = request_id
    error["data"] = details
    return Response(orjson.dumps(document), response.status_code,
                    media_type="application/json")
