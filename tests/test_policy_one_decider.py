"""One decider: the running gateway and `aigw policy test` / `explain` never disagree on a route.

Rule sets are generated (allow and deny, `clients`, `kinds`, `scopes`, nested paths, methods,
both `default_access` values), callers are real JWTs of every kind, and each decision is taken
twice: by a real gateway process over HTTP in front of the echo upstream, and by the policy
tools on the same config and policies. Deny rules added to any rule set never turn a deny into
an allow, and every decision-log entry's effect is the HTTP outcome of its request.
"""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from idp_helpers import AUDIENCE, ISSUER, FakeIdp, SigningKey, running_idp
from log_files import jsonl_records
from processes import ROOT, Gateway

from gateway.loader import load_config
from gateway.model import Principal, TokenKind
from gateway.policy.kinds import ROUTE, RouteRule
from gateway.policy.rules import Ask, evaluate

KEY = SigningKey.rsa("one-decider")
PREFIXES = ("/echo", "/echo/a", "/echo/a/b", "/echo/c")
PATHS = ("/echo/x", "/echo/a", "/echo/a/z", "/echo/a/b/q", "/echo/c/1", "/status/204")
METHODS = ("GET", "POST")
SCOPES = ("s:a", "s:b")
CLIENTS = ("agent-1", "blocked-app")


@dataclass(frozen=True)
class Caller:
    label: str
    kind: str  # anonymous | client | owner
    client_id: str | None = None
    scopes: tuple[str, ...] = ()

    def token(self) -> str | None:
        if self.kind == "anonymous":
            return None
        return KEY.token(client_id=self.client_id, scope=" ".join(self.scopes),
                         token_kind=self.kind)

    def spec(self) -> dict[str, Any]:
        if self.kind == "anonymous":
            return {"kind": "anonymous"}
        return {"kind": self.kind, "client_id": self.client_id, "scopes": list(self.scopes)}

    def principal(self) -> Principal:
        if self.kind == "anonymous":
            return Principal()
        return Principal("alice", self.client_id, frozenset(self.scopes), TokenKind(self.kind))


CALLERS = (
    Caller("anonymous", "anonymous"),
    Caller("client without scopes", "client", "agent-1"),
    Caller("client s:a", "client", "agent-1", ("s:a",)),
    Caller("client s:a s:b", "client", "agent-1", ("s:a", "s:b")),
    Caller("blocked-app s:a s:b", "client", "blocked-app", ("s:a", "s:b")),
    Caller("owner s:a", "owner", None, ("s:a",)),
)


# ------------------------------------------------------------------------ generated rule sets

def random_when(rng: random.Random) -> dict[str, Any]:
    when: dict[str, Any] = {}
    if rng.random() < 0.5:
        when["scopes"] = rng.sample(SCOPES, rng.randint(1, 2))
    if rng.random() < 0.25:
        when["kinds"] = rng.sample(["anonymous", "client", "owner"], rng.randint(1, 2))
    if rng.random() < 0.3:
        when["clients"] = [rng.choice(CLIENTS)]
    return when


def random_rule(rng: random.Random, index: int, effect: str | None = None) -> dict[str, Any]:
    effect = effect or rng.choice(["allow", "allow", "deny"])
    rule: dict[str, Any] = {"id": f"r{index}", "kind": "route", "path": rng.choice(PREFIXES),
                            "effect": effect, "description": f"generated rule {index}"}
    if rng.random() < 0.3:
        rule["methods"] = [rng.choice(METHODS)]
    if effect == "allow" and rng.random() < 0.3:
        rule["public"] = True
    when = random_when(rng)
    if when:
        rule["when"] = when
    return rule


def random_rules(rng: random.Random) -> list[dict[str, Any]]:
    return [random_rule(rng, index) for index in range(rng.randint(1, 5))]


def extra_denies(rng: random.Random, start: int) -> list[dict[str, Any]]:
    return [random_rule(rng, start + index, "deny") for index in range(rng.randint(1, 3))]


# ------------------------------------------------------------------------ the gateway's side

@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeIdp]:
    with running_idp(tmp_path_factory.mktemp("idp")) as started:
        started.publish(KEY)
        yield started


def gateway_config(idp: FakeIdp, echo: str, workdir: Path, default_access: str) -> dict:
    return {
        "upstreams": {"legacy": {"url": echo}}, "default_upstream": "legacy",
        "policies": str(workdir / "policies"),
        "decision_log": {"sink": "file", "path": str(workdir / "decisions.jsonl")},
        "auth": {
            "resource": "https://api.example.com", "default_access": default_access,
            "issuers": [{"issuer": ISSUER, "jwks_uri": idp.url + "/jwks",
                         "audiences": [AUDIENCE], "token_kind_claim": "token_kind"}],
        },
    }


class Deployment:
    """One gateway process whose config and policies a test rewrites (reloaded as a
    deployment's would be), with the callers' tokens."""

    def __init__(self, idp: FakeIdp, echo: str, workdir: Path) -> None:
        self.idp, self.echo, self.workdir = idp, echo, workdir
        (workdir / "policies").mkdir(exist_ok=True)
        self.write_rules([])
        self.gateway = Gateway(gateway_config(idp, echo, workdir, "authenticated"), workdir)
        self.tokens = {caller: caller.token() for caller in CALLERS}

    def write_rules(self, rules: list[dict[str, Any]], default_access: str = "") -> None:
        # default_access is named in the file, so the revision moves with the config too
        document = {"description": f"generated route rules ({default_access})",
                    "owner": "tests", "rules": rules}
        (self.workdir / "policies" / "routes.yaml").write_text(yaml.safe_dump(document))

    def apply(self, rules: list[dict[str, Any]], default_access: str) -> None:
        """Write the config, then the rules, and wait until the gateway decides with both
        (a reload reads every file at once, so the rules' revision implies the config)."""
        config = {**self.gateway.config, "auth": gateway_config(
            self.idp, self.echo, self.workdir, default_access)["auth"]}
        self.gateway.write_config(config)
        self.gateway.config = config
        self.write_rules(rules, default_access)
        revision = load_config(self.gateway.config_path).bundle.revision
        deadline = time.monotonic() + 30
        while self.gateway.metric("aigw_policy_bundle_info", revision=revision) != 1.0:
            assert time.monotonic() < deadline, f"the gateway never loaded revision {revision}"
            time.sleep(0.05)

    def call(self, caller: Caller, method: str, path: str) -> httpx.Response:
        token = self.tokens[caller]
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return httpx.request(method, self.gateway.url + path, headers=headers, timeout=10)


@pytest.fixture(scope="module")
def deployment(idp: FakeIdp, echo: str,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    started = Deployment(idp, echo, tmp_path_factory.mktemp("one-decider"))
    yield started
    started.gateway.stop()


def http_effect(response: httpx.Response) -> str:
    """allow: the request reached the upstream; deny: the gateway refused it."""
    if response.status_code in (401, 403):
        error = response.json()["error"]
        assert error["request_id"] == response.headers["x-request-id"]
        return "deny"
    assert response.status_code in (200, 204), response.text
    return "allow"


def observe(deployment: Deployment) -> dict[tuple[Caller, str, str], tuple[str, str]]:
    """(caller, method, path) -> (the gateway's effect, the request's decision id)."""
    seen = {}
    for caller in CALLERS:
        for method in METHODS:
            for path in PATHS:
                response = deployment.call(caller, method, path)
                decision_id = response.headers.get("x-aigw-decision-id")
                assert decision_id, f"{method} {path} for {caller.label}: no decision id"
                seen[(caller, method, path)] = (http_effect(response), decision_id)
    return seen


# ------------------------------------------------------------------------ the tools' side

def fixtures_for(seen: dict[tuple[Caller, str, str], tuple[str, str]]) -> dict[str, Any]:
    """Every observed decision as a `policy test` case expecting what the gateway did."""
    cases = [{"name": f"{caller.label} {method} {path}", "principal": caller.spec(),
              "request": {"kind": "route", "resource": path, "method": method},
              "expect": {"effect": effect}}
             for (caller, method, path), (effect, _) in seen.items()]
    return {"description": "what the gateway did", "cases": cases}


def tools_disagreements(deployment: Deployment, seen: dict, folder: Path) -> list[str]:
    """The cases on which `aigw policy test` does not decide as the gateway did."""
    folder.mkdir(exist_ok=True)
    (folder / "routes.yaml").write_text(
        (deployment.workdir / "policies" / "routes.yaml").read_text())
    (folder / "routes.test.yaml").write_text(yaml.safe_dump(fixtures_for(seen)))
    run = aigw("policy", "test", "-c", str(deployment.gateway.config_path), str(folder))
    failed = [line for line in run.stdout.splitlines() if line.startswith("FAIL")]
    assert run.returncode in (0, 1) and (failed or run.returncode == 0), run.stdout + run.stderr
    return failed


def explained(deployment: Deployment, caller: Caller, method: str, path: str) -> str:
    principal = " ".join(f"{k}={','.join(v) if isinstance(v, list) else v}"
                         for k, v in caller.spec().items() if v)
    run = aigw("policy", "explain", "-c", str(deployment.gateway.config_path),
               "--request", f"kind=route resource={path} method={method}",
               "--principal", principal)
    assert run.returncode == 0, run.stderr
    decision = next(line for line in run.stdout.splitlines() if line.startswith("decision: "))
    return decision.split()[1]


def aigw(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


def logged_effects(log: Path, ids: set[str]) -> dict[str, str]:
    """decision id -> the effect of its route decision, once every id is in the log."""
    deadline = time.monotonic() + 15
    while True:
        found = {}
        for record in jsonl_records(log):
            if record.get("decision_id") in ids:
                route = [d for d in record["decisions"] if d["kind"] == "route"]
                assert len(route) == 1, record
                found[record["decision_id"]] = route[0]["effect"]
        if ids <= found.keys() or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


# ------------------------------------------------------------------------ the tests

RULE_SETS = 8


def test_the_gateway_and_the_policy_tools_never_disagree(deployment: Deployment,
                                                         tmp_path: Path):
    rng = random.Random(20261128)
    disagreements: list[str] = []
    for index in range(RULE_SETS):
        rules = random_rules(rng)
        default_access = rng.choice(["authenticated", "public"])
        deployment.apply(rules, default_access)
        seen = observe(deployment)
        failed = tools_disagreements(deployment, seen, tmp_path / f"set-{index}")
        disagreements += [f"set {index} {rules} ({default_access}): {line}" for line in failed]
        caller, method, path = rng.choice(sorted(seen, key=str))
        if explained(deployment, caller, method, path) != seen[(caller, method, path)][0]:
            disagreements.append(f"set {index}: explain {caller.label} {method} {path}")
        log = deployment.workdir / "decisions.jsonl"
        effects = logged_effects(log, {decision_id for _, decision_id in seen.values()})
        for key, (effect, decision_id) in seen.items():
            if effects.get(decision_id) != effect:
                disagreements.append(f"set {index}: logged {effects.get(decision_id)} for "
                                     f"{key[0].label} {key[1]} {key[2]}, answered {effect}")
    assert not disagreements, f"{len(disagreements)} disagreements, the first 20:\n" + \
        "\n".join(disagreements[:20])


def test_adding_deny_rules_never_turns_a_deny_into_an_allow_in_the_gateway(
        deployment: Deployment):
    rng = random.Random(4)
    grants = []
    for _ in range(4):
        rules = random_rules(rng)
        default_access = rng.choice(["authenticated", "public"])
        deployment.apply(rules, default_access)
        before = observe(deployment)
        deployment.apply(rules + extra_denies(rng, len(rules)), default_access)
        after = observe(deployment)
        grants += [f"{rules}: {key[0].label} {key[1]} {key[2]}" for key, (effect, _) in
                   before.items() if effect == "deny" and after[key][0] == "allow"]
    assert not grants, f"{len(grants)} denials turned into allows:\n" + "\n".join(grants[:20])


def engine_effect(rules: list[RouteRule], caller: Caller, method: str, path: str,
                  default_access: str) -> str:
    ask = Ask("route", path, caller.principal(),
              {"method": method, "default_access": default_access})
    return evaluate(rules, ask, ROUTE.default_for(ask), most_specific=True).effect


def test_adding_deny_rules_never_turns_a_deny_into_an_allow_in_the_engine():
    rng = random.Random(7)
    for _ in range(400):
        raw = random_rules(rng)
        default_access = rng.choice(["authenticated", "public"])
        rules = [RouteRule.model_validate(rule) for rule in raw]
        more = rules + [RouteRule.model_validate(rule) for rule in
                        extra_denies(rng, len(raw))]
        for caller in CALLERS:
            for method in METHODS:
                for path in PATHS:
                    if engine_effect(rules, caller, method, path, default_access) == "deny":
                        assert engine_effect(more, caller, method, path,
                                             default_access) == "deny", (raw, caller, path)


def test_a_deny_rule_that_does_not_match_a_caller_does_not_decide_for_it():
    narrower = {"id": "blocked", "kind": "route", "path": "/echo/a", "effect": "deny",
                "when": {"clients": ["blocked-app"]}, "description": "keep blocked-app out"}
    wider = {"id": "readers", "kind": "route", "path": "/echo", "when": {"scopes": ["s:a"]},
             "description": "readers only"}
    rules = [RouteRule.model_validate(rule) for rule in (narrower, wider)]
    effects = {caller.label: engine_effect(rules, caller, "GET", "/echo/a/z", "public")
               for caller in CALLERS}
    assert effects == {"anonymous": "deny", "client without scopes": "deny",
                       "client s:a": "allow", "client s:a s:b": "allow",
                       "blocked-app s:a s:b": "deny", "owner s:a": "allow"}
