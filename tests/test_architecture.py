"""The shape DESIGN.md asks for, held by tests: the core names no spec and imports no surface
(nor the demo), the import contracts cover every core module, and the import graph has no
cycles; surfaces plug in through the registry."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import tokenize
import tomllib
from collections.abc import Iterator
from pathlib import Path

import grimp
import pytest

from gateway import registry
from gateway.policy.config import PolicyPack

ROOT = Path(__file__).resolve().parent.parent
GATEWAY = ROOT / "gateway"
# the spec plug-ins; the demo backend and issuer; `aigw check`, a client of every spec
OUTSIDE_THE_CORE = ("surfaces", "demo", "check")
# A spec's short name or title, in prose or inside an identifier (`pdpp_grant`, `AipRules`);
# MCP and A2A are the agents' protocols DESIGN.md plans as surfaces too.
SPEC_NAME = re.compile(
    r"(?<![a-z0-9])(aidre|aidip|aip|pdpp|ai_?endpoint|mcp|a2a|ai discovery|agentic intent)"
    r"(?![a-z0-9])")
# Where a core module may still name a spec: (module, the string as written) -> why.
NAMED_SPECS_ALLOWED = {
    # Wire names a token carries (PDPP's token-kind claim, its grant claim and RFC 9396 detail
    # type), as config defaults that deployments and their IdPs already rely on.
    ("gateway/auth/config.py", "pdpp_token_kind"): "default claim name",
    ("gateway/auth/config.py", "pdpp_grant"): "default claim name and detail type",
}
# Modules another change is rewriting, with the spec names they still hold (in docstrings).
# gateway/pipeline.py, also being rewritten, names none and needs no entry.
OWNED_ELSEWHERE = {
}
# The CLI's `demo` and `token` commands start the demo and mint its tokens.
DEMO_IMPORTERS = {"gateway/cli.py"}
_WORDS = {tokenize.NAME, tokenize.STRING, tokenize.COMMENT,
          getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}  # Python 3.12+ splits f-strings


def core_modules() -> list[Path]:
    return sorted(path for path in GATEWAY.rglob("*.py")
                  if path.relative_to(GATEWAY).parts[0] not in OUTSIDE_THE_CORE)


def _words(text: str) -> str:
    """`text` lowercased, camelCase split into words, so a pattern can see `AipRules`."""
    split = re.sub(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", text)
    return re.sub(r"\s+", " ", split).lower()


def _spec_names(path: Path) -> Iterator[tuple[int, str, str]]:
    """(line, spec name, the token's text) for every identifier, string, docstring and comment
    that names a spec."""
    for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if token.type in _WORDS:
            text = _text(token)
            for match in SPEC_NAME.finditer(_words(text)):
                yield token.start[0], match.group(1), text


def _text(token: tokenize.TokenInfo) -> str:
    """A string literal's value (an f-string as written), any other token as written."""
    literal = token.string
    if token.type != tokenize.STRING or literal.lstrip("rbuRBU").startswith(("f", "F")):
        return literal
    return str(ast.literal_eval(literal))


def _named_specs(path: Path) -> list[str]:
    relative = path.relative_to(ROOT).as_posix()
    return [f"{relative}:{line}: {name!r} in {text[:80]!r}"
            for line, name, text in _spec_names(path)
            if (relative, text) not in NAMED_SPECS_ALLOWED
            and name not in OWNED_ELSEWHERE.get(relative, ())]


def test_the_core_names_no_spec():
    found = [named for path in core_modules() for named in _named_specs(path)]
    assert not found, "\n".join(found)


def test_the_allowed_names_are_still_there():
    """An allowance nothing needs any more is removed, so the list only shrinks."""
    for (module, text), why in NAMED_SPECS_ALLOWED.items():
        texts = {written for _, _, written in _spec_names(ROOT / module)}
        assert text in texts, f"{module} no longer says {text!r} ({why}): drop the allowance"
    for module, names in OWNED_ELSEWHERE.items():
        said = {name for _, name, _ in _spec_names(ROOT / module)}
        assert names <= said, f"{module} no longer names {names - said}: shrink the allowance"


def _imported(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) for every import, at any depth (under TYPE_CHECKING, in a function),
    and every module name given as a string (`importlib.import_module("...")`)."""
    package = ".".join(path.relative_to(ROOT).parts[:-1])  # what `from . import` names
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            yield node.lineno, base
            yield from ((node.lineno, f"{base}.{alias.name}") for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and re.fullmatch(r"gateway(\.\w+)+", node.value):
            yield node.lineno, node.value


def _is_under(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def test_the_core_imports_no_surface_and_no_demo():
    found = []
    for path in core_modules():
        relative = path.relative_to(ROOT).as_posix()
        for line, module in _imported(path):
            if _is_under(module, "gateway.surfaces") or (
                    _is_under(module, "gateway.demo") and relative not in DEMO_IMPORTERS):
                found.append(f"{relative}:{line}: imports {module}")
    assert not found, "\n".join(found)


def _contracts() -> dict[str, dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {c["name"]: c for c in config["tool"]["importlinter"]["contracts"]}


def test_the_import_contracts_cover_the_whole_core():
    """Every top-level module and package of the core is a source of the contracts, so a new
    module is held by them from its first commit."""
    top_level = {f"gateway.{path.stem}" for path in GATEWAY.glob("*.py")
                 if path.name != "__init__.py"}
    top_level |= {f"gateway.{path.name}" for path in GATEWAY.iterdir()
                  if (path / "__init__.py").is_file() and path.name not in OUTSIDE_THE_CORE}
    contract = _contracts()["The core never imports a spec surface, nor the demo but for the "
                            "CLI's demo commands"]
    assert set(contract["source_modules"]) == top_level
    assert set(contract["forbidden_modules"]) == {"gateway.surfaces", "gateway.demo"}


# What only the pipeline calls (gateway/pipeline.py): a surface gets these stages' results
# through `Pipeline.retrieve`/`listing`/`permitted` and the upstream calls it is handed.
AIDIP_FORBIDDEN = re.compile(
    r"\bpipeline\.(upstream|policy|authenticat\w*|limit\w*|egress)\b|\bbundle\.decide\b"
    r"|\bPolicyEngine\b|\bUpstreamCalls\b|\baiohttp\b|\bhttpx\b|\bEgressClient\b")


def test_aidip_calls_no_policy_engine_and_no_upstream_client_itself():
    """AIDIP asks the pipeline for access decisions (`permitted`, so they are logged) and calls
    configured and registered agents through the pipeline's `Calls`: it names neither the
    engine, the bundle's decisions, an upstream client nor the egress client it is lent."""
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
             for path in sorted((ROOT / "gateway" / "surfaces" / "aidip").rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if AIDIP_FORBIDDEN.search(line)]
    assert not found, "\n".join(found)


def test_import_contracts_hold():
    lint = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "0 broken" in result.stdout


def test_the_import_graph_has_no_cycles():
    """Imports made at run time form no cycle. An import under `TYPE_CHECKING` only names a
    type for an annotation (the exchange names the generation that holds it), so it may."""
    graph = grimp.build_graph("gateway", exclude_type_checking_imports=True)
    cycles = []
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            if imported != module and graph.chain_exists(imported, module):
                cycles.append(graph.find_shortest_chain(imported, module))
    assert not cycles, cycles[:5]


def test_surfaces_are_found_through_entry_points():
    names = [surface.name for surface in registry.surfaces()]
    assert {"aidip", "aidre", "aiendpoint"} <= set(names)
    fields = registry.settings_model().model_fields
    assert {"aidip", "aidre", "ai_endpoint"} <= set(fields)


def test_a_surface_adds_its_own_policy_section():
    """The older `aip:` policy-file section is the AIP surface's, not the core's."""
    assert "aip" not in PolicyPack.model_fields
    pack = registry.policy_pack_model().model_validate({"aip": {"max_chunks": 3}})
    assert pack.aip.max_chunks == 3  # type: ignore[attr-defined]


PDPP_FORBIDDEN = re.compile(
    r"\bpipeline\.(upstream|policy|authenticat\w*|limit\w*|admit\w*)\b|\bbundle\.decide\b"
    r"|\bPolicyEngine\b|\bUpstreamCalls\b")
PDPP_FORBIDDEN_IMPORTS = ("gateway.policy.engine", "gateway.upstream_call",
                          "gateway.auth.authenticator", "gateway.ratelimit")
# The report's projection of a rule kind (what a reader of a stream is shown) decides sampled
# asks with the bundle while `aigw policy report | explain | test` run, never on a request.
PDPP_TOOL_TIME = {("gateway/surfaces/pdpp/policy_rules.py", "bundle.decide")}


def test_pdpp_calls_no_stage_itself():
    """PDPP calls no authentication, rate limiting, policy engine or upstream client itself:
    the pipeline admits its requests, decides its grant kinds (`permitted`, a listing) and
    reads its streams' upstream operations through the `Stages` of `Pipeline.serve`."""
    found = []
    for path in sorted((GATEWAY / "surfaces" / "pdpp").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        for number, line in enumerate(path.read_text().splitlines(), 1):
            match = PDPP_FORBIDDEN.search(line)
            if match and (relative, match.group(0)) not in PDPP_TOOL_TIME:
                found.append(f"{relative}:{number}: {line.strip()}")
        found += [f"{relative}:{number}: imports {module}"
                  for number, module in _imported(path)
                  if any(_is_under(module, banned) for banned in PDPP_FORBIDDEN_IMPORTS)]
    assert not found, "\n".join(found)


# What only the pipeline calls (DESIGN.md, "One pipeline, five dialects"): a surface reaches
# authentication, rate limiting, the policy engine and upstream clients through it. Types an
# upstream call raises or is configured with (`gateway.upstream.UpstreamError`, egress rules)
# are no client, and stay importable.
PIPELINE_ONLY_CALLS = {*(("pipeline", stage) for stage in
                         ("authenticate", "limit", "admit", "policy", "upstream", "egress")),
                       ("bundle", "decide")}
PIPELINE_ONLY_NAMES = {"PolicyEngine", "may_see_record", "UpstreamCalls", "EgressClient",
                       "Transport", "create_transport"}
# Upstream clients by module: HTTP client libraries and the gateway's own transports.
CLIENT_MODULES = re.compile(r"(aiohttp|httpx|gateway\.upstream\.(\w+_transport|h1_\w+))(\..*)?")
# Surfaces that still call those themselves, each until its own change moves them onto the
# pipeline: delete a name here to hold that surface to the rule.
NOT_YET_ON_THE_PIPELINE: dict[str, str] = {}


def _dotted_tail(node: ast.expr) -> str:
    """The last name of an expression such as `exchange.pipeline` (`pipeline`), else ''."""
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else ""


def _bypass(node: ast.AST) -> str | None:
    """What this node references that only the pipeline may call, if anything."""
    if isinstance(node, ast.Attribute):
        owner = _dotted_tail(node.value)
        if (owner, node.attr) in PIPELINE_ONLY_CALLS:
            return f"{owner}.{node.attr}"
        return node.attr if node.attr in PIPELINE_ONLY_NAMES else None
    if isinstance(node, ast.Name):
        return node.id if node.id in PIPELINE_ONLY_NAMES else None
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        named = [alias.name for alias in node.names if alias.name in PIPELINE_ONLY_NAMES]
        return module if CLIENT_MODULES.fullmatch(module) else ", ".join(named) or None
    if isinstance(node, ast.Import):
        return next((a.name for a in node.names if CLIENT_MODULES.fullmatch(a.name)), None)
    return None


def pipeline_bypasses(source: str) -> list[str]:
    """What a module references that only the pipeline may call, as `line: what`."""
    found = sorted((getattr(node, "lineno", 0), what) for node in ast.walk(ast.parse(source))
                   if (what := _bypass(node)) is not None)
    return [f"{line}: {what}" for line, what in found]


def test_the_bypass_scan_finds_each_way_round_the_pipeline():
    source = "\n".join([
        "from gateway.policy.engine import PolicyEngine, may_see_record",
        "import httpx",
        "from gateway.upstream_call import UpstreamCalls",
        "from gateway.upstream.h1_transport import H1Transport",
        "from gateway.upstream import UpstreamError",  # an error type: no client
        "async def f(exchange, self):",
        "    await exchange.pipeline.authenticate(ctx, scope)",
        "    await exchange.pipeline.limit(ctx)",
        "    exchange.generation.pipeline.upstream.hits(op, values, ctx)",
        "    self.bundle.decide(ask)",
        "    return exchange.pipeline.retrieve(surface, exchange), stages.hits(op, values)",
    ])
    assert pipeline_bypasses(source) == [
        "1: PolicyEngine, may_see_record", "2: httpx", "3: UpstreamCalls",
        "4: gateway.upstream.h1_transport", "7: pipeline.authenticate", "8: pipeline.limit",
        "9: pipeline.upstream", "10: bundle.decide"]


def _surface_packages() -> list[object]:
    packages = sorted(p.name for p in (ROOT / "gateway" / "surfaces").iterdir()
                      if p.is_dir() and (p / "__init__.py").exists())
    return [pytest.param(name, marks=pytest.mark.xfail(reason=NOT_YET_ON_THE_PIPELINE[name]))
            if name in NOT_YET_ON_THE_PIPELINE else name for name in packages]


@pytest.mark.parametrize("surface", _surface_packages())
def test_a_surface_calls_no_stage_only_the_pipeline_calls(surface: str):
    """No module of the package references authentication, rate limiting, the policy engine
    or an upstream client but through the pipeline (`Pipeline.retrieve`, `listing`,
    `permitted`, the `Stages` and `Calls` it hands out, admission as the route declares)."""
    found = {}
    for path in sorted((ROOT / "gateway" / "surfaces" / surface).rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        bypasses = [bypass for bypass in pipeline_bypasses(path.read_text())
                    if (relative, bypass.split(": ", 1)[1]) not in PDPP_TOOL_TIME]
        if bypasses:
            found[relative] = bypasses
    assert not found, found
