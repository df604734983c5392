"""Config loading: typed models, ${VAR} interpolation, errors that name file and path."""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.cli import config_schema
from gateway.loader import ConfigError, load_config

ROOT = Path(__file__).resolve().parent.parent


def write(tmp_path: Path, text: str, name: str = "gateway.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def issues_of(path: Path, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config(path, env=env or {})
    return [str(issue) for issue in caught.value.issues]


def aigw(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=60)


def test_aigw_version_prints_the_package_version_and_exits_0():
    from importlib.metadata import version

    result = aigw("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"aigw {version('aigw')}"


def test_a_minimal_config_gets_documented_defaults(tmp_path: Path):
    path = write(tmp_path, "upstreams:\n  legacy:\n    url: http://127.0.0.1:9000/\n")
    settings = load_config(path, env={}).settings
    assert settings.upstreams["legacy"].url == "http://127.0.0.1:9000"
    assert settings.upstreams["legacy"].transport == "httptools"
    assert settings.listen.port == 8080 and settings.admin.port == 9090
    assert settings.proxy.max_body_bytes == 10 * 1024 * 1024


def test_environment_variables_and_defaults_are_interpolated(tmp_path: Path):
    path = write(tmp_path, """
listen:
  port: ${PORT}
upstreams:
  legacy:
    url: ${LEGACY_URL:-http://127.0.0.1:9000}
    timeout:
      read: ${READ_TIMEOUT:-2.5}
""")
    settings = load_config(path, env={"PORT": "8181"}).settings
    assert settings.listen.port == 8181
    assert settings.upstreams["legacy"].url == "http://127.0.0.1:9000"
    assert settings.upstreams["legacy"].timeout.read == 2.5


def test_dollar_dollar_escapes_a_literal_dollar(tmp_path: Path):
    path = write(tmp_path, "upstreams:\n  a:\n    url: http://h\n    health_path: /$${X}\n")
    assert load_config(path, env={"X": "no"}).settings.upstreams["a"].health_path == "/${X}"


def test_missing_variable_names_file_and_path(tmp_path: Path):
    path = write(tmp_path, "upstreams:\n  legacy:\n    url: ${LEGACY_URL}\n")
    assert issues_of(path) == [
        f"{path}: upstreams.legacy.url: environment variable LEGACY_URL is not set "
        "and has no default"
    ]


GENERATED = """
upstreams: {legacy: {url: "http://127.0.0.1:9"}}
auth:
  resource: https://api.example.com
  introspection:
    endpoint: https://idp.example.com/introspect
    client_id: gateway
    client_secret: ${generated_secret:state/introspection.secret}
decision_log: {sink: file, path: "${generated_secret_file:state/introspection.secret}"}
"""


def test_a_generated_secret_is_made_once_kept_private_and_read_again(tmp_path: Path):
    (tmp_path / "config").mkdir()
    path = write(tmp_path / "config", GENERATED)
    first = load_config(path, env={}).settings
    secret = first.auth.introspection.client_secret.get_secret_value()
    kept = tmp_path / "config" / "state" / "introspection.secret"
    assert re.fullmatch(r"[0-9a-f]{64}", secret)
    assert kept.read_text() == secret + "\n" and kept.stat().st_mode & 0o777 == 0o600
    assert first.decision_log.path == str(kept)  # the _file form: the absolute path
    again = load_config(path, env={}).settings  # a restart, another worker: the same secret
    assert again.auth.introspection.client_secret.get_secret_value() == secret
    elsewhere = write(tmp_path, GENERATED, "other.yaml")  # another checkout: its own secret
    other = load_config(elsewhere, env={}).settings.auth.introspection.client_secret
    assert other.get_secret_value() != secret


def test_a_generated_secret_that_cannot_be_made_is_a_config_error(tmp_path: Path):
    (tmp_path / "state").write_text("a file where the folder should be")
    path = write(tmp_path, GENERATED)
    [issue, *_] = issues_of(path)
    assert issue.startswith(f"{path}: auth.introspection.client_secret: cannot read or create "
                            f"the generated secret {tmp_path / 'state' / 'introspection.secret'}")


def test_every_error_is_reported_with_file_path_and_expectation(tmp_path: Path):
    path = write(tmp_path, """
listen:
  port: 99999
upstreams:
  docs:
    url: ftp://files.example.com
    timeout:
      read: soon
  Bad-Name:
    url: http://127.0.0.1:1
proxy:
  trusted_proxies: [10.0.0.0/8, not-an-ip]
lisen: {}
""")
    problems = issues_of(path)
    expected = [
        "listen.port: Input should be less than or equal to 65535",
        "upstreams.docs.url: expected an absolute http:// or https:// URL",
        "upstreams.docs.timeout.read: Input should be a valid number",
        "upstreams.Bad-Name: invalid name",
        "proxy.trusted_proxies[1]: expected an IP address or CIDR range",
        "lisen: unknown field",
    ]
    assert len(problems) == len(expected)
    for fragment in expected:
        assert any(p.startswith(f"{path}: {fragment}") for p in problems), (fragment, problems)


def test_cross_field_errors_name_the_field(tmp_path: Path):
    path = write(tmp_path, """
upstreams:
  legacy: {url: "http://127.0.0.1:1"}
default_upstream: legasy
admin: {port: 8080}
""")
    problems = issues_of(path)
    assert f"{path}: default_upstream: expected one of the upstreams (legacy), got 'legasy'" \
        in problems
    assert any(p.startswith(f"{path}: admin.port: expected a port other than") for p in problems)


def test_yaml_syntax_errors_give_line_and_column(tmp_path: Path):
    path = write(tmp_path, "upstreams:\n  legacy: {url: http://x\n")
    [problem] = issues_of(path)
    assert problem.startswith(f"{path}: line ") and "invalid YAML" in problem


def test_a_file_that_is_not_utf8_is_a_config_error_not_a_crash(tmp_path: Path):
    # The handler read `strerror`, which only OSError has: loading raised AttributeError.
    path = tmp_path / "gateway.yaml"
    text = b"upstreams:\n  legacy: {url: 'http://h\xff'}\n"
    path.write_bytes(text)
    assert issues_of(path) == [
        f"{path}: (top level): expected UTF-8 text; invalid byte at offset {text.index(0xff)}"]
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "latin1.yaml").write_bytes(b"description: r\xe9vis\xe9\n")
    path.write_text("policies: policies\nupstreams:\n  a: {url: 'http://h'}\n")
    assert issues_of(path) == [
        f"{policies / 'latin1.yaml'}: (top level): expected UTF-8 text; invalid byte at offset 14"]


def test_policy_files_are_loaded_and_their_errors_name_the_file(tmp_path: Path):
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "notes.yaml").write_text("description: reviewed 2026-11\n")
    (policies / "broken.yaml").write_text("- just\n- a list\n")
    (policies / "typo.yaml").write_text("vector_retrun: []\n")
    (policies / "stray.yaml").write_text("vector_return: [{collection: nope}]\n")
    path = write(tmp_path, "policies: policies\nupstreams:\n  a: {url: 'http://h'}\n")
    assert sorted(issues_of(path)) == [
        f"{policies / 'broken.yaml'}: (top level): expected a mapping at the top level",
        f"{policies / 'stray.yaml'}: vector_return[0].collection: expected one of the "
        "collections and sources the config declares (none)",
        f"{policies / 'typo.yaml'}: vector_retrun: unknown field; check its spelling and place",
    ]
    for name in ("broken", "typo", "stray"):
        (policies / f"{name}.yaml").unlink()
    assert load_config(path, env={}).policies == {"notes": {"description": "reviewed 2026-11"}}


@pytest.mark.parametrize(("logging", "decision_log", "rule"), [
    ("", "", "hash"), ("{subjects: omit}", "", "omit"), ("", "{subjects: clear}", "clear"),
    ("{subjects: clear}", "{subjects: clear}", "clear")])
def test_one_setting_rules_subjects_in_every_log_the_old_key_still_read(
        tmp_path: Path, logging: str, decision_log: str, rule: str):
    path = write(tmp_path, "upstreams: {a: {url: 'http://127.0.0.1:1'}}\n"
                 + (f"logging: {logging}\n" if logging else "")
                 + (f"decision_log: {decision_log}\n" if decision_log else ""))
    assert load_config(path, env={}).settings.log_subjects == rule
    result = aigw("validate", "--strict", str(path))
    assert ("decision_log.subjects: deprecated" in result.stdout + result.stderr) \
        == bool(decision_log)
    assert result.returncode == (1 if decision_log else 0)


def test_the_old_and_the_new_subjects_setting_may_not_disagree(tmp_path: Path):
    path = write(tmp_path, "upstreams: {a: {url: 'http://127.0.0.1:1'}}\n"
                 "logging: {subjects: hash}\ndecision_log: {subjects: clear}\n")
    [problem] = issues_of(path)
    assert "set logging.subjects only" in problem


def test_validate_command_lists_all_errors_and_exits_1(tmp_path: Path):
    path = write(tmp_path, "upstreams:\n  a: {url: nope}\nextra: 1\n")
    result = aigw("validate", str(path))
    assert result.returncode == 1
    assert f"{path}: upstreams.a.url:" in result.stderr
    assert f"{path}: extra: unknown field" in result.stderr
    assert "Traceback" not in result.stderr


def test_validate_command_accepts_the_shipped_demo_config():
    result = aigw("validate", "config/demo.yaml")
    assert result.returncode == 0, result.stderr
    assert "valid" in result.stdout


def test_committed_json_schema_matches_the_models():
    committed = json.loads((ROOT / "config" / "aigw.schema.json").read_text())
    assert committed == config_schema(), "run `make schema` and commit config/aigw.schema.json"


def test_schema_command_prints_the_json_schema_that_validates_the_demo_config():
    import jsonschema
    import yaml

    schema = json.loads(aigw("schema").stdout)
    text = (ROOT / "config" / "demo.yaml").read_text()
    # The schema describes values after interpolation: put each variable's default in.
    demo = yaml.safe_load(re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", text))
    jsonschema.Draft202012Validator(schema).validate(demo)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate({**demo, "unknown": True})


def test_the_readme_example_is_a_valid_config(tmp_path, monkeypatch):
    """The README's 20-line example passes `aigw validate --strict` as printed."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    [example] = re.findall(r"```yaml\n(.*?)```", readme, re.S)
    assert len(example.splitlines()) <= 22
    path = tmp_path / "gw.yaml"
    path.write_text(example)
    env = {**os.environ, "AIDRE_CURSOR_SECRET": secrets.token_hex(32)}
    result = subprocess.run([sys.executable, "-m", "gateway", "validate", "--strict", str(path)],
                            capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
