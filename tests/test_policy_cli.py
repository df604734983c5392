"""`aigw policy test | explain | lint | diff` and `aigw schema --policies`, run as a compliance
team's CI would run them: on the shipped policies and on changed copies of them."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from processes import ROOT

from gateway.context import RequestContext
from gateway.model import Principal, TokenKind
from gateway.policy.decisionlog import DecisionLog
from gateway.policy.decisions import note
from gateway.policy.rules import Ask, Outcome
from gateway.settings import DecisionLog as DecisionLogSettings

POLICIES = ROOT / "policies"


def aigw(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The shipped policies and their fixtures, to change."""
    folder = tmp_path / "policies"
    shutil.copytree(POLICIES, folder)
    return folder


def add_rules(folder: Path, name: str, *rules: dict) -> None:
    (folder / name).write_text(yaml.safe_dump({"rules": list(rules)}))


# --------------------------------------------------------------------------- test


def test_the_shipped_policies_pass_their_fixtures_with_every_rule_covered():
    result = aigw("policy", "test", "--coverage", "100")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FAIL" not in result.stdout
    assert "rule coverage 100%" in result.stdout


def test_a_failing_fixture_exits_non_zero_and_shows_the_difference(copy: Path):
    (copy / "wrong.test.yaml").write_text(yaml.safe_dump({"cases": [{
        "name": "anonymous callers get vectors",
        "principal": {"kind": "anonymous"},
        "request": {"kind": "vector_return", "resource": "articles"},
        "expect": {"effect": "allow", "rule": "articles-vectors-for-partners"}}]}))
    result = aigw("policy", "test", str(copy))
    assert result.returncode == 1
    assert "FAIL wrong.test.yaml: anonymous callers get vectors" in result.stdout
    assert "-effect: allow" in result.stdout and "+effect: deny" in result.stdout
    assert "PASS aip.test.yaml: a scraper is refused" in result.stdout  # the rest still run


def test_a_wrong_projection_fails_naming_the_fields(copy: Path):
    (copy / "fields.test.yaml").write_text(yaml.safe_dump({"cases": [{
        "name": "anonymous readers see vectors", "principal": {"kind": "anonymous"},
        "request": {"kind": "collection_read", "resource": "articles"},
        "expect": {"effect": "allow", "visible": ["text", "vectors"]}}]}))
    result = aigw("policy", "test", str(copy))
    assert result.returncode == 1
    assert "-visible: ['text', 'vectors']" in result.stdout


def test_rules_no_fixture_exercises_are_reported_and_can_fail_the_run(copy: Path):
    add_rules(copy, "extra.yaml", {
        "id": "no-vectors-for-bots", "kind": "vector_return", "collection": "articles",
        "effect": "deny", "when": {"clients": ["bot"]}, "description": "Bots never."})
    plain = aigw("policy", "test", str(copy))
    assert plain.returncode == 0
    assert "not exercised: no-vectors-for-bots" in plain.stdout
    assert "rule coverage 96%" in plain.stdout  # 22 of the 23 rules
    assert aigw("policy", "test", str(copy), "--coverage", "100").returncode == 1


# --------------------------------------------------------------------------- explain


def test_explain_lists_every_rule_consulted_and_the_projection():
    result = aigw("policy", "explain", "-r", "kind=collection_read resource=articles",
                  "-p", "kind=client scopes=articles:read,vectors:read")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "config:aidre.collections.articles [allow, enforce]: matches" in out
    assert "decision: allow by config:aidre.collections.articles" in out
    assert "visible: text, category, title, url, vectors, records:internal, records:public" \
        in out


def test_explain_says_why_a_route_is_refused():
    result = aigw("policy", "explain", "-r", "kind=route resource=/api/v1/users method=GET",
                  "-p", "kind=client scopes=articles:read")
    assert "legacy-users [allow, enforce]: lacks scope messages:read" in result.stdout
    assert "decision: deny by legacy-users" in result.stdout


def test_explain_a_logged_decision_by_its_id(tmp_path: Path):
    log = tmp_path / "decisions.jsonl"
    ctx = RequestContext("req-1", "POST", "/search", "127.0.0.1")
    principal = Principal("someone", "partner", frozenset({"vectors:read"}), TokenKind.CLIENT)
    note(ctx, "aidre", Ask("vector_return", "articles", principal),
         Outcome("allow", "articles-vectors-for-partners", "enforce", "matches"))

    async def write() -> None:
        decisions = DecisionLog(DecisionLogSettings(sink="file", path=str(log)))
        decisions.submit(ctx, "rev-then")
        await decisions.aclose()

    asyncio.run(write())
    result = aigw("policy", "explain", "--decision-id", ctx.decision_id or "", "--log", str(log))
    assert result.returncode == 0, result.stderr
    assert f"decision {ctx.decision_id} (request req-1)" in result.stdout
    assert "note: the policies now loaded are revision" in result.stdout
    assert "decision: allow by articles-vectors-for-partners" in result.stdout
    missing = aigw("policy", "explain", "--decision-id", "nope", "--log", str(log))
    assert missing.returncode == 1 and "no decision nope" in missing.stderr


# --------------------------------------------------------------------------- lint


def test_lint_passes_the_shipped_policies_with_the_scope_nothing_grants_named():
    result = aigw("policy", "lint")
    assert result.returncode == 0, result.stdout
    assert "0 error(s)" in result.stdout
    assert "warning: articles-vectors-for-partners: scope vectors:read" in result.stdout


def test_lint_finds_shadowed_rules_overlaps_and_unknown_scopes(copy: Path):
    add_rules(copy, "zz-review.yaml",
              {"id": "again-vectors", "kind": "vector_return", "collection": "articles",
               "when": {"scopes": ["vectors:read"]}, "description": "Same as before."},
              {"id": "no-vectors-for-bots", "kind": "vector_return", "collection": "articles",
               "effect": "deny", "when": {"clients": ["bot"]}, "description": "Bots never."},
              {"id": "mystery", "kind": "record_visibility", "collection": "articles",
               "visibility": "draft", "when": {"scopes": ["drafts:read"]},
               "description": "Drafts."})
    result = aigw("policy", "lint", str(copy))
    assert result.returncode == 1
    assert "error: again-vectors: never decides" in result.stdout
    assert "warning: no-vectors-for-bots: overlaps articles-vectors-for-partners" \
        in result.stdout
    assert "warning: mystery: scope drafts:read is required by no route" in result.stdout


def test_lint_refuses_a_rule_naming_a_collection_the_config_lacks(copy: Path):
    add_rules(copy, "typo.yaml", {"id": "typo", "kind": "vector_return",
                                  "collection": "artcles", "description": "Oops."})
    result = aigw("policy", "lint", str(copy))
    assert result.returncode == 1
    assert "typo.yaml: rules[0].collection: expected one of the collections and sources the " \
        "config declares (articles, help-articles)" in result.stderr


def test_rule_ids_must_be_unique_across_files(copy: Path):
    add_rules(copy, "dup.yaml", {"id": "aip-limits", "kind": "aip_limit", "max_chunks": 2,
                                 "description": "Again."})
    result = aigw("policy", "lint", str(copy))
    assert result.returncode == 1 and "rule id 'aip-limits' is used twice" in result.stderr


# --------------------------------------------------------------------------- diff


def test_diff_reads_a_change_as_decisions_and_fields(copy: Path):
    (copy / "vector-return.yaml").unlink()
    add_rules(copy, "open.yaml", {"id": "messages-route", "kind": "route",
                                  "path": "/api/v1/users", "public": True,
                                  "description": "Opened by mistake."})
    result = aigw("policy", "diff", str(POLICIES), str(copy))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "allow -> deny: client vectors:read | aidre vector_return articles" in out
    assert "visible -vectors: client vectors:read | aidre collection_read articles" in out
    assert "deny -> allow: anonymous | gateway route /api/v1/users method=GET " \
        "(now decided by messages-route)" in out
    assert aigw("policy", "diff", str(POLICIES), str(copy), "--exit-code").returncode == 1
    same = aigw("policy", "diff", str(POLICIES), str(POLICIES), "--exit-code")
    assert same.returncode == 0 and "no decision changes" in same.stdout


# --------------------------------------------------------------------------- schema


def test_the_policy_schema_validates_the_shipped_files_and_refuses_a_rule_without_id():
    schema = json.loads(aigw("schema", "--policies").stdout)
    validator = jsonschema.Draft202012Validator(schema)
    for path in POLICIES.glob("*.yaml"):
        if not path.name.endswith(".test.yaml"):
            validator.validate(yaml.safe_load(path.read_text()))
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({"rules": [{"kind": "vector_return", "collection": "articles",
                                       "description": "no id"}]})
    committed = json.loads((ROOT / "config" / "policy.schema.json").read_text())
    assert committed == schema, "run: aigw schema --policies > config/policy.schema.json"
