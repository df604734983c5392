"""A recording proxy for `make fuzz`: forwards every request to the backend unchanged and
writes one JSON line per request (method, raw path, request id, identity and credential
headers) so the harness can see exactly what the gateway sent upstream. Never the bodies.

    python bench/recorder.py PORT BACKEND_URL LOG_FILE
"""

from __future__ import annotations

import json
import sys
from typing import Any

import aiohttp
import uvicorn
from yarl import URL

PORT, BACKEND, LOG = int(sys.argv[1]), sys.argv[2].rstrip("/"), sys.argv[3]
_HOP = {b"host", b"connection", b"transfer-encoding", b"keep-alive", b"content-length"}
_state: dict[str, Any] = {}


def _entry(scope: dict[str, Any]) -> dict[str, Any]:
    headers: dict[str, str] = {}
    for name, value in scope["headers"]:
        headers.setdefault(name.decode("latin-1"), value.decode("latin-1"))
    raw = scope.get("raw_path") or scope["path"].encode()
    return {
        "method": scope["method"], "path": scope["path"], "raw_path": raw.decode("latin-1"),
        "request_id": headers.get("x-request-id"), "subject": headers.get("x-aigw-subject"),
        "client_id": headers.get("x-aigw-client-id"), "scopes": headers.get("x-aigw-scopes"),
        "authorization": "authorization" in headers, "api_key": "x-api-key" in headers,
    }


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await receive()
        await send({"type": "lifespan.startup.complete"})
        await receive()
        await send({"type": "lifespan.shutdown.complete"})
        return
    _state["log"].write(json.dumps(_entry(scope)) + "\n")
    _state["log"].flush()
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    url = BACKEND + (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
    if scope["query_string"]:
        url += "?" + scope["query_string"].decode("latin-1")
    headers = [(n.decode("latin-1"), v.decode("latin-1"))
               for n, v in scope["headers"] if n not in _HOP]
    session = _state.get("session") or _state.setdefault("session", aiohttp.ClientSession(
        auto_decompress=False))
    async with session.request(scope["method"], URL(url, encoded=True),
                               headers=headers, data=body, allow_redirects=False) as upstream:
        content = await upstream.read()
        out = [(n.lower().encode("latin-1"), v.encode("latin-1"))
               for n, v in upstream.headers.items()
               if n.lower().encode("latin-1") not in _HOP]
    await send({"type": "http.response.start", "status": upstream.status,
                "headers": [*out, (b"content-length", str(len(content)).encode())]})
    await send({"type": "http.response.body", "body": content})


if __name__ == "__main__":
    with open(LOG, "a", encoding="utf-8") as log:
        _state["log"] = log
        uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning", access_log=False)
