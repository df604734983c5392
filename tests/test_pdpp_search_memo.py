"""What one stream's index gives a PDPP search is remembered per copy of the stream and grant
shape (issue 24): every grant shape gets what it would get alone, and a new copy of the stream
(a refresh) is searched anew."""

from __future__ import annotations

from pathlib import Path

from gateway.caching import BoundedCache
from gateway.index.sqlite import SqliteIndex
from gateway.surfaces.pdpp import search
from gateway.surfaces.pdpp.config import Pdpp
from gateway.surfaces.pdpp.indexing import indexed
from gateway.surfaces.pdpp.projection import Access
from gateway.surfaces.pdpp.store import Entry
from gateway.surfaces.pdpp.streams import CompiledStream, Record, Snapshot, compile_streams

STREAM = compile_streams(Pdpp.model_validate({"streams": {"notes": {
    "connector_id": "c", "primary_key": "id", "cursor_field": "id",
    "fields": {"id": {"path": "id", "required": True}, "title": {"path": "title"},
               "text": {"path": "text"}},
    "records": {"upstream": "u", "path": "/notes", "mapping": {"id": "id"}},
    "search": {"lexical_fields": ["title", "text"]}}}}), {"u"})["notes"]
RECORDS = [Record("a", {"id": "a", "title": "Refund policy", "text": "Cards are refunded."}),
           Record("b", {"id": "b", "title": "Shipping", "text": "A refund takes a week."}),
           Record("c", {"id": "c", "title": "Refund by card", "text": "Ask the bank."})]
WHOLE = Access(STREAM, frozenset({"id", "title", "text"}))
TITLES = Access(STREAM, frozenset({"id", "title"}))
ONLY_B = Access(STREAM, frozenset({"id", "title", "text"}), resources=frozenset({"b"}))


def entry_of(records: list[Record], path: Path, stream: CompiledStream = STREAM) -> Entry:
    index = SqliteIndex(path, fields=["title", "text"], max_bytes=1 << 24)
    index.replace(indexed(stream, records, None), truncated=False)
    return Entry(Snapshot(records, "2026-01-01T00:00:00Z", False), index, 0.0)


async def found(entry: Entry, access: Access, searches: search.Searches | None
                ) -> list[tuple[str, tuple[str, ...], str | None]]:
    async def entry_for(_: object) -> Entry:
        return entry

    ranked = await search.lexical("refund", [access], [], entry_for, None, True, 10, searches)
    return [(f.record.key, f.matched, (f.snippet or {}).get("text")) for f in ranked.hits]


async def test_each_grant_shape_gets_what_it_would_get_alone(tmp_path):
    entry = entry_of(RECORDS, tmp_path / "notes.db")
    alone = {name: await found(entry, access, None)
             for name, access in (("whole", WHOLE), ("titles", TITLES), ("only_b", ONLY_B))}
    assert alone["whole"] != alone["titles"] != alone["only_b"]
    searches: search.Searches = BoundedCache(100, 1 << 20)
    for _ in range(2):  # the second round answers from what the first remembered
        for name, access in (("whole", WHOLE), ("titles", TITLES), ("only_b", ONLY_B)):
            assert await found(entry, access, searches) == alone[name]
    assert len(searches) == 3
    assert all("text" not in matched for _, matched, _ in alone["titles"])
    assert [key for key, _, _ in alone["only_b"]] == ["b"]


async def test_a_new_copy_of_the_stream_is_searched_anew(tmp_path):
    searches: search.Searches = BoundedCache(100, 1 << 20)
    first = entry_of(RECORDS, tmp_path / "first.db")
    assert {key for key, _, _ in await found(first, WHOLE, searches)} == {"a", "b", "c"}
    changed = [RECORDS[0], Record("b", {"id": "b", "title": "Shipping", "text": "A week."}),
               RECORDS[2]]
    refreshed = entry_of(changed, tmp_path / "refreshed.db")
    assert {key for key, _, _ in await found(refreshed, WHOLE, searches)} == {"a", "c"}


def test_a_page_of_records_is_remembered_per_grant_shape_and_position():
    from datetime import UTC, datetime

    from gateway.surfaces.pdpp.keys import page_key

    def key(access: Access, position: list | None = None, serial: int = 1) -> object:
        return page_key(serial, access, "id", "asc", position, [], 10, None)

    shapes = [WHOLE, TITLES, ONLY_B,
              Access(STREAM, WHOLE.fields, "id", datetime(2026, 1, 1, tzinfo=UTC)),
              Access(STREAM, WHOLE.fields, "id", None, datetime(2026, 1, 1, tzinfo=UTC))]
    assert len({key(access) for access in shapes}) == len(shapes)
    assert key(WHOLE) == key(Access(STREAM, frozenset(WHOLE.fields)))  # the same shape
    assert key(WHOLE) != key(WHOLE, serial=2)  # another copy of the stream
    assert key(WHOLE, ["a", "a"]) != key(WHOLE, ["b", "b"])
    assert key(WHOLE, [["a"], "a"]) is None  # a position that cannot key: not remembered
