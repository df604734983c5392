"""The neutral model every surface translates into and out of.

A surface turns its request into a `Query`, the pipeline turns upstream JSON into `Hit`s, policy
decides with a `Principal` and answers with a `Decision`, and the surface renders the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from gateway.policy.rules import Ask


@dataclass(frozen=True, slots=True)
class Query:
    text: str | None = None
    vector: tuple[float, ...] | None = None
    embedding_space: str | None = None
    top_k: int = 10
    cursor: str | None = None
    collection: str | None = None
    filters: dict[str, Any] = field(default_factory=dict)
    fields: frozenset[str] = frozenset()  # optional parts of each result the caller asked for
    strict_fields: bool = False  # refuse, rather than drop, a requested part policy denies
    # Decisions the request raises beyond its resource (a platform's declared use, say): the
    # policy stage takes each before any upstream call; the first denial refuses the request.
    asks: tuple[Ask, ...] = ()
    # The record visibilities the caller may see, as the policy stage decided them before the
    # upstream call (None: not decided yet); only the policy stage sets it.
    visible_records: frozenset[str] | None = None

    def narrowed(self, fields: frozenset[str], visible_records: frozenset[str],
                 filters: dict[str, Any]) -> Query:
        """This query as the policy stage narrowed it (`dataclasses.replace`, without the cost
        of its generic walk over the fields: it runs on every search)."""
        return Query(text=self.text, vector=self.vector, embedding_space=self.embedding_space,
                     top_k=self.top_k, cursor=self.cursor, collection=self.collection,
                     filters=filters, fields=fields, strict_fields=self.strict_fields,
                     asks=self.asks, visible_records=visible_records)


@dataclass(slots=True)
class Hit:
    id: str
    fields: dict[str, Any] = field(default_factory=dict)
    text: str | None = None
    score: float | None = None
    vector: list[float] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


T = TypeVar("T")


@dataclass(slots=True)
class Page(Generic[T]):
    """One upstream answer: its entries (hits, or items as the upstream sent them) and the
    upstream's token for the page after it (None on the last page, or when its mapping has
    no `next`)."""

    entries: list[T]
    next: str | None = None


@dataclass(frozen=True, slots=True)
class StreamGrant:
    """Readable fields of one stream or collection (None: all), an optional time window and
    an optional list of the only records (by canonical key) it may read."""

    fields: frozenset[str] | None = None
    time_field: str | None = None
    since: str | None = None  # inclusive, ISO 8601
    until: str | None = None  # exclusive, ISO 8601
    resources: frozenset[str] | None = None  # None: every record


@dataclass(frozen=True, slots=True)
class Grant:
    """What a principal may read: streams or collections by name."""

    streams: dict[str, StreamGrant] = field(default_factory=dict)
    grant_id: str | None = None
    expires_at: str | None = None  # ISO 8601; None: the grant itself does not expire

    def for_stream(self, name: str) -> StreamGrant | None:
        return self.streams.get(name)


class TokenKind(StrEnum):
    ANONYMOUS = "anonymous"
    OWNER = "owner"
    CLIENT = "client"


@dataclass(frozen=True, slots=True)
class Principal:
    subject: str | None = None
    client_id: str | None = None
    scopes: frozenset[str] = frozenset()
    kind: TokenKind = TokenKind.ANONYMOUS
    grant: Grant | None = None

    @property
    def is_anonymous(self) -> bool:
        return self.kind is TokenKind.ANONYMOUS


ANONYMOUS = Principal()


class Outcome(StrEnum):
    ALLOW = "allow"
    DENY = "deny"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class Decision:
    outcome: Outcome
    status: int = 200
    code: str | None = None
    reason: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def allowed(self) -> bool:
        return self.outcome is Outcome.ALLOW


ALLOW = Decision(Outcome.ALLOW)


def deny(
    status: int, code: str, reason: str, headers: tuple[tuple[str, str], ...] = (),
    details: dict[str, Any] | None = None,
) -> Decision:
    return Decision(Outcome.DENY, status, code, reason, headers, details or {})
