"""Datasette (PyPI, in its own venv .datasette/ from `make datasette`) as a real upstream process,
over an SQLite database of this machine's Debian packages written by
examples/datasette/build_db.py (the records of examples/json-server/dataset.py).

A test module asks for the `datasette` fixture (conftest.py): the upstream's base URL, with the
database at `/debian` (`/debian/packages.json`, `/debian/changes.json`, ...)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import ModuleType
from typing import Any

from processes import ROOT, Process, free_port, script_module, wait_for_http

EXAMPLE = ROOT / "examples" / "datasette"
BINARY = ROOT / ".datasette" / "bin" / "datasette"
VERSION = "0.65.5"
DATABASE = "debian"  # the file's stem, which is the database's name in Datasette's URLs
# Stated rather than left to Datasette's defaults: `_size` may be up to 1000 (`_size=max`);
# no suggested facets, work that no answer the tests read needs.
SETTINGS = {"default_page_size": "100", "max_returned_rows": "1000", "suggest_facets": "off"}
_TILDE_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def tilde_encode(value: str) -> str:
    """Datasette's encoding of a primary key in a row path and in `next` tokens: UTF-8 bytes
    outside [A-Za-z0-9_-] as `~XX`, a space as `+` (datasette.utils.tilde_encode)."""
    return "".join(chr(b) if b in _TILDE_SAFE else "+" if b == 0x20 else f"~{b:02X}"
                   for b in value.encode("utf-8"))


def build_db_module() -> ModuleType:
    """examples/datasette/build_db.py, which is a script beside the example, not a package."""
    return script_module(EXAMPLE / "build_db.py", "datasette_build_db")


def write_database(directory: Path) -> tuple[Path, dict[str, list[dict[str, Any]]]]:
    """`<directory>/debian.db` for Datasette, and the records it holds (json-server's form)."""
    build_db = build_db_module()
    db = build_db.dataset_module().build()
    path = directory / f"{DATABASE}.db"
    build_db.write(db, path)
    with sqlite3.connect(path) as conn:  # as written, not as meant to be
        counts = {table: conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
                  for table in build_db.TABLES}
    assert counts == {table: len(db[table]) for table in build_db.TABLES}
    return path, db


def start_datasette(db: Path, logs: Path) -> tuple[Process, str]:
    """`datasette serve` on a free loopback port over `db` (read-only), answering."""
    if not BINARY.exists():
        raise RuntimeError(f"Datasette {VERSION} is not installed: run `make datasette`")
    port = free_port()
    settings = [arg for name, value in SETTINGS.items() for arg in ("--setting", name, value)]
    process = Process([str(BINARY), "serve", "--immutable", str(db),
                       "--metadata", str(EXAMPLE / "metadata.json"),
                       "--host", "127.0.0.1", "--port", str(port), *settings],
                      logs, f"datasette-{port}")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{url}/{DATABASE}/packages.json?_size=1", process=process.popen)
    except (RuntimeError, TimeoutError):
        process.stop()
        raise
    return process, url
