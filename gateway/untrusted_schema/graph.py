"""The subschemas of a schema and the references between them, checked before any input runs.

A reference may only point inside the document (`#...`): the registry that resolves it holds
that one document and retrieves nothing. Keywords that apply a subschema to the *same* input
value (`$ref`, `allOf`, `not`, `if`, ...) form the "in-place" graph: a cycle there (`{"$ref":
"#"}`) recurses forever, and wide fan-out (`allOf` of `allOf` of ...) multiplies the work for
each value, so both are refused here. Recursion through keywords that descend into the input
(`properties`, `items`, ...) ends with the input, whose depth is bounded.
"""

from __future__ import annotations

from typing import Any

from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

# keyword -> True when its subschemas apply to the same value (in place), False when they
# apply to parts of it, None when they apply to nothing by themselves ($defs: targets of $ref)
_ONE = {"not": True, "if": True, "then": True, "else": True, "items": False, "contains": False,
        "additionalProperties": False, "propertyNames": False, "unevaluatedItems": False,
        "unevaluatedProperties": False, "contentSchema": None}
_LIST = {"allOf": True, "anyOf": True, "oneOf": True, "prefixItems": False}
_MAP = {"dependentSchemas": True, "properties": False, "patternProperties": False,
        "$defs": None, "definitions": None}
DIALECTS = frozenset({"https://json-schema.org/draft/2020-12/schema",
                      "https://json-schema.org/draft/2020-12/schema#"})


class SchemaRefused(Exception):
    """The schema is not accepted; `where` is a JSON pointer inside it, `problem` says why."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where or '/'}: {problem}")
        self.where = where
        self.problem = problem


def refuse_retrieval(uri: str) -> Resource[Any]:
    raise Unresolvable(uri)  # never fetch: only the document itself is known


def registry_of(schema: Any) -> Registry[Any]:
    """A registry holding `schema` alone (jsonschema adds the metaschemas) that fetches nothing."""
    resource = DRAFT202012.create_resource(schema)
    # `retrieve` is attrs' alias of the private `_retrieve` field, which mypy does not read
    # from referencing's dataclass_transform stub.
    return Registry(retrieve=refuse_retrieval).with_resource(resource.id() or "", resource)  # type: ignore[call-arg]


class Subschemas:
    """Every subschema reachable from the root, by `id()` (they live as long as the schema),
    with its pointer and its in-place edges."""

    def __init__(self, schema: Any, max_subschemas: int) -> None:
        self.root = schema
        self.nodes: dict[int, dict[str, Any]] = {}
        self.pointers: dict[int, str] = {}
        self.in_place: dict[int, list[Any]] = {}
        self.targets: list[tuple[str, Any]] = []  # (pointer of the $ref, what it points to)
        self._max = max_subschemas
        self._resolver = registry_of(schema).resolver_with_root(
            DRAFT202012.create_resource(schema))
        self.walk(schema, "")

    def walk(self, start: Any, pointer: str) -> None:
        """Visit `start` and what its keywords hold."""
        stack = [(start, pointer)]
        while stack:
            node, where = stack.pop()
            if not isinstance(node, dict) or id(node) in self.pointers:
                continue
            if len(self.pointers) >= self._max:
                raise SchemaRefused(where, f"more than {self._max} subschemas")
            self.nodes[id(node)] = node
            self.pointers[id(node)] = where
            self.in_place[id(node)] = []
            self._check_identifiers(node, where)
            for child, child_where, in_place in _children(node, where):
                if in_place:
                    self.in_place[id(node)].append(child)
                stack.append((child, child_where))
            if "$ref" in node:
                target = self._resolve(node["$ref"], f"{where}/$ref")
                self.in_place[id(node)].append(target)
                self.targets.append((f"{where}/$ref", target))

    def _check_identifiers(self, node: dict[str, Any], where: str) -> None:
        if "$dynamicRef" in node:
            raise SchemaRefused(f"{where}/$dynamicRef", "$dynamicRef is not supported")
        if node is self.root:
            dialect = node.get("$schema", next(iter(DIALECTS)))
            if not isinstance(dialect, str) or dialect not in DIALECTS:
                raise SchemaRefused("/$schema", "only JSON Schema 2020-12 is supported")
            return
        for keyword in ("$id", "$schema"):
            if keyword in node:
                raise SchemaRefused(f"{where}/{keyword}", f"{keyword} is allowed only at the top")

    def _resolve(self, ref: Any, where: str) -> Any:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise SchemaRefused(where, "only references inside the schema (#...) are allowed")
        try:
            target = self._resolver.lookup(ref).contents
        except Unresolvable:
            raise SchemaRefused(where, "the reference points to nothing in the schema") from None
        if not isinstance(target, dict | bool):
            raise SchemaRefused(where, "the reference points to something not a schema")
        return target


def _children(node: dict[str, Any], where: str) -> list[tuple[Any, str, bool | None]]:
    found = []
    for keyword, value in node.items():
        at = f"{where}/{_escaped(keyword)}"
        if keyword in _ONE:
            found.append((value, at, _ONE[keyword]))
        elif keyword in _LIST and isinstance(value, list):
            found += [(item, f"{at}/{i}", _LIST[keyword]) for i, item in enumerate(value)]
        elif keyword in _MAP and isinstance(value, dict):
            found += [(item, f"{at}/{_escaped(name)}", _MAP[keyword])
                      for name, item in value.items()]
    return found


def _escaped(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def in_place_problem(graph: Subschemas, max_expansion: int,
                     max_chain: int) -> SchemaRefused | None:
    """A cycle of in-place subschemas; one whose in-place subschemas, counted along every path
    as validation visits them, number more than `max_expansion`; or a chain of them (`$ref`
    hops, `allOf` in `allOf`, ...) longer than `max_chain`."""
    measured: dict[int, tuple[int, int]] = {}  # node -> (expansion, longest chain)
    for node_id in graph.nodes:
        if node_id not in measured:
            problem = _measure(graph, node_id, measured, max_expansion, max_chain)
            if problem is not None:
                return problem
    return None


def _measure(graph: Subschemas, start: int, measured: dict[int, tuple[int, int]],
             max_expansion: int, max_chain: int) -> SchemaRefused | None:
    """Depth-first, without recursion: `measured` is filled in post-order."""
    on_path: set[int] = {start}
    stack: list[tuple[int, int]] = [(start, 0)]  # (node, index of its next edge)
    while stack:
        node_id, index = stack[-1]
        edges = graph.in_place[node_id]
        if index < len(edges):
            stack[-1] = (node_id, index + 1)
            child = edges[index]
            if not isinstance(child, dict) or id(child) in measured:
                continue
            if id(child) in on_path:
                return SchemaRefused(graph.pointers[node_id], "a reference loops back to "
                                     "itself without descending into the input")
            on_path.add(id(child))
            stack.append((id(child), 0))
            continue
        stack.pop()
        on_path.discard(node_id)
        below = [measured[id(c)] if isinstance(c, dict) else (1, 1) for c in edges]
        expansion = 1 + sum(count for count, _ in below)
        chain = 1 + max((length for _, length in below), default=0)
        where = graph.pointers[node_id]
        if expansion > max_expansion:
            return SchemaRefused(where, "one value would be checked against more than "
                                        f"{max_expansion} subschemas")
        if chain > max_chain:
            return SchemaRefused(where, f"more than {max_chain} references or in-place "
                                        "subschemas in a row")
        measured[node_id] = (expansion, chain)
    return None
