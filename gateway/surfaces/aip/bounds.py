"""Bounds on the shape of every AIP JSON body, checked once it is parsed and before anything
reads it: nesting depth and the length of every string (member names included).

The schemas leave `extensions` open and their strings unbounded, yet what a platform sends
ends up in upstream URLs, rate-limit keys, stored events and (re-)serialised JSON, whose
encoder refuses documents nested deeper than 254 levels. The walk is iterative, so a deep
document cannot exhaust the stack either.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MAX_DEPTH = 32
MAX_STRING_CHARS = 2048

Path = tuple[str, ...]


def shape_problem(document: Any, string_limits: Mapping[Path, int] | None = None,
                  raw: bytes | None = None) -> tuple[Path, str] | None:
    """(path, complaint) for the first place the document is too deep or a string too long;
    `string_limits` sets another bound for the string at some paths (longer or shorter).
    `raw`, the JSON the document was parsed from, may spare the walk (`_small`).

    A first pass stacks only containers, with their depth, and checks scalars in place; the
    paths are built only when it finds something, so an accepted body costs one cheap pass."""
    limits = string_limits or {}
    within = (raw is not None and _small(raw)) or _within(document)
    problem = None if within else _locate(document, limits)
    return problem or _limited_problem(document, limits)


def _small(raw: bytes) -> bool:
    """Whether JSON this short, with this few brackets, is surely within the bounds: a string
    or name takes at least a byte per character, and each level of nesting an opening bracket
    (brackets inside strings only make this answer no more often)."""
    return len(raw) <= MAX_STRING_CHARS and raw.count(b"{") + raw.count(b"[") <= MAX_DEPTH


def _within(document: Any) -> bool:
    """No container deeper than MAX_DEPTH, no name or string longer than MAX_STRING_CHARS."""
    if isinstance(document, str):
        return len(document) <= MAX_STRING_CHARS
    stack = [(document, 0)]
    while stack:
        container, depth = stack.pop()
        if depth >= MAX_DEPTH:
            return False
        if isinstance(container, dict):
            if container and max(map(len, container)) > MAX_STRING_CHARS:
                return False
            values: Any = container.values()
        else:
            values = container
        for value in values:
            kind = value.__class__
            if kind is str:
                if len(value) > MAX_STRING_CHARS:
                    return False
            elif kind is dict or kind is list:
                stack.append((value, depth + 1))
    return True


def _limited_problem(document: Any, limits: Mapping[Path, int]) -> tuple[Path, str] | None:
    for path, limit in limits.items():
        value = document
        for name in path:
            value = value.get(name) if isinstance(value, dict) else None
        if isinstance(value, str) and len(value) > limit:
            return path, f"longer than {limit} characters"
    return None


def _locate(document: Any, limits: Mapping[Path, int]) -> tuple[Path, str] | None:
    """The first problem, with its path; a path named in `limits` has its own bound."""
    stack: list[tuple[Any, Path]] = [(document, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str):
            limit = limits.get(path, MAX_STRING_CHARS)
            if len(value) > limit:
                return path, f"longer than {limit} characters"
            continue
        if not isinstance(value, dict | list):
            continue
        if len(path) >= MAX_DEPTH:
            return path[:1], f"nested deeper than {MAX_DEPTH} levels"
        if isinstance(value, list):
            stack.extend((item, (*path, str(index))) for index, item in enumerate(value))
            continue
        for name, item in value.items():
            if len(name) > MAX_STRING_CHARS:
                return path, f"holding a member name longer than {MAX_STRING_CHARS} characters"
            stack.append((item, (*path, name)))
    return None


def where(path: Path, separator: str) -> str:
    """A path for an error message: its first few members, each cut short (they are the
    caller's own member names, so never echoed at length)."""
    parts = [part if len(part) <= 32 else part[:32] + "..." for part in path[:4]]
    return separator.join(parts) + (separator + "..." if len(path) > 4 else "") or "(body)"
