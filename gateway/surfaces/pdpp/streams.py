"""Streams compiled from config: their schema and declarations, and how records are read
from the legacy API (paged list calls, fields mapped with JMESPath)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jmespath
from jmespath.parser import ParsedResult

from gateway.mapping import MappingError
from gateway.operations import Operation, compile_operation
from gateway.surfaces.pdpp.config import Pdpp, Stream

LIST_PLACEHOLDERS = frozenset({"subject", "page", "after"})
SEARCH_PLACEHOLDERS = frozenset({"subject", "fields", "fields_csv"})
SCALARS = frozenset({"string", "integer", "number", "boolean"})

FetchJson = Callable[[Any], Awaitable[Any]]  # one UpstreamCall -> the upstream's JSON


@dataclass(frozen=True, slots=True)
class Record:
    """One record as read from the upstream: every mapped field. What a caller is shown of it
    is `Access.view(record)` (projection.py), never this."""

    key: str
    data: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class CompiledStream:
    name: str
    settings: Stream
    paths: dict[str, ParsedResult]
    list_op: Operation
    record_op: Operation | None
    lexical_op: Operation | None
    lexical_fields: tuple[str, ...]  # declared and a top-level string of the schema
    semantic_fields: tuple[str, ...]

    @property
    def connector_id(self) -> str:
        return self.settings.connector_id

    @property
    def required(self) -> frozenset[str]:
        return frozenset(n for n, spec in self.settings.fields.items() if spec.required)

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
        properties = {}
        for name, spec in self.settings.fields.items():
            properties[name] = {"type": spec.type, **({"format": spec.format}
                                                      if spec.format else {})}
        required = sorted({*self.required, self.settings.primary_key})
        return {"type": "object", "properties": properties, "required": required}

    def record(self, item: Any) -> Record | None:
        """One upstream item as a record; None without a key."""
        data = {name: path.search(item) for name, path in self.paths.items()}
        key = data.get(self.settings.primary_key)
        if key is None or isinstance(key, bool | dict | list):
            return None
        return Record(str(key), data)


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
    paths = {}
    for field, spec in stream.fields.items():
        try:
            paths[field] = jmespath.compile(spec.path)
        except jmespath.exceptions.JMESPathError as exc:
            raise MappingError(f"{where}.fields.{field}.path", f"invalid JMESPath: {exc}") from None
    lexical = stream.search.lexical
    return CompiledStream(
        name, stream, paths,
        compile_operation(stream.records, f"{where}.records", upstreams, LIST_PLACEHOLDERS),
        compile_operation(stream.record, f"{where}.record", upstreams, LIST_PLACEHOLDERS)
        if stream.record else None,
        compile_operation(lexical.operation, f"{where}.search.lexical.operation", upstreams,
                          SEARCH_PLACEHOLDERS) if not isinstance(lexical, str) else None,
        searchable(stream, stream.search.lexical_fields),
        searchable(stream, stream.search.semantic_fields),
    )


@dataclass(frozen=True, slots=True)
class Snapshot:
    records: list[Record]
    captured_at: str
    truncated: bool  # max_records was reached: more records may exist upstream


async def read_all(stream: CompiledStream, subject: str, target: Any,
                   fetch: FetchJson) -> tuple[list[Record], bool]:
    """Every record of a stream for one subject, paging until a short or repeated page."""
    size, limit = stream.settings.page_size, stream.settings.max_records
    records: dict[str, Record] = {}
    after = ""
    for page in range(limit // size + 1):
        values = {"subject": subject, "limit": size, "offset": page * size, "page": page + 1,
                  "after": after, "fetch": size, "top_k": size, "query": "", "vector": [],
                  "id": "", "visibility": ""}
        document = await fetch(stream.list_op.call(target, values))
        items = _items(stream.list_op, document)
        fresh = [r for item in items if (r := stream.record(item)) and r.key not in records]
        for record in fresh:
            records[record.key] = record
        if len(records) >= limit:
            return list(records.values())[:limit], True
        if len(items) < size or not fresh:
            return list(records.values()), False
        after = fresh[-1].key
    return list(records.values()), True


async def read_one(stream: CompiledStream, subject: str, key: str, target: Any,
                   fetch: FetchJson) -> Record | None:
    """One record through the stream's record operation."""
    assert stream.record_op is not None
    values = {"subject": subject, "id": key, "limit": 1, "offset": 0, "page": 1, "after": "",
              "fetch": 1, "top_k": 1, "query": "", "vector": [], "visibility": ""}
    items = _items(stream.record_op, await fetch(stream.record_op.call(target, values)))
    found = [r for item in items if (r := stream.record(item)) is not None and r.key == key]
    return found[0] if found else None


def _items(operation: Operation, document: Any) -> list[Any]:
    items = operation.mapping.items
    found = items.search(document) if items is not None else document
    if isinstance(found, dict):
        return [found]
    return found if isinstance(found, list) else []
