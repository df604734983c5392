"""How an operation's input travels to its agent: what the gateway sends, per method.

POST and PUT send the input as the JSON body. A GET sends no body: each field of the input
becomes a query parameter `name=value`, both percent-encoded as UTF-8 (RFC 3986: every
character but the unreserved ones), strings as they are, numbers and booleans as JSON spells
them, a null field left out. Only such scalars are sent this way: an array or an object has
no one query encoding (repeated names, commas, brackets and JSON text are all in use), and an
upstream that reads another than the gateway picked would silently get something else. So a
GET operation's declared input properties must be scalars (checked when the config loads and
at registration), and any other value, an undeclared field included, is refused at invoke.

A configured operation's path may name input fields, `/packages/{id}`: each is filled with its
field's value as one path segment (percent-encoded, `/` included), whatever the method; such a
field is declared, required and a scalar that is not null, and a GET does not repeat it in the
query. A value that no path could carry (empty, `.` or `..`, control characters, over 256
characters) is refused at invoke. A registered agent's GET adds the query to its endpoint.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import orjson

from gateway.errors import GatewayError
from gateway.ids import addressable
from gateway.surfaces.aidip.catalog import Operation
from gateway.surfaces.aidip.render import fields_message, invalid_input

METHODS = ("GET", "POST", "PUT")
DEFAULT_METHOD = "POST"
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_SCALAR_TYPES = frozenset({"string", "number", "integer", "boolean"})
_QUERY_ONLY_SCALARS = "a GET operation sends its input as query parameters: strings, " \
                      "numbers, integers and booleans only (an array or object has no one " \
                      "query encoding)"


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One call's request: `target` is the path and query on a configured upstream, or the
    URL of a registered agent; `body` is None for a GET."""

    target: str
    body: bytes | None


def inputs_problem(method: str, inputs: dict[str, Any], path: str = "") -> str | None:
    """Why an operation's `inputs` schema cannot be sent its way (as a query for a GET, into
    the `{field}`s of a configured `path`), or None."""
    placeholders = _PLACEHOLDER.findall(path)
    if method != "GET" and not placeholders:
        return None
    if inputs.get("type") != "object":
        return "expected type: object (each field becomes a query parameter or a path segment)"
    properties = inputs.get("properties", {})
    properties = properties if isinstance(properties, dict) else {}
    problem = _placeholder_problem(placeholders, properties, inputs.get("required", []))
    if problem is None and method == "GET":
        problem = _query_problem(properties, inputs.get("additionalProperties"))
    return problem


def _placeholder_problem(placeholders: list[str], properties: dict[str, Any],
                         required: Any) -> str | None:
    for name in placeholders:
        if name not in properties or name not in required \
                or not _scalar(properties[name], null=False):
            return f"{{{name}}} in the path: expected a required input property that is a " \
                   "string, number, integer or boolean"
    return None


def _query_problem(properties: dict[str, Any], additional: Any) -> str | None:
    for name, schema in properties.items():
        if not _scalar(schema, null=True):
            return f"property '{name}': {_QUERY_ONLY_SCALARS}"
    if isinstance(additional, dict) and not _scalar(additional, null=True):
        return f"additionalProperties: {_QUERY_ONLY_SCALARS}"
    return None


def outgoing(operation: Operation, item: Any, at: str = "") -> Outgoing:
    """The request carrying one input (checked against `inputs` already); `InvalidInput`
    naming the field for a value it cannot carry. `at` is the input's place in a batch
    (`[2]`), which field names start with."""
    if operation.url is not None:
        base, placeholders = operation.url, []
    else:
        base, placeholders = operation.path, _PLACEHOLDER.findall(operation.path)
    if operation.method != "GET" and not placeholders:
        return Outgoing(base, orjson.dumps(item))
    if not isinstance(item, dict):
        raise _refused(at or "(body)", "expected an object")
    target = _PLACEHOLDER.sub(lambda m: _segment(item, m.group(1), at), base)
    if operation.method != "GET":
        return Outgoing(target, orjson.dumps(item))
    query = "&".join(f"{quote(name, safe='')}={quote(_query_value(item, name, at), safe='')}"
                     for name in item if item[name] is not None and name not in placeholders)
    if query:
        target += ("&" if "?" in target else "?") + query
    return Outgoing(target, None)


def _segment(item: dict[str, Any], name: str, at: str) -> str:
    value = item.get(name)
    if value is None or not _scalar_value(value):
        raise _refused(_field(at, name), "expected a string, number or boolean for the path")
    text = _text(value)
    if not addressable(text):
        raise _refused(_field(at, name), "cannot be a path segment: expected 1 to 256 "
                                         "characters, not '.' or '..', no control characters")
    return quote(text, safe="")


def _query_value(item: dict[str, Any], name: str, at: str) -> str:
    value = item[name]
    if not _scalar_value(value):
        raise _refused(_field(at, name), "expected a string, number or boolean: a GET "
                                         "operation sends its input as query parameters")
    return _text(value)


def _field(at: str, name: str) -> str:
    return f"{at}.{name}" if at else name


def _text(value: str | int | float | bool) -> str:
    """A scalar as JSON spells it, a string as it is."""
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _scalar_value(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool))


def _scalar(schema: Any, *, null: bool) -> bool:
    """Whether every value `schema` admits is a scalar (or null, when `null`)."""
    if schema is False:
        return True  # admits nothing
    if not isinstance(schema, dict):
        return False
    allowed = _SCALAR_TYPES | ({"null"} if null else set())
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        return set(types) <= allowed
    if "const" in schema:
        return _admitted(schema["const"], null)
    enum = schema.get("enum")
    return isinstance(enum, list) and all(_admitted(value, null) for value in enum)


def _admitted(value: Any, null: bool) -> bool:
    return _scalar_value(value) or (null and value is None)


def _refused(field: str, problem: str) -> GatewayError:
    fields = [{"field": field, "problem": problem}]
    return invalid_input(fields_message(fields), fields)
