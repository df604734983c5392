"""What every embedder offers (`Embedder`), what it raises (`EmbeddingError`), and the vector
arithmetic they share.

`embed` is synchronous and may block (a model on the CPU, a call over the network): callers run
it in a worker thread (`gateway.embeddings.running.embed_off_loop`), never on the event loop.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, Protocol

Distance = Literal["cosine"]


class EmbeddingError(Exception):
    """No embeddings: the provider could not be reached, refused, or answered with something
    that is not one vector per text. The message names neither a secret nor a text, and quotes
    no answer body."""


class Embedder(Protocol):
    @property
    def model(self) -> str:
        """The model's name, as discovery documents advertise it."""

    @property
    def dimensions(self) -> int: ...

    @property
    def distance(self) -> Distance: ...

    @property
    def normalized(self) -> bool:
        """Every vector of a text with words in it has unit length."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector of `dimensions` finite numbers per text, in order. Blocks."""


def unit(vector: Sequence[float]) -> list[float]:
    """`vector` scaled to unit length; an all-zero vector stays all zeros."""
    norm = math.sqrt(math.fsum(x * x for x in vector))
    return [x / norm for x in vector] if norm else [float(x) for x in vector]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two equal-length vectors; 0.0 if either is all zeros."""
    if len(a) != len(b):
        raise ValueError(f"vector lengths differ: {len(a)} != {len(b)}")
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0
