"""An embedder over any server speaking OpenAI's embeddings API, the de-facto one of vLLM, TEI,
Ollama and hosted services: `POST {base_url}/v1/embeddings` with `{"model", "input": [texts]}`,
answered by `{"data": [{"index", "embedding": [numbers]}]}`.

An answer is checked before any of it is used: at most a size that fits the vectors asked for,
JSON, exactly one embedding per text (by `index` when the server gives one), each of the
configured dimensions and of finite numbers only. The vectors are then scaled to unit length.
Errors name the server's status or what was wrong with its answer, never the answer's body,
the texts or the key.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import httpx
import orjson

from gateway.embeddings.base import Distance, EmbeddingError, unit
from gateway.embeddings.config import OpenAICompatibleSettings

PATH = "/v1/embeddings"
# A number in JSON takes ~20 characters at float32 precision; a server that says more is wrong.
BYTES_PER_NUMBER = 32
SLACK_BYTES = 64 * 1024


class OpenAICompatibleEmbedder:
    distance: Distance = "cosine"
    normalized = True

    def __init__(self, settings: OpenAICompatibleSettings,
                 transport: httpx.BaseTransport | None = None) -> None:
        spec = settings.spec
        self.model, self.dimensions = spec.model, spec.dimensions
        self._batch_size = settings.batch_size
        headers = {"accept": "application/json", "content-type": "application/json"}
        if settings.api_key is not None:
            headers["authorization"] = f"Bearer {settings.api_key.get_secret_value()}"
        self._client = httpx.Client(
            base_url=settings.base_url, headers=headers, transport=transport,
            timeout=httpx.Timeout(settings.read_timeout, connect=settings.connect_timeout))

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            vectors += self._request(list(texts[start:start + self._batch_size]))
        return vectors

    def close(self) -> None:
        self._client.close()

    def _request(self, texts: list[str]) -> list[list[float]]:
        body = orjson.dumps({"model": self.model, "input": texts})
        limit = SLACK_BYTES + len(texts) * self.dimensions * BYTES_PER_NUMBER
        try:
            with self._client.stream("POST", PATH, content=body) as response:
                if response.status_code != 200:
                    raise EmbeddingError(
                        f"the embedding server answered HTTP {response.status_code}")
                raw = _read_at_most(response, limit)
        except httpx.HTTPError as exc:
            raise EmbeddingError(
                f"the embedding server could not be reached ({type(exc).__name__})") from None
        return vectors_of(raw, len(texts), self.dimensions)


def _read_at_most(response: httpx.Response, limit: int) -> bytes:
    chunks, size = [], 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > limit:
            raise EmbeddingError(f"the embedding server's answer is larger than {limit} bytes, "
                                 "more than the embeddings asked for can take")
        chunks.append(chunk)
    return b"".join(chunks)


def vectors_of(raw: bytes, count: int, dimensions: int) -> list[list[float]]:
    """The `count` unit vectors an answer holds, in the order of the texts sent."""
    try:
        answer = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise EmbeddingError("the embedding server's answer is not JSON") from None
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        raise EmbeddingError("the embedding server's answer has no `data` list")
    if len(data) != count:
        raise EmbeddingError(f"the embedding server answered {len(data)} embeddings for "
                             f"{count} texts")
    vectors: list[list[float] | None] = [None] * count
    for position, item in enumerate(data):
        if not isinstance(item, dict):
            raise EmbeddingError("an item of the embedding server's `data` is not an object")
        index = item.get("index", position)
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count \
                or vectors[index] is not None:
            raise EmbeddingError("the embedding server's answer has a missing, repeated or "
                                 "out-of-range `index`")
        vectors[index] = _vector(item.get("embedding"), dimensions)
    return [vector for vector in vectors if vector is not None]


def _vector(value: Any, dimensions: int) -> list[float]:
    if not isinstance(value, list):
        raise EmbeddingError("an embedding in the server's answer is not a list of numbers "
                             "(base64 encoding is not supported)")
    if len(value) != dimensions:
        raise EmbeddingError(f"an embedding in the server's answer has {len(value)} numbers, "
                             f"not the {dimensions} configured")
    if not all(isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
               for x in value):
        raise EmbeddingError("an embedding in the server's answer holds something other than "
                             "finite numbers")
    return unit(value)
