"""Issue 32's three reproductions, as a compliance officer tried them: the policy tools said
deny while the running gateway allowed. Each runs the real gateway and the real `aigw policy`
commands on the same files, with real tokens."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from json_server import example_config, start_json_server, write_database
from log_files import jsonl_records
from processes import ROOT, free_port, wait_for_http

from gateway.demo.issuer import load_issuer
from gateway.demo.tokens import mint_token


def aigw(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


def explained(config: Path, request: str, principal: str) -> str:
    run = aigw("policy", "explain", "-c", str(config), "--request", request,
               "--principal", principal)
    assert run.returncode == 0, run.stderr
    return next(line for line in run.stdout.splitlines() if line.startswith("decision: "))


def add_rules(policies: Path, rules: list[dict[str, Any]]) -> None:
    path = policies / "routes.yaml"
    document = yaml.safe_load(path.read_text())
    document["rules"] = [*document["rules"], *rules]
    path.write_text(yaml.safe_dump(document, sort_keys=False))


# ------------------------------------------------------------------ the demo, as shipped + a rule

BLOCKED = {"id": "block-blocked-app", "kind": "route", "path": "/api/v1/articles/search",
           "effect": "deny", "when": {"clients": ["blocked-app"]},
           "description": "blocked-app abused search; it may not search any more."}
OWNERS = {"id": "u-001-owner-only", "kind": "route", "path": "/api/v1/users/u-001",
          "when": {"kinds": ["owner"]},
          "description": "u-001's data through the legacy API: its owner only."}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`aigw demo` on a copy of the shipped config and policies, with the two rules added
    and the decision log in a file."""
    tmp = tmp_path_factory.mktemp("reproductions")
    checkout = tmp / "checkout"
    shutil.copytree(ROOT / "config", checkout / "config")
    shutil.copytree(ROOT / "policies", checkout / "policies")
    add_rules(checkout / "policies", [BLOCKED, OWNERS])
    config_path = checkout / "config" / "demo.yaml"
    log = tmp / "decisions.jsonl"
    with config_path.open("a") as config:
        config.write(f"\ndecision_log: {{sink: file, path: {log}}}\n")
    env = {name: value for name, value in os.environ.items() if not name.startswith("AIGW_")}
    port, admin, issuer = free_port(), free_port(), free_port()
    out = (tmp / "demo.out").open("w+")
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway", "demo", "--backend-port", str(free_port()),
         "--port", str(port), "--admin-port", str(admin), "--issuer-port", str(issuer),
         "--config", str(config_path)],
        cwd=ROOT, env={**env, "PYTHONUNBUFFERED": "1"}, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for_http(f"http://127.0.0.1:{admin}/readyz", timeout=60, process=process)
    except BaseException:  # never left running
        process.kill()
        raise
    with pytest.MonkeyPatch.context() as patch:  # the issuer's URL names its port
        patch.setenv("AIGW_ISSUER_PORT", str(issuer))
        settings, key = load_issuer(str(config_path))

    def token(client_id: str, scopes: list[str], kind: str = "client", sub: str = "u-001") -> str:
        return mint_token(key, issuer=settings.url, audience=settings.audience, subject=sub,
                          client_id=client_id, scopes=scopes, kind=kind, grant=None, ttl=600)

    yield {"url": f"http://127.0.0.1:{port}", "config": config_path, "log": log,
           "token": token}
    process.terminate()
    process.wait(15)
    out.close()


def get(demo: dict[str, Any], path: str, token: str) -> httpx.Response:
    return httpx.get(demo["url"] + path, headers={"authorization": f"Bearer {token}"},
                     timeout=30)


def logged(log: Path, decision_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for record in jsonl_records(log):
            if record.get("decision_id") == decision_id:
                return record
        time.sleep(0.05)
    raise AssertionError(f"decision {decision_id} was not logged")


def test_a_deny_rule_for_one_client_refuses_it_and_opens_the_path_to_nobody(demo):
    search = "/api/v1/articles/search?q=refund&limit=3"
    blocked = get(demo, search, demo["token"]("blocked-app", ["articles:read"]))
    assert blocked.status_code == 403, blocked.text
    assert blocked.json()["error"]["request_id"] == blocked.headers["x-request-id"]
    record = logged(demo["log"], blocked.headers["x-aigw-decision-id"])
    assert (record["rule"], record["effect"]) == ("block-blocked-app", "deny")
    assert "deny by block-blocked-app" in explained(
        demo["config"], "kind=route resource=/api/v1/articles/search method=GET",
        "kind=client client_id=blocked-app scopes=articles:read")
    unscoped = get(demo, search, demo["token"]("some-app", []))
    assert unscoped.status_code == 403  # the less specific legacy-articles still decides
    assert "deny by legacy-articles" in explained(
        demo["config"], "kind=route resource=/api/v1/articles/search method=GET",
        "kind=client client_id=some-app")
    reader = get(demo, search, demo["token"]("legacy-crm", ["articles:read"]))
    assert reader.status_code == 200 and reader.json()["items"]


def test_a_rule_for_owners_refuses_client_tokens(demo):
    path = "/api/v1/users/u-001/messages"
    client = get(demo, path, demo["token"]("demo-agent", ["messages:read"]))
    assert client.status_code == 403, client.text
    assert "deny by u-001-owner-only" in explained(
        demo["config"], f"kind=route resource={path} method=GET",
        "kind=client client_id=demo-agent scopes=messages:read")
    owner = get(demo, path, demo["token"]("u-001", ["messages:read"], kind="owner"))
    assert owner.status_code == 200, owner.text
    assert "allow by u-001-owner-only" in explained(
        demo["config"], f"kind=route resource={path} method=GET",
        "kind=owner scopes=messages:read")


def test_explaining_a_logged_decision_agrees_with_what_was_logged(demo):
    response = get(demo, "/api/v1/articles/search?q=login",
                   demo["token"]("blocked-app", ["articles:read"]))
    decision_id = response.headers["x-aigw-decision-id"]
    logged(demo["log"], decision_id)
    run = aigw("policy", "explain", "-c", str(demo["config"]), "--decision-id", decision_id,
               "--log", str(demo["log"]))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "logged: deny by block-blocked-app" in run.stdout
    assert "decision: deny by block-blocked-app" in run.stdout
    assert "differs" not in run.stdout


# ------------------------------------------------------------------ json-server, a real third party

CATCH_ALL = {"id": "no-maintainer-records", "kind": "route", "path": "/maintainers",
             "effect": "deny",
             "description": "Maintainer records hold e-mail addresses: nobody reads or changes "
                            "them through the gateway."}
APP_KEY = "example-app-key"  # a client key of examples/json-server/aigw.yaml


@pytest.fixture(scope="module")
def json_server(tmp_path_factory: pytest.TempPathFactory, logs_dir: Path) -> Iterator[Any]:
    db = tmp_path_factory.mktemp("json-server") / "db.json"
    rows = write_database(db)
    process, url = start_json_server(db, logs_dir)
    yield url, rows
    process.stop()


def test_a_catch_all_deny_keeps_every_caller_out_of_the_upstream(json_server, gateway_factory,
                                                                 tmp_path: Path):
    upstream, rows = json_server
    policies = tmp_path / "policies"
    shutil.copytree(ROOT / "examples" / "json-server" / "policies", policies)
    add_rules(policies, [CATCH_ALL])
    config = {**example_config(upstream, tmp_path), "policies": str(policies)}
    gateway = gateway_factory(config)
    maintainer = rows["maintainers"][0]
    path = "/maintainers/" + httpx.URL("/" + str(maintainer["id"])).raw_path.decode()[1:]
    headers = {"x-api-key": APP_KEY}
    read = httpx.get(gateway.url + path, headers=headers, timeout=30)
    assert read.status_code == 403, read.text
    assert str(maintainer.get("email", "@")) not in read.text
    changed = httpx.patch(gateway.url + path, headers=headers, json={"email": "x@evil.test"},
                          timeout=30)
    assert changed.status_code == 403, changed.text
    assert httpx.get(upstream + path, timeout=30).json() == maintainer  # nothing changed
    assert httpx.get(gateway.url + path, timeout=30).status_code == 401
    for method in ("GET", "PATCH"):
        assert "deny by no-maintainer-records" in explained(
            gateway.config_path, f"kind=route resource={path} method={method}",
            "kind=client client_id=summary-app")
