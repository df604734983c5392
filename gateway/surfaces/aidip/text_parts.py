"""Which input field an A2A text part fills, when an operation takes text at all.

Most A2A clients are chat agents that send a text part. An operation takes one when its config
names the field (`text_input`), or when its `inputs` schema is an object with exactly one
required property and that property is a string: the text becomes `{field: text}`, checked
against `inputs` like any input. Any other operation takes data parts only; its card skill says
so (`inputModes`) and a text part is A2A's ContentTypeNotSupportedError.
"""

from __future__ import annotations

from typing import Any

JSON_MODE = "application/json"
TEXT_MODE = "text/plain"
SEARCH_TEXT_FIELD = "query"  # the registry's search: a text part is its free-text query


def text_field(inputs: Any, named: str | None = None) -> str | None:
    """The field a text part fills: `named` (the config's `text_input`), else the one
    required string property of `inputs`; None when text does not map."""
    if named is not None:
        return named
    if not isinstance(inputs, dict) or inputs.get("type") != "object":
        return None
    required, properties = inputs.get("required"), inputs.get("properties")
    if not isinstance(required, list) or len(required) != 1 or not isinstance(properties, dict):
        return None
    field = required[0]
    described = properties.get(field) if isinstance(field, str) else None
    return field if isinstance(described, dict) and described.get("type") == "string" else None


def input_modes(takes_text: bool) -> list[str]:
    return [JSON_MODE, TEXT_MODE] if takes_text else [JSON_MODE]


def is_text(media_type: str) -> bool:
    """A text part's media type this maps: none given, or a text/ type."""
    return not media_type or media_type.lower().startswith("text/")


def text_input_problem(inputs: dict[str, Any], field: str) -> str | None:
    """Why `text_input` cannot name `field` of `inputs`: it must be a string property, and the
    only required one (a text part carries nothing else)."""
    properties = inputs.get("properties")
    described = properties.get(field) if isinstance(properties, dict) else None
    if not isinstance(described, dict) or described.get("type") != "string":
        return f"expected a string property of inputs, got {field!r}"
    others = [name for name in inputs.get("required") or [] if name != field]
    if others:
        return f"inputs requires {', '.join(map(str, others))} too, which a text part lacks"
    return None
