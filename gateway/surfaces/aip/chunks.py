"""Upstream texts cut into chunks, and the chunks chosen within the response's limits.

An article is split at sentence ends into chunks of at most `chunk_tokens`. Unless full
articles are allowed, the chunks of one article that a response carries never add up to the
whole article: at most all but one of them, and an article too short to split gives none.

A `Cutter` cuts each text once: the chunks of a piece (its text, id, URL and title: all a
chunk is made of) are remembered by the piece itself, so a text changed upstream is a new key
and nothing remembered can go stale; only the space is bounded.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from gateway.caching import BoundedCache
from gateway.surfaces.aip.policy import Limits
from gateway.surfaces.aip.tokens import TokenCounter

CUT_ENTRIES = 4096  # texts whose chunks a retriever remembers
CUT_BYTES = 8 * 1024 * 1024  # their size, about: a text, its chunks' texts, their words

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n\s*\n")
_WORD = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class Piece:
    """A source text (a hit, an article) and where it came from."""

    id: str
    text: str
    url: str | None = None
    title: str | None = None


@dataclass(frozen=True, slots=True)
class Chunk:
    id: str
    text: str
    token_count: int
    source: Piece
    words: frozenset[str] = field(default=frozenset(), compare=False)  # what a query matches


class Cutter:
    """`split` with a counter and a chunk size, each piece cut once (while remembered)."""

    def __init__(self, counter: TokenCounter, chunk_tokens: int) -> None:
        self.counter, self.chunk_tokens = counter, chunk_tokens
        self._cuts: BoundedCache[Piece, tuple[Chunk, ...]] = BoundedCache(CUT_ENTRIES,
                                                                         CUT_BYTES)

    def cut(self, piece: Piece) -> tuple[Chunk, ...]:
        found = self._cuts.get(piece)
        if found is None:
            found = tuple(split(piece, self.counter, self.chunk_tokens))
            size = 400 + 3 * len(piece.text) + 250 * len(found) + len(piece.url or "") \
                + len(piece.title or "")
            self._cuts.put(piece, found, size)
        return found


def split(piece: Piece, counter: TokenCounter, chunk_tokens: int) -> list[Chunk]:
    """The piece's text in chunks of at most `chunk_tokens`, in reading order."""
    texts: list[str] = []
    current = ""
    for sentence in _sentences(piece.text, counter, chunk_tokens):
        joined = f"{current} {sentence}" if current else sentence
        if current and counter.count(joined) > chunk_tokens:
            texts.append(current)
            joined = sentence
        current = joined
    if current:
        texts.append(current)
    return [Chunk(f"{piece.id}#{index}", text, counter.count(text), piece, _words(text))
            for index, text in enumerate(texts, 1)]


def select(articles: Sequence[Sequence[Chunk]], query: str, limits: Limits,
           whole_allowed: bool) -> list[Chunk]:
    """The best-matching chunks, articles in rank order, within max_chunks and max_tokens."""
    terms = set(_WORD.findall(query.lower()))
    chosen: list[Chunk] = []
    budget = limits.max_tokens
    for chunks in articles:
        allowed = len(chunks) if whole_allowed else len(chunks) - 1
        ranked = sorted(chunks, key=lambda chunk: -len(terms & chunk.words))
        for chunk in ranked[:max(allowed, 0)]:
            if len(chosen) == limits.max_chunks:
                return chosen
            if chunk.token_count <= budget:
                chosen.append(chunk)
                budget -= chunk.token_count
    return chosen


def withheld_whole(articles: Sequence[Sequence[Chunk]], whole_allowed: bool) -> int:
    """How many articles give no chunk at all because one chunk would be the whole article
    (too short to split) and whole articles are not allowed: what an answer says it left out."""
    return 0 if whole_allowed else sum(1 for chunks in articles if len(chunks) == 1)


def _sentences(text: str, counter: TokenCounter, limit: int) -> list[str]:
    """Sentences, each cut further at word boundaries when it alone exceeds the limit."""
    out: list[str] = []
    for sentence in (s.strip() for s in _SENTENCE_END.split(text)):
        if not sentence:
            continue
        if counter.count(sentence) <= limit:
            out.append(sentence)
            continue
        words: list[str] = []
        for word in sentence.split():
            if words and counter.count(" ".join([*words, word])) > limit:
                out.append(" ".join(words))
                words = []
            words.append(word)
        out.extend(_hard_cut(" ".join(words), counter, limit))
    return out


def _hard_cut(text: str, counter: TokenCounter, limit: int) -> list[str]:
    """A single run of text with no usable break: cut by characters."""
    parts = []
    while text and counter.count(text) > limit:
        size = len(text)
        while size > 1 and counter.count(text[:size]) > limit:
            size //= 2
        parts.append(text[:size])
        text = text[size:]
    return [*parts, text] if text else parts


def _words(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.lower()))
