"""Paging PDPP answers: one page of a stream's records read from its ordered copy, what a
records or search cursor is bound to, and a cursor read back as a keyset position or an offset
(refused in PDPP's dialect, `invalid_cursor`)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from gateway.model import Principal
from gateway.surfaces.cursors import CursorSigner, InvalidCursor
from gateway.surfaces.pdpp import filters, render, request
from gateway.surfaces.pdpp.keys import grant_digest
from gateway.surfaces.pdpp.projection import Access
from gateway.surfaces.pdpp.records import first_after, position_of
from gateway.surfaces.pdpp.store import Entry
from gateway.surfaces.pdpp.streams import Record
from gateway.surfaces.pdpp.threads import over_records

# A page of records as rendered, and the position its cursor continues after (None: the end).
Page = tuple[list[dict[str, Any]], list[Any] | None]


@dataclass(frozen=True, slots=True)
class Listed:
    """What a records request asks for of a stream it may read."""

    access: Access
    limit: int
    order: str
    wanted: frozenset[str] | None
    filters: list[filters.Filter]

    @property
    def field(self) -> str | None:
        return self.access.order_field


async def read_page(entry: Entry, asked: Listed, position: list[Any] | None) -> Page:
    """One page of records as rendered, and the position of its last record when more
    follow (what its cursor continues after)."""
    access, field, limit = asked.access, asked.field, asked.limit

    def listed() -> list[Record]:
        """The page and one record more: read from the cursor's place in the ordered
        records on, until the page is full (not the whole stream each time)."""
        ordered = entry.ordered(field, asked.order)
        rows = []
        start = first_after(ordered, position, field, asked.order)
        for record in itertools.islice(ordered, start, None):
            view = record if access.whole else access.view(record)
            if view is not None and filters.matches(view, asked.filters, access):
                rows.append(view)
                if len(rows) > limit:
                    break
        return rows

    rows = await over_records(len(entry.snapshot.records), listed)
    shown, more = rows[:limit], len(rows) > limit
    captured = entry.snapshot.captured_at
    return ([render.record(access, r, asked.wanted, captured) for r in shown],
            position_of(shown[-1], field) if more else None)


def records_binding(asked: Listed, principal: Principal) -> dict[str, Any]:
    """What a records cursor is bound to: the stream, order, filters, and who asks under
    which grant."""
    return {"e": "records", "s": asked.access.stream.name, "o": asked.order,
            "k": asked.field, "f": _filters(asked.filters), "g": grant_digest(principal)}


def search_binding(q: str, semantic: bool, streams: list[str] | None,
                   found: list[filters.Filter], principal: Principal) -> dict[str, Any]:
    """What a search cursor is bound to: the query, the streams named, filters and grant."""
    return {"e": "semantic" if semantic else "lexical", "q": q, "s": streams,
            "f": _filters(found), "g": grant_digest(principal)}


class Cursors:
    """PDPP's cursors, sealed by the shared signer."""

    def __init__(self, secret: bytes, ttl: int) -> None:
        self.signer = CursorSigner(secret, ttl)

    def position(self, cursor: str | None, binding: dict[str, Any]) -> list[Any] | None:
        """The keyset position a records cursor continues after (None: no cursor)."""
        if cursor is None:
            return None
        position = self._checked(cursor, binding)
        if not (isinstance(position, list) and len(position) == 2
                and isinstance(position[1], str)):
            raise request.invalid("The cursor is not valid.", "cursor", "invalid_cursor")
        return position

    def offset(self, cursor: str | None, binding: dict[str, Any]) -> int:
        """The offset a search cursor continues at (0: no cursor)."""
        if cursor is None:
            return 0
        offset = self._checked(cursor, binding)
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise request.invalid("The cursor is not valid.", "cursor", "invalid_cursor")
        return offset

    def _checked(self, cursor: str, binding: dict[str, Any]) -> Any:
        try:
            return self.signer.position(cursor, binding)
        except InvalidCursor as exc:
            raise request.invalid(str(exc), "cursor", "invalid_cursor") from None


def _filters(found: list[filters.Filter]) -> list[list[Any]]:
    return sorted([f.field, f.op, f.value] for f in found)
