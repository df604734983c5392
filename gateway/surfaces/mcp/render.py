"""The MCP endpoints' error dialect, for failures before the SDK answers (admission, an
unknown path or method): a JSON-RPC 2.0 error object with the gateway's stable code and the
request id in its `data`, under the HTTP status the failure has (401 keeps its
`WWW-Authenticate` challenge, which points at the endpoint's own RFC 9728 metadata)."""

from __future__ import annotations

import orjson
from starlette.responses import Response

from gateway.errors import GatewayError
from gateway.exchange import Exchange

_UNAUTHORIZED = -32001  # implementation-defined server error range of JSON-RPC 2.0
_INVALID_REQUEST = -32600
_INTERNAL = -32603


def render_error(error: GatewayError, exchange: Exchange) -> Response:
    if error.status in (401, 403):
        number = _UNAUTHORIZED
    elif error.status >= 500:
        number = _INTERNAL
    else:
        number = _INVALID_REQUEST
    data = {"code": error.code, "request_id": exchange.request_id}
    body = {"jsonrpc": "2.0", "id": None,
            "error": {"code": number, "message": error.message, "data": data}}
    return Response(orjson.dumps(body), error.status,
                    {"cache-control": "no-store", **dict(error.headers)}, "application/json")
