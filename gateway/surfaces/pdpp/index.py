"""One field's search index over a stream's records: BM25 (bm25s) and embeddings from the
demo embedder, each built the first time a search may match that field."""

from __future__ import annotations

import re
from typing import Any

import bm25s

from gateway.demo.embedding import cosine, embed, tokenize

_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
SNIPPET_CHARS = 200


class FieldIndex:
    def __init__(self, values: list[Any], tokens: list[list[str]] | None = None) -> None:
        self.texts = [v if isinstance(v, str) else "" for v in values]
        self._tokens = tokens
        self._bm25: bm25s.BM25 | None = None
        self._vectors: list[list[float]] | None = None

    @property
    def tokens(self) -> list[list[str]]:
        if self._tokens is None:
            self._tokens = [tokenize(text) or [""] for text in self.texts]
        return self._tokens

    def subset(self, positions: tuple[int, ...]) -> FieldIndex:
        """An index of the records at `positions` alone (BM25's term statistics then come from
        them only), reusing their tokens."""
        return FieldIndex([self.texts[i] for i in positions],
                          [self.tokens[i] for i in positions])

    def lexical(self, terms: list[str]) -> list[float]:
        """BM25 score of every record for the query terms (0: no match)."""
        known = [t for t in terms if t]
        if not known or not any(self.texts):
            return [0.0] * len(self.texts)
        if self._bm25 is None:
            self._bm25 = bm25s.BM25()
            self._bm25.index(self.tokens, show_progress=False)
        vocabulary = self._bm25.vocab_dict
        present = [t for t in known if t in vocabulary]
        if not present:
            return [0.0] * len(self.texts)
        scores: list[float] = self._bm25.get_scores(present).tolist()
        return scores

    def semantic(self, query: list[float]) -> list[float]:
        if self._vectors is None:
            self._vectors = [embed(text) for text in self.texts]
        return [cosine(query, vector) for vector in self._vectors]


def lexical_snippet(text: str, terms: set[str]) -> str | None:
    """The first sentence of `text` with a query term, verbatim (cut at a word boundary)."""
    for match in _SENTENCE.finditer(text):
        sentence = match.group().strip()
        if terms & set(tokenize(sentence)):
            return _cut(sentence)
    return None


def semantic_snippet(text: str, query: list[float]) -> str | None:
    """The sentence of `text` nearest the query, verbatim."""
    best = max(((cosine(query, embed(m.group())), m.group().strip())
                for m in _SENTENCE.finditer(text) if m.group().strip()), default=None)
    return _cut(best[1]) if best and best[0] > 0 else None


def _cut(sentence: str) -> str:
    if len(sentence) <= SNIPPET_CHARS:
        return sentence
    return sentence[:SNIPPET_CHARS].rsplit(" ", 1)[0]
