"""A capability: one thing an agent can do here, as the /.well-known/ai document lists it.

Every surface contributes its own (`Surface.capabilities`); a surface's config section may let
a deployment declare more. The model checks an entry's id, lengths and endpoint.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BeforeValidator, Field, PrivateAttr

from gateway.schema_text import params_text
from gateway.strict import Strict

_ID = re.compile(r"[a-z][a-z0-9_]{0,63}")


def _snake_case_id(value: Any) -> Any:
    if isinstance(value, str) and not _ID.fullmatch(value):
        raise ValueError("expected a snake_case id: a lowercase letter, then lowercase letters, "
                         f"digits or _, at most 64 characters (got {value!r})")
    return value


def _length(low: int, high: int) -> Callable[[Any], Any]:
    """Refuse strings outside `low..high` characters with a message that gives the length."""

    def check(value: Any) -> Any:
        if isinstance(value, str) and not low <= len(value) <= high:
            raise ValueError(f"expected {low} to {high} characters, got {len(value)}")
        return value

    return check


def _endpoint(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    relative = value.startswith("/") and not value.startswith("//")
    if not (relative or _absolute_http(value)) or any(char.isspace() for char in value):
        raise ValueError("expected a path starting with / (served by this gateway) or an "
                         f"absolute http:// or https:// URL (got {value!r})")
    return value


def _absolute_http(value: str) -> bool:
    parts = urlsplit(value)
    try:
        parts.port  # noqa: B018 -- raises ValueError for a port out of range
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


# The document's limits on an entry, checked first so that the message is plain;
# the Field constraints repeat them for the exported JSON Schema.
CapabilityId = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=64),
                         BeforeValidator(_snake_case_id)]
Description = Annotated[str, Field(min_length=1, max_length=200), BeforeValidator(_length(1, 200))]
Returns = Annotated[str, Field(max_length=300), BeforeValidator(_length(0, 300))]
Endpoint = Annotated[str, Field(min_length=1), BeforeValidator(_endpoint)]


class Capability(Strict):
    id: CapabilityId = Field(
        description="The capability's id: snake_case, at most 64 characters, unique in the "
        "document.",
    )
    description: Description = Field(
        description="What the capability does, for an agent choosing one (at most 200 "
        "characters).",
    )
    endpoint: Endpoint = Field(
        description="Path on this gateway (or an absolute URL) the capability is served at."
    )
    method: Literal["GET", "POST", "PUT", "DELETE", "PATCH"] = Field(
        "GET",
        description="HTTP method the endpoint is called with.",
    )
    params: dict[str, str] = Field(
        {}, description="Parameter name -> 'type, required|optional[, qualifiers] — meaning'."
    )
    returns: Returns | None = Field(None, description="Compact shape, e.g. 'items[] {id, title}'.")
    # The JSON Schema its route enforces on the arguments, for a surface's own capability
    # whose route has one (never set from config): enforced_capability.
    _request_schema: dict[str, Any] | None = PrivateAttr(None)

    @property
    def request_schema(self) -> dict[str, Any] | None:
        return self._request_schema


def enforced_capability(schema: dict[str, Any], meanings: dict[str, str] | None = None,
                        **fields: Any) -> Capability:
    """A capability whose params are written from `schema`, the JSON Schema its route
    enforces on the arguments (gateway.schema_text; `meanings` replace descriptions the schema
    does not write for a caller), and which keeps it for the tools that describe it further."""
    capability = Capability(params=params_text(schema, meanings), **fields)
    capability._request_schema = schema
    return capability
