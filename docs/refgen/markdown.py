"""Markdown pieces the reference pages are made of: table cells that cannot break a table or
turn into HTML, and tables."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any


def text(value: str) -> str:
    """Prose for a table cell: one line, `|` escaped, `<` and `>` shown as written. Text
    between backticks is left as it is: code spans show it verbatim (a table's cells are
    split outside code spans only)."""
    parts = " ".join(value.split()).split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no code span
        parts = [" ".join(value.split()).replace("`", "'")]
    for i in range(0, len(parts), 2):
        parts[i] = (parts[i].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
                    .replace("|", "\\|"))
    return "`".join(parts)


def code(value: Any) -> str:
    """A value as inline code: strings as written, anything else as compact JSON."""
    shown = value if isinstance(value, str) else json.dumps(value, separators=(", ", ": "))
    fence = "``" if "`" in shown else "`"
    pad = " " if shown.startswith("`") or shown.endswith("`") else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


GENERATED = ("!!! note \"Generated\"\n    This page is generated from the code when the site is "
             "built (`make docs`, `docs/refgen/`): edit the code, not this page.\n")
