"""The walkthrough, "Put aigw in front of an API you already run" (docs/how-to/existing-api.md),
run as written: every command of its shell blocks in order, against a real json-server (npm)
and `aigw run`, on spare ports. Each `curl` must answer the status its `# NNN` note says and
never carry json-server's address; every other command must exit 0 (or the code its `# exit N`
note says). Its excerpts of the example's files must be in those files, verbatim.

Also held to the code here: where each kind of operation is configured (its `configured`,
which the placeholder reference shows) against what that operation fills when a config loads,
and the token claims shown in docs/how-to/authentication.md.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import pkgutil
import re
import shlex
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from json_server import EXAMPLE, example_config
from processes import ROOT, Process, free_port, wait_for_http

import gateway
from gateway import cli
from gateway.loader import ConfigError, load_config
from gateway.operations import Placeholders

WALKTHROUGH_PAGE = ROOT / "docs" / "how-to" / "existing-api.md"
AUTHENTICATION_PAGE = ROOT / "docs" / "how-to" / "authentication.md"
WALKTHROUGH = "Put aigw in front of an API you already run"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
_HEREDOC = re.compile(r"<<\s*'?(\w+)'?")
_STATUS = re.compile(r"#\s*(\d{3})\s*$")
_EXIT = re.compile(r"#\s*exit\s+(\d+)\s*$")
# An aigw command other than `run`, neither piped nor redirected.
_AIGW = re.compile(r"^\.venv/bin/aigw (?!run\b)[^|<>]*$")


def section(page: Path, title: str, level: str = "##") -> str:
    """A docs page's text under `title`, up to the next heading of the same level."""
    text = "\n" + page.read_text(encoding="utf-8")
    start = text.index(f"\n{level} {title}\n")
    end = text.find(f"\n{level} ", start + 1)
    return text[start:end if end != -1 else len(text)]


def walkthrough() -> str:
    text = WALKTHROUGH_PAGE.read_text(encoding="utf-8")
    assert text.startswith(f"# {WALKTHROUGH}\n")
    return text


def blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced block, in order."""
    return [(m[1], m[2]) for m in _FENCE.finditer(text)]


def commands(script: str) -> list[str]:
    """The commands of a shell block as bash reads them: continuation lines joined, quoted
    strings and here-documents kept whole; blank and comment-only lines dropped."""
    found: list[str] = []
    lines = iter(script.splitlines())
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        command = line
        heredoc = _HEREDOC.search(line)
        if heredoc:
            for body in lines:
                command += "\n" + body
                if body == heredoc[1]:
                    break
            found.append(command)
            continue
        while command.endswith("\\") or not _balanced(command):
            command += "\n" + next(lines)
        found.append(command)
    return found


def _balanced(command: str) -> bool:
    try:
        shlex.split(command, comments=True)
    except ValueError:  # "No closing quotation"
        return False
    return True


# --------------------------------------------------------------------------- the walkthrough


@dataclass
class Walk:
    """The walkthrough's ports and files, swapped in for the ones it names."""

    tmp: Path
    logs: Path
    upstream_port: int = field(default_factory=free_port)
    port: int = field(default_factory=free_port)
    admin_port: int = field(default_factory=free_port)
    upstream: Process | None = None
    gateway: Process | None = None
    gateway_reads_gw_yaml: bool = False
    started: int = 0

    def local(self, command: str) -> str:
        command = re.sub(r"\b3000\b", str(self.upstream_port), command)
        command = re.sub(r"\b8080\b", str(self.port), command)
        command = re.sub(r"\b9090\b", str(self.admin_port), command)
        command = command.replace("/tmp/db.json", str(self.tmp / "db.json"))
        return re.sub(r"(?<![\w./-])gw\.yaml\b", str(self.tmp / "gw.yaml"), command)

    @property
    def upstream_address(self) -> str:
        return f"127.0.0.1:{self.upstream_port}"

    @property
    def admin(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    def run(self, command: str) -> None:
        local = self.local(command)
        if re.match(r"\S*/json-server ", command):
            self.upstream = self.start(local, f"http://{self.upstream_address}/")
        elif re.search(r"(^|\s)\S*aigw run\b", command):
            if self.gateway is not None:
                self.gateway.stop()
            self.gateway = self.start(local, self.admin + "/healthz")
            self.gateway_reads_gw_yaml = "--config gw.yaml" in command
        elif command.startswith("curl "):
            self.curl(command, local)
        else:
            self.shell(command, local)

    def start(self, command: str, answers: str) -> Process:
        env = {"AIGW_PORT": str(self.port), "AIGW_ADMIN_PORT": str(self.admin_port)}
        self.started += 1
        process = Process(["bash", "-c", "exec env " + command], self.logs,
                          f"walkthrough-{self.port}-{self.started}", env=env)
        try:
            wait_for_http(answers, process=process.popen)
        except (RuntimeError, TimeoutError):
            process.stop()
            raise AssertionError(f"{command} did not start: {process.stderr()[-2000:]}") from None
        return process

    def curl(self, command: str, local: str) -> None:
        expected = _STATUS.search(command.splitlines()[-1])
        assert expected, f"no expected status noted on: {command}"
        with_status = local.replace("curl -s ", "curl -s -w '\\n%{http_code}' ", 1)
        result = subprocess.run(["bash", "-c", with_status], capture_output=True, text=True,
                                timeout=30, cwd=ROOT)
        answer, _, status = result.stdout.rpartition("\n")
        assert result.returncode == 0 and status == expected[1], (command, result.stdout)
        if f":{self.port}/" in local:  # an answer of the gateway's
            assert self.upstream_address not in answer, (command, answer)

    def shell(self, command: str, local: str) -> None:
        expected = _EXIT.search(command.splitlines()[-1])
        reloads = self.reloads() if self.reloads_gw_yaml(command) else None
        code, output = self.aigw(local) if _AIGW.match(command) else self.bash(local)
        assert code == (int(expected[1]) if expected else 0), (command, output)
        if reloads is not None:
            self.wait_for_reload(reloads)

    @staticmethod
    def bash(command: str) -> tuple[int, str]:
        result = subprocess.run(["bash", "-c", command], capture_output=True, text=True,
                                timeout=60, cwd=ROOT)
        return result.returncode, result.stdout + result.stderr

    @staticmethod
    def aigw(command: str) -> tuple[int, str]:
        """An `aigw` command run by its entry point in this process: the console script
        calls the same function, without the second of start-up each process costs."""
        output = io.StringIO()
        with contextlib.chdir(ROOT), contextlib.redirect_stdout(output), \
                contextlib.redirect_stderr(output):
            code = cli.main(shlex.split(command, comments=True)[1:])
        return code, output.getvalue()

    def reloads_gw_yaml(self, command: str) -> bool:
        writes = re.match(r"cat >>? gw\.yaml\b", command) is not None
        return writes and self.gateway is not None and self.gateway_reads_gw_yaml

    def reloads(self) -> float:
        metrics = httpx.get(self.admin + "/metrics").text
        found = re.search(r'^aigw_config_reloads_total\{result="success"\} (\S+)$', metrics,
                          re.MULTILINE)
        return float(found[1]) if found else 0.0

    def wait_for_reload(self, before: float, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while self.reloads() <= before:
            assert time.monotonic() < deadline, "the gateway did not reload gw.yaml"
            time.sleep(0.05)

    def stop(self) -> None:
        for process in (self.gateway, self.upstream):
            if process is not None:
                process.stop()


@pytest.fixture
def walk(tmp_path: Path, logs_dir: Path) -> Iterator[Walk]:
    walk = Walk(tmp_path, logs_dir)
    yield walk
    walk.stop()


def walkthrough_commands() -> list[str]:
    return [command for language, body in blocks(walkthrough())
            if language == "sh" for command in commands(body)]


def test_the_walkthrough_runs_as_written(walk: Walk):
    steps = walkthrough_commands()
    curls = [step for step in steps if step.startswith("curl ")]
    assert len(curls) >= 15 and {"200", "401", "403"} <= {_STATUS.search(c.splitlines()[-1])[1]
                                                          for c in curls}
    for step in steps:
        walk.run(step)
    assert walk.upstream is not None and walk.gateway is not None


def test_the_walkthroughs_excerpts_are_in_the_files_they_name():
    excerpts = [body for language, body in blocks(walkthrough())
                if language == "yaml"]
    assert len(excerpts) >= 3
    for excerpt in excerpts:
        first, _, rest = excerpt.partition("\n")
        named = ROOT / first.removeprefix("# ").strip()
        assert first.startswith("# ") and named.is_file(), first
        assert rest in named.read_text(encoding="utf-8"), f"not in {named.name}:\n{rest}"


def test_the_example_config_points_at_the_walkthrough():
    header = (EXAMPLE / "aigw.yaml").read_text(encoding="utf-8").split("\nversion:")[0]
    assert "docs/how-to/existing-api.md" in header and WALKTHROUGH in header


# --------------------------------------------------------------------------- placeholders

_FILLS = re.compile(r"unknown placeholder \{not_a_placeholder\}; this operation fills (.*)$")


def documented_placeholders() -> dict[str, tuple[str, set[str]]]:
    """Kind -> (where it is configured, its placeholders), as the placeholder reference lists
    them (docs/refgen/placeholders_ref.py reads each kind's `configured` and fields)."""
    return {name: (kind.configured, {f.name for f in fields(kind)})
            for name, kind in placeholder_kinds().items()}


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


def test_every_kind_of_operation_says_where_it_is_configured():
    assert {kind.configured for kind in placeholder_kinds().values()} \
        >= {"aidre.collections.<name>.text_search", "pdpp.streams.<name>.records"}
    assert all(kind.configured for kind in placeholder_kinds().values())


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
    shown = blocks(section(AUTHENTICATION_PAGE, "The grant in a token"))
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

