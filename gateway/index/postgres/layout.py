"""Where an index lives on the server and what its tables look like.

Each index is one schema: `records` (a row per record: key, version, data as jsonb, its size
for the byte budget, and per searchable field a tsvector column with its length in lexeme
occurrences, per semantic field a vector column), `meta` (one row: the index's name and layout,
state, when it was built, whether records were left out) and `lease` (one row: which replica
may refresh). Columns are named by position (`t0`, `n0`, `v0`), never by a caller's field
name, so no name a config chose ever becomes SQL.

The schema's name comes from the index name, its layout (fields, dimensions, text search
configuration) and how it stores vectors: a config that changes the layout (or pgvector newly
installed) gets a new, empty index beside the old one, so replicas still on the old config
keep reading theirs during a rolling deploy; `PostgresIndex.drop` removes the old one."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Literal

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

VectorKind = Literal["pgvector", "exact"]
_UNSAFE = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True, slots=True)
class Layout:
    texts: tuple[str, ...]  # fields searched by words, one tsvector column each
    vectors: tuple[str, ...]  # fields searched by meaning, one vector column each
    dimensions: int | None  # of every vector; required when there are vector fields
    text_config: str  # the PostgreSQL text search configuration (stemming, stopwords)

    def __post_init__(self) -> None:
        if self.vectors and not (self.dimensions and self.dimensions > 0):
            raise ValueError("an index with vector fields needs their dimensions")
        for fields in (self.texts, self.vectors):
            if len(set(fields)) != len(fields):
                raise ValueError("a field is named twice in the index layout")

    def text_column(self, field: str) -> int:
        """The position of a searchable field's columns (`t<i>`, `n<i>`)."""
        try:
            return self.texts.index(field)
        except ValueError:
            raise ValueError(f"the index holds no searchable field {field!r}") from None

    def vector_column(self, field: str) -> int:
        try:
            return self.vectors.index(field)
        except ValueError:
            raise ValueError(f"the index holds no vectors of field {field!r}") from None

    def as_json(self) -> dict[str, Any]:
        return {"texts": list(self.texts), "vectors": list(self.vectors),
                "dimensions": self.dimensions, "text_config": self.text_config}


def schema_name(name: str, layout: Layout, kind: VectorKind) -> str:
    """`aigw_ix_<readable part of the name>_<hash of name, layout and vector kind>`, within
    PostgreSQL's 63-byte identifiers."""
    readable = _UNSAFE.sub("_", name.lower()).strip("_")[:24]
    identity = json.dumps([name, layout.as_json(), kind], sort_keys=True).encode()
    return f"aigw_ix_{readable}_{hashlib.sha256(identity).hexdigest()[:12]}"


def table(schema: str, name: str) -> sql.Identifier:
    return sql.Identifier(schema, name)


def column(prefix: str, position: int) -> sql.Identifier:
    return sql.Identifier(f"{prefix}{position}")


def open_schema(conn: psycopg.Connection[Any], name: str, layout: Layout,
                use_pgvector: bool | None) -> tuple[str, VectorKind]:
    """The index's schema and how it scores vectors, creating it unless it exists (replicas
    opening at once wait for each other)."""
    try:
        conn.execute("SELECT %s::regconfig", [layout.text_config])
    except psycopg.errors.UndefinedObject:
        raise ValueError(f"no text search configuration {layout.text_config!r}") from None
    kind = _vector_kind(conn, use_pgvector) if layout.vectors else "exact"
    schema = schema_name(name, layout, kind)
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [schema])
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", [f'"{schema}".meta']).fetchone()
    if not (row and row[0]):
        _create(conn, schema, name, layout, kind)
    return schema, kind


def _vector_kind(conn: psycopg.Connection[Any], use_pgvector: bool | None) -> VectorKind:
    """pgvector when the database has it (created here if the server offers it and the role
    may), unless `use_pgvector` is False; exact scoring over float4[] otherwise."""
    if use_pgvector is False:
        return "exact"
    installed, offered = _pgvector(conn)
    if not installed and offered:
        try:
            with conn.transaction():
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error:
            pass  # not allowed, or another replica is creating it
        installed, _ = _pgvector(conn)
    if installed:
        return "pgvector"
    if use_pgvector:
        raise ValueError("pgvector was asked for but the database does not have it")
    return "exact"


def _pgvector(conn: psycopg.Connection[Any]) -> tuple[bool, bool]:
    """Whether pgvector is installed in the database, and whether the server offers it."""
    row = conn.execute("SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'vector'),"
                       " EXISTS (SELECT FROM pg_available_extensions WHERE name = 'vector')"
                       ).fetchone()
    return (bool(row[0]), bool(row[1])) if row else (False, False)


def _create(conn: psycopg.Connection[Any], schema: str, name: str, layout: Layout,
            kind: VectorKind) -> None:
    vector_type = (sql.SQL("vector({})").format(sql.Literal(layout.dimensions))
                   if kind == "pgvector" else sql.SQL("float4[]"))
    columns: list[sql.Composable] = [
        sql.SQL('key text COLLATE "C" PRIMARY KEY, version text NOT NULL, data jsonb NOT NULL,'
                " size bigint NOT NULL")]
    for i in range(len(layout.texts)):
        columns.append(sql.SQL("{} tsvector").format(column("t", i)))
        columns.append(sql.SQL("{} integer NOT NULL DEFAULT 0").format(column("n", i)))
    columns += [sql.SQL("{} {}").format(column("v", j), vector_type)
                for j in range(len(layout.vectors))]
    statements = [
        sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)),
        sql.SQL("CREATE TABLE {} ({})").format(table(schema, "records"),
                                              sql.SQL(", ").join(columns)),
        *(sql.SQL("CREATE INDEX ON {} USING gin ({})").format(table(schema, "records"),
                                                            column("t", i))
          for i in range(len(layout.texts))),
        sql.SQL("CREATE TABLE {} (id integer PRIMARY KEY CHECK (id = 1), name text NOT NULL,"
                " layout jsonb NOT NULL, vectors text NOT NULL, state text NOT NULL,"
                " built_at timestamptz,"
                " source_truncated boolean NOT NULL DEFAULT false,"
                " budget_truncated boolean NOT NULL DEFAULT false)").format(
            table(schema, "meta")),
        sql.SQL("CREATE TABLE {} (id integer PRIMARY KEY CHECK (id = 1), holder text,"
                " expires timestamptz NOT NULL DEFAULT '-infinity')").format(
            table(schema, "lease")),
        sql.SQL("INSERT INTO {} (id) VALUES (1)").format(table(schema, "lease")),
        # OR of per-term queries, so query words are passed as parameters and never parsed
        # as tsquery syntax.
        sql.SQL("CREATE AGGREGATE {} (tsquery) (SFUNC = tsquery_or, STYPE = tsquery)").format(
            table(schema, "any_of")),
    ]
    for statement in statements:
        conn.execute(statement)
    conn.execute(sql.SQL("INSERT INTO {} (id, name, layout, vectors, state)"
                         " VALUES (1, %s, %s, %s, 'building')").format(table(schema, "meta")),
                 [name, Jsonb(layout.as_json()), kind])


def drop_schema(conn: psycopg.Connection[Any], schema: str) -> None:
    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
