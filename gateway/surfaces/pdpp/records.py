"""Record-list order: by (cursor_field, primary key), absent values last, and the
direction-bound keyset position a page cursor continues after."""

from __future__ import annotations

from typing import Any

from gateway.surfaces.pdpp.streams import Record


def sort_records(records: list[Record], field: str, order: str) -> list[Record]:
    present = [r for r in records if r.data.get(field) is not None]
    absent = sorted((r for r in records if r.data.get(field) is None), key=lambda r: r.key)
    present.sort(key=lambda r: (_value(r.data.get(field)), r.key), reverse=order == "desc")
    return present + absent


def page_after(records: list[Record], position: list[Any] | None, field: str,
               order: str) -> list[Record]:
    """The records strictly after `position` ([cursor value, key]) in this order."""
    if position is None:
        return records
    value, key = position
    return [r for r in records if _after(r.data.get(field), r.key, value, key, order)]


def _after(value: Any, key: str, last_value: Any, last_key: str, order: str) -> bool:
    if last_value is None:  # the previous page ended among the absent values
        return value is None and key > last_key
    if value is None:
        return True
    mine, theirs = (_value(value), key), (_value(last_value), last_key)
    return mine > theirs if order == "asc" else mine < theirs


def _value(value: Any) -> tuple[int, Any]:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, value)
    return (1, str(value))
