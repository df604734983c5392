"""An index's SQLite file: how a connection to it is opened, and its tables for one list of
searchable fields (an FTS5 column each: field i is column `c{i}`).

Tables of the file:
- `meta` (name, value): the schema version, the fields, the state, when it was built, whether
  it was truncated, each semantic field's dimensions.
- `records` (id, key, version, data): `id` is the rowid shared by the tables below.
- `fts` (c0, c1, ...): FTS5, porter-stemmed unicode61 tokens with positions.
- `lengths` (id, n0, n1, ...): each record's token count per field, copied from FTS5's own
  (`fts_docsize`), so that average lengths over any set of records are one SQL sum.
- `vectors` (id, field, v): one unit-length float32 vector per (semantic field, record).

Each connection also has temporary tables of its own for a query's working sets.

A new file has 16 KiB pages, is in WAL mode and gives freed pages back at each commit
(`auto_vacuum=FULL`), so that its size is what it holds."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import orjson

from gateway.private_files import private_file, tighten

SCHEMA_VERSION = "1"
TOKENIZER = "porter unicode61 remove_diacritics 2"
WORDS = "unicode61 remove_diacritics 2"  # the same words, unstemmed
BUSY_SECONDS = 60.0  # how long a writer waits for another's transaction (a full build's)


def columns(count: int) -> list[str]:
    return [f"c{i}" for i in range(count)]


def connect(path: Path, width: int) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), usable from the thread
    that closes it, with the file (its owner's alone, gateway.private_files) in WAL mode and
    this connection's temporary tables for an index of `width` searchable fields."""
    private_file(path)  # before SQLite makes it: its -wal and -shm then take its mode
    for suffix in ("-wal", "-shm"):
        tighten(Path(f"{path}{suffix}"))  # as an older version may have left them
    conn = sqlite3.connect(path, timeout=BUSY_SECONDS, isolation_level=None,
                           check_same_thread=False)
    if conn.execute("PRAGMA page_count").fetchone()[0] == 0:
        # A new file, before anything writes its first page (WAL mode does). On a file in use
        # these would wait for its writer. FULL: each commit hands the pages it freed back.
        conn.execute("PRAGMA page_size=16384")  # a row of a kilobyte wastes less of a page
        conn.execute("PRAGMA auto_vacuum=FULL")  # (after page_size, or that is ignored)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")  # in WAL: a crash loses no committed index
    conn.execute("PRAGMA temp_store=MEMORY")
    _temporary(conn, width)
    return conn


def _temporary(conn: sqlite3.Connection, width: int) -> None:
    """A query's working sets: the ids of the `only` records; each (record, term)'s occurrence
    count per column (t0, t1, ...) and each term's weights (w0, w1, ...); the query's words as
    the index's tokenizer stems them and as they were (without stemming)."""
    counts = "".join(f", t{i} INTEGER NOT NULL DEFAULT 0" for i in range(width))
    weights = "".join(f", w{i} REAL NOT NULL DEFAULT 0" for i in range(width))
    conn.executescript(f"""
        CREATE TEMP TABLE only_ids(id INTEGER PRIMARY KEY);
        CREATE TEMP TABLE tfs(doc INTEGER NOT NULL, term TEXT NOT NULL{counts},
                              PRIMARY KEY (doc, term)) WITHOUT ROWID;
        CREATE TEMP TABLE weights(term TEXT PRIMARY KEY{weights}) WITHOUT ROWID;
        CREATE VIRTUAL TABLE temp.query_stems USING fts5(t, tokenize='{TOKENIZER}');
        CREATE VIRTUAL TABLE temp.query_stems_at USING fts5vocab(temp, query_stems, instance);
        CREATE VIRTUAL TABLE temp.query_words USING fts5(t, tokenize='{WORDS}');
        CREATE VIRTUAL TABLE temp.query_words_at USING fts5vocab(temp, query_words, instance);
    """)


def ensure(conn: sqlite3.Connection, fields: Sequence[str]) -> None:
    """Create the tables for `fields` unless the file already has them; a file made for other
    fields (or by another schema version) is emptied and made anew, in one transaction. A file
    that is as wanted is only read: opening it never waits for a build another process runs."""
    wanted = (SCHEMA_VERSION, list(fields))
    conn.execute("BEGIN")
    try:
        current = _stored(conn)
    finally:
        conn.execute("COMMIT")
    if current == wanted:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        if _stored(conn) != wanted:  # unless another process made it meanwhile
            _drop(conn)
            _create(conn, fields)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _stored(conn: sqlite3.Connection) -> tuple[str, list[str]] | None:
    found = conn.execute("SELECT 1 FROM sqlite_schema WHERE name = 'meta'").fetchone()
    if found is None:
        return None
    meta = dict(conn.execute("SELECT name, value FROM meta").fetchall())
    return meta.get("schema", ""), orjson.loads(meta.get("fields", "[]"))


def _drop(conn: sqlite3.Connection) -> None:
    for name in ("fts", "lengths", "vectors", "records", "meta"):
        conn.execute(f"DROP TABLE IF EXISTS {name}")


def _create(conn: sqlite3.Connection, fields: Sequence[str]) -> None:
    conn.execute("CREATE TABLE meta(name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID")
    conn.execute("CREATE TABLE records(id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, "
                 "version TEXT NOT NULL, data TEXT NOT NULL)")
    # A rowid table: WITHOUT ROWID suits small rows, and a vector takes a kilobyte or more.
    conn.execute("CREATE TABLE vectors(id INTEGER NOT NULL, field TEXT NOT NULL, "
                 "v BLOB NOT NULL, PRIMARY KEY (id, field))")
    lengths = "".join(f", n{i} INTEGER NOT NULL" for i in range(len(fields)))
    conn.execute(f"CREATE TABLE lengths(id INTEGER PRIMARY KEY{lengths})")
    create_fts(conn, len(fields))
    conn.executemany("INSERT INTO meta(name, value) VALUES (?, ?)", [
        ("schema", SCHEMA_VERSION), ("fields", orjson.dumps(list(fields)).decode()),
        ("state", "building"), ("built_at", ""), ("truncated", "0"), ("cut", "0"),
        ("dimensions", "{}"),
    ])


def create_fts(conn: sqlite3.Connection, count: int) -> None:
    """The FTS5 table (a full build drops it and makes it again: faster than deleting every
    row, which FTS5 does by tokenizing each row's text again)."""
    cols = ", ".join(columns(count)) or "c0"
    conn.execute(f"CREATE VIRTUAL TABLE fts USING fts5({cols}, tokenize='{TOKENIZER}')")
