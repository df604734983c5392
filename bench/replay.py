"""Bench upstream for the spec pipelines: the demo backend's legacy JSON, answered instantly.

The first request for a (method, target, body) goes to the demo backend (AIGW_BENCH_BACKEND);
its status, content type and body are kept and every later identical request gets them at once,
so a benchmark measures the gateway, not the backend's search. `GET /__replay/seen` lists the
legacy requests seen so far (method and target), in order: the harness reads which legacy call a
spec route makes and lets nginx proxy that same call.

Run: AIGW_BENCH_BACKEND=http://127.0.0.1:PORT uvicorn replay:app --app-dir bench ...
"""

from __future__ import annotations

import json
import os
import urllib.request
from typing import Any

BACKEND = os.environ.get("AIGW_BENCH_BACKEND", "http://127.0.0.1:8081")
_cache: dict[tuple[str, bytes, bytes], tuple[int, list[tuple[bytes, bytes]], bytes]] = {}
_seen: list[dict[str, str]] = []


def _fetch(method: str, target: bytes, body: bytes, headers: list[tuple[bytes, bytes]]) -> Any:
    forward = {k.decode(): v.decode() for k, v in headers if k in (b"content-type", b"accept")}
    request = urllib.request.Request(BACKEND + target.decode("latin-1"), method=method,
                                     data=body or None, headers=forward)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, kind, payload = response.status, response.headers.get("content-type"), \
                response.read()
    except urllib.error.HTTPError as exc:
        status, kind, payload = exc.code, exc.headers.get("content-type"), exc.read()
    fields = [(b"content-type", (kind or "application/json").encode()),
              (b"content-length", str(len(payload)).encode())]
    return status, fields, payload


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    target = scope["raw_path"] + (b"?" + scope["query_string"] if scope["query_string"] else b"")
    if target == b"/__replay/seen":
        payload = json.dumps(_seen).encode()
        answer = (200, [(b"content-type", b"application/json")], payload)
    else:
        key = (scope["method"], target, body)
        answer = _cache.get(key)  # type: ignore[assignment]
        if answer is None:
            answer = _cache[key] = _fetch(scope["method"], target, body, scope["headers"])
            _seen.append({"method": scope["method"], "target": target.decode("latin-1"),
                          "body": body.decode("latin-1"),
                          "content_type": dict(scope["headers"]).get(b"content-type", b"")
                          .decode("latin-1")})
    status, headers, payload = answer
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
