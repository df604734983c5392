"""The embedder a config describes, one per distinct config per process (so a model is loaded,
and a connection pool kept, once however many sections name it)."""

from __future__ import annotations

import functools

from gateway.embeddings.base import Embedder
from gateway.embeddings.config import (
    EmbedderSettings,
    HashSettings,
    OpenAICompatibleSettings,
    WordLlamaSettings,
)
from gateway.embeddings.hashing import HashEmbedder
from gateway.embeddings.openai_compatible import OpenAICompatibleEmbedder
from gateway.embeddings.wordllama import WordLlamaEmbedder


@functools.lru_cache(maxsize=32)
def embedder_for(settings: EmbedderSettings) -> Embedder:
    """The embedder of `settings`. Cheap: nothing is loaded or called until it embeds."""
    match settings:
        case WordLlamaSettings():
            return WordLlamaEmbedder(settings)
        case OpenAICompatibleSettings():
            return OpenAICompatibleEmbedder(settings)
        case HashSettings():
            return HashEmbedder()
    raise TypeError(f"no embedder for {type(settings).__name__}")
