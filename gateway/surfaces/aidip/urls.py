"""The URL fields of a registration: the strings its schema declares with `format: uri`, so a
new URL field is checked (by gateway.upstream.egress.urls) without touching this module."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def url_fields(schema: dict[str, Any], document: Any,
               where: str = "") -> Iterator[tuple[str, str]]:
    """(field, value) for each string in `document` that `schema` declares `format: uri`."""
    if schema.get("format") == "uri" and isinstance(document, str):
        yield where or "(body)", document
    for branch in ("allOf", "anyOf", "oneOf"):
        for sub in schema.get(branch, []):
            yield from url_fields(sub, document, where)
    if isinstance(document, dict):
        for name, sub in schema.get("properties", {}).items():
            if name in document:
                yield from url_fields(sub, document[name], f"{where}.{name}".lstrip("."))
    elif isinstance(document, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(document):
            yield from url_fields(schema["items"], item, f"{where}[{index}]")
