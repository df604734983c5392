"""An MCP tool: a name, its JSON Schema input and output, the route of this gateway a call is
served by (as an inner request, gateway.inner), and how that route's JSON answer becomes the
tool's structured result. The tools themselves are generated from the config: one per
`/.well-known/ai` capability served here (capabilities.py), and those agent platforms and a
spec's own clients expect by name (connectors.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.inner import InnerCall

Arguments = Mapping[str, Any]


class ToolInputError(ValueError):
    """Arguments a tool cannot turn into a request (beyond what its input schema says)."""


@dataclass(frozen=True, slots=True)
class McpTool:
    name: str
    description: str
    input_schema: dict[str, Any]
    method: str  # the route a call is served by: what the route rules decide on
    path: str  # its template, as the owning surface declares it
    request: Callable[[Arguments], InnerCall]
    shape: Callable[[Any, str], dict[str, Any]] | None = None  # (route's JSON, request id)
    output_schema: dict[str, Any] | None = None
    read_only: bool = True
    title: str | None = None
    surface: str = ""  # whose route it wraps: names its own endpoint, `<mcp path>/<surface>`
    meta: dict[str, Any] = field(default_factory=dict)

    def structured(self, body: Any, request_id: str) -> dict[str, Any]:
        """The structured result of a successful call."""
        if self.shape is not None:
            return self.shape(body, request_id)
        return body if isinstance(body, dict) else {"result": body}


def as_object(value: Any) -> dict[str, Any]:
    """`value` when it is a JSON object, else an empty one (answers are read defensively)."""
    return value if isinstance(value, dict) else {}


def text_value(value: Any, field_name: str, limit: int = 1000) -> str:
    """A required string argument, bounded."""
    if not isinstance(value, str) or not value.strip():
        raise ToolInputError(f"{field_name} must be a non-empty string.")
    if len(value) > limit:
        raise ToolInputError(f"{field_name} is longer than {limit} characters.")
    return value


def string_schema(description: str, limit: int = 1000) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": limit, "description": description}


def object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required,
            "additionalProperties": False}
