"""What every index engine offers (`SearchIndex`) and what it holds (`IndexedRecord`).

An index holds one stream's records (or one subject's, when the stream's records depend on
the caller): each record's data as the upstream gave it (mapped), its version (a content hash
or the upstream's `updated_at`, for incremental refresh), the text of each searchable field
and, for fields searched by meaning, one vector per field.

Every method is synchronous and may block (disk, network, CPU): callers run them in a worker
thread or process, never on the event loop. Scores answer a question about the records in
`only` alone when it is given: term statistics (BM25's IDF and average lengths) and ranks are
taken over those records, so records a caller may not see never sway what it is shown.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

IndexState = Literal["building", "ready", "stale"]


class IndexUnavailable(RuntimeError):
    """The index's storage engine cannot be reached (refused, down, or failing fast for a few
    seconds after it was): a caller answers 503 at once instead of waiting for it."""


@dataclass(frozen=True, slots=True)
class IndexedRecord:
    key: str
    version: str  # changes when the record does
    data: dict[str, Any]  # the record as mapped (what a records page shows)
    texts: dict[str, str] = field(default_factory=dict)  # searchable field -> its text
    # semantic field -> vector (any sequence of floats: an array('f') keeps one object, not
    # one per number, which matters to the garbage collector at tens of thousands of records)
    vectors: dict[str, Sequence[float]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FieldScores:
    """One record's scores, per field that matched (a BM25 score, or a cosine similarity)."""

    key: str
    scores: dict[str, float]


@dataclass(frozen=True, slots=True)
class IndexStats:
    records: int
    bytes: int  # what the index takes on disk (or in the server)
    built_at: str | None  # RFC 3339, when the last complete build or refresh finished
    state: IndexState
    truncated: bool  # the stream held more records than the index's limits let in


class SearchIndex(Protocol):
    def replace(self, records: Sequence[IndexedRecord], *, truncated: bool) -> None:
        """Every record, replacing what the index held, in one transaction."""

    def apply(self, upserts: Sequence[IndexedRecord], deletions: Collection[str]) -> None:
        """An incremental refresh: these records added or replaced, those keys removed."""

    def versions(self) -> dict[str, str]:
        """Each record's key and version, to tell what a refresh must change."""

    def records(self, keys: Collection[str] | None = None) -> list[tuple[str, dict[str, Any]]]:
        """(key, data) of the records with these keys (all when None), in key order."""

    def lexical(self, terms: Sequence[str], fields: Sequence[str],
                only: Collection[str] | None, limit: int) -> list[FieldScores]:
        """The records matching any of `terms` in any of `fields`, best first (by the sum of
        their fields' BM25 scores), at most `limit`; statistics over `only` when given."""

    def semantic(self, vector: Sequence[float], fields: Sequence[str],
                 only: Collection[str] | None, limit: int) -> list[FieldScores]:
        """The records nearest `vector` in any of `fields` (cosine similarity), best first by
        their best field, at most `limit`; among `only` when given."""

    def stats(self) -> IndexStats: ...

    def mark(self, state: IndexState) -> None:
        """Record that a build started (`building`) or a refresh failed (`stale`)."""

    def close(self) -> None: ...
