"""The feature-hashing embedder and its tokenizer, now `gateway.embeddings.hashing`; kept under
this name for the modules that still import it from here (PDPP's index and search)."""

from gateway.embeddings.hashing import DIM, SPACE_ID, cosine, embed, tokenize

__all__ = ["DIM", "SPACE_ID", "cosine", "embed", "tokenize"]
