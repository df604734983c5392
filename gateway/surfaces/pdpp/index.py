"""Snippets of a search hit: the sentence of a matched field that holds a query term
(lexical), or the one nearest the query (semantic), verbatim. The index itself is
gateway.index (indexing.py says what a record puts in it)."""

from __future__ import annotations

import re

from gateway.demo.embedding import cosine, embed, tokenize

_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
SNIPPET_CHARS = 200


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
