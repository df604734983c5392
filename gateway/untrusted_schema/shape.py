"""How big a parsed JSON value is, measured without recursion (its depth is the sender's)."""

from __future__ import annotations

from typing import Any


def shape_problem(value: Any, max_depth: int, max_values: int) -> str | None:
    """Why `value` is too big, or None. Depth counts nested arrays and objects: `{}` is 1,
    `{"a": []}` is 2; values count every array, object, string, number, boolean and null."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    seen = 0
    while stack:
        item, depth = stack.pop()
        seen += 1
        if seen > max_values:
            return f"more than {max_values} values"
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            return f"nested deeper than {max_depth} levels"
        stack.extend((child, depth + 1) for child in children)
    return None
