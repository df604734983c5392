"""The feature-hashing embedder (`hash`, model `demo-hash-256`): a test double, not a model of
meaning. Texts that share no word get unrelated vectors, so it stands in for a real embedder only
where a test needs vectors that are cheap, deterministic and need no model loaded.

Tokens are lowercased unicode words, minus stopwords, with a crude suffix
stripper so "refunds" and "refunded" meet "refund". Unigrams and bigrams are
hashed with blake2b into ``DIM`` signed buckets, weighted by sublinear term
frequency (``1 + ln tf``) and L2-normalised. blake2b keeps vectors identical
across processes, unlike the built-in ``hash()`` which is salted per run.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from itertools import pairwise

from gateway.embeddings.base import Distance, cosine

DIM = 256
SPACE_ID = "demo-hash-256"
# Bigrams refine word matches; at full weight their extra collisions in only
# 256 buckets drown short queries in noise.
BIGRAM_WEIGHT = 0.5

_WORD = re.compile(r"\w+")
# fmt: off
STOPWORDS = frozenset({
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be",
    "been", "before", "both", "but", "by", "can", "could", "did", "do", "does", "each", "every",
    "few", "for", "from", "had", "has", "have", "he", "her", "here", "him", "his", "how", "i",
    "if", "in", "into", "is", "it", "its", "just", "may", "me", "more", "most", "must", "my", "no",
    "nor", "not", "of", "off", "on", "once", "only", "or", "other", "our", "out", "over", "own",
    "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "them", "then",
    "there", "these", "they", "this", "to", "too", "up", "us", "very", "was", "we", "were", "what",
    "when", "where", "which", "while", "who", "why", "will", "with", "would", "you", "your",
})
# fmt: on


def _stem(word: str) -> str:
    if word.endswith("ss"):
        return word
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            word = word[: -len(suffix)]
            break
    return word[:-1] if len(word) > 3 and word.endswith("e") else word


def tokenize(text: str) -> list[str]:
    """Lowercased, suffix-stripped word tokens with stopwords removed."""
    return [_stem(word) for word in _WORD.findall(text.lower()) if word not in STOPWORDS]


@lru_cache(maxsize=65536)
def _bucket(feature: str) -> tuple[int, float]:
    value = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "big")
    # A sign bit makes colliding features cancel on average, so dot products
    # stay unbiased estimates of the unhashed ones.
    return value % DIM, (1.0 if value >> 63 else -1.0)


def _add(vector: list[float], features: list[str], weight: float) -> None:
    for feature, count in Counter(features).items():
        index, sign = _bucket(feature)
        vector[index] += sign * weight * (1.0 + math.log(count))


def embed(text: str) -> list[float]:
    """Return a unit-length ``DIM``-dimensional vector (all zeros for wordless text)."""
    tokens = tokenize(text)
    vector = [0.0] * DIM
    _add(vector, tokens, 1.0)
    _add(vector, [f"{left} {right}" for left, right in pairwise(tokens)], BIGRAM_WEIGHT)
    norm = math.sqrt(sum(value * value for value in vector))
    return [value / norm for value in vector] if norm else vector


class HashEmbedder:
    """`embed` above behind the `Embedder` protocol."""

    model = SPACE_ID
    dimensions = DIM
    distance: Distance = "cosine"
    normalized = True

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [embed(text) for text in texts]


__all__ = ["DIM", "SPACE_ID", "HashEmbedder", "cosine", "embed", "tokenize"]
