"""Config warnings: `aigw validate` lists them and exits 0, `--strict` fails on them, and
`aigw run` logs them once. Every advertised endpoint must be rate-limited (AI Discovery §6.3,
AIDRE §11.1); discovery must be reachable over HTTPS with its auth documentation."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from aidre_config import aidre_gateway_config
from processes import ROOT

from gateway.loader import load_config

SERVICE = {"name": "Acme", "description": "Acme help centre.",
           "docs": "https://acme.example/docs/agents"}
LIMITED = {"rules": [{"name": "all", "paths": ["/"], "limit": "60/minute"}]}


def aigw_validate(tmp_path: Path, config: dict[str, Any], *flags: str
                  ) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True))
    return subprocess.run([sys.executable, "-m", "gateway", "validate", *flags, str(path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)


def warnings_of(tmp_path: Path, config: dict[str, Any]) -> list[str]:
    path = tmp_path / "warned.yaml"
    path.write_text(yaml.safe_dump(config))
    return [f"{issue.path}: {issue.message}" for issue in load_config(path, env={}).warnings]


STRONG_SECRET = "q8Vt3kR0xLm2Zp7Wc9Yh4Nb6Jd1Fs5Ga"


def aidre_config(tmp_path: Path, *, aidre: dict | None = None, **top: Any) -> dict[str, Any]:
    return aidre_gateway_config("http://127.0.0.1:9", tmp_path, service=SERVICE,
                                ai_endpoint={"capabilities": []},
                                aidre={"cursor_secret": STRONG_SECRET, **(aidre or {})}, **top)


def validate_demo(**env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway", "validate", "--strict",
                           "config/demo.yaml"], capture_output=True, text=True, cwd=ROOT,
                          timeout=60, env={**os.environ, **env})


def test_the_demo_config_is_valid_even_with_strict_once_given_a_cursor_secret():
    result = validate_demo(AIGW_CURSOR_SECRET=STRONG_SECRET)
    assert result.returncode == 0, result.stderr
    assert "warnings: 0" in result.stdout and result.stderr == ""


def test_the_demo_cursor_secret_default_warns():
    result = validate_demo()
    assert result.returncode == 1
    assert "aidre.cursor_secret: expected a random secret" in result.stderr
    assert "demo-cursor-secret" not in result.stderr  # the value itself is never printed


@pytest.mark.parametrize("secret, warned", [
    (None, "expected a secret: without one the cursor key is derived"),
    ("short-but-random-x7", "expected a random secret"),
    ("please-change-me-before-production-use", "expected a random secret"),
    (STRONG_SECRET, None),
])
def test_a_cursor_secret_others_can_know_warns(tmp_path: Path, secret: str | None,
                                               warned: str | None):
    config = aidre_config(tmp_path, rate_limits=LIMITED)
    if secret is None:
        del config["aidre"]["cursor_secret"]
    else:
        config["aidre"]["cursor_secret"] = secret
    found = warnings_of(tmp_path, config)
    if warned is None:
        assert found == []
    else:
        [warning] = found
        assert warning.startswith(f"aidre.cursor_secret: {warned}")


def test_unlimited_aidre_endpoints_warn_and_fail_with_strict(tmp_path: Path):
    limits = {"rules": [{"name": "search", "paths": ["/search"], "limit": "60/minute"}]}
    config = aidre_config(tmp_path, rate_limits=limits)
    relaxed = aigw_validate(tmp_path, config)
    assert relaxed.returncode == 0, relaxed.stderr
    assert "warning: " in relaxed.stderr and "rate_limits.rules" in relaxed.stderr
    assert "GET /collections (AIDRE collections)" in relaxed.stderr
    assert "GET /chunks/{id} (AIDRE chunks)" in relaxed.stderr
    assert "POST /search" not in relaxed.stderr  # the rule covers it
    strict = aigw_validate(tmp_path, config, "--strict")
    assert strict.returncode == 1
    assert "error: " in strict.stderr and "GET /collections" in strict.stderr
    assert "Traceback" not in strict.stderr


def test_a_configured_capability_no_rule_counts_is_named(tmp_path: Path):
    capability = {"id": "classify_text", "description": "Classify a support request",
                  "endpoint": "/api/tasks/classify", "method": "POST"}
    limits = {"rules": [{"name": "reads", "paths": ["/api"], "methods": ["GET"],
                         "limit": "60/minute"}]}
    config = {"upstreams": {"legacy": {"url": "http://127.0.0.1:9"}}, "service": SERVICE,
              "ai_endpoint": {"capabilities": [capability]}, "rate_limits": limits}
    [warning] = warnings_of(tmp_path, config)
    assert "POST /api/tasks/classify (capability classify_text)" in warning
    config["rate_limits"]["rules"][0]["methods"] = ["GET", "POST"]
    assert warnings_of(tmp_path, config) == []


def test_missing_service_docs_warns_when_callers_need_credentials(tmp_path: Path):
    service = {k: v for k, v in SERVICE.items() if k != "docs"}
    config = aidre_config(tmp_path, rate_limits=LIMITED)
    assert warnings_of(tmp_path, config) == []
    config["service"] = service
    [warning] = warnings_of(tmp_path, config)
    assert warning.startswith("service.docs: expected a URL")


@pytest.mark.parametrize("url, warned", [
    ("http://api.example.com", True), ("https://api.example.com", False),
    ("http://127.0.0.1:8080", False), ("http://localhost:8080", False),
    ("http://[::1]:8080", False),
])
def test_plain_http_public_base_url_warns_unless_loopback(tmp_path: Path, url: str,
                                                          warned: bool):
    found = warnings_of(tmp_path, aidre_config(tmp_path, rate_limits=LIMITED,
                                               public_base_url=url))
    assert [w.startswith("public_base_url: expected an https:// URL") for w in found] == \
        ([True] if warned else [])


def test_colon_path_parameters_warn(tmp_path: Path):
    capability = {"id": "get_article", "description": "Get an article",
                  "endpoint": "/api/articles/:id"}
    config = {"upstreams": {"legacy": {"url": "http://127.0.0.1:9"}}, "service": SERVICE,
              "ai_endpoint": {"capabilities": [capability]}, "rate_limits": LIMITED}
    [warning] = warnings_of(tmp_path, config)
    assert warning.startswith("ai_endpoint.capabilities[0].endpoint: expected path parameters "
                              "as {id}")


def test_run_logs_each_warning_once(gateway_factory, tmp_path: Path):
    config = aidre_config(tmp_path, public_base_url="http://api.example.com",
                          rate_limits=LIMITED)
    gateway = gateway_factory(config)
    assert httpx.get(gateway.admin_url + "/healthz").status_code == 200
    gateway.stop()
    assert gateway.process.stderr().count("public_base_url: expected an https:// URL") == 1


def test_a_public_rule_without_methods_on_a_passthrough_path_warns(tmp_path: Path):
    config = aidre_config(tmp_path, rate_limits=LIMITED, default_upstream="helpcentre")
    config["auth"]["routes"] = [{"path": "/api/v1/health", "public": True},
                                {"path": "/search", "public": True},
                                {"path": "/api/v1/status", "methods": ["GET"], "public": True}]
    [warning] = warnings_of(tmp_path, config)
    assert warning.startswith("auth.routes[0].methods: expected the methods anonymous callers "
                              "may use on /api/v1/health")
    config["auth"]["routes"][0]["methods"] = ["GET"]
    assert warnings_of(tmp_path, config) == []
