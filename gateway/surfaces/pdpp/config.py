"""Config models of the `pdpp` section: streams mapped onto the legacy API, and search."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, SecretStr, model_validator

from gateway.embeddings.config import EmbedderSettings, HashSettings
from gateway.operations import UpstreamOperation
from gateway.policy.resources import RecordScopes
from gateway.strict import Strict

StreamName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,62}$")]
FieldName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")]
RangeOp = Literal["gte", "gt", "lte", "lt"]


class FieldSpec(Strict):
    """One top-level field of a stream's records: where it is in an upstream item, and what
    its values are (the stream's advertised schema, which every record sent holds to)."""

    path: str = Field(description="JMESPath into one upstream item.")
    type: Literal["string", "integer", "number", "boolean", "array", "object"] = Field(
        "string",
        description="The field's JSON type; a value of another type is left out of its record.",
    )
    nullable: bool = Field(
        False, description="Null is a value of it (schema type [type, \"null\"]); without it "
        "a null or missing value leaves the field out of the record.")
    format: Literal["date-time", "date", "uri", "email", "uuid"] | None = Field(
        None, description="JSON Schema format of a string field, checked on every value: one "
        "that does not match is left out (or its record skipped when the field is required).")
    required: bool = Field(
        False, description="Schema-required: always included in a record; a record whose "
        "value is missing, null (unless nullable) or of another type is not sent.")

    @model_validator(mode="after")
    def _format_of_a_string(self) -> FieldSpec:
        if self.format is not None and self.type != "string":
            raise ValueError(f"format {self.format!r} applies to a string field only")
        return self


class StreamRecordVisibility(RecordScopes):
    """The shared record-visibility shape (gateway.policy.resources), and where a record's
    visibility is in its upstream item."""

    path: str = Field(
        description="JMESPath into one upstream item: the record's visibility, a string (read "
        "with the record, never one of its fields). A record without one is seen by nobody.")


class UpstreamSearch(Strict):
    """Search delegated to the legacy API, which must search only the fields it is sent.
    `{query}` is the text; `{fields}` the list of fields the caller may match (repeated query
    parameters, or a JSON list in a body), `{fields_csv}` the same list comma-separated and
    `{fts5_match}` the query as an SQLite FTS5 expression matching only them
    (`{name summary} : ("word" "word")`); `{subject}` the token's subject and `{limit}` the
    stream's max_records (or the operation's max_items, when lower). The answer's items are
    the matching records, best first, each mapped by the stream's `fields` as a records page
    is: the gateway reads nothing more of the stream for a search, and keeps no index of it."""

    operation: UpstreamOperation = Field(
        description="The upstream search call: {query}, {fields}, {fields_csv}, {fts5_match}, "
        "{subject}, {limit}; its answer's items are the matching records, best first.",
    )


class StreamSearch(Strict):
    lexical_fields: list[FieldName] = Field(
        [], description="Declared lexically searchable fields (top-level strings only).")
    semantic_fields: list[FieldName] = Field(
        [], description="Declared semantically searchable fields (top-level strings only).")
    lexical: Literal["index"] | UpstreamSearch = Field(
        "index", description="`index`: the gateway indexes the mapped records itself (BM25); "
        "or an upstream search operation that is sent only the fields the caller may match.")


class Stream(Strict):
    connector_id: str = Field(min_length=1, description="The connector this stream comes from.")
    description: str | None = Field(
        None,
        description="What the stream holds, as its metadata shows it.",
    )
    fields: dict[FieldName, FieldSpec] = Field(
        min_length=1,
        description="The stream's schema: each field's type and where it is in an upstream item.",
    )
    primary_key: FieldName = Field(
        description="The field that is a record's key: /v1/streams/{stream}/records/{key}.",
    )
    cursor_field: FieldName = Field(
        description="The field records are ordered and paged by (for callers who may read it).",
    )
    consent_time_field: FieldName | None = Field(
        None,
        description="The field a grant's time constraint is read against, as the stream's "
        "metadata says.",
    )
    emitted_at: FieldName | None = Field(
        None, description="Field whose value is a record's emitted_at (default: cursor_field); "
        "a caller who may not read it is given the time the gateway read the record instead.")
    visibility: Annotated[str, Field(min_length=1, max_length=64)] = Field(
        "public", description="The visibility of the stream's records, unless they carry their "
        "own (`record_visibility`). `record_visibility` rules naming the stream say who sees "
        "which (an AIDRE collection or AIP source of the same name is the same resource, and "
        "must have the same visibility); without one, `public` and this one are seen by every "
        "reader of the stream.")
    record_visibility: StreamRecordVisibility | None = Field(
        None, description="Per-record visibility: where each record's is in its upstream item. "
        "A record the caller may not see is answered as one that does not exist (404), and is "
        "never listed, searched, counted or snipped.")
    range_filters: dict[FieldName, list[RangeOp]] = Field(
        {},
        description="Fields callers may filter by range, and the operators each allows (gte, gt, "
        "lte, lt).",
    )
    records: UpstreamOperation = Field(
        description="Reads a page of records. Placeholders: {subject} (the token's subject), "
        "{limit}, {offset}, {page} (1-based) and {after}: the token the previous answer gave when "
        "the mapping reads one (`next`; pages are read until it gives none), else the key of "
        "the previous page's last item (\"\" for the first page). The mapping's `fields` are "
        "ignored: `fields` above say where each field is.")
    record: UpstreamOperation | None = Field(
        None, description="Reads one record by {id} (and {subject}); default: from the list.")
    page_size: Annotated[int, Field(ge=1, le=1000)] = Field(
        100,
        description="Records asked of the upstream per page ({limit} of the records operation).",
    )
    records_scope: Literal["auto", "stream", "subject"] = Field(
        "auto", description="Whose records `records` reads. `stream`: the same records for "
        "every caller, read once (without the caller's identity headers) and kept once, for "
        "all. `subject`: each token subject's own, read and kept per subject. `auto`: "
        "`subject` when the records or record operation names {subject}, else `stream`; set "
        "`subject` for an upstream that answers by the identity headers it is sent.")
    max_records: Annotated[int, Field(ge=1, le=100_000)] = Field(
        10_000, description="The most records read per stream and subject; past it searches "
        "say their recall is a candidate window.")
    search: StreamSearch = Field(
        StreamSearch(),
        description="Which fields /v1/search and /v1/search/semantic match, and whether the "
        "upstream searches itself.",
    )


class LexicalSettings(Strict):
    default_limit: Annotated[int, Field(ge=1, le=100)] = Field(
        10,
        description="Results per page when a search gives no `limit`.",
    )
    max_limit: Annotated[int, Field(ge=1, le=100)] = Field(50, description="Most results per page.")
    snippets: bool = Field(True, description="Show the matching sentence of a matched field.")


class SemanticSettings(Strict):
    enabled: bool = Field(True, description="Serve semantic search.")
    embedder: EmbedderSettings = Field(
        default_factory=lambda: HashSettings(provider="hash"),
        description="What turns texts and queries into vectors (gateway.embeddings): "
        "`wordllama` (a model shipped inside its package: real semantic search offline), "
        "`openai-compatible` (a /v1/embeddings server), or `hash` (feature hashing, no "
        "model of meaning: for tests). The advertised model and dimensions are its.")
    default_limit: Annotated[int, Field(ge=1, le=100)] = Field(
        10,
        description="Results per page when a search gives no `limit`.",
    )
    max_limit: Annotated[int, Field(ge=1, le=100)] = Field(50, description="Most results per page.")
    snippets: bool = Field(True, description="Show the best-matching sentence of a matched field.")
    min_similarity: Annotated[float, Field(ge=-1, le=1)] = Field(
        0.05, description="Records less similar than this to the query are not hits.")


class SearchIndexSettings(Strict):
    """Where the gateway keeps its own index of a stream (for streams searched in the gateway,
    not by an upstream search operation): one per stream, or per subject when the stream's
    records are each subject's own (`records_scope`)."""

    engine: Literal["sqlite", "postgres"] = Field(
        "sqlite", description="`sqlite`: one file per index under `path`, shared by the "
        "workers of one host and kept across restarts. `postgres`: tables in the database at "
        "`dsn`, shared by every replica; one replica at a time refreshes (a lease).")
    path: str = Field(".aigw/pdpp-index", description="The folder of the sqlite indexes "
                      "(relative to the working directory).")
    dsn: SecretStr | None = Field(None, description="postgresql:// URL of the shared index.")
    max_bytes: Annotated[int, Field(ge=1 << 20)] = Field(
        512 << 20, description="Largest index of one stream (or one subject's records); "
        "records past it are left out and the stream's records say `truncated`.")
    subjects_max_bytes: Annotated[int, Field(ge=1 << 20)] = Field(
        2 << 30, description="All per-subject indexes together; past it the least recently "
        "used are dropped (and read again when asked for).")
    required_for_ready: bool = Field(
        False, description="Whether /readyz answers 503 while the index's engine (postgres) "
        "cannot be reached. false: the gateway stays in rotation and only requests that need "
        "the index are answered 503 `index_unavailable`; /readyz names the engine down.")

    @model_validator(mode="after")
    def _dsn_for_postgres(self) -> SearchIndexSettings:
        if self.engine == "postgres" and self.dsn is None:
            raise ValueError("engine postgres needs a dsn")
        return self


class Pdpp(Strict):
    enabled: bool = Field(True, description="Serve the section (false: keep it, serve nothing).")
    base_path: Annotated[str, Field(pattern=r"^(/[A-Za-z0-9._~-]+)*$")] = Field(
        "", description="Prefix of /v1/streams and /v1/search.")
    versions: list[Annotated[str, Field(pattern=r"^\d{4}-\d{2}-\d{2}$")]] = Field(
        ["2026-04-06"], min_length=1,
        description="Accepted PDPP-Version values; the first is used when none is sent.")
    cursor_secret: SecretStr | None = Field(
        None, description="HMAC key of cursors; set it when replicas share traffic (without "
        "it the key is derived from this section, and `aigw validate` warns).")
    cursor_ttl: Annotated[int, Field(ge=60, le=86400)] = Field(
        3600,
        description="How long a next_cursor stays valid, in seconds.",
    )
    index: SearchIndexSettings = Field(
        SearchIndexSettings(),
        description="The gateway's own search index of streams the upstream cannot search: SQLite "
        "files, or PostgreSQL shared by replicas.",
    )
    refresh_seconds: Annotated[float, Field(ge=1, le=86400)] = Field(
        60, description="How long the records read from the upstream (and the search indexes "
        "built from them) are served before they are read again.")
    lexical: LexicalSettings = Field(
        LexicalSettings(),
        description="Lexical search (/v1/search): page sizes and snippets.",
    )
    semantic: SemanticSettings | None = Field(
        None,
        description="Semantic search (/v1/search/semantic) and the embedder it uses; unset: not "
        "served.",
    )
    streams: dict[StreamName, Stream] = Field(
        min_length=1,
        description="The streams, by name: their schema and the upstream calls that read their "
        "records.",
    )
