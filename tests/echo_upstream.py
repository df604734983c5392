"""A test upstream that reports exactly what it received, run as its own process.

    python tests/echo_upstream.py PORT [NAME]

GET|POST|... /echo/...   -> JSON: method, raw path, query, headers (as a list), body digest
/status/{code}           -> that status, with a small body where one is allowed
/cookies                 -> three Set-Cookie fields
/gzip                    -> a gzip-encoded JSON body with Content-Encoding: gzip
/slow?seconds=S          -> answers after S seconds
/large?bytes=N           -> N bytes, streamed in 64 KiB chunks without Content-Length
/hop                     -> a response carrying hop-by-hop fields
/count                   -> how many requests reached this upstream so far (`requests`),
                            and how many of them were not /count (`others`)
/own-limits              -> a response with the upstream's own (strict) RateLimit fields
/truncated               -> declares 100 bytes, sends 5, and drops the connection
.../redirect?name=value  -> 302 with each query parameter as a response field (any prefix;
                            `to=URL` is short for `location=URL`)
/reply                   -> the request body back, as application/json
/text                    -> 200 text/plain (not JSON)
/rec/...                 -> the echo, and the request is remembered
/recorded                -> every remembered request: [{path, query}] (query as a list of pairs)
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import sys
from typing import Any
from urllib.parse import parse_qs, parse_qsl

import uvicorn

NAME = sys.argv[2] if len(sys.argv) > 2 else "echo"
GZIP_PAYLOAD = json.dumps({"compressed": True, "items": list(range(200))}).encode()
_state = {"requests": 0, "others": 0}
_recorded: list[dict[str, Any]] = []


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    _state["requests"] += 1
    if scope["path"] != "/count":
        _state["others"] += 1
    body = await _read_body(receive)
    path = scope["path"]
    query = parse_qs(scope["query_string"].decode())
    if path.startswith("/status/"):
        code = int(path.rsplit("/", 1)[1])
        payload = b"" if code in (204, 304) else f'{{"status": {code}}}'.encode()
        await _respond(send, code, payload)
    elif path == "/cookies":
        cookies = [(b"set-cookie", f"c{i}={i}; Path=/".encode()) for i in range(3)]
        await _respond(send, 200, b"{}", cookies)
    elif path == "/gzip":
        await _respond(send, 200, gzip.compress(GZIP_PAYLOAD, mtime=0),
                       [(b"content-encoding", b"gzip")])
    elif path == "/slow":
        await asyncio.sleep(float(query.get("seconds", ["1"])[0]))
        await _respond(send, 200, b'{"slow": true}')
    elif path == "/large":
        await _stream(send, int(query.get("bytes", ["1048576"])[0]))
    elif path == "/hop":
        hop = [(b"connection", b"x-hop-secret"), (b"x-hop-secret", b"1"),
               (b"keep-alive", b"timeout=5"), (b"proxy-authenticate", b"Basic"),
               (b"x-kept", b"yes")]
        await _respond(send, 200, b"{}", hop)
    elif path == "/own-limits":
        own = [(b"ratelimit-limit", b"10"), (b"ratelimit-remaining", b"1"),
               (b"ratelimit-reset", b"30"), (b"ratelimit-policy", b'"upstream";q=10;w=60'),
               (b"ratelimit", b'"upstream";r=1;t=30')]
        await _respond(send, 200, b"{}", own)
    elif path == "/truncated":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", b"100")]})
        await send({"type": "http.response.body", "body": b"short"})
    elif path.endswith("/redirect"):
        fields = [(b"location" if name == "to" else name.encode(), value.encode())
                  for name, value in parse_qsl(scope["query_string"].decode())]
        await _respond(send, 302, b"{}", fields)
    elif path == "/reply":
        await _respond(send, 200, body)
    elif path == "/text":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"plain words"})
    elif path == "/recorded":
        await _respond(send, 200, json.dumps(_recorded).encode())
    elif path.startswith("/rec/"):
        _recorded.append({"path": path, "query": parse_qsl(scope["query_string"].decode())})
        await _respond(send, 200, _echo(scope, body))
    elif path == "/count":
        await _respond(send, 200, json.dumps(_state).encode())
    else:
        await _respond(send, 200, _echo(scope, body))


async def _read_body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def _echo(scope: dict[str, Any], body: bytes) -> bytes:
    return json.dumps({
        "upstream": NAME,
        "method": scope["method"],
        "raw_path": scope["raw_path"].decode("latin-1"),
        "query": scope["query_string"].decode("latin-1"),
        "headers": [[k.decode("latin-1"), v.decode("latin-1")] for k, v in scope["headers"]],
        "body_length": len(body),
        "body_sha256": hashlib.sha256(body).hexdigest(),
        "body": body[:1024].decode("utf-8", "replace"),
    }).encode()


async def _respond(send: Any, status: int, body: bytes, extra: list | None = None) -> None:
    headers = [(b"content-type", b"application/json"), (b"x-upstream", NAME.encode())]
    if status not in (204, 304):
        headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status,
                "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": body})


async def _stream(send: Any, size: int) -> None:
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/octet-stream")]})
    block = bytes(range(256)) * 256
    sent = 0
    while sent < size:
        chunk = block[: min(len(block), size - sent)]
        sent += len(chunk)
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning",
                access_log=False)
