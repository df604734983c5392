"""How much of a text query any search takes on, bounded before the search runs: at most
MAX_QUERY_CHARS characters and MAX_QUERY_TERMS distinct terms. A lexical search costs a few
SQL statements per distinct term (or an upstream full-text search a clause per word), so one
long query would otherwise cost as much as thousands of short ones. Surfaces refuse a query
past a bound (`query_terms`); the engines and the upstream expressions hold to them again
(`bounded`, `query_words`), whoever calls them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from gateway.embeddings.hashing import tokenize

MAX_QUERY_TERMS = 32
MAX_QUERY_CHARS = 1000


class QueryTooLarge(ValueError):
    """A query past one of the bounds: `bound` says which (`chars` or `terms`), `limit` its
    value, `what` it counts."""

    def __init__(self, bound: Literal["chars", "terms"], limit: int) -> None:
        self.bound = bound
        self.limit = limit
        self.what = "characters" if bound == "chars" else "distinct search terms"
        super().__init__(f"The query has more than {limit} {self.what}.")


def query_terms(text: str) -> list[str]:
    """The distinct terms of `text` (tokenized as the indexes score them: lowercased,
    stemmed, without stopwords), first seen first; QueryTooLarge past a bound."""
    if len(text) > MAX_QUERY_CHARS:
        raise QueryTooLarge("chars", MAX_QUERY_CHARS)
    terms = list(dict.fromkeys(tokenize(text)))
    if len(terms) > MAX_QUERY_TERMS:
        raise QueryTooLarge("terms", MAX_QUERY_TERMS)
    return terms


def bounded(terms: Iterable[str]) -> list[str]:
    """At most MAX_QUERY_TERMS distinct terms of `terms`, the first ones (an engine's own
    guard: the surfaces have refused a longer query before it gets there)."""
    return list(dict.fromkeys(terms))[:MAX_QUERY_TERMS]


def query_words(text: str) -> list[str]:
    """The distinct words of `text` as typed (split at white space; another case of a word is
    the same word, as full-text tokenizers fold case), at most MAX_QUERY_TERMS: what an
    upstream's own full-text search is sent, to tokenize as it does (stopwords included)."""
    words: dict[str, str] = {}
    for word in text[:MAX_QUERY_CHARS].split():
        words.setdefault(word.casefold(), word)
    return list(words.values())[:MAX_QUERY_TERMS]
