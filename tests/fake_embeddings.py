"""A fake OpenAI-compatible embeddings server, run as its own process.

    python tests/fake_embeddings.py PORT [API_KEY]

POST /v1/embeddings {"model", "input": [texts]}
    -> {"object": "list", "model", "data": [{"object": "embedding", "index", "embedding"}]},
       the feature-hashing vectors (256 numbers) scaled by 3, so a client must normalize them,
       listed last text first (each with its `index`), as a server may.
    Without `Authorization: Bearer API_KEY` (when one is given): 401 with an OpenAI error body.
    The model's name chooses a misbehaviour: `one-short` answers one embedding too few,
    `slow` answers after 2 s, `broken` answers 500 with the request's texts in its body.
GET /requests -> [{"model", "inputs"}] of every embeddings request so far, oldest first
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from gateway.embeddings.hashing import embed

API_KEY = sys.argv[2] if len(sys.argv) > 2 else None
_requests: list[dict[str, Any]] = []


async def embeddings(request: Request) -> JSONResponse:
    if API_KEY is not None and request.headers.get("authorization") != f"Bearer {API_KEY}":
        return JSONResponse({"error": {"message": "Incorrect API key provided",
                                       "type": "invalid_request_error"}}, status_code=401)
    body = await request.json()
    model, texts = body["model"], body["input"]
    _requests.append({"model": model, "inputs": texts})
    if model == "slow":
        await asyncio.sleep(2)
    if model == "broken":
        return JSONResponse({"error": {"message": f"cannot embed {texts}"}}, status_code=500)
    data = [{"object": "embedding", "index": index,
             "embedding": [3 * x for x in embed(text)]}
            for index, text in reversed(list(enumerate(texts)))]
    if model == "one-short":
        data = data[1:]
    return JSONResponse({"object": "list", "model": model, "data": data,
                         "usage": {"prompt_tokens": 0, "total_tokens": 0}})


async def requests(request: Request) -> JSONResponse:
    return JSONResponse(_requests)


app = Starlette(routes=[Route("/v1/embeddings", embeddings, methods=["POST"]),
                        Route("/requests", requests)])

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
