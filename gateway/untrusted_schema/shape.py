"""How big a parsed JSON value is, measured without recursion (its depth is the sender's)."""

from __future__ import annotations

from typing import Any, NamedTuple


class Shape(NamedTuple):
    problem: str | None  # why the value is too big, or None
    values: int  # every array, object, string, number, boolean and null
    names: int  # object member names
    depth: int  # the deepest value's level, at most: a scalar is 1, `{"a": 1}` is 2


def measure(value: Any, max_depth: int, max_values: int) -> Shape:
    """The value's `Shape`; its `problem` as `shape_problem` says it (when there is one, the
    counts are those seen so far)."""
    stack: list[Any] = [value]
    depths: list[int] = [1]  # each of `stack`'s, popped alongside
    seen = names = deepest = 0
    while stack:
        item = stack.pop()
        depth = depths.pop()
        seen += 1
        if seen > max_values:
            return Shape(f"more than {max_values} values", seen, names, deepest)
        if isinstance(item, dict):
            children: Any = item.values()
            names += len(item)
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            return Shape(f"nested deeper than {max_depth} levels", seen, names, deepest)
        if depth > deepest:
            deepest = depth
        stack.extend(children)
        depths.extend([depth + 1] * len(children))
    return Shape(None, seen, names, deepest + 1)  # a container's members are one level down


def shape_problem(value: Any, max_depth: int, max_values: int) -> str | None:
    """Why `value` is too big, or None. Depth counts nested arrays and objects: `{}` is 1,
    `{"a": []}` is 2; values count every array, object, string, number, boolean and null."""
    return measure(value, max_depth, max_values).problem
