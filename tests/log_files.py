"""Reading a JSON-lines log another thread or process is appending to."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def jsonl_records(path: Path) -> list[dict[str, Any]]:
    """The records of `path`'s whole lines (none when it does not exist yet): the writer may be
    in the middle of a batch, so a last line without its newline is left for the next read."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().split("\n")[:-1] if line]
