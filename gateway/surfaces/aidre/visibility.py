"""Record visibilities a search learnt through the chunk operation (`record_visibility: lookup:
chunk`), remembered so the next search does not read the same records again.

An entry is keyed by the collection, by who asks as the upstream sees it (the identity headers
its calls carry) and by what the chunk call is sent (the record id and the `{visibility}` the
caller may see): it is only ever used for a call that would have been the same request. It is
used while the search hit's validators (`updated_at`, `content_hash`, as the search mapping
gives them) equal those of the chunk answer it was learnt from, so a record changed upstream is
read again; a hit without a validator is always read. A visibility changed upstream without
either validator changing is seen once the entry is older than the cache's `ttl`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.caching import BoundedCache
from gateway.model import Hit
from gateway.surfaces.aidre.config import VisibilityCache

VALIDATORS = ("updated_at", "content_hash")
MAX_PART = 256  # the longest validator or visibility kept (characters)
_OVERHEAD = 400  # bytes an entry costs beyond its strings: tuples, the entry, the dict slot

Validators = tuple[str | int | None, ...]
Scope = tuple[str, bytes, str]  # collection, caller digest, the {visibility} sent


@dataclass(frozen=True, slots=True)
class Learnt:
    validators: Validators  # the chunk answer's
    visibility: str


Cache = BoundedCache[tuple[Scope, str], Learnt]


def new_cache(settings: VisibilityCache) -> Cache | None:
    if settings.ttl <= 0:
        return None
    return BoundedCache(settings.max_entries, settings.max_bytes, settings.ttl)


class Memo:
    """One search's view of a collection's cache."""

    __slots__ = ("_cache", "_scope")

    def __init__(self, cache: Cache, collection: str, caller: bytes, visibility: str) -> None:
        self._cache = cache
        self._scope: Scope = (collection, caller, visibility)

    def recall(self, hit: Hit) -> bool:
        """Give `hit` the visibility remembered for it, when its validators still match."""
        seen = validators(hit.metadata)
        if seen is None:
            return False
        found = self._cache.get((self._scope, hit.id))
        if found is None or not _agree(seen, found.validators):
            return False
        hit.metadata["visibility"] = found.visibility
        return True

    def learn(self, hit: Hit, record: Hit | None) -> None:
        """Remember what the chunk answer `record` says of `hit`'s visibility, when both carry
        the same validators."""
        if record is None:
            return
        visibility = record.metadata.get("visibility")
        seen, known = validators(hit.metadata), validators(record.metadata)
        if not isinstance(visibility, str) or len(visibility) > MAX_PART or seen is None \
                or known is None or not _agree(seen, known):
            return
        size = _OVERHEAD + len(hit.id) + len(visibility) + sum(map(_size, known)) \
            + sum(map(_size, self._scope[0::2]))
        self._cache.put((self._scope, hit.id), Learnt(known, visibility), size)


def validators(metadata: dict[str, Any]) -> Validators | None:
    """A record's validators; None when it has none, or one that is not a short string or an
    integer (never compared, never kept)."""
    found = tuple(metadata.get(name) for name in VALIDATORS)
    if all(value is None for value in found):
        return None
    for value in found:
        if value is not None and not ((isinstance(value, str) and len(value) <= MAX_PART)
                                      or type(value) is int):
            return None
    return found


def _agree(seen: Validators, known: Validators) -> bool:
    """Every validator the search hit gives is the chunk answer's."""
    return all(s is None or s == k for s, k in zip(seen, known, strict=True))


def _size(value: object) -> int:
    return len(value) if isinstance(value, str) else 32
