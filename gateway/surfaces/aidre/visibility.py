"""Record visibilities a search learnt through the chunk operation (`record_visibility: lookup:
chunk`), remembered (gateway.record_cache) so the next search does not read the same records
again: per collection, per caller as the upstream is told who asks (the identity headers its
calls carry) and per `{visibility}` the chunk call is sent, while the search hit's validators
are the chunk answer's."""

from __future__ import annotations

from gateway.model import Hit
from gateway.record_cache import RecordCache

MAX_VISIBILITY = 256  # the longest visibility value remembered (characters)

Cache = RecordCache[str]


class Memo:
    """One search's view of a collection's cache."""

    __slots__ = ("_cache", "_scope", "_scope_size")

    def __init__(self, cache: Cache, collection: str, caller: bytes, visibility: str) -> None:
        self._cache = cache
        self._scope = (collection, caller, visibility)
        self._scope_size = len(collection) + len(caller) + len(visibility)

    def recall(self, hit: Hit) -> bool:
        """Give `hit` the visibility remembered for it, when its validators still match."""
        found = self._cache.recall(self._scope, hit)
        if found is None:
            return False
        hit.metadata["visibility"] = found
        return True

    def learn(self, hit: Hit, record: Hit | None) -> None:
        """Remember what the chunk answer `record` says of `hit`'s visibility."""
        visibility = record.metadata.get("visibility") if record is not None else None
        if record is None or not isinstance(visibility, str) \
                or len(visibility) > MAX_VISIBILITY:
            return
        self._cache.learn(self._scope, hit, record, visibility,
                          self._scope_size + len(visibility))
