"""The spec schemas shipped in the package (gateway/schemas/), never fetched over the network,
and one function that says the first way a document breaks one."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

import jsonschema


@cache
def _file(name: str) -> dict[str, Any]:
    text = (resources.files("gateway") / "schemas" / name).read_text(encoding="utf-8")
    return dict(json.loads(text))


def aiendpoint() -> dict[str, Any]:
    return _file("aiendpoint.schema.json")


def aip(name: str) -> dict[str, Any]:
    """`aip`, `retrieve-request` or `retrieve-response`."""
    return _file(f"aip/{name}.schema.json")


def pdpp(name: str) -> dict[str, Any]:
    """A PDPP response schema by what it describes: `error`, `record_list`, `stream_list`,
    `lexical_search`, `semantic_search`, `resource_metadata` (copied from the reference
    server's OpenAPI document)."""
    return dict(_file("pdpp/responses.json")[name])


def problem(document: Any, schema: dict[str, Any]) -> str | None:
    """None when `document` is valid, else its first error: where, and what is wrong."""
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is None:
        return None
    where = "/" + "/".join(str(part) for part in error.absolute_path)
    return f"at {where}: {error.message}"
