"""A controllable identity provider for the auth tests, run as its own process.

    python tests/fake_idp.py PORT CLIENT_ID CLIENT_SECRET

GET  /jwks           -> the JWK Set last set by /admin/jwks (initially {"keys": []}),
                        with Cache-Control: max-age=N (N from /admin/jwks, default 300)
POST /introspect     -> RFC 7662: form field `token`, HTTP Basic CLIENT_ID:CLIENT_SECRET
                        (else 401); answers from the /admin/tokens table, unknown ->
                        {"active": false}
Both answer 503 while the IdP is down.

POST /admin/jwks     {"keys": [...public JWKs...], "max_age"?: int}
POST /admin/down     {"down": bool}
POST /admin/delay    {"seconds": float}   (each introspection answers that much later)
POST /admin/tokens   {"TOKEN": {introspection response}, ...}   (merged into the table)
POST /admin/reset    back to the initial state
GET  /admin/stats    -> {"jwks_fetches": n, "introspections": n} (failed requests included)
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import sys
from typing import Any
from urllib.parse import parse_qs

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

CLIENT = f"{sys.argv[2]}:{sys.argv[3]}" if len(sys.argv) > 3 else "client:secret"


def _initial() -> dict[str, Any]:
    return {"jwks": {"keys": []}, "max_age": 300, "down": False, "tokens": {},
            "jwks_fetches": 0, "introspections": 0, "delay": 0.0}


state = _initial()


def _unavailable() -> Response:
    return JSONResponse({"error": "temporarily_unavailable"}, status_code=503)


def _authorized(header: str) -> bool:
    scheme, _, encoded = header.partition(" ")
    try:
        given = base64.b64decode(encoded, validate=True)
    except ValueError:
        return False
    return scheme.lower() == "basic" and hmac.compare_digest(given, CLIENT.encode())


async def jwks(request: Request) -> Response:
    state["jwks_fetches"] += 1
    if state["down"]:
        return _unavailable()
    return JSONResponse(state["jwks"], headers={"Cache-Control": f"max-age={state['max_age']}"})


async def introspect(request: Request) -> Response:
    state["introspections"] += 1
    if state["delay"]:
        await asyncio.sleep(state["delay"])
    if state["down"]:
        return _unavailable()
    if not _authorized(request.headers.get("authorization", "")):
        return JSONResponse({"error": "invalid_client"}, status_code=401,
                            headers={"WWW-Authenticate": 'Basic realm="fake-idp"'})
    token = parse_qs((await request.body()).decode()).get("token", [""])[0]
    answer = state["tokens"].get(token, {"active": False})
    return JSONResponse(answer, headers={"Cache-Control": "no-store"})


async def set_jwks(request: Request) -> Response:
    body = await request.json()
    state["jwks"] = {"keys": body["keys"]}
    state["max_age"] = body.get("max_age", state["max_age"])
    return JSONResponse({"ok": True})


async def set_down(request: Request) -> Response:
    state["down"] = bool((await request.json())["down"])
    return JSONResponse({"ok": True})


async def set_delay(request: Request) -> Response:
    state["delay"] = float((await request.json())["seconds"])
    return JSONResponse({"ok": True})


async def set_tokens(request: Request) -> Response:
    state["tokens"].update(await request.json())
    return JSONResponse({"ok": True})


async def reset(request: Request) -> Response:
    state.clear()
    state.update(_initial())
    return JSONResponse({"ok": True})


async def stats(request: Request) -> Response:
    return JSONResponse({key: state[key] for key in ("jwks_fetches", "introspections")})


app = Starlette(routes=[
    Route("/jwks", jwks),
    Route("/introspect", introspect, methods=["POST"]),
    Route("/admin/jwks", set_jwks, methods=["POST"]),
    Route("/admin/down", set_down, methods=["POST"]),
    Route("/admin/delay", set_delay, methods=["POST"]),
    Route("/admin/tokens", set_tokens, methods=["POST"]),
    Route("/admin/reset", reset, methods=["POST"]),
    Route("/admin/stats", stats),
])

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning",
                access_log=False)
