"""Snippets of a search hit: the sentence of a matched field that holds a query term
(lexical), or the one nearest the query (semantic), verbatim. The index itself is
gateway.index (indexing.py says what a record puts in it)."""

from __future__ import annotations

import re

from gateway.embeddings.base import Embedder, cosine
from gateway.embeddings.hashing import tokenize

_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
SNIPPET_CHARS = 200


def lexical_snippet(text: str, terms: set[str]) -> str | None:
    """The first sentence of `text` with a query term, verbatim (cut at a word boundary)."""
    for match in _SENTENCE.finditer(text):
        sentence = match.group().strip()
        if terms & set(tokenize(sentence)):
            return _cut(sentence)
    return None


def semantic_snippet(text: str, query: list[float], embedder: Embedder,
                     max_sentences: int = 32) -> str | None:
    """The sentence of `text` nearest the query, verbatim (among its first `max_sentences`).
    Blocks: the embedder runs here (callers are in a PDPP thread)."""
    sentences = [s for m in _SENTENCE.finditer(text) if (s := m.group().strip())]
    sentences = sentences[:max_sentences]
    if not sentences:
        return None
    near = [cosine(query, vector) for vector in embedder.embed(sentences)]
    best = max(range(len(sentences)), key=near.__getitem__)
    return _cut(sentences[best]) if near[best] > 0 else None


def _cut(sentence: str) -> str:
    if len(sentence) <= SNIPPET_CHARS:
        return sentence
    return sentence[:SNIPPET_CHARS].rsplit(" ", 1)[0]
