"""Config warnings: `aigw validate` lists them and exits 0, `--strict` fails on them, and
`aigw run` logs them once. Every advertised endpoint must be rate-limited (AI Discovery §6.3,
AIDRE §11.1); discovery must be reachable over HTTPS with its auth documentation."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from aidre_config import aidre_gateway_config
from pdpp_config import demo_pdpp
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


def test_the_demo_config_has_no_warnings_even_with_strict():
    result = validate_demo()
    assert result.returncode == 0, result.stderr
    assert "warnings: 0" in result.stdout and result.stderr == ""


WEAK = "expected the secret to be random"


@pytest.mark.parametrize("secret, warned", [
    (None, "expected a secret: without one the cursor key is derived"),
    ("short-but-random-x7", WEAK),
    ("please-change-me-before-production-use", WEAK),
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


# Each place a config holds a secret, and the weak value put there: one rule judges them all.
PLACEHOLDER = "demo-cursor-secret-change-me"  # the value the demo used to ship
WEAK_SECRETS = {
    "pdpp.cursor_secret": lambda config, tmp: config.update(
        pdpp={**demo_pdpp(), "cursor_secret": PLACEHOLDER}),
    "aidre.cursor_secret": lambda config, tmp: config["aidre"].update(cursor_secret=PLACEHOLDER),
    "auth.introspection.client_secret": lambda config, tmp: config["auth"].update(
        introspection={"endpoint": "https://idp.example.com/introspect", "client_id": "gw",
                       "client_secret": "gateway-demo-secret"}),
    "aip.signing.keys.plat": lambda config, tmp: config.update(aip=signed_aip(tmp)),
    "rate_limits.storage": lambda config, tmp: config["rate_limits"].update(
        storage="redis://:hunter2hunter2@127.0.0.1:6379/0"),
    "upstreams.helpcentre.add_headers.Authorization": lambda config, tmp: config["upstreams"][
        "helpcentre"].update(add_headers={"Authorization": "Bearer example-token"}),
    "demo.issuer.clients.agent.secret": lambda config, tmp: config.update(demo={"issuer": {
        "url": "http://127.0.0.1:8082", "key_file": "issuer.jwk",
        "clients": {"agent": {"secret": "demo-agent-secret"}}}}),
}


def signed_aip(tmp_path: Path) -> dict[str, Any]:
    secret = tmp_path / "platform.secret"
    secret.write_text("demo-only-v4PR8m0VRV00Xwto5oUK9Tu72HI6xmxH")  # once committed
    aip = yaml.safe_load((ROOT / "config" / "demo.yaml").read_text())["aip"]
    aip["signing"]["keys"] = {"plat": {"secret_file": str(secret)}}
    aip["events"] = {"file": str(tmp_path / "events.jsonl")}
    return aip


@pytest.mark.parametrize("where", list(WEAK_SECRETS))
def test_a_weak_secret_warns_wherever_it_is_held(tmp_path: Path, where: str):
    config = aidre_config(tmp_path, rate_limits={**LIMITED, "storage": "memory://"})
    WEAK_SECRETS[where](config, tmp_path)
    weak = [w for w in warnings_of(tmp_path, config) if " to be random " in w]
    assert len(weak) == 1 and weak[0].startswith(f"{where}: expected the "), weak
    assert "change-me" not in weak[0] and "hunter2" not in weak[0]  # never the value


def test_a_placeholder_pdpp_cursor_secret_fails_validate_strict(tmp_path: Path):
    config = aidre_config(tmp_path, rate_limits=LIMITED, pdpp={**demo_pdpp(),
                                                               "cursor_secret": PLACEHOLDER})
    result = aigw_validate(tmp_path, config, "--strict")
    assert result.returncode == 1
    assert f"pdpp.cursor_secret: {WEAK}" in result.stderr
    assert PLACEHOLDER not in result.stderr + result.stdout


def test_a_strong_secret_from_the_environment_does_not_warn(tmp_path: Path):
    config = aidre_config(tmp_path, rate_limits=LIMITED)
    config["aidre"]["cursor_secret"] = "${CURSOR_SECRET}"
    path = tmp_path / "env.yaml"
    path.write_text(yaml.safe_dump(config))
    loaded = load_config(path, env={"CURSOR_SECRET": secrets.token_hex(32)})
    assert loaded.warnings == ()


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


URL_DROPPED = "looks like a URL: without public_base_url a value naming a configured upstream"


def test_a_mapped_url_field_without_public_base_url_warns(tmp_path: Path):
    config = aidre_config(tmp_path, rate_limits=LIMITED)
    del config["public_base_url"]
    config["auth"] = {"default_access": "public", "resource": "https://ai.example.com"}
    hits = config["aidre"]["collections"]["articles"]["text_search"]["mapping"]
    hits["fields"]["see_also"] = "_links.next.href"  # the expression names a URL field
    hits["metadata"]["nextUrl"] = "next"
    where = "aidre.collections.articles.text_search.mapping"
    found = [w for w in warnings_of(tmp_path, config) if URL_DROPPED in w]
    assert {w.split(":")[0] for w in found if w.startswith(where)} == {
        f"{where}.fields.url", f"{where}.fields.see_also", f"{where}.metadata.nextUrl"}
    assert "aidre.collections.articles.chunk.mapping.fields.url" in {
        w.split(":")[0] for w in found}
    assert all("http://127.0.0.1:9/..." in w for w in found)
    config["public_base_url"] = "https://ai.example.com"  # such URLs can be rewritten now
    assert [w for w in warnings_of(tmp_path, config) if URL_DROPPED in w] == []


@pytest.mark.parametrize(("name", "path", "warned"), [
    ("homepage_url", "homepage", True), ("link", "l", True), ("website", "links.self", True),
    ("homepage", "homepage", False), ("curl_command", "curl", False), ("title", "title", False),
])
def test_pdpp_fields_that_look_like_urls_warn(tmp_path: Path, name: str, path: str,
                                              warned: bool):
    pdpp = demo_pdpp()
    pdpp["streams"]["messages"]["fields"][name] = {"path": path}
    config = {"upstreams": {"helpcentre": {"url": "http://127.0.0.1:9"}}, "pdpp": pdpp,
              "rate_limits": LIMITED}
    found = {w.split(":")[0] for w in warnings_of(tmp_path, config) if URL_DROPPED in w}
    assert "pdpp.streams.articles.fields.url" in found  # the demo's own, without a public URL
    assert (f"pdpp.streams.messages.fields.{name}" in found) is warned


def test_a_passthrough_with_no_auth_or_no_rate_limit_in_front_warns(tmp_path: Path):
    """`validate --strict` fails on a passthrough every caller reaches anonymously, or without
    a limit (issue 34); with both in front, neither warning."""
    bare = {"upstreams": {"legacy": {"url": "http://127.0.0.1:9"}}, "default_upstream": "legacy"}
    found = warnings_of(tmp_path, bare)
    assert any(line.startswith("auth: expected authentication in front of the passthrough")
               for line in found), found
    assert any(line.startswith("rate_limits: expected a rate limit in front of the passthrough")
               for line in found), found
    guarded = {**bare, "rate_limits": LIMITED, "public_base_url": "https://ai.example.com",
               "auth": {"api_keys": {"keys": [{"sha256": "0" * 64, "subject": "s"}]}}}
    assert not [line for line in warnings_of(tmp_path, guarded) if "passthrough" in line]
