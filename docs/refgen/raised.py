"""Every error code the gateway can answer with, found in its source with `ast`.

An error is made by one of the constructors below (`GatewayError`, a policy `Decision`, an AIP
`SigningFailure` or `Denial`) or by a function that passes its own parameters on to one (a
factory, such as `deny(status, code, ...)`, found here too): each call whose status and code
are literals, module constants, both arms of a conditional, or the rows of a module's table
(`GatewayError(*_REFUSALS.get(...))`) is a site. A call whose code cannot be read that way is
returned as unresolved, so that a new kind of call fails the docs test until it is read here
or listed as known (`KNOWN_INDIRECT`)."""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Constructor -> (kind, position of the status, position of the code); None: not an argument.
CONSTRUCTORS: dict[str, tuple[str, int | None, int]] = {
    "GatewayError": ("error", 0, 1),
    "Decision": ("error", 1, 2),
    "SigningFailure": ("signing", 1, 0),
    "Denial": ("denial", None, 0),
}
_KEYWORDS = {"status": "status", "code": "code", "reason": "code"}
# Calls that only carry on an error made elsewhere (a site scanned here): module:function.
KNOWN_INDIRECT = {
    "gateway.pipeline:denial": "a policy or auth Decision (deny(...) sites) as a GatewayError",
    "gateway.surfaces.aidip.a2a_errors:refusal": "an AIDIP answer's own code, passed on to A2A",
    "gateway.surfaces.aip.signed:Denied": "an AIP Denial (Denial(...) sites) as a GatewayError",
    "gateway.surfaces.aip.gate:SignatureRefused": "a SigningFailure as a GatewayError",
    "gateway.surfaces.aip.signed:_denial": "a core refusal (rate_limited, policy_violation) "
                                           "as an AIP denial on the retrieve path",
}
SKIPPED = ("check", "demo")  # a client of the specs, and the demo backend: no gateway answers


@dataclass(frozen=True, slots=True)
class Site:
    kind: str  # error, signing, denial
    status: int | None
    code: str
    module: str
    line: int
    message: str | None = None

    @property
    def owner(self) -> str:
        """The surface whose package raises it, or `core` (any surface may answer it)."""
        parts = self.module.split(".")
        return parts[2] if len(parts) > 2 and parts[1] == "surfaces" else "core"


@dataclass(frozen=True, slots=True)
class Unresolved:
    module: str
    function: str
    line: int

    @property
    def where(self) -> str:
        return f"{self.module}:{self.function}"


@dataclass(slots=True)
class Module:
    name: str
    tree: ast.Module
    constants: dict[str, Any] = field(default_factory=dict)
    imports: dict[str, str] = field(default_factory=dict)  # local name -> module.name


@dataclass(frozen=True, slots=True)
class Factory:
    """A callable that makes an error from its own arguments: for the status and the code,
    either a fixed value or (parameter index, its default)."""

    kind: str
    status: Any
    code: Any


@dataclass(frozen=True, slots=True)
class Param:
    index: int
    name: str
    default: Any = None


def scan(package: Path) -> tuple[list[Site], list[Unresolved]]:
    modules = list(_modules(package))
    factories = _factories(modules)
    sites: list[Site] = []
    unresolved: list[Unresolved] = []
    for module in modules:
        for function, call in _calls(module.tree):
            found = _resolve_call(module, function, call, factories)
            if isinstance(found, Unresolved):
                unresolved.append(found)
            elif found is not None:
                sites.extend(found)
    return sites, unresolved


# --------------------------------------------------------------------------- modules


def _modules(package: Path) -> Iterator[Module]:
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package.parent).with_suffix("")
        parts = list(relative.parts)
        if len(parts) > 1 and parts[1] in SKIPPED:
            continue
        if parts[-1] == "__init__":
            parts.pop()
        module = Module(".".join(parts), ast.parse(path.read_text(encoding="utf-8")))
        package_name = module.name if path.name == "__init__.py" \
            else module.name.rsplit(".", 1)[0]
        for node in module.tree.body:
            _note_constant(module, node)
            _note_import(module, node, package_name)
        yield module


def _note_constant(module: Module, node: ast.stmt) -> None:
    targets = node.targets if isinstance(node, ast.Assign) else \
        [node.target] if isinstance(node, ast.AnnAssign) and node.value is not None else []
    value = getattr(node, "value", None)
    for target in targets:
        if isinstance(target, ast.Name) and value is not None:
            with contextlib.suppress(ValueError):
                module.constants[target.id] = ast.literal_eval(value)


def _note_import(module: Module, node: ast.stmt, package: str) -> None:
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]
                            + ([base] if base else []))
        for alias in node.names:
            module.imports[alias.asname or alias.name] = f"{base}.{alias.name}"
    elif isinstance(node, ast.Import):
        for alias in node.names:
            module.imports[alias.asname or alias.name.split(".")[0]] = alias.name


# --------------------------------------------------------------------------- factories


def _functions(tree: ast.AST) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef,
                                                ast.ClassDef | None]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    yield item, node
        elif isinstance(node, ast.Module):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    yield item, None


def _params(function: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, Param]:
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    if positional and positional[0].arg in ("self", "cls"):
        positional = positional[1:]
    defaults: list[Any] = [None] * (len(positional) - len(args.defaults)) + [
        _literal(d) for d in args.defaults]
    found = {a.arg: Param(i, a.arg, d) for i, (a, d) in enumerate(zip(positional, defaults,
                                                                      strict=True))}
    for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        found[a.arg] = Param(-1, a.arg, _literal(d) if d is not None else None)
    return found


def _factories(modules: list[Module]) -> dict[str, Factory]:
    """Qualified name (`module:function`, or `module:Class` for an error subclass) -> how it
    makes an error, to a fixed point: a factory may call another."""
    known: dict[str, Factory] = {}
    changed = True
    while changed:
        changed = False
        for module in modules:
            for function, cls in _functions(module.tree):
                key = _key(module, function, cls)
                if key in known:
                    continue
                params = _params(function)
                for call in _own_calls(function):
                    callee = _callee(module, call, cls, known)
                    if callee is None:
                        continue
                    status = _argument(call, callee.status, "status")
                    code = _argument(call, callee.code, "code")
                    status_p = _as_param(status, params, callee.status)
                    code_p = _as_param(code, params, callee.code)
                    if isinstance(status_p, Param) or isinstance(code_p, Param):
                        known[key] = Factory(callee.kind, status_p, code_p)
                        changed = True
                        break
    return known


def _key(module: Module, function: ast.AST, cls: ast.ClassDef | None) -> str:
    name = getattr(function, "name", "")
    if cls is not None and name == "__init__":
        return f"{module.name}:{cls.name}"
    return f"{module.name}:{name}"


def _as_param(expression: Any, params: dict[str, Param], spec: Any) -> Any:
    if isinstance(expression, ast.Name) and expression.id in params:
        return params[expression.id]
    return expression


# --------------------------------------------------------------------------- calls


def _calls(tree: ast.Module) -> Iterator[tuple[ast.AST, ast.Call]]:
    """Each call with the function (or module) it is made in."""
    def visit(node: ast.AST, function: ast.AST, cls: ast.ClassDef | None) -> Iterator[Any]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                yield from visit(child, function, child)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                child.parent_class = cls  # type: ignore[attr-defined]
                yield from visit(child, child, cls)
            else:
                if isinstance(child, ast.Call):
                    yield function, child
                yield from visit(child, function, cls)
    yield from visit(tree, tree, None)


def _own_calls(function: ast.AST) -> Iterator[ast.Call]:
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            yield node


def _callee(module: Module, call: ast.Call, cls: ast.ClassDef | None,
            factories: dict[str, Factory]) -> Factory | None:
    func = call.func
    name = func.id if isinstance(func, ast.Name) else \
        func.attr if isinstance(func, ast.Attribute) else None
    if name is None:
        return None
    if name == "__init__" and isinstance(func, ast.Attribute) \
            and isinstance(func.value, ast.Call) and _name(func.value.func) == "super":
        if cls is not None and any(_name(base) in CONSTRUCTORS for base in cls.bases):
            base = next(_name(b) for b in cls.bases if _name(b) in CONSTRUCTORS)
            kind, status, code = CONSTRUCTORS[base]
            return Factory(kind, status, code)
        return None
    if name in CONSTRUCTORS:
        kind, status, code = CONSTRUCTORS[name]
        return Factory(kind, status, code)
    for key in _candidates(module, func, name):
        if key in factories:
            return factories[key]
    return None


def _candidates(module: Module, func: ast.expr, name: str) -> list[str]:
    if isinstance(func, ast.Name):
        imported = module.imports.get(name)
        if imported is not None:
            owner, _, attr = imported.rpartition(".")
            return [f"{owner}:{attr}"]
        return [f"{module.name}:{name}"]
    assert isinstance(func, ast.Attribute)
    if isinstance(func.value, ast.Name):
        target = module.imports.get(func.value.id)
        if target is not None:
            return [f"{target}:{name}"]
    return [f"{module.name}:{name}"]


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return getattr(node, "name", "<module>")


def _argument(call: ast.Call, spec: Any, keyword: str) -> Any:
    """The expression passed for one slot (a position or a Param of a factory)."""
    if spec is None or not isinstance(spec, int | Param):
        return spec  # a fixed value of the factory
    index = spec.index if isinstance(spec, Param) else spec
    names = {keyword, spec.name} if isinstance(spec, Param) else {keyword} | {
        k for k, v in _KEYWORDS.items() if v == keyword}
    for kw in call.keywords:
        if kw.arg in names:
            return kw.value
    starred = [a for a in call.args if isinstance(a, ast.Starred)]
    if starred:
        return ("starred", starred[0].value, index)
    if 0 <= index < len(call.args):
        return call.args[index]
    if isinstance(spec, Param):
        return ("default", spec.default)
    return None


def _resolve_call(module: Module, function: ast.AST, call: ast.Call,
                  factories: dict[str, Factory]) -> list[Site] | Unresolved | None:
    cls = getattr(function, "parent_class", None)
    callee = _callee(module, call, cls, factories)
    if callee is None:
        return None
    status = _argument(call, callee.status, "status")
    code = _argument(call, callee.code, "code")
    if code is None:
        return None  # made without a code (an ALLOW decision): not an error
    if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
        params = _params(function)
        if any(isinstance(e, ast.Name) and e.id in params for e in (status, code)):
            return None  # a factory passing its arguments on: its callers are the sites
    statuses = _values(module, status)
    codes = _values(module, code)
    if codes is None or (callee.status is not None and statuses is None):
        where = _key(module, function, cls) if not isinstance(function, ast.Module) \
            else f"{module.name}:<module>"
        return Unresolved(*where.split(":"), call.lineno)
    message = _message(call, code)
    return [Site(callee.kind, s, c, module.name, call.lineno, message)
            for s, c in _pairs(statuses, codes)]


def _pairs(statuses: list[Any] | None, codes: list[Any]) -> list[tuple[Any, Any]]:
    """Rows of a table give (status, code) together; literals combine."""
    if statuses is not None and len(statuses) == len(codes) and getattr(codes, "paired", False):
        return list(zip(statuses, codes, strict=True))
    return [(s, c) for s in (statuses or [None]) for c in codes]


class _Paired(list):  # values read from the rows of one table, status and code side by side
    paired = True


def _values(module: Module, expression: Any) -> list[Any] | None:
    if expression is None:
        return None
    if isinstance(expression, tuple):
        if expression[0] == "default":
            return [expression[1]] if expression[1] is not None else None
        _, table, index = expression
        rows = _table_rows(module, table)
        return _Paired(row[index] for row in rows) if rows is not None else None
    if isinstance(expression, ast.Constant) and isinstance(expression.value, str | int):
        return [expression.value]
    if isinstance(expression, ast.Name) and expression.id in module.constants:
        value = module.constants[expression.id]
        return [value] if isinstance(value, str | int) else None
    if isinstance(expression, ast.IfExp):
        body = _values(module, expression.body)
        orelse = _values(module, expression.orelse)
        return body + orelse if body is not None and orelse is not None else None
    if isinstance(expression, ast.BoolOp) and isinstance(expression.op, ast.Or):
        last = _values(module, expression.values[-1])
        return last  # `x or "default"`: the literal is the one a site shows
    return None


def _table_rows(module: Module, expression: ast.expr) -> list[tuple[Any, ...]] | None:
    """`TABLE.get(key, DEFAULT)` or `TABLE[key]` over a module's dict of tuples."""
    if isinstance(expression, ast.Call) and isinstance(expression.func, ast.Attribute) \
            and expression.func.attr == "get" and isinstance(expression.func.value, ast.Name):
        rows = module.constants.get(expression.func.value.id)
        extra = [_literal_or_constant(module, a) for a in expression.args[1:]]
    elif isinstance(expression, ast.Subscript) and isinstance(expression.value, ast.Name):
        rows, extra = module.constants.get(expression.value.id), []
    else:
        return None
    if not isinstance(rows, dict):
        return None
    found = [*rows.values(), *(e for e in extra if isinstance(e, tuple))]
    return found if all(isinstance(r, tuple) for r in found) else None


def _literal_or_constant(module: Module, node: ast.expr) -> Any:
    if isinstance(node, ast.Name):
        return module.constants.get(node.id)
    return _literal(node)


def _literal(node: ast.expr | None) -> Any:
    try:
        return ast.literal_eval(node) if node is not None else None
    except ValueError:
        return None


def _message(call: ast.Call, code: Any) -> str | None:
    """The message a site passes, when it is written there: its first string argument other
    than the code (an f-string's fields shown as {…})."""
    for node in call.args:
        if node is code:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr):
            return "".join(v.value if isinstance(v, ast.Constant) else "{…}"
                           for v in node.values)
    return None
