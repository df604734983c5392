"""The README held to the code: its operation placeholder tables against what each kind of
operation fills when a config loads, and the token claims shown under Authentication against
what `aigw token` mints."""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
import subprocess
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
import yaml
from json_server import example_config
from processes import ROOT

import gateway
from gateway.loader import ConfigError, load_config
from gateway.operations import Placeholders

README = ROOT / "README.md"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def section(title: str, level: str = "##") -> str:
    """The README's text under `title`, up to the next heading of the same level."""
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n{level} {title}\n")
    end = text.find(f"\n{level} ", start + 1)
    return text[start:end if end != -1 else len(text)]


def blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced block, in order."""
    return [(m[1], m[2]) for m in _FENCE.finditer(text)]


# --------------------------------------------------------------------------- placeholders

_TABLE_HEAD = re.compile(r"^\*\*`(?P<where>[\w.<>]+)`\*\* \(kind `(?P<kind>\w+)`\)", re.M)
_ROW = re.compile(r"^\| `\{(\w+)\}` \|", re.M)
_FILLS = re.compile(r"unknown placeholder \{not_a_placeholder\}; this operation fills (.*)$")


def documented_placeholders() -> dict[str, tuple[str, set[str]]]:
    """Kind -> (where it is configured, its placeholders), from the README's tables."""
    text = section("Operation placeholders", "###")
    heads = list(_TABLE_HEAD.finditer(text))
    tables = {}
    for head, following in zip(heads, [*heads[1:], None], strict=True):
        body = text[head.end():following.start() if following else len(text)]
        tables[head["kind"]] = (head["where"], set(_ROW.findall(body)))
    return tables


def placeholder_kinds() -> dict[str, type[Placeholders]]:
    """Every kind of upstream operation the gateway declares, by class name: a Placeholders
    subclass some module of the package defines and no other kind extends. (Read from the
    modules, not `__subclasses__()`, which still lists the class each slotted dataclass
    replaced.)"""
    declared: set[type[Placeholders]] = set()
    for module in pkgutil.walk_packages(gateway.__path__, "gateway."):
        if module.name.endswith(".__main__"):  # importing it would run the command line
            continue
        for value in vars(importlib.import_module(module.name)).values():
            if isinstance(value, type) and issubclass(value, Placeholders) \
                    and value is not Placeholders and value.__module__ == module.name:
                declared.add(value)
    bases = {base for kind in declared for base in kind.__mro__[1:]}
    return {kind.__name__: kind for kind in declared - bases}


def test_every_kind_of_operation_has_a_placeholder_table_with_its_fields():
    tables, kinds = documented_placeholders(), placeholder_kinds()
    assert set(tables) == set(kinds)
    for name, kind in kinds.items():
        assert tables[name][1] == {f.name for f in fields(kind)}, name


def probe_config(where: str, workdir: Path) -> tuple[dict[str, Any], str]:
    """The example config with the operation at `where` (`<name>`: the first one there,
    created when absent) naming a placeholder no operation fills; and its concrete path."""
    config = example_config("http://127.0.0.1:9", workdir)
    config["aidre"]["embedding_spaces"] = [{"id": "probe", "dimensions": 3,
                                            "distance": "cosine"}]
    node: dict[str, Any] = config
    path = []
    *parents, last = where.split(".")
    for key in parents:
        key = next(iter(node)) if key == "<name>" else key
        node = node.setdefault(key, {})
        path.append(key)
    operation = node.setdefault(last, {"upstream": "debian", "path": "/probe",
                                       "mapping": {"id": "id"}})
    if last == "vector_search":
        operation.setdefault("embedding_space", "probe")
    operation["query"] = {**operation.get("query", {}), "probe": "{not_a_placeholder}"}
    return config, ".".join([*path, last])


@pytest.mark.parametrize("kind", sorted(documented_placeholders()))
def test_each_placeholder_table_is_what_its_operation_fills(kind: str, tmp_path: Path):
    where, documented = documented_placeholders()[kind]
    config, path = probe_config(where, tmp_path)
    (tmp_path / "probe.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError) as refused:
        load_config(tmp_path / "probe.yaml")
    [issue] = [issue for issue in refused.value.issues if "not_a_placeholder" in issue.message]
    assert issue.path == path
    fills = _FILLS.search(issue.message)
    assert fills, issue.message
    assert set(re.findall(r"\{(\w+)\}", fills[1])) == documented


# --------------------------------------------------------------------------- token claims


def test_the_token_claims_under_authentication_are_what_aigw_token_mints():
    shown = blocks(section("Authentication"))
    [(index, command)] = [(i, body) for i, (language, body) in enumerate(shown)
                          if language == "sh" and "aigw token" in body]
    language, claims = shown[index + 1]
    assert language == "json"
    minted = subprocess.run(["bash", "-c", command], capture_output=True, text=True,
                            timeout=30, cwd=ROOT, check=True)
    fresh, documented = json.loads(minted.stdout), json.loads(claims)
    per_token = {"iat", "nbf", "exp", "jti"}
    assert {k: v for k, v in fresh.items() if k not in per_token} == \
        {k: v for k, v in documented.items() if k not in per_token}
    assert set(fresh) == set(documented)

