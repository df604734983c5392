"""Streams compiled from config: their schema and declarations, and how records are read
from the legacy API (paged list calls, fields mapped with JMESPath, and each record's
visibility). A stream is a resource the policy engine decides on (gateway.policy.engine.
Resource): who sees its records of each visibility is the `record_visibility` rules' to say."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import jmespath

from gateway.index.query import MAX_QUERY_TERMS, query_words
from gateway.mapping import Expression, MappingError
from gateway.model import Page
from gateway.operations import K, Operation, Placeholders, compile_operation, placeholder
from gateway.surfaces.pdpp.config import Pdpp, Stream
from gateway.surfaces.pdpp.conform import FieldRule, Tally, compile_rule, conform, report, schema_of
from gateway.surfaces.pdpp.threads import over_records

SCALARS = frozenset({"string", "integer", "number", "boolean"})
MAX_VISIBILITY = 256  # the longest visibility value a record carries (longer: it has none)
SUBJECT = "the caller's subject (the token's `sub`, or the API key's `subject`)"


@dataclass(frozen=True, slots=True)
class RecordPage(Placeholders):
    """One page of a stream's records for a subject (the token's subject): `limit` records
    from `offset`, the 1-based `page`, and `after`: the previous answer's token when the
    mapping reads one (`next`), else the key of the previous page's last item ("" first)."""

    after_without_next: ClassVar[bool] = True
    configured = "pdpp.streams.<name>.records"

    subject: str = placeholder(SUBJECT)
    limit: int = placeholder("the stream's `page_size` (default 100)")
    offset: int = placeholder("the position of the page's first record: (`{page}` - 1) * "
                              "`{limit}`")
    page: int = placeholder("the page number, from 1")
    after: str = placeholder("the `next` token of the previous answer when the mapping reads "
                             "one, else the key of the previous page's last record (empty on "
                             "the first page)")


@dataclass(frozen=True, slots=True)
class RecordRead(Placeholders):
    """One record of a subject, by its key."""

    configured = "pdpp.streams.<name>.record"
    subject: str = placeholder(SUBJECT)
    id: str = placeholder("the record key from the URL, percent-decoded once")


@dataclass(frozen=True, slots=True)
class FieldSearch(Placeholders):
    """A search of a subject's records: the query text, the fields the caller may match (a
    list, `fields_csv` comma-separated, and `fts5_match`, the query as an SQLite FTS5
    expression matching only them) and `limit`, the stream's max_records."""

    configured = "pdpp.streams.<name>.search.lexical.operation"
    query: str = placeholder("the request's `q`")
    fields: list[str] = placeholder("the fields the caller may match (the grant's, among "
                                    "`lexical_fields`), a list: a repeated query parameter, or "
                                    "a JSON list in a body")
    fields_csv: str = placeholder("the same fields, comma-separated")
    fts5_match: str = placeholder(
        "the query as an SQLite FTS5 expression over only those fields, `{name summary} : "
        "(\"word\" \"word\")`: each distinct word of `q` "
        f"(at most {MAX_QUERY_TERMS}) a quoted string, so nothing typed "
        "is read as FTS5 syntax (for SQLite-backed APIs such as Datasette: "
        "`_search={fts5_match}&_searchmode=raw`)")
    subject: str = placeholder(SUBJECT)
    limit: int = placeholder("the stream's `max_records`, or the operation's `max_items` when "
                             "lower")

    @classmethod
    def of(cls, query: str, fields: tuple[str, ...], subject: str, limit: int) -> FieldSearch:
        return cls(query=query, fields=list(fields), fields_csv=",".join(fields),
                   fts5_match=fts5_match(query, fields), subject=subject, limit=limit)


def fts5_match(query: str, fields: tuple[str, ...]) -> str:
    """`{field field} : ("word" "word")`: every distinct word of the query (at most
    MAX_QUERY_TERMS, gateway.index.query) a quoted FTS5 string, so nothing the caller typed is
    read as FTS5 syntax (an operator, a column filter of its own), all of them matched within
    `fields` only. Field names are FTS5 barewords (config allows no others)."""
    words = query_words(query)
    strings = " ".join('"' + word.replace('"', '""') + '"' for word in words)
    return "{" + " ".join(fields) + "} : (" + strings + ")"


class ReadItems(Protocol):
    """One upstream operation called with its kind's values: the items it answered."""

    def __call__(self, operation: Operation[K], values: K) -> Awaitable[list[Any]]: ...


class ReadPage(Protocol):
    """`ReadItems`, with the upstream's token for the page after the answer."""

    def __call__(self, operation: Operation[K], values: K) -> Awaitable[Page[Any]]: ...


@dataclass(frozen=True, slots=True)
class Record:
    """One record as read from the upstream: every mapped field, and the visibility its item
    carries (`record_visibility`; never a field). What a caller is shown of it is
    `Access.view(record)` (projection.py), never this."""

    key: str
    data: Mapping[str, Any]
    visibility: str | None = None


@dataclass(frozen=True, slots=True)
class CompiledStream:
    name: str
    settings: Stream
    rules: tuple[FieldRule, ...]  # every field: its path and the values its schema admits
    list_op: Operation[RecordPage]
    record_op: Operation[RecordRead] | None
    lexical_op: Operation[FieldSearch] | None
    lexical_fields: tuple[str, ...]  # declared and a top-level string of the schema
    semantic_fields: tuple[str, ...]
    required: frozenset[str]  # the schema-required fields (asked of on every request)
    visibility_path: Expression | None = None  # where an item's visibility is

    @property
    def connector_id(self) -> str:
        return self.settings.connector_id

    # As a resource the policy engine decides on (gateway.policy.engine.Resource): read by
    # the tokens whose grant covers it (never public, no scope of its own), without stored
    # vectors; its records carry their own visibility when `record_visibility` is set.
    @property
    def public(self) -> bool:
        return False

    @property
    def scopes(self) -> frozenset[str]:
        return frozenset()

    @property
    def returns_vectors(self) -> bool:
        return False

    @property
    def visibility(self) -> str:
        return self.settings.visibility

    @property
    def records_carry_visibility(self) -> bool:
        return self.visibility_path is not None

    @property
    def per_subject(self) -> bool:
        """Whether each token subject has records of its own (`records_scope`)."""
        scope = self.settings.records_scope
        if scope != "auto":
            return scope == "subject"
        return any(op is not None and "subject" in op.placeholders
                   for op in (self.list_op, self.record_op))

    @property
    def emitted_field(self) -> str:
        """The field a record's `emitted_at` is read from."""
        return self.settings.emitted_at or self.settings.cursor_field

    @property
    def scalar_fields(self) -> frozenset[str]:
        return frozenset(n for n, spec in self.settings.fields.items() if spec.type in SCALARS)

    def declared(self, kind: str) -> tuple[str, ...]:
        return self.lexical_fields if kind == "lexical" else self.semantic_fields

    def schema(self) -> dict[str, Any]:
        """The JSON Schema (Draft 2020-12) of a record's data: every record sent holds to it."""
        properties = {name: schema_of(spec) for name, spec in self.settings.fields.items()}
        required = sorted({*self.required, self.settings.primary_key})
        return {"type": "object", "properties": properties, "required": required}

    def record(self, item: Any, tally: Tally) -> Record | None:
        """One upstream item as a record of its schema (conform.py); None without a key or
        when a required field breaks the schema (counted in `tally`)."""
        data = conform(self.rules, item, tally)
        if data is None:
            return None
        key = data.get(self.settings.primary_key)
        if key is None or isinstance(key, bool | dict | list):
            return None
        return Record(str(key), data, self._visibility(item))

    def _visibility(self, item: Any) -> str | None:
        """The visibility `item` carries, when the stream reads one (`visibility_of` says
        what a record without one has)."""
        if self.visibility_path is None:
            return None
        value = self.visibility_path.search(item)
        return value if isinstance(value, str) and len(value) <= MAX_VISIBILITY else None


def searchable(stream: Stream, declared: list[str]) -> tuple[str, ...]:
    """The declared fields v1 allows: top-level string fields of the schema (others omitted)."""
    return tuple(name for name in dict.fromkeys(declared)
                 if name in stream.fields and stream.fields[name].type == "string")


def compile_streams(pdpp: Pdpp, upstreams: set[str]) -> dict[str, CompiledStream]:
    """Every stream checked and compiled; `MappingError` names the bad path."""
    return {name: _compile(name, stream, upstreams) for name, stream in pdpp.streams.items()}


def _compile(name: str, stream: Stream, upstreams: set[str]) -> CompiledStream:
    where = f"pdpp.streams.{name}"
    for field in (stream.primary_key, stream.cursor_field, stream.consent_time_field,
                  stream.emitted_at, *stream.range_filters):
        if field is not None and field not in stream.fields:
            raise MappingError(where, f"{field!r} is not one of the stream's fields")
    if stream.fields[stream.primary_key].nullable:
        raise MappingError(f"{where}.fields.{stream.primary_key}.nullable",
                           "the primary key cannot be nullable")
    rules = [compile_rule(field, spec, _path(spec.path, f"{where}.fields.{field}.path"),
                          required=spec.required or field == stream.primary_key)
             for field, spec in stream.fields.items()]
    visibility = stream.record_visibility
    lexical = stream.search.lexical
    return CompiledStream(
        name, stream, tuple(rules),
        compile_operation(stream.records, f"{where}.records", upstreams, RecordPage),
        compile_operation(stream.record, f"{where}.record", upstreams, RecordRead)
        if stream.record else None,
        compile_operation(lexical.operation, f"{where}.search.lexical.operation", upstreams,
                          FieldSearch) if not isinstance(lexical, str) else None,
        searchable(stream, stream.search.lexical_fields),
        searchable(stream, stream.search.semantic_fields),
        frozenset(n for n, spec in stream.fields.items() if spec.required),
        _path(visibility.path, f"{where}.record_visibility.path")
        if visibility is not None else None,
    )


def _path(text: str, where: str) -> Expression:
    try:
        return Expression(jmespath.compile(text))
    except jmespath.exceptions.JMESPathError as exc:
        raise MappingError(where, f"invalid JMESPath: {exc}") from None


@dataclass(frozen=True, slots=True)
class Snapshot:
    records: list[Record]
    captured_at: str
    truncated: bool  # max_records was reached: more records may exist upstream


async def read_all(stream: CompiledStream, subject: str,
                   read: ReadPage) -> tuple[list[Record], bool]:
    """Every record of a stream for one subject, paging until the upstream gives no `next`
    token (when its mapping reads one), or else until a short or repeated page."""
    size, limit = stream.settings.page_size, stream.settings.max_records
    by_token = stream.list_op.mapping.next is not None
    records: dict[str, Record] = {}
    tally: Tally = Counter()
    try:
        after = ""
        for page in range(limit // size + 1):
            answer = await read(stream.list_op, RecordPage(
                subject=subject, limit=size, offset=page * size, page=page + 1, after=after))
            mapped = await over_records(  # x4: mapping an item costs more than a pass
                4 * len(answer.entries), functools.partial(_records, stream, answer.entries,
                                                           tally))
            fresh = [r for r in mapped if r is not None and r.key not in records]
            for record in fresh:
                records[record.key] = record
            if len(records) >= limit:
                return list(records.values())[:limit], True
            if by_token and answer.next is None:
                return list(records.values()), False
            if not by_token and (len(answer.entries) < size or not fresh):
                return list(records.values()), False
            after = answer.next if by_token and answer.next is not None else fresh[-1].key
        return list(records.values()), True
    finally:
        report(stream.name, tally)


async def search_upstream(stream: CompiledStream, values: FieldSearch,
                          read: ReadItems) -> tuple[list[Record], bool]:
    """The records the stream's upstream search answered, each once and in its order, mapped
    as the stream's records are; and whether it answered all it was asked for (`limit`: more
    may match)."""
    assert stream.lexical_op is not None
    items = await read(stream.lexical_op, values)
    tally: Tally = Counter()
    found: dict[str, Record] = {}
    # up to max_items (1,000 and more) mapped as a records page is: off the loop when many
    for record in await over_records(4 * len(items),
                                     functools.partial(_records, stream, items, tally)):
        if record is not None:
            found.setdefault(record.key, record)
    report(stream.name, tally)
    return list(found.values()), len(items) >= values.limit


def _records(stream: CompiledStream, items: list[Any], tally: Tally) -> list[Record | None]:
    return [stream.record(item, tally) for item in items]


async def read_one(stream: CompiledStream, subject: str, key: str,
                   read: ReadItems) -> Record | None:
    """One record through the stream's record operation."""
    assert stream.record_op is not None
    items = await read(stream.record_op, RecordRead(subject=subject, id=key))
    tally: Tally = Counter()
    found = [r for item in items if (r := stream.record(item, tally)) is not None and r.key == key]
    report(stream.name, tally)
    return found[0] if found else None
