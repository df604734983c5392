"""What PDPP remembers of a caller's requests, so that a caller asking again computes only what
changed: its access to a stream (with the policy decisions that made it, noted again on every
request: the decision log reads the same) and the rendered body of a page of records (whose
next-page cursor is reused for at most CURSOR_REUSE seconds, so it expires no later than a fresh
one would).

Both are keyed by the very principal the authenticator keeps for a token (held, and compared by
identity: never another caller's, never a principal whose grant changed) and the pipeline whose
policy decided (a reloaded policy comes with another pipeline); both are bounded. Whatever is
checked per request (the grant's expiry, the parameters, an incoming cursor) still is.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from dataclasses import dataclass

from gateway.caching import BoundedCache
from gateway.model import Principal
from gateway.policy.decisions import Again
from gateway.surfaces.pdpp.projection import Access

REMEMBERED = 1024  # entries of each memo
BODY_BYTES = 8 * 1024 * 1024  # rendered pages kept, in all
CURSOR_REUSE = 1.0  # seconds a rendered page's next_cursor is served again (cursor_ttl >= 60)
_ENTRY_BYTES = 200  # what a remembered entry costs beside its body, about


@dataclass(frozen=True, slots=True)
class Decided:
    """A stream as a caller may read it, and the decisions that said so."""

    principal: Principal
    pipeline: object
    access: Access
    decisions: Again


@dataclass(frozen=True, slots=True)
class Rendered:
    """A page's body as sent, good until `until` (monotonic seconds)."""

    principal: Principal
    pipeline: object
    body: bytes
    until: float


class Memo:
    """One config generation's memos (the service's)."""

    def __init__(self) -> None:
        self._accesses: BoundedCache[Hashable, Decided] = BoundedCache(
            REMEMBERED, REMEMBERED * _ENTRY_BYTES * 64)
        self._bodies: BoundedCache[Hashable, Rendered] = BoundedCache(REMEMBERED, BODY_BYTES)

    def access(self, principal: Principal, pipeline: object, stream: str) -> Decided | None:
        found = self._accesses.get((id(principal), id(pipeline), stream))
        if found is None or found.principal is not principal or found.pipeline is not pipeline:
            return None
        return found

    def keep_access(self, decided: Decided) -> None:
        key = (id(decided.principal), id(decided.pipeline), decided.access.stream.name)
        self._accesses.put(key, decided, _ENTRY_BYTES * (1 + len(decided.decisions.decisions)))

    def body(self, principal: Principal, pipeline: object, key: Hashable) -> bytes | None:
        """The body rendered for this caller and pipeline and `key` (everything else the
        page depends on), while it is good."""
        found = self._bodies.get((id(principal), id(pipeline), key))
        if found is None or found.principal is not principal or found.pipeline is not pipeline \
                or time.monotonic() >= found.until:
            return None
        return found.body

    def keep_body(self, principal: Principal, pipeline: object, key: Hashable, body: bytes,
                  cursor: bool) -> None:
        """Keep a rendered body: while its copy is served when it carries no cursor, for
        CURSOR_REUSE seconds when it does."""
        until = time.monotonic() + CURSOR_REUSE if cursor else float("inf")
        self._bodies.put((id(principal), id(pipeline), key),
                         Rendered(principal, pipeline, body, until), _ENTRY_BYTES + len(body))
