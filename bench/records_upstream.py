"""Bench upstream for `index_lag.py` and `tail.py`: a JSON API of N help-centre-like records
(~1 KB each), answered from memory.

Records are built once at start from the demo corpus (gateway/demo/data.py), deterministic for
a given count and seed, and each is encoded once; a page is its records' bytes joined, kept
after its first request, so the gateway's reads cost the upstream next to nothing.

  GET /records?_start=N&_limit=M          M records from the N-th (a bare JSON array)
  GET /records?q=text&_start=N&_limit=M   records whose title or body holds the text
  GET /records/{id}                       one record (404 when there is none)
  GET /health                             200 once the records are built
  GET /__stats                            {"records": N, "requests": {kind: count}}
  POST /__churn?n=K                       K records (the next K, round robin) change: a new
                                          `updated_at` and a new last sentence (a refresh
                                          has K records to index again)

Run: AIGW_BENCH_RECORDS=60000 uvicorn records_upstream:app --app-dir bench ...
"""

from __future__ import annotations

import os
import random
from collections import Counter
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, unquote

import orjson

from gateway.demo.data import (
    AUTHORS,
    CATEGORIES,
    CLOSINGS,
    EPOCH,
    FIRST_NAMES,
    LAST_NAMES,
    QUALIFIERS,
    TOPICS,
    iso,
)

BODY_CHARS = 850  # with the other fields, ~1 KB of JSON per record
MAX_LIMIT = 1000
JSON = [(b"content-type", b"application/json")]


def make_record(rng: random.Random, number: int) -> dict[str, Any]:
    """One record: a title and a body of the demo corpus's sentences (mostly of one topic, one
    sentence of another), a customer's name and an order number that few records share."""
    category = rng.choice(CATEGORIES)
    topic, other = TOPICS[category], TOPICS[rng.choice(CATEGORIES)]
    customer = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
    sentences = [f"Order {rng.randrange(10**6):06d} for {customer}."]
    pool = rng.sample(topic.sentences, len(topic.sentences))
    sentences.insert(rng.randrange(len(sentences) + 1), rng.choice(other.sentences))
    while sum(len(s) + 1 for s in sentences) < BODY_CHARS and pool:
        sentences.append(pool.pop())
    sentences.append(rng.choice(CLOSINGS))
    return {
        "id": f"rec-{number:06d}",
        "title": rng.choice(topic.titles) + rng.choice(QUALIFIERS),
        "body": " ".join(sentences)[: BODY_CHARS + 120],
        "category": category,
        "tags": rng.sample(topic.tags, 2),
        "author": rng.choice(AUTHORS),
        "updated_at": iso(EPOCH + timedelta(minutes=number * 7 + rng.randrange(7))),
    }


def make_records(count: int, seed: int = 22) -> list[dict[str, Any]]:
    rng = random.Random(f"index-lag:{seed}")
    return [make_record(rng, number) for number in range(1, count + 1)]


RECORDS = make_records(int(os.environ.get("AIGW_BENCH_RECORDS", "60000")))
ENCODED = [orjson.dumps(record) for record in RECORDS]
BY_ID = {record["id"]: encoded for record, encoded in zip(RECORDS, ENCODED, strict=True)}
TEXTS = [f"{record['title']}\n{record['body']}".lower() for record in RECORDS]
_pages: dict[bytes, bytes] = {}
_requests: Counter[str] = Counter()
_churned = [0]  # records changed so far (the next to change is this modulo the count)


def _int(values: dict[str, list[str]], name: str, default: int) -> int:
    try:
        return max(0, int(values[name][0]))
    except (KeyError, ValueError):
        return default


def listing(query: bytes) -> bytes:
    """A page of records (of those matching `q`, when there is one), kept once made."""
    page = _pages.get(query)
    if page is not None:
        return page
    values = parse_qs(query.decode("latin-1"))
    start, limit = _int(values, "_start", 0), min(_int(values, "_limit", 10), MAX_LIMIT)
    text = values.get("q", [""])[0].lower()
    if text:
        positions = [i for i, body in enumerate(TEXTS) if text in body][start : start + limit]
    else:
        positions = list(range(start, min(start + limit, len(ENCODED))))
    page = _pages[query] = b"[" + b",".join(ENCODED[i] for i in positions) + b"]"
    return page


def churn(count: int) -> None:
    """Change `count` records, the next ones round robin: a later `updated_at` and another
    closing sentence; the pages made so far are dropped."""
    rng = random.Random(f"churn:{_churned[0]}")
    for _ in range(min(count, len(RECORDS))):
        position = _churned[0] % len(RECORDS)
        _churned[0] += 1
        record = RECORDS[position]
        record["body"] = f"{record['body'].rsplit('. ', 1)[0]}. {rng.choice(CLOSINGS)}"
        record["updated_at"] = iso(EPOCH + timedelta(days=3650, minutes=_churned[0]))
        ENCODED[position] = BY_ID[record["id"]] = orjson.dumps(record)
        TEXTS[position] = f"{record['title']}\n{record['body']}".lower()
    _pages.clear()


def answer(path: str, query: bytes) -> tuple[int, bytes]:
    if path == "/records":
        _requests["search" if b"q=" in query else "page"] += 1
        return 200, listing(query)
    if path.startswith("/records/"):
        _requests["record"] += 1
        found = BY_ID.get(unquote(path.removeprefix("/records/")))
        return (200, found) if found is not None else (404, b'{"error": "not found"}')
    if path == "/health":
        return 200, b'{"status": "ok"}'
    if path == "/__stats":
        return 200, orjson.dumps({"records": len(RECORDS), "requests": _requests})
    if path == "/__churn":
        churn(_int(parse_qs(query.decode("latin-1")), "n", 0))
        return 200, orjson.dumps({"changed": _churned[0]})
    return 404, b'{"error": "not found"}'


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    status, body = answer(scope["path"], scope["query_string"])
    headers = [*JSON, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
