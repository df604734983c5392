"""Decision records over real HTTP: the decision id header, the decision log line it names,
the bundle revision, shadow rules that count without changing a response, and a log that
drops (and counts) rather than waits."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
import yaml
from aidre_config import SPACE, aidre_gateway_config
from demo_vectors import embed
from log_files import jsonl_records
from test_aidre import search

from gateway.context import RequestContext
from gateway.model import Principal
from gateway.observability import POLICY_LOG_DROPPED
from gateway.policy.decisionlog import DecisionLog
from gateway.policy.decisions import note
from gateway.policy.rules import Ask, Outcome
from gateway.settings import DecisionLog as DecisionLogSettings

VECTORS = {"query_vector": embed("password reset"), "embedding_space": SPACE["id"],
           "collection": "articles", "top_k": 3, "return": {"vectors": True}}


def logged(path: Path, decision_id: str, timeout: float = 5.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for record in jsonl_records(path):
            if record["decision_id"] == decision_id:
                return record
        time.sleep(0.05)
    raise AssertionError(f"no decision {decision_id} in {path}")


def config_logging_to(backend: str, workdir: Path, log: Path, **extra: object) -> dict:
    return {**aidre_gateway_config(backend, workdir),
            "decision_log": {"sink": "file", "path": str(log)}, **extra}


def test_the_decision_id_header_names_the_logged_decision(backend, inprocess_factory, tmp_path):
    log = tmp_path / "decisions.jsonl"
    gateway = inprocess_factory(config_logging_to(backend, tmp_path, log))
    response = search(gateway, VECTORS, key="reader-key")  # no vectors:read: vectors removed
    assert response.status_code == 200
    assert all("vector" not in r for r in response.json()["results"])
    record = logged(log, response.headers["x-aigw-decision-id"])
    assert record["request_id"] == response.headers["x-request-id"]
    assert record["fields_removed"] == ["vectors"]
    vectors = next(d for d in record["decisions"] if d["kind"] == "vector_return")
    assert vectors["effect"] == "deny" and vectors["removed"] == ["vectors"]
    assert vectors["rule"] == "vector-return.vector_return[0]"  # allow-listed for vectors:read
    principal = record["principal"]
    assert principal["subject"].startswith("sha256:") and "reader" not in principal["subject"]
    assert "reader-key" not in log.read_text()  # no credential ever reaches the log
    revision = record["revision"]
    assert len(revision) == 16
    assert gateway.metric("aigw_policy_bundle_info", revision=revision) == 1.0


def test_a_route_refused_for_a_missing_scope_logs_the_caller_refused(backend, inprocess_factory,
                                                                     tmp_path):
    log = tmp_path / "decisions.jsonl"
    config = config_logging_to(backend, tmp_path, log, default_upstream="helpcentre")
    (tmp_path / "policies" / "routes.yaml").write_text(yaml.safe_dump({"rules": [{
        "id": "users-need-messages", "kind": "route", "path": "/api/v1/users",
        "when": {"scopes": ["messages:read"]}, "description": "Users need messages:read."}]}))
    gateway = inprocess_factory(config)
    import httpx

    response = httpx.get(gateway.url + "/api/v1/users/u-001", headers={"X-API-Key": "reader-key"})
    assert response.status_code == 403
    record = logged(log, response.headers["x-aigw-decision-id"])
    assert (record["kind"], record["rule"], record["effect"]) == \
        ("route", "users-need-messages", "deny")
    assert record["principal"]["kind"] != "anonymous"
    assert record["principal"]["client_id"] == "reader"  # not an anonymous caller


def test_a_request_no_rule_governs_carries_no_decision_id(backend, inprocess_factory, tmp_path):
    gateway = inprocess_factory(aidre_gateway_config(backend, tmp_path))
    import httpx

    response = httpx.get(gateway.url + "/nothing/here")  # no surface's, no route rule's
    assert response.status_code == 404 and "x-aigw-decision-id" not in response.headers


@pytest.mark.parametrize("path", ["/.well-known/ai-discovery", "/collections"])
def test_a_listing_logs_the_read_decision_on_every_collection(backend, inprocess_factory,
                                                              tmp_path, path):
    log = tmp_path / "decisions.jsonl"
    gateway = inprocess_factory(config_logging_to(backend, tmp_path, log))
    import httpx

    response = httpx.get(gateway.url + path)
    assert response.status_code == 200
    record = logged(log, response.headers["x-aigw-decision-id"])
    decided = {d["resource"]: d["effect"] for d in record["decisions"]
               if d["kind"] == "collection_read"}
    listed = {c["name"] for c in (response.json()["collections"])}
    assert {name for name, effect in decided.items() if effect == "allow"} == listed
    assert "deny" in decided.values()  # the private collections an anonymous caller may not see


def test_a_shadow_rule_counts_and_logs_but_changes_no_response(backend, inprocess_factory,
                                                                 tmp_path):
    log = tmp_path / "decisions.jsonl"
    gateway = inprocess_factory(config_logging_to(backend, tmp_path, log))
    before = search(gateway, VECTORS, key="vector-key")
    assert before.status_code == 200 and before.json()["results"][0].get("vector")
    (tmp_path / "policies" / "shadow.yaml").write_text(yaml.safe_dump({"rules": [{
        "id": "no-vectors-trial", "kind": "vector_return", "collection": "articles",
        "effect": "deny", "mode": "shadow",
        "description": "Trial: stop returning vectors of articles to anyone."}]}))
    counted = {"rule": "no-vectors-trial", "effect": "deny", "mode": "shadow"}
    deadline = time.monotonic() + 10
    while gateway.metric("aigw_policy_decisions_total", **counted) == 0:
        assert time.monotonic() < deadline, "the shadow rule was never counted"
        after = search(gateway, VECTORS, key="vector-key")
        time.sleep(0.2)
    assert after.status_code == 200
    assert [r["id"] for r in after.json()["results"]] == [r["id"] for r in
                                                           before.json()["results"]]
    assert after.json()["results"][0]["vector"] == before.json()["results"][0]["vector"]
    record = logged(log, after.headers["x-aigw-decision-id"])
    vectors = next(d for d in record["decisions"] if d["kind"] == "vector_return")
    assert vectors["effect"] == "allow" and vectors["mode"] == "enforce"
    assert vectors["shadow"] == {"rule": "no-vectors-trial", "effect": "deny", "differs": True}


def test_enforcing_a_shadow_rule_is_a_one_line_change_applied_on_reload(
    backend, inprocess_factory, tmp_path
):
    gateway = inprocess_factory(aidre_gateway_config(backend, tmp_path))
    rule = {"id": "no-vectors", "kind": "vector_return", "collection": "articles",
            "effect": "deny", "mode": "shadow", "description": "Stop returning vectors."}
    policy = tmp_path / "policies" / "stop.yaml"
    policy.write_text(yaml.safe_dump({"rules": [rule]}))
    time.sleep(0.6)
    assert search(gateway, VECTORS, key="vector-key").json()["results"][0].get("vector")
    policy.write_text(policy.read_text().replace("mode: shadow", "mode: enforce"))
    deadline = time.monotonic() + 10
    while search(gateway, VECTORS, key="vector-key").json()["results"][0].get("vector"):
        assert time.monotonic() < deadline, "the enforced rule never applied"
        time.sleep(0.2)


def _context() -> RequestContext:
    ctx = RequestContext("r1", "POST", "/search", "127.0.0.1")
    note(ctx, "aidre", Ask("vector_return", "articles", Principal()),
         Outcome("deny", None, "enforce", "default"))
    return ctx


def test_a_full_queue_drops_and_counts_instead_of_waiting(tmp_path):
    settings = DecisionLogSettings(sink="file", path=str(tmp_path / "d.jsonl"), queue_size=2)
    dropped = POLICY_LOG_DROPPED.labels("queue_full")._value.get()

    async def burst() -> None:
        log = DecisionLog(settings)
        for _ in range(5):  # nothing drains until this coroutine yields
            log.submit(_context(), "rev")
        await log.aclose()

    asyncio.run(burst())
    assert POLICY_LOG_DROPPED.labels("queue_full")._value.get() - dropped == 3
    assert len((tmp_path / "d.jsonl").read_text().splitlines()) == 2


def _written(settings: DecisionLogSettings) -> None:
    async def once() -> None:
        log = DecisionLog(settings)
        log.submit(_context(), "rev")
        await log.aclose()

    asyncio.run(once())


def test_lines_go_to_stderr_by_default_apart_from_the_access_log(capfd):
    _written(DecisionLogSettings())
    out, err = capfd.readouterr()
    assert out == ""
    assert json.loads(err)["type"] == "decision"


def test_stdout_stays_a_choice(capfd):
    _written(DecisionLogSettings(sink="stdout"))
    out, err = capfd.readouterr()
    assert json.loads(out)["type"] == "decision" and err == ""


def test_a_file_sink_makes_its_folder_and_file_its_owners_alone(tmp_path):
    log = tmp_path / "state" / "decisions.jsonl"
    for _ in range(2):  # made once, appended to after
        _written(DecisionLogSettings(sink="file", path=str(log)))
    assert len(log.read_text().splitlines()) == 2
    assert (log.parent.stat().st_mode & 0o777, log.stat().st_mode & 0o777) == (0o700, 0o600)


@pytest.mark.parametrize("subjects,expected", [("clear", "alice"), ("omit", None)])
def test_subjects_are_hashed_unless_configured(tmp_path, subjects, expected):
    settings = DecisionLogSettings(sink="file", path=str(tmp_path / "d.jsonl"))
    ctx = RequestContext("r1", "GET", "/x", "127.0.0.1")
    note(ctx, "gateway", Ask("route", "/x", Principal("alice")),
         Outcome("allow", None, "enforce", "default"))

    async def once() -> None:
        log = DecisionLog(settings, subjects=subjects)
        log.submit(ctx, "rev")
        await log.aclose()

    asyncio.run(once())
    record = json.loads((tmp_path / "d.jsonl").read_text())
    assert record["principal"].get("subject") == expected


def test_the_redis_sink_adds_each_line_to_a_stream(tmp_path):
    import redis

    stream = f"aigw-test:{time.time_ns()}:decisions"
    settings = DecisionLogSettings(sink="redis", redis_url="redis://127.0.0.1:6379/15",
                                   stream=stream)

    async def once() -> None:
        log = DecisionLog(settings)
        log.submit(_context(), "rev")
        await log.aclose()

    asyncio.run(once())
    client = redis.Redis.from_url("redis://127.0.0.1:6379/15")
    try:
        entries = client.xrange(stream)
        assert len(entries) == 1
        assert json.loads(entries[0][1][b"line"])["revision"] == "rev"
    finally:
        client.delete(stream)


def test_an_aip_retrieve_logs_its_policy_decisions_like_an_aidre_search(
        backend, inprocess_factory, tmp_path):
    """The retrieve's own ask, who reads the source and which hit visibilities the caller sees,
    on one decision-log line; a denial by the policy packs is the deciding decision, taken
    before the source is read."""
    from test_aip import ask
    from test_aip_visibility import STAFF_KEY, demo_aip_config

    log = tmp_path / "decisions.jsonl"
    config = {**demo_aip_config(backend, tmp_path),
              "decision_log": {"sink": "file", "path": str(log)}}
    (tmp_path / "policies" / "aip.yaml").write_text(yaml.safe_dump({"rules": [{
        "id": "no-scrapers", "kind": "aip_retrieve", "platforms": ["scraper-bot"],
        "effect": "deny", "message": "Scrapers may not retrieve.",
        "description": "No scraper retrieves."}]}))
    gateway = inprocess_factory(config)
    import httpx

    def retrieve(key: str | None = None, **changes: object) -> tuple[dict, dict]:
        response = httpx.post(gateway.url + "/pag/retrieve", timeout=10,
                              json=ask(query="reset your password", **changes),
                              headers={"X-API-Key": key} if key else {})
        return response.json(), logged(log, response.headers["x-aigw-decision-id"])

    for key, internal in ((None, "deny"), (STAFF_KEY, "allow")):
        answer, record = retrieve(key)
        assert answer["status"] == "ok"
        aip = [d for d in record["decisions"] if d["kind"] != "route"]  # the app's, first
        decided = {(d["kind"], d["resource"], d.get("attributes", {}).get("visibility")):
                   (d["rule"], d["effect"]) for d in aip}
        assert {d["surface"] for d in aip} == {"aip"}
        assert decided[("aip_retrieve", "retrieve", None)] == (None, "allow")
        assert decided[("collection_read", "help-articles", None)] == \
            ("config:aip.sources.help-articles", "allow")
        assert decided[("record_visibility", "help-articles", "internal")] == \
            ("config:aip.sources.help-articles.record_visibility.internal", internal)
        assert decided[("record_visibility", "help-articles", "public")] == (None, "allow")
    answer, record = retrieve(platform={"id": "scraper-bot"})
    assert answer["denial"] == {"reason": "policy_violation",
                                "message": "Scrapers may not retrieve."}
    assert (record["kind"], record["rule"], record["effect"]) == \
        ("aip_retrieve", "no-scrapers", "deny")
    assert [d["kind"] for d in record["decisions"]] == ["route", "aip_retrieve"]
