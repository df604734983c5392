"""Finding agents (AIDIP §4.3): attribute filters, and free text ranked with BM25.

Filters combine with AND; a list filter is containment (the agent has every listed value).
An agent without `supported_languages` is language-agnostic and passes language filters.
Free text is ranked with Okapi BM25 (the `bm25s` library, Lucene's IDF) over each agent's
name, description, capabilities and tags; equal scores are ordered by id, so the order is
deterministic; agents sharing no term with the query are not returned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import bm25s

from gateway.surfaces.aidip.catalog import Agent

LIST_FILTERS = ("capabilities", "tags", "supported_languages")
TEXT_FILTERS = ("publisher", "status")


@dataclass(frozen=True, slots=True)
class Filters:
    lists: dict[str, frozenset[str]] = field(default_factory=dict)
    values: dict[str, str] = field(default_factory=dict)

    def match(self, agent: Agent) -> bool:
        for name, wanted in self.lists.items():
            have = agent.metadata.get(name) or []
            if name == "supported_languages" and not have:
                continue
            if not wanted <= set(have):
                return False
        return all(str(agent.metadata.get(name, "active" if name == "status" else "")) == value
                   for name, value in self.values.items())


def ranked(agents: list[Agent], query: str) -> list[tuple[Agent, float]]:
    """Agents matching `query`, best first, with their BM25 score."""
    if not agents:
        return []
    corpus = [_text(agent) for agent in agents]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False),
                    show_progress=False)
    terms = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)[0]
    if not terms:
        return []
    scores = retriever.get_scores(terms)
    scored = [(agent, round(float(score), 6)) for agent, score in zip(agents, scores, strict=True)
              if score > 0]
    return sorted(scored, key=lambda pair: (-pair[1], pair[0].id))


def _text(agent: Agent) -> str:
    metadata = agent.metadata
    words: list[Any] = [metadata.get("name", ""), metadata.get("description", ""),
                        *metadata.get("capabilities", []), *metadata.get("tags", [])]
    # "text_generation" should match "generation": split identifiers into words.
    return " ".join(str(word).replace("_", " ").replace("-", " ") for word in words)
