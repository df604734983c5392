"""WordLlama (`wordllama` on PyPI): token vectors taken from a large language model's codebook
and trained for sentence similarity, average-pooled over a text's tokens. The 256-dimension
`l2_supercat` weights and their tokenizer ship inside the wheel, so it loads offline (it is
told never to download) in well under a second and embeds on the CPU with numpy alone."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from gateway.embeddings.base import Distance, EmbeddingError
from gateway.embeddings.config import WordLlamaSettings

CONFIG = "l2_supercat"
SHIPPED_DIMENSIONS = 256
# Texts go to the model in groups of similar length, each padded to its longest: a group holds
# one float32 vector per padded token (~1 KB at 256 dimensions, a token per ~4 characters of
# English, up to one per byte of other scripts), twice over while it is pooled. This bounds it.
CHARS_PER_GROUP = 16_384
TEXTS_PER_GROUP = 64

_MODELS: dict[int, Any] = {}  # dimensions -> the loaded model
_LOADING = threading.Lock()
# One text group at a time per process: the model is CPU-bound, and two threads at once would
# only hold two groups' memory.
_EMBEDDING = threading.Lock()


class WordLlamaEmbedder:
    distance: Distance = "cosine"
    normalized = True

    def __init__(self, settings: WordLlamaSettings) -> None:
        spec = settings.spec
        self.model, self.dimensions = spec.model, spec.dimensions

    def load(self) -> None:
        """Load the weights now rather than on the first `embed` (blocks)."""
        _model(self.dimensions)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        model = _model(self.dimensions)
        for group in _groups(texts):
            # Taken per group: a query's embedding waits for one group of a background
            # build's batch at most, not for the whole batch at the build's lower priority.
            with _EMBEDDING:
                vectors[group] = model.embed([texts[i] for i in group], norm=False,
                                             batch_size=len(group))
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        np.divide(vectors, norms, out=vectors, where=norms > 0)  # an empty text stays zeros
        return vectors.tolist()


def _groups(texts: Sequence[str]) -> Iterator[list[int]]:
    """Positions of `texts` in groups of similar length, within the group bounds above (a text
    longer than CHARS_PER_GROUP alone)."""
    group: list[int] = []
    for position in sorted(range(len(texts)), key=lambda i: len(texts[i])):
        # Shortest first: the text joining a group is its longest, its padded length.
        if group and (len(group) == TEXTS_PER_GROUP
                      or (len(group) + 1) * len(texts[position]) > CHARS_PER_GROUP):
            yield group
            group = []
        group.append(position)
    if group:
        yield group


def _model(dimensions: int) -> Any:
    """The loaded model, loaded once per process and size."""
    model = _MODELS.get(dimensions)
    if model is None:
        with _LOADING:
            model = _MODELS.get(dimensions)
            if model is None:
                model = _MODELS[dimensions] = _load(dimensions)
    return model


def _load(dimensions: int) -> Any:
    try:
        with _root_logging_kept():
            # Its inference module calls logging.basicConfig() when imported.
            import wordllama
    except ImportError:
        raise EmbeddingError("the wordllama package is not installed") from None
    # It finds the shipped weights in its package's weights/, but looks for the tokenizer in
    # tokenizer/ while the wheel has it in tokenizers/, and would then download it. Its
    # package is the "cache" it also reads, where tokenizers/ is right.
    shipped = Path(wordllama.__file__).parent
    try:
        return wordllama.WordLlama.load(
            CONFIG, dim=SHIPPED_DIMENSIONS, cache_dir=shipped, disable_download=True,
            trunc_dim=None if dimensions == SHIPPED_DIMENSIONS else dimensions)
    except (OSError, ValueError) as exc:
        raise EmbeddingError(f"wordllama's {CONFIG} weights could not be loaded: "
                             f"{type(exc).__name__}") from None


@contextmanager
def _root_logging_kept() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        root.handlers[:], root.level = handlers, level
