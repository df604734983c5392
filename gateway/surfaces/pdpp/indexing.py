"""The gateway's own index of a stream's records (gateway.index): where the index of one stream
(or one subject's records of it) lives, and what each record puts in it: its data (with its
visibility, under a key no field can have), a version (a digest of both, to tell what a refresh
changes), the text of each searchable field and a vector of each field searched by meaning.

Everything here may block or take time that grows with the stream: callers run it in a PDPP
thread (threads.py), never on the event loop."""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from gateway.embeddings.base import Embedder
from gateway.embeddings.config import EmbedderSettings
from gateway.embeddings.providers import embedder_for
from gateway.embeddings.running import clip
from gateway.index.base import IndexedRecord, SearchIndex
from gateway.private_files import private_folder
from gateway.surfaces.pdpp.config import SearchIndexSettings
from gateway.surfaces.pdpp.streams import CompiledStream, Record

EMBED_BATCH = 256  # texts per call of the embedder
# A record's visibility in its stored data: no field name can start with "@" (config.FieldName).
VISIBILITY_KEY = "@visibility"


def searchable(stream: CompiledStream) -> tuple[str, ...]:
    """The fields the index holds texts of: every field a search of either kind may match."""
    return tuple(dict.fromkeys((*stream.lexical_fields, *stream.semantic_fields)))


def open_index(settings: SearchIndexSettings, stream: CompiledStream, subject: str,
               source: str, embedder: EmbedderSettings | None) -> SearchIndex:
    """The index of `stream` (of `subject`'s records of it, when not ""), read from `source`
    (where the upstreams are), opened or made. Its name holds a digest of both and of the
    stream's settings: a stream configured otherwise, or read from elsewhere, gets another
    index, never one built for different fields or records."""
    model = embedder.spec if embedder is not None else None
    name = _name(stream, subject, source + repr(model))
    if settings.engine == "postgres":
        from gateway.index.postgres import PostgresIndex

        assert settings.dsn is not None
        return PostgresIndex.connect(
            settings.dsn.get_secret_value(), name, texts=searchable(stream),
            vectors=stream.semantic_fields if model is not None else (),
            dimensions=model.dimensions if model is not None and stream.semantic_fields
            else None, text_config="simple", max_bytes=settings.max_bytes)
    from gateway.index.sqlite import SqliteIndex

    folder = private_folder(Path(settings.path))  # it holds the subjects' records
    return SqliteIndex(folder / f"{name}.db", fields=searchable(stream),
                       max_bytes=settings.max_bytes)


def engine_reachable(settings: SearchIndexSettings) -> bool:
    """Whether the indexes' engine can be reached now (a local one always is)."""
    if settings.engine != "postgres" or settings.dsn is None:
        return True
    from gateway.index.postgres.pool import reachable

    return reachable(settings.dsn.get_secret_value())


def drop_index(settings: SearchIndexSettings, index: SearchIndex) -> None:
    """Close `index` and remove what it holds (an evicted per-subject index)."""
    path = getattr(index, "path", None)
    drop = getattr(index, "drop", None)
    if drop is not None:
        drop()
    index.close()
    if isinstance(path, Path):
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


def indexed(stream: CompiledStream, records: Sequence[Record],
            embedder: EmbedderSettings | None) -> list[IndexedRecord]:
    """Each record as the index holds it: its semantic fields embedded (texts past the
    embedder's `max_chars` cut there), when semantic search is served."""
    texts = searchable(stream)
    vectors = _vectors(stream, records, embedder) if embedder is not None else {}
    return [IndexedRecord(
        key=record.key, version=version(record), data=stored(record),
        texts={f: value for f in texts if isinstance(value := record.data.get(f), str)},
        vectors=vectors.get(record.key, {}),
    ) for record in records]


def _vectors(stream: CompiledStream, records: Sequence[Record],
             settings: EmbedderSettings) -> dict[str, dict[str, Sequence[float]]]:
    """record key -> semantic field -> vector, embedded in batches."""
    wanted = [(record.key, field, clip(value, settings)[0]) for record in records
              for field in stream.semantic_fields
              if isinstance(value := record.data.get(field), str) and value.strip()]
    embedder: Embedder = embedder_for(settings)
    found: dict[str, dict[str, Sequence[float]]] = {}
    for start in range(0, len(wanted), EMBED_BATCH):
        batch = wanted[start:start + EMBED_BATCH]
        for (key, field, _), vector in zip(batch, embedder.embed([t for *_, t in batch]),
                                           strict=True):
            found.setdefault(key, {})[field] = array("f", vector)
    return found


def stored(record: Record) -> dict[str, Any]:
    """The record's data as the index keeps it: with its visibility, when it carries one."""
    data = dict(record.data)
    if record.visibility is not None:
        data[VISIBILITY_KEY] = record.visibility
    return data


def restored(key: str, data: dict[str, Any]) -> Record:
    """A record as `stored` kept it."""
    visibility = data.pop(VISIBILITY_KEY, None)
    return Record(key, data, visibility if isinstance(visibility, str) else None)


def version(record: Record) -> str:
    return hashlib.sha256(orjson.dumps(stored(record), option=orjson.OPT_SORT_KEYS,
                                       default=str)).hexdigest()[:32]


def _name(stream: CompiledStream, subject: str, source: str) -> str:
    digest = hashlib.sha256((stream.settings.model_dump_json() + source).encode()).hexdigest()
    digest = digest[:12]
    name = f"{stream.name}-{digest}"
    if subject:
        name += "-" + hashlib.sha256(subject.encode()).hexdigest()[:16]
    return name
