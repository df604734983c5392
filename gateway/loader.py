"""Read YAML config and policy files into `Settings`, with `${VAR}` interpolation (and
`${generated_secret:PATH}`, a secret made once on this machine: `gateway.generated_secrets`).

Every problem is reported as a `ConfigIssue` naming the file, the dotted path inside it and
what was expected, and all problems of one load are reported together.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from gateway import registry
from gateway.generated_secrets import generated
from gateway.policy.bundle import PolicyBundle, build_bundle, revision_of
from gateway.policy.resources import unknown_resources
from gateway.settings import Settings
from gateway.warnings import core_warnings

_VARIABLE = re.compile(r"\$\$|\$\{(?:(?P<form>generated_secret(?:_file)?):(?P<path>[^}]+)"
                       r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?)\}")
_SECRET_WORDS = ("secret", "password", "token", "key", "credential")


@dataclass(frozen=True, slots=True)
class ConfigIssue:
    file: str
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.path or '(top level)'}: {self.message}"


class ConfigError(Exception):
    def __init__(self, issues: list[ConfigIssue]) -> None:
        super().__init__("\n".join(str(issue) for issue in issues))
        self.issues = issues


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    settings: Settings
    path: Path
    policies: dict[str, Any] = field(default_factory=dict)
    sources: tuple[Path, ...] = ()
    modified: date | None = None  # the config file's last change (UTC), as far as known
    warnings: tuple[ConfigIssue, ...] = ()  # valid, but against the specs; see gateway.warnings
    bundle: PolicyBundle | None = None  # every policy rule, with the files' revision


def load_config(path: str | os.PathLike[str], env: Mapping[str, str] | None = None,
                policies_dir: Path | None = None) -> LoadedConfig:
    """Load, interpolate and validate a config file and its policy folder (or `policies_dir`,
    another folder read in its place, as `aigw policy` commands do)."""
    env = os.environ if env is None else env
    config_path = Path(path)
    issues: list[ConfigIssue] = []
    raw = _read_yaml(config_path, env, issues)
    settings = _validate(raw, str(config_path), issues) if raw is not None else None
    policies: dict[str, Any] = {}
    sources: list[Path] = [config_path]
    policy_files: list[Path] = []
    if settings is not None:
        issues.extend(_cross_checks(settings, str(config_path)))
        if settings.policies is not None or policies_dir is not None:
            folder = policies_dir.resolve() if policies_dir is not None \
                else (config_path.parent / str(settings.policies)).resolve()
            policies, policy_files = _read_policies(folder, str(config_path), env, issues,
                                                    settings)
            sources.extend(policy_files)
    if issues or settings is None:
        raise ConfigError(issues)
    bundle = build_bundle(settings, policies, registry.rule_kinds(), registry.rule_model(),
                          revision_of(policy_files) if policy_files else "none")
    issues.extend(_duplicate_ids(bundle, str(config_path)))
    if issues:
        raise ConfigError(issues)
    return LoadedConfig(settings, config_path, policies, tuple(sources),
                        _modified(config_path), _warnings(settings, str(config_path)), bundle)


def _duplicate_ids(bundle: PolicyBundle, file: str) -> list[ConfigIssue]:
    seen: set[str] = set()
    issues = []
    for rule in bundle.rules:
        if rule.id in seen:
            where = bundle.files.get(rule.id, "")
            issues.append(ConfigIssue(f"{where}.yaml" if where else file, "rules",
                                      f"rule id {rule.id!r} is used twice; ids must be unique"))
        seen.add(rule.id)
    return issues


def fingerprint(sources: tuple[Path, ...], policies_dir: Path | None = None) -> bytes:
    """A digest of everything a load reads, so a reload happens only on a real change."""
    digest = hashlib.sha256()
    files = list(sources)
    if policies_dir is not None and policies_dir.is_dir():
        files.extend(sorted(set(_policy_files(policies_dir)) - set(files)))
    for file in files:
        digest.update(str(file).encode())
        try:
            digest.update(file.read_bytes())
        except OSError:
            digest.update(b"\0missing")
    return digest.digest()


def policies_folder(loaded: LoadedConfig) -> Path | None:
    if loaded.settings.policies is None:
        return None
    return (loaded.path.parent / loaded.settings.policies).resolve()


def _read_yaml(file: Path, env: Mapping[str, str], issues: list[ConfigIssue]) -> Any:
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        issues.append(ConfigIssue(str(file), "", f"cannot read file: {exc.strerror or exc}"))
        return None
    except UnicodeDecodeError as exc:
        issues.append(ConfigIssue(str(file), "",
                                  f"expected UTF-8 text; invalid byte at offset {exc.start}"))
        return None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        issues.append(ConfigIssue(str(file), where, f"invalid YAML: {problem}"))
        return None
    if not isinstance(document, dict):
        issues.append(ConfigIssue(str(file), "", "expected a mapping at the top level"))
        return None
    found = len(issues)
    document = _interpolate(document, (), file, env, issues)
    return document if len(issues) == found else None


def _interpolate(
    node: Any, where: tuple[str | int, ...], file: Path, env: Mapping[str, str], issues: list
) -> Any:
    if isinstance(node, dict):
        return {key: _interpolate(value, (*where, key), file, env, issues)
                for key, value in node.items()}
    if isinstance(node, list):
        return [_interpolate(item, (*where, index), file, env, issues)
                for index, item in enumerate(node)]
    if not isinstance(node, str) or "$" not in node:
        return node

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        if match.group("form"):
            path = file.parent / match.group("path")
            return _generated(match.group("form"), path, str(file), _dotted(where), issues)
        name, default = match.group("name"), match.group("default")
        if name in env:
            return env[name]
        if default is not None:
            return default
        issues.append(ConfigIssue(str(file), _dotted(where),
                                  f"environment variable {name} is not set and has no default"))
        return ""

    return _VARIABLE.sub(substitute, node)


def _generated(form: str, path: Path, file: str, where: str, issues: list) -> str:
    """A `${generated_secret...}` form's value, or "" with the issue saying why not."""
    try:
        return generated(form, path)
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        issues.append(ConfigIssue(file, where, f"cannot read or create the generated secret "
                                               f"{path}: {reason}"))
        return ""


def _validate(raw: dict[str, Any], file: str, issues: list[ConfigIssue],
              model: type[BaseModel] | None = None) -> Any:
    model = model or registry.settings_model()
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            loc = error["loc"]
            is_key = bool(loc) and loc[-1] == "[key]"
            path = _dotted(loc[:-1] if is_key else loc)
            message = error["msg"].removeprefix("Value error, ")
            if is_key:
                message = f"invalid name: {message}"
            if error["type"] not in ("missing", "extra_forbidden", "value_error") or is_key:
                message += f" (got {_describe(error.get('input'), path)})"
            if error["type"] == "extra_forbidden":
                message = "unknown field; check its spelling and place"
            issues.append(ConfigIssue(file, path, message))
        return None


def _cross_checks(settings: Settings, file: str) -> list[ConfigIssue]:
    issues = []
    if settings.default_upstream and settings.default_upstream not in settings.upstreams:
        known = ", ".join(sorted(settings.upstreams))
        issues.append(ConfigIssue(file, "default_upstream",
                                  f"expected one of the upstreams ({known}), "
                                  f"got {settings.default_upstream!r}"))
    if settings.auth is not None and not (settings.auth.resource or settings.public_base_url):
        issues.append(ConfigIssue(file, "auth.resource",
                                  "expected a resource URL (or a top-level public_base_url): "
                                  "the RFC 9728 metadata and WWW-Authenticate need it"))
    same_port = settings.listen.port == settings.admin.port != 0
    if same_port and settings.listen.host == settings.admin.host:
        issues.append(ConfigIssue(file, "admin.port",
                                  "expected a port other than listen.port: the admin listener "
                                  "must stay separate from the public one"))
    issues.extend(ConfigIssue(file, path, message)
                  for path, message in registry.config_problems(settings))
    return issues


def _warnings(settings: Settings, file: str) -> tuple[ConfigIssue, ...]:
    found = [*core_warnings(settings), *registry.config_warnings(settings)]
    return tuple(ConfigIssue(file, path, message) for path, message in found)


def _modified(file: Path) -> date | None:
    try:
        return datetime.fromtimestamp(file.stat().st_mtime, UTC).date()
    except OSError:
        return None


def _read_policies(
    folder: Path, config_file: str, env: Mapping[str, str], issues: list[ConfigIssue],
    settings: Settings,
) -> tuple[dict[str, Any], list[Path]]:
    """Every policy file, validated as a policy pack and against the config it serves."""
    if not folder.is_dir():
        issues.append(ConfigIssue(config_file, "policies", f"expected a folder, got {folder}"))
        return {}, []
    files = _policy_files(folder)
    policies = {}
    declared = registry.policy_resources(settings)
    for file in files:
        document = _read_yaml(file, env, issues)
        if document is None:
            continue
        pack = _validate(document, str(file), issues, registry.policy_pack_model())
        if pack is not None:
            policies[file.stem] = document
            problems = unknown_resources(declared, pack) + [
                problem for surface in registry.surfaces()
                for problem in surface.policy_problems(settings, pack)]
            issues.extend(ConfigIssue(str(file), path, message) for path, message in problems)
    return policies, files


def _policy_files(folder: Path) -> list[Path]:
    """The policy files; `*.test.yaml` beside them are `aigw policy test` fixtures."""
    return sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file()
                  and not p.name.endswith((".test.yaml", ".test.yml")))


def _dotted(loc: tuple[str | int, ...] | list[str | int]) -> str:
    parts = [f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc]
    return "".join(parts).lstrip(".")


def _describe(value: Any, path: str) -> str:
    if isinstance(value, str) and any(word in path.lower() for word in _SECRET_WORDS):
        return "a string (hidden)"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
