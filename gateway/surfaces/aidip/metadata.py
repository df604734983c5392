"""Agent metadata (AIDIP §3) as a JSON Schema, and checks against it that name each field.

A registration carries JSON Schemas (`inputs`, `outputs`) that the gateway will run: they are
compiled here, at registration, by `gateway.untrusted_schema` (in-document references only,
RE2 patterns, bounded size and fan-out), so nothing a client registers is first found wrong
at invoke. All of it runs in a schema thread, off the event loop.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from gateway.surfaces.aidip.render import busy
from gateway.surfaces.aidip.sending import DEFAULT_METHOD, METHODS, inputs_problem
from gateway.untrusted_schema import (
    DEFAULT_LIMITS,
    Overloaded,
    SchemaRefused,
    compiled,
    off_loop,
    shape_problem,
    validate,
)

# The draft's operations have no method (§5.1 has the client POST a JSON body to the agent),
# so the method the gateway calls a registered endpoint with is a namespaced extension.
METHOD_FIELD = "x-aigw-method"
_METHOD = {"type": "string", "enum": list(METHODS), "description":
           "Gateway extension: the HTTP method the gateway calls the endpoint with (default "
           "POST). POST and PUT send the input as the JSON body; GET sends each input field as "
           "a query parameter, so its inputs may only be strings, numbers, integers and "
           "booleans. Clients invoke through the gateway with POST whatever this says."}
_STRINGS = {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 100},
            "maxItems": 50, "uniqueItems": True}
_JSON_SCHEMA = {"type": "object", "description": "A JSON Schema (2020-12)."}

OPERATION: dict[str, Any] = {
    "type": "object",
    "required": ["name", "inputs", "outputs"],
    "properties": {
        "name": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"},
        "description": {"type": "string", "maxLength": 1000},
        "inputs": _JSON_SCHEMA,
        "outputs": _JSON_SCHEMA,
        "examples": {"type": "array", "maxItems": 20, "items": {
            "type": "object", "properties": {"input": {}, "output": {}}}},
        "endpoint": {"type": "string", "format": "uri", "maxLength": 2000,
                     "description": "This operation's own URL; default: the agent's."},
        "idempotent": {"type": "boolean"},
        "batch": {"type": "boolean"},
        METHOD_FIELD: {**_METHOD, "description": "This operation's method; default: the "
                       f"agent's {METHOD_FIELD}. {_METHOD['description']}"},
    },
}

AGENT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "urn:aigw:aidip:agent-metadata",
    "title": "AIDIP agent metadata (draft-cui-ai-agent-discovery-invocation-01 §3)",
    "type": "object",
    "required": ["name", "description", "version", "capabilities", "endpoint"],
    "properties": {
        "id": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$"},
        "name": {"type": "string", "minLength": 1, "maxLength": 200},
        "description": {"type": "string", "minLength": 1, "maxLength": 2000},
        "version": {"type": "string", "minLength": 1, "maxLength": 50},
        "publisher": {"type": "string", "maxLength": 200},
        "capabilities": {**_STRINGS, "minItems": 1},
        "tags": _STRINGS,
        "endpoint": {"type": "string", "format": "uri", "maxLength": 2000},
        "supported_languages": _STRINGS,
        "authentication": {"type": "object", "properties": {
            "type": {"type": "string", "enum": ["api_key", "oauth2_bearer", "mtls", "none"]},
            "instructions": {"type": "string", "maxLength": 2000},
            "scopes": _STRINGS}},
        "status": {"type": "string", "enum": ["active", "inactive", "deprecated"]},
        "operations": {"type": "array", "minItems": 1, "maxItems": 50, "items": OPERATION},
        "inputs": _JSON_SCHEMA,
        "outputs": _JSON_SCHEMA,
        METHOD_FIELD: _METHOD,
        "allowed_clients": {**_STRINGS, "description":
                            "Client ids entitled to see and invoke the agent (gateway extension)."},
    },
    # §3.2: operations, or top-level inputs and outputs for one implied operation.
    "anyOf": [{"required": ["operations"]}, {"required": ["inputs", "outputs"]}],
}

# What a registration is stored and answered as (catalog.public): the members AGENT_SCHEMA
# checks, but how the gateway calls the agent (kept inside) and top-level inputs and outputs
# (one operation, normalized), with its id and operations always there.
_KEPT_INSIDE = ("inputs", "outputs", METHOD_FIELD)
ANSWERED_AGENT: dict[str, Any] = {
    "type": "object",
    "required": ["id", *AGENT_SCHEMA["required"], "operations"],
    "properties": {
        **{name: schema for name, schema in AGENT_SCHEMA["properties"].items()
           if name not in _KEPT_INSIDE},
        "operations": {**AGENT_SCHEMA["properties"]["operations"], "items": {
            **OPERATION, "properties": {name: schema for name, schema
                                        in OPERATION["properties"].items()
                                        if name != METHOD_FIELD}}},
    },
}

IMPLIED_OPERATION = "default"
_VALIDATOR = Draft202012Validator(AGENT_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER)


# `operations[i].inputs` sits three levels below the document's top.
_MAX_DOCUMENT_DEPTH = DEFAULT_LIMITS.max_depth + 3
_MAX_DOCUMENT_VALUES = 10_000


async def problems(document: Any) -> list[dict[str, str]]:
    """Each problem as {field, problem}, in a stable order; empty when the document is valid.
    Its schemas are compiled (and kept for invoke) in a schema thread."""
    try:
        return await off_loop(lambda: _problems(document), DEFAULT_LIMITS.wait)
    except Overloaded:
        raise busy() from None


async def schema_problems(instances: list[Any],
                          schema: dict[str, Any]) -> list[list[dict[str, str]]]:
    """Instances checked against an operation's `inputs` or `outputs` schema, with one budget,
    in a schema thread. Raises `SchemaRefused` (a schema stored before it would be refused),
    `Unverifiable` (past the limits) or a 503 when no thread is free in time."""
    try:
        found = await validate(schema, instances)
    except Overloaded:
        raise busy() from None
    return [sorted((_problem(error) for error in errors), key=lambda p: (p["field"], p["problem"]))
            for errors in found]


def _problems(document: Any) -> list[dict[str, str]]:
    too_big = shape_problem(document, _MAX_DOCUMENT_DEPTH, _MAX_DOCUMENT_VALUES)
    if too_big is not None:
        return [{"field": "(body)", "problem": f"too big: {too_big}"}]
    found = [_problem(error) for error in _VALIDATOR.iter_errors(document)]
    if isinstance(document, dict):
        method = document.get(METHOD_FIELD, DEFAULT_METHOD)
        found += _operation_problems(document.get("operations"), method)
        found += _schemas_problems(document, "", method)
    return sorted(found, key=lambda p: (p["field"], p["problem"]))


def normalized(document: dict[str, Any]) -> dict[str, Any]:
    """Top-level inputs/outputs become one operation named "default"."""
    if "operations" in document:
        return document
    document = dict(document)
    operation = {"name": IMPLIED_OPERATION, "inputs": document.pop("inputs"),
                 "outputs": document.pop("outputs")}
    return {**document, "operations": [operation]}


def _operation_problems(operations: Any, default_method: Any) -> list[dict[str, str]]:
    if not isinstance(operations, list):
        return []
    found, seen = [], set()
    for index, operation in enumerate(operations):
        if not isinstance(operation, dict):
            continue
        name = operation.get("name")
        if name in seen:
            found.append({"field": f"operations[{index}].name", "problem": "duplicate name"})
        seen.add(name)
        if "method" in operation:  # else silently ignored, and the agent POSTed to
            found.append({"field": f"operations[{index}].method",
                          "problem": f"unknown field: the gateway's is '{METHOD_FIELD}'"})
        method = operation.get(METHOD_FIELD, default_method)
        found += _schemas_problems(operation, f"operations[{index}].", method)
    return found


def _schemas_problems(holder: dict[str, Any], prefix: str,
                      method: Any) -> list[dict[str, str]]:
    found = []
    for part in ("inputs", "outputs"):
        schema = holder.get(part)
        if not isinstance(schema, dict):
            continue  # the metadata schema says what is wrong
        try:
            compiled(schema)
        except SchemaRefused as refused:
            where = f"{refused.where}: " if refused.where else ""
            found.append({"field": f"{prefix}{part}", "problem": f"{where}{refused.problem}"})
            continue
        sent = inputs_problem(method, schema) if part == "inputs" else None
        if sent is not None:
            found.append({"field": f"{prefix}{part}", "problem": sent})
    return found


def _problem(error: ValidationError) -> dict[str, str]:
    path = _dotted(error.absolute_path)
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else ""
        return {"field": f"{path}.{missing}".lstrip(".") or "(body)",
                "problem": "required field is missing"}
    if error.validator == "anyOf" and not path:
        return {"field": "operations", "problem": "expected operations, or inputs and outputs"}
    return {"field": path or "(body)", "problem": _short(error)}


def _short(error: ValidationError) -> str:
    """The validator's message without the offending value (it may be long or sensitive)."""
    expected = error.validator_value
    if error.validator in ("type", "enum", "pattern", "format", "minLength", "maxLength",
                           "minItems", "maxItems", "minimum", "maximum", "const"):
        return f"expected {error.validator} {expected}"[:200]
    if error.validator == "additionalProperties":
        return "unexpected field"
    if error.validator == "uniqueItems":  # the gateway's own message, without the items
        return f"uniqueItems: {error.message}"
    return error.validator if isinstance(error.validator, str) else "invalid"


def _dotted(path: Any) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out.lstrip(".")
