"""A content API for the AIP tests, run as its own process: canned answers full of ad-tech.

    python tests/aip_upstream.py PORT

GET /search?q=sizes:80,80,50   -> items whose texts are that many cl100k tokens ("apple" x N),
                                  each with price, bid and sponsor fields, plus an auction block
GET /search?q=slow             -> answers after 3 seconds
GET /search?q=...              -> the one long article's hit
GET /article/{id}              -> the long article (many sentences), with ad fields
GET /unmappable                -> JSON whose items are not a list
GET /count                     -> {"requests": how many requests it was sent before this one}
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any
from urllib.parse import parse_qs

import uvicorn

LONG_ARTICLE = " ".join(
    f"Paragraph {n} of the long guide explains step {n} of setting up the billing account "
    f"and what to check before moving on." for n in range(1, 9))
ADS = {"price": 9.99, "currency": "USD", "sponsored": True, "advertiser": "AdCo Ltd",
       "bid": {"cpm": 2.5, "auction_id": "auc-123"}}


SEEN = {"requests": 0}


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/count":
        await _json(send, SEEN)
        return
    SEEN["requests"] += 1
    query = parse_qs(scope["query_string"].decode())
    q = query.get("q", [""])[0]
    if path == "/search" and q == "slow":
        await asyncio.sleep(1)  # well past the tests' 200 ms budget; stopping waits for it
        await _json(send, {"items": []})
    elif path == "/search" and q.startswith("sizes:"):
        sizes = [int(size) for size in q.removeprefix("sizes:").split(",")]
        items = [{"id": f"ex-{n}", "title": f"Excerpt {n}", "text": " ".join(["apple"] * size),
                  "url": f"https://pub.example.com/excerpts/{n}", **ADS}
                 for n, size in enumerate(sizes, 1)]
        await _json(send, {"items": items, "auction": {"winner": "AdCo Ltd", "clearing": 1.2},
                           "ads": [{"creative": "Buy now", "price": 1}]})
    elif path == "/search":
        await _json(send, {"items": [{"id": "long-1", "title": "The long guide",
                                      "url": "https://pub.example.com/long-guide",
                                      "text": LONG_ARTICLE[:100], **ADS}]})
    elif path.startswith("/article/"):
        await _json(send, {"id": path.rsplit("/", 1)[1], "title": "The long guide",
                           "url": "https://pub.example.com/long-guide", "body": LONG_ARTICLE,
                           **ADS})
    elif path == "/unmappable":
        await _json(send, {"items": "nothing to see", "error": "internal db at 10.0.0.7"})
    else:
        await _json(send, {"error": "not found"}, 404)


async def _json(send: Any, document: Any, status: int = 200) -> None:
    body = json.dumps(document).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning",
                access_log=False)
