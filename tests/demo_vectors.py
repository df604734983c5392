"""Query vectors in the demo's embedding space (WordLlama, 256 dimensions), made as a client of
the demo makes them; the model is loaded once per test process."""

from __future__ import annotations

from gateway.demo.backend import default_embedder


def embed(text: str) -> list[float]:
    return default_embedder().embed([text])[0]
