"""A legacy help-centre API that the aigw demo runs behind the gateway.

All responses are JSON. Every error is ``{"message": str, "code": str}`` with codes
BAD_QUERY, BAD_PARAM, BAD_CURSOR, BAD_JSON, BAD_TEXT (400), BAD_VECTOR (422),
NOT_FOUND (404), METHOD_NOT_ALLOWED (405) and INTERNAL (500). Timestamps are
ISO-8601 UTC strings such as "2024-03-05T10:22:13Z"; limits above 100 are capped.

Article summary = {id, title, category, tags, url, updated_at, visibility: "public"|"internal"}

GET  /api/v1/health
     -> {status: "ok", articles: int}
GET  /api/v1/articles/search?q=&limit=10&offset=0&category=
     -> {query, total, items: [{id, title, snippet, category, tags, url, updated_at, score}]}
     BM25 ranking, best first; missing or blank q -> 400 BAD_QUERY.
POST /api/v1/articles/vector-search  {vector: [256 numbers], k?: 10, category?: str}
     -> {items: [{id, title, snippet, url, updated_at, score, embedding: [256 floats]}]}
     Cosine ranking. Leaks each hit's stored embedding (the gateway strips it).
POST /api/v1/embed  {text}
     -> {model: "wordllama-l2_supercat", dimensions: 256, embedding: [256 floats]}
GET  /api/v1/articles?page=1&per_page=20&updated_since=<ISO-8601>
     -> {page, per_page, total, items: [article summary]}   (ordered by id)
GET  /api/v1/articles/{id}
     -> {id, title, body, category, tags, author, locale, created_at, updated_at, url,
         visibility: "public"|"internal", content_hash: "sha256:<hex of body>"}
GET  /api/v1/users/{user_id}/messages?limit=20&cursor=
     -> {user_id, items: [message], next_cursor: str|null}   (newest first)
     message = {id, thread_id, from, to, subject, body, sent_at, labels: [str],
                read: bool, priority: "low"|"normal"|"high"}
GET  /api/v1/users/{user_id}/messages/{message_id}
     -> message
POST /api/v1/tasks/summarize  {article_id} or {text}
     -> {summary, source_id: str|null}
POST /api/v1/tasks/classify  {text}
     -> {category, confidence: float 0..1, neighbours: [article id]}

Articles (title and body) and texts are embedded by WordLlama (`gateway.embeddings`), a model
of meaning that ships inside its package; `create_app(embedder=...)` takes another.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import re
from collections import Counter
from typing import Any

import numpy as np
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.demo.data import Dataset, Record, generate
from gateway.demo.inputs import (
    MAX_LIMIT,
    ApiError,
    category_field,
    int_param,
    json_object,
    k_field,
    since_param,
    text_field,
    vector_field,
)
from gateway.embeddings import Embedder, embedder_for
from gateway.embeddings.config import WordLlamaSettings
from gateway.embeddings.hashing import tokenize

SNIPPET_CHARS = 200
CLASSIFY_NEIGHBOURS = 7
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+")


class ORJSONResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


class KeywordIndex:
    """Okapi BM25 over pre-tokenised documents."""

    K1, B = 1.2, 0.75

    def __init__(self, documents: list[list[str]]) -> None:
        self._postings: dict[str, list[tuple[int, int]]] = {}
        for position, tokens in enumerate(documents):
            for term, count in Counter(tokens).items():
                self._postings.setdefault(term, []).append((position, count))
        self._lengths = [len(tokens) for tokens in documents]
        self._average = sum(self._lengths) / len(documents) if documents else 1.0

    def scores(self, terms: list[str]) -> dict[int, float]:
        """Score of every document matching at least one term, keyed by position."""
        scores: dict[int, float] = {}
        for term in set(terms):
            postings = self._postings.get(term, [])
            rarity = (len(self._lengths) - len(postings) + 0.5) / (len(postings) + 0.5)
            idf = math.log(1 + rarity)
            for position, count in postings:
                length = self._lengths[position] / self._average
                saturation = count + self.K1 * (1 - self.B + self.B * length)
                gain = idf * count * (self.K1 + 1) / saturation
                scores[position] = scores.get(position, 0.0) + gain
        return scores


class HelpCentre:
    """The backend's data plus the search structures built from it."""

    def __init__(self, dataset: Dataset, embedder: Embedder) -> None:
        self.articles = dataset.articles
        self.by_id = {article["id"]: article for article in self.articles}
        self.embedder = embedder
        vectors = embedder.embed([f"{a['title']}\n{a['body']}" for a in self.articles])
        self.embeddings = {
            article["id"]: vector for article, vector in zip(self.articles, vectors, strict=True)
        }
        self._matrix = np.array(vectors, dtype=np.float64).reshape(len(vectors),
                                                                   embedder.dimensions)
        self._norms = np.linalg.norm(self._matrix, axis=1)
        # Titles count twice so an article *about* a term beats one mentioning it.
        self.index = KeywordIndex(
            [tokenize(a["title"]) * 2 + tokenize(a["body"]) for a in self.articles]
        )
        self.messages = dataset.messages
        self.message_positions = {
            user_id: {message["id"]: position for position, message in enumerate(messages)}
            for user_id, messages in dataset.messages.items()
        }

    def article(self, article_id: str) -> Record:
        if article_id not in self.by_id:
            raise ApiError(404, "NOT_FOUND", "Article not found")
        return self.by_id[article_id]

    def user_messages(self, user_id: str) -> list[Record]:
        if user_id not in self.messages:
            raise ApiError(404, "NOT_FOUND", "User not found")
        return self.messages[user_id]

    def search(self, terms: list[str], category: str | None) -> list[tuple[float, Record]]:
        hits = [(score, self.articles[pos]) for pos, score in self.index.scores(terms).items()]
        return _ranked([(s, a) for s, a in hits if category in (None, a["category"])])

    def nearest(
        self, vector: list[float], k: int, category: str | None = None
    ) -> list[tuple[float, Record]]:
        """The `k` articles most cosine-similar to `vector` (0.0 for an all-zero one)."""
        query = np.asarray(vector, dtype=np.float64)
        norms = self._norms * np.linalg.norm(query)
        scores = np.divide(self._matrix @ query, norms, out=np.zeros_like(norms), where=norms > 0)
        hits = [
            (float(score), article)
            for score, article in zip(scores, self.articles, strict=True)
            if category in (None, article["category"])
        ]
        return _ranked(hits)[:k]

    def classify(self, text: str) -> Record:
        """Similarity-weighted vote of the nearest articles' categories."""
        neighbours = self.nearest(self.embedder.embed([text])[0], CLASSIFY_NEIGHBOURS)
        votes: dict[str, float] = {}
        for score, article in neighbours:
            votes[article["category"]] = votes.get(article["category"], 0.0) + max(score, 0.0)
        category, weight = max(votes.items(), key=lambda vote: vote[1])  # the first, on a tie
        total = sum(votes.values())
        return {
            "category": category,
            "confidence": round(weight / total, 3) if total else 0.0,
            "neighbours": [article["id"] for _, article in neighbours],
        }


def _ranked(hits: list[tuple[float, Record]]) -> list[tuple[float, Record]]:
    return sorted(hits, key=lambda hit: (-hit[0], hit[1]["id"]))


def _sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE_BREAK.split(text) if part.strip()]


def _snippet(body: str, terms: set[str]) -> str:
    """The first sentence mentioning a query term (else the first sentence)."""
    sentences = _sentences(body)
    best = next((s for s in sentences if terms & set(tokenize(s))), sentences[0])
    return best if len(best) <= SNIPPET_CHARS else best[: SNIPPET_CHARS - 1].rstrip() + "…"


def summarize_text(text: str, size: int = 2) -> str:
    """The ``size`` sentences with the highest mean in-document term frequency, in order."""
    sentences = _sentences(text)
    frequency = Counter(tokenize(text))

    def weight(sentence: str) -> float:
        tokens = tokenize(sentence)
        return sum(frequency[t] for t in tokens) / len(tokens) if tokens else 0.0

    best = sorted(range(len(sentences)), key=lambda i: -weight(sentences[i]))[:size]
    return " ".join(sentences[i] for i in sorted(best))


def _summary(article: Record) -> Record:
    keys = ("id", "title", "category", "tags", "url", "updated_at", "visibility")
    return {key: article[key] for key in keys}


def _centre(request: Request) -> HelpCentre:
    return request.app.state.centre


async def health(request: Request) -> Response:
    return ORJSONResponse({"status": "ok", "articles": len(_centre(request).articles)})


async def search_articles(request: Request) -> Response:
    query = request.query_params.get("q", "").strip()
    if not query:
        raise ApiError(400, "BAD_QUERY", "q must be a non-empty search query")
    limit = int_param(request, "limit", 10, minimum=1, maximum=MAX_LIMIT)
    offset = int_param(request, "offset", 0, minimum=0)
    terms = tokenize(query)
    hits = _centre(request).search(terms, request.query_params.get("category") or None)
    items = [
        {
            "id": article["id"],
            "title": article["title"],
            "snippet": _snippet(article["body"], set(terms)),
            "category": article["category"],
            "tags": article["tags"],
            "url": article["url"],
            "updated_at": article["updated_at"],
            "score": round(score, 4),
        }
        for score, article in hits[offset : offset + limit]
    ]
    return ORJSONResponse({"query": query, "total": len(hits), "items": items})


async def vector_search(request: Request) -> Response:
    body = await json_object(request)
    centre = _centre(request)
    vector = vector_field(body, centre.embedder.dimensions)
    hits = centre.nearest(vector, k_field(body), category_field(body))
    items = [
        {
            "id": article["id"],
            "title": article["title"],
            "snippet": _snippet(article["body"], set()),
            "url": article["url"],
            "updated_at": article["updated_at"],
            "score": round(score, 4),
            "embedding": centre.embeddings[article["id"]],
        }
        for score, article in hits
    ]
    return ORJSONResponse({"items": items})


async def embed_text(request: Request) -> Response:
    text = text_field(await json_object(request), "text")
    embedder = _centre(request).embedder
    return ORJSONResponse({"model": embedder.model, "dimensions": embedder.dimensions,
                           "embedding": embedder.embed([text])[0]})


async def list_articles(request: Request) -> Response:
    page = int_param(request, "page", 1, minimum=1)
    per_page = int_param(request, "per_page", 20, minimum=1, maximum=MAX_LIMIT)
    since = since_param(request)
    matching = [a for a in _centre(request).articles if since is None or a["updated_at"] >= since]
    start = (page - 1) * per_page
    items = [_summary(article) for article in matching[start : start + per_page]]
    return ORJSONResponse(
        {"page": page, "per_page": per_page, "total": len(matching), "items": items}
    )


async def get_article(request: Request) -> Response:
    article = _centre(request).article(request.path_params["article_id"])
    digest = hashlib.sha256(article["body"].encode()).hexdigest()
    return ORJSONResponse({**article, "content_hash": f"sha256:{digest}"})


async def list_messages(request: Request) -> Response:
    centre, user_id = _centre(request), request.path_params["user_id"]
    messages = centre.user_messages(user_id)
    limit = int_param(request, "limit", 20, minimum=1, maximum=MAX_LIMIT)
    # The cursor is the id of the last message the client has already seen.
    cursor = request.query_params.get("cursor")
    if cursor and cursor not in centre.message_positions[user_id]:
        raise ApiError(400, "BAD_CURSOR", "cursor does not match a message of this user")
    start = centre.message_positions[user_id][cursor] + 1 if cursor else 0
    items = messages[start : start + limit]
    more = start + limit < len(messages)
    next_cursor = items[-1]["id"] if more else None
    return ORJSONResponse({"user_id": user_id, "items": items, "next_cursor": next_cursor})


async def get_message(request: Request) -> Response:
    centre, user_id = _centre(request), request.path_params["user_id"]
    messages = centre.user_messages(user_id)
    position = centre.message_positions[user_id].get(request.path_params["message_id"])
    if position is None:
        raise ApiError(404, "NOT_FOUND", "Message not found")
    return ORJSONResponse(messages[position])


async def summarize(request: Request) -> Response:
    body = await json_object(request)
    if "article_id" in body:
        article = _centre(request).article(text_field(body, "article_id"))
        text, source_id = article["body"], article["id"]
    else:
        text, source_id = text_field(body, "text"), None
    return ORJSONResponse({"summary": summarize_text(text), "source_id": source_id})


async def classify(request: Request) -> Response:
    text = text_field(await json_object(request), "text")
    if not tokenize(text):
        raise ApiError(400, "BAD_TEXT", "text has no words to classify")
    return ORJSONResponse(_centre(request).classify(text))


def _error(status: int, code: str, message: str, headers: Any = None) -> Response:
    return ORJSONResponse({"message": message, "code": code}, status_code=status, headers=headers)


async def _api_error(request: Request, exc: ApiError) -> Response:
    return _error(exc.status, exc.code, exc.message)


async def _http_error(request: Request, exc: HTTPException) -> Response:
    code = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(exc.status_code, "HTTP_ERROR")
    return _error(exc.status_code, code, exc.detail, exc.headers)


async def _server_error(request: Request, exc: Exception) -> Response:
    return _error(500, "INTERNAL", "Internal server error")


ROUTES = [
    Route("/api/v1/health", health),
    Route("/api/v1/articles/search", search_articles),
    Route("/api/v1/articles/vector-search", vector_search, methods=["POST"]),
    Route("/api/v1/articles", list_articles),
    Route("/api/v1/articles/{article_id}", get_article),
    Route("/api/v1/embed", embed_text, methods=["POST"]),
    Route("/api/v1/users/{user_id}/messages", list_messages),
    Route("/api/v1/users/{user_id}/messages/{message_id}", get_message),
    Route("/api/v1/tasks/summarize", summarize, methods=["POST"]),
    Route("/api/v1/tasks/classify", classify, methods=["POST"]),
]


def default_embedder() -> Embedder:
    """WordLlama at 256 dimensions, what config/demo.yaml's article space declares."""
    return embedder_for(WordLlamaSettings(provider="wordllama"))


def create_app(
    n_articles: int = 300, seed: int = 7, embedder: Embedder | None = None
) -> Starlette:
    """Build the help-centre app; data, vectors and indexes are computed once, here."""
    app = Starlette(
        routes=ROUTES,
        # Starlette types every handler as taking any Exception; each gets its key's class.
        exception_handlers={
            ApiError: _api_error,  # type: ignore[dict-item]
            HTTPException: _http_error,  # type: ignore[dict-item]
            Exception: _server_error,
        },
    )
    app.state.centre = HelpCentre(generate(n_articles=n_articles, seed=seed),
                                  embedder or default_embedder())
    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Run the demo help-centre backend.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8081)
    args = parser.parse_args(argv)
    uvicorn.run(create_app(), host=args.host, port=args.port)


if __name__ == "__main__":
    main()
