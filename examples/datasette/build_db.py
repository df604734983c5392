"""Write the SQLite database Datasette serves: the records of examples/json-server/dataset.py.

    python examples/datasette/build_db.py debian.db
    .datasette/bin/datasette serve -i debian.db -m examples/datasette/metadata.json

Tables `packages`, `maintainers` and `changes`: each json-server collection's fields as columns
in the same order, `id` a TEXT PRIMARY KEY, rows inserted in id order. A column whose values
are all integers (or booleans) is INTEGER, every other one TEXT; list fields (`depends`,
`package_ids`) are stored as JSON text and `synthetic` as 0/1, which is how Datasette gives
them back.

Two FTS5 tables index the text: `packages_fts` (name, summary, description) and `changes_fts`
(source, text). Each is an external-content table (`content="<table>"`, keyed by the table's
rowid), which is the form Datasette finds on its own for `?_search=`; metadata.json names them
as well. Same input files, same rows: nothing is random.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sqlite3
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

DATASET = Path(__file__).resolve().parent.parent / "json-server" / "dataset.py"
TABLES = ("packages", "maintainers", "changes")
FTS_COLUMNS = {"packages": ("name", "summary", "description"), "changes": ("source", "text")}


def dataset_module() -> ModuleType:
    """examples/json-server/dataset.py, a script beside its example rather than a package."""
    if "json_server_dataset" in sys.modules:
        return sys.modules["json_server_dataset"]
    spec = importlib.util.spec_from_file_location("json_server_dataset", DATASET)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def column_type(rows: list[dict[str, Any]], column: str) -> str:
    values = [row[column] for row in rows if row[column] is not None]
    return "INTEGER" if values and all(isinstance(v, int) for v in values) else "TEXT"


def cell(value: Any) -> Any:
    """A field as SQLite stores it: lists as JSON text, booleans as 0/1."""
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    return int(value) if isinstance(value, bool) else value


def write_table(conn: sqlite3.Connection, table: str, rows: list[dict[str, Any]]) -> None:
    columns = list(rows[0])
    definitions = ", ".join(
        f"{quoted(c)} TEXT PRIMARY KEY" if c == "id" else f"{quoted(c)} {column_type(rows, c)}"
        for c in columns)
    conn.execute(f"CREATE TABLE {quoted(table)} ({definitions})")
    conn.executemany(
        f"INSERT INTO {quoted(table)} ({', '.join(map(quoted, columns))}) "
        f"VALUES ({', '.join('?' for _ in columns)})",
        [[cell(row[c]) for c in columns] for row in sorted(rows, key=lambda r: r["id"])])


def write_fts(conn: sqlite3.Connection, table: str, columns: tuple[str, ...]) -> None:
    """`<table>_fts` over `columns`, filled from the table (FTS5 'rebuild')."""
    fts = quoted(f"{table}_fts")
    conn.execute(f"CREATE VIRTUAL TABLE {fts} USING fts5("
                 f"{', '.join(map(quoted, columns))}, content={quoted(table)})")
    conn.execute(f"INSERT INTO {fts} ({fts}) VALUES ('rebuild')")


def write(db: dict[str, list[dict[str, Any]]], path: Path) -> None:
    """The tables of `db` into a new SQLite file at `path` (replaced whole, never half-written)."""
    staging = path.with_name(path.name + ".tmp")
    staging.unlink(missing_ok=True)
    conn = sqlite3.connect(staging)
    try:
        with conn:
            for table in TABLES:
                write_table(conn, table, db[table])
            for table, columns in FTS_COLUMNS.items():
                write_fts(conn, table, columns)
    finally:
        conn.close()
    staging.replace(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="where to write the database (SQLite)")
    args = parser.parse_args()
    db = dataset_module().build()
    write(db, args.out)
    print(", ".join(f"{len(db[table])} {table}" for table in TABLES), "->", args.out)


if __name__ == "__main__":
    main()
