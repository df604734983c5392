"""Text embeddings behind one seam (`Embedder`): a model shipped inside a package (`wordllama`),
any OpenAI-compatible `/v1/embeddings` endpoint (vLLM, TEI, Ollama, hosted services), and the
feature-hashing embedder kept as a test double (`hash`). A config names one
(`gateway.embeddings.config.EmbedderSettings`); `embedder_for` gives the embedder it describes,
and `gateway.embeddings.running.embed_off_loop` runs it off the event loop, bounded."""

from gateway.embeddings.base import Embedder, EmbeddingError
from gateway.embeddings.config import EmbedderSettings
from gateway.embeddings.providers import embedder_for

__all__ = ["Embedder", "EmbedderSettings", "EmbeddingError", "embedder_for"]
