"""What a surface learnt by reading one record after a search found it (its visibility, its
whole text), remembered so the next search that finds the record does not read it again.

An entry is keyed by a scope the surface gives (at least the resource, who the upstream is told
the caller is, and anything else the read is sent) and the record's id: it only ever stands in
for a read that would have been the same request. It is used while the search hit's validators
(`updated_at`, `content_hash`, as the search mapping gives them) equal those of the record it
was learnt from, so a record changed upstream is read again, and a hit without a validator is
always read. A change upstream that touches neither validator is seen once the entry is older
than `ttl`: the staleness this cache allows, and why its `ttl` is a config choice.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Annotated, Any, Generic, TypeVar

from pydantic import Field

from gateway.caching import BoundedCache
from gateway.model import Hit
from gateway.strict import Strict

VALIDATORS = ("updated_at", "content_hash")
MAX_VALIDATOR = 256  # the longest validator compared and kept (characters)
OVERHEAD = 400  # bytes an entry costs beyond what its owner counts: tuples, the dict slot

V = TypeVar("V")
Validators = tuple[str | int | None, ...]


class RecordCacheSettings(Strict):
    ttl: Annotated[int, Field(ge=0, le=86400)] = Field(
        60, description="Seconds what was learnt of a record is used at most, while the search "
        "hit's updated_at / content_hash still equal the record's; 0: nothing is remembered "
        "(every record is read again).")
    max_entries: Annotated[int, Field(ge=1, le=1_000_000)] = Field(
        10_000, description="Records remembered at most, per collection or source and process; "
        "the least recently used goes first.")
    max_bytes: Annotated[int, Field(ge=65_536, le=1 << 30)] = Field(
        4 * 1024 * 1024, description="Bytes of remembered values at most, per collection or "
        "source and process (an estimate of their size).")


class RecordCache(Generic[V]):
    """Values learnt from records, per scope and id, with the record's validators."""

    __slots__ = ("_entries",)

    def __init__(self, settings: RecordCacheSettings) -> None:
        self._entries: BoundedCache[tuple[Hashable, str], tuple[Validators, V]] = \
            BoundedCache(settings.max_entries, settings.max_bytes, settings.ttl)

    @classmethod
    def of(cls, settings: RecordCacheSettings) -> RecordCache[V] | None:
        """A cache, or None when the settings remember nothing."""
        return cls(settings) if settings.ttl > 0 else None

    def recall(self, scope: Hashable, hit: Hit) -> V | None:
        """What was learnt of the record `hit` found, while its validators still match."""
        found = self._entries.get((scope, hit.id))
        if found is None:
            return None
        seen = validators(hit.metadata)
        return found[1] if seen is not None and agree(seen, found[0]) else None

    def learn(self, scope: Hashable, hit: Hit, record: Hit, value: V, size: int) -> None:
        """Remember `value`, learnt by reading `record` (about `size` bytes beyond the key and
        validators), when the record carries the validators `hit` gives."""
        seen, known = validators(hit.metadata), validators(record.metadata)
        if seen is None or known is None or not agree(seen, known):
            return
        size += OVERHEAD + len(hit.id) + sum(len(v) if isinstance(v, str) else 32 for v in known)
        self._entries.put((scope, hit.id), (known, value), size)


def validators(metadata: dict[str, Any]) -> Validators | None:
    """A record's validators (`VALIDATORS`, in order); None when it has none, or one that is
    not a short string or an integer (never compared, never kept)."""
    updated_at, content_hash = metadata.get("updated_at"), metadata.get("content_hash")
    if updated_at is None and content_hash is None:
        return None
    if not (_comparable(updated_at) and _comparable(content_hash)):
        return None
    return updated_at, content_hash


def _comparable(value: Any) -> bool:
    return value is None or type(value) is int \
        or (isinstance(value, str) and len(value) <= MAX_VALIDATOR)


def agree(seen: Validators, known: Validators) -> bool:
    """Every validator the search hit gives is the record's."""
    return (seen[0] is None or seen[0] == known[0]) and (seen[1] is None or seen[1] == known[1])
