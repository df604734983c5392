"""`aigw policy log`: a real gateway's decision log, written while real callers with real
tokens are allowed and refused, read back as lines a person reads, with each filter, as JSON
lines and from stdin; the durations, the line format and the streaming read on their own."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from aidre_config import aidre_gateway_config
from idp_helpers import AUDIENCE, ISSUER, FakeIdp, SigningKey
from log_files import jsonl_records
from processes import ROOT, Gateway, Process, free_port, wait_for_http
from test_aidre import AIDRE_JSON
from test_policy_decisions import VECTORS

from gateway.cli import main
from gateway.personal_data import hashed_subject
from gateway.policy import logview
from gateway.policy.logview import Filters, parse_since, request_lines

KEY = SigningKey.rsa("policy-log")
STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


def aigw_log(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway", "policy", "log", *args],
                          input=stdin, capture_output=True, text=True, cwd=ROOT, timeout=120)


# --------------------------------------------------------------------------- a real gateway


@dataclass
class Logged:
    """A gateway's decision log after five requests, and what the test knows of them."""

    gateway: Gateway
    log: Path
    between: float  # a moment after the second request and before the third


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeIdp]:
    port = free_port()
    process = Process([sys.executable, str(ROOT / "tests" / "fake_idp.py"), str(port), "gw",
                       "gw-secret"], tmp_path_factory.mktemp("idp"), "idp")
    idp = FakeIdp(f"http://127.0.0.1:{port}")
    wait_for_http(idp.url + "/admin/stats", process=process.popen)
    idp.publish(KEY)
    yield idp
    process.stop()


def logging_gateway(backend: str, idp: FakeIdp, workdir: Path, **top: object) -> Gateway:
    """An AIDRE gateway in its own process, trusting the IdP, with route rules for the legacy
    API behind it (passthrough)."""
    config = aidre_gateway_config(backend, workdir, default_upstream="helpcentre", **top)
    config["auth"]["issuers"] = [{"issuer": ISSUER, "jwks_uri": idp.url + "/jwks",
                                  "audiences": [AUDIENCE]}]
    (workdir / "policies" / "routes.yaml").write_text(yaml.safe_dump({"rules": [
        {"id": "articles-need-articles", "kind": "route", "path": "/api/v1/articles",
         "when": {"scopes": ["articles:read"]}, "description": "Articles need articles:read."},
        {"id": "users-need-messages", "kind": "route", "path": "/api/v1/users",
         "when": {"scopes": ["messages:read"]}, "description": "Users need messages:read."},
    ]}))
    return Gateway(config, workdir)


def bearer(client_id: str, subject: str, scope: str) -> dict[str, str]:
    return {"authorization": "Bearer " + KEY.token(client_id=client_id, sub=subject,
                                                   scope=scope)}


def vector_search(gateway: Gateway, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(gateway.url + "/search", json=VECTORS, timeout=10,
                      headers={**headers, "content-type": AIDRE_JSON, "accept": AIDRE_JSON})


def decision_lines(path: Path, count: int, timeout: float = 10.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        found = jsonl_records(path)
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


@pytest.fixture(scope="module")
def logged(backend: str, idp: FakeIdp, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Logged]:
    workdir = tmp_path_factory.mktemp("policy-log")
    gateway = logging_gateway(backend, idp, workdir, decision_log={
        "sink": "file", "path": "state/decisions.jsonl"})  # relative to the config file
    agent = bearer("agent-1", "alice", "articles:read")
    partner = bearer("partner", "bob", "articles:read vectors:read")
    try:
        assert httpx.get(gateway.url + "/api/v1/articles/art-0001",
                         headers=agent).status_code == 200
        assert httpx.get(gateway.url + "/api/v1/users/u-001", headers=agent).status_code == 403
        time.sleep(0.05)
        between = time.time()
        time.sleep(0.05)
        refused_vectors = vector_search(gateway, agent)
        assert refused_vectors.status_code == 200
        assert all("vector" not in hit for hit in refused_vectors.json()["results"])
        assert vector_search(gateway, partner).json()["results"][0].get("vector")
        assert httpx.get(gateway.url + "/api/v1/users/u-001").status_code == 401
        log = workdir / "state" / "decisions.jsonl"
        assert len(decision_lines(log, 5)) == 5
        yield Logged(gateway, log, between)
    finally:
        gateway.stop()


def shown(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, result.stderr
    return [line for line in result.stdout.splitlines() if not line.startswith("    ")]


def test_each_request_is_one_line_with_its_caller_request_effect_rule_and_why(logged: Logged):
    lines = shown(aigw_log(str(logged.log)))
    assert len(lines) == 5
    assert all(re.match(STAMP + "  ", line) for line in lines)
    articles, users, refused, allowed, anonymous = lines
    alice = hashed_subject("alice")[:15]  # sha256: and 8 hex digits
    assert f"  client agent-1 sub={alice} [articles:read]  " in articles
    assert articles.endswith("gateway route GET /api/v1/articles/art-0001  "
                             "allow by articles-need-articles (Articles need articles:read.)")
    assert users.endswith("gateway route GET /api/v1/users/u-001  deny by users-need-messages "
                          "(allow-listed, and the caller lacks scope messages:read)")
    assert "  aidre vector_return articles  deny by vector-return.vector_return[0] (allow-listed, "\
        "and the caller lacks scope vectors:read)  removed: vectors" in refused
    assert "  client partner sub=" in allowed and "[articles:read vectors:read]" in allowed
    assert "  allow by " in allowed and "removed" not in allowed
    assert re.fullmatch(STAMP + "  anonymous  gateway route GET /api/v1/users/u-001  "
                        r"deny by users-need-messages \(allow-listed, and the caller needs a "
                        r"token with messages:read\)", anonymous)
    assert "bob" not in "".join(lines) and "alice" not in "".join(lines)  # hashed subjects
    assert (logged.log.parent.stat().st_mode & 0o777, logged.log.stat().st_mode & 0o777) == \
        (0o700, 0o600)


NAMES = {"/api/v1/articles/art-0001": "articles", "agent-1 .* /api/v1/users": "agent-users",
         "agent-1 .* deny by vector": "vectors-refused", "partner": "vectors-allowed",
         "anonymous": "anonymous"}


def named(lines: list[str]) -> list[str]:
    """Which of the five requests each line is."""
    return [next(name for pattern, name in NAMES.items() if re.search(pattern, line))
            for line in lines]


def test_each_filter_as_the_command_runs_it(logged: Logged):
    since = datetime.fromtimestamp(logged.between, UTC).isoformat()
    for args, expected in [
        (("--rule", "users-need-messages"), ["agent-users", "anonymous"]),
        (("--caller", "alice"), ["articles", "agent-users", "vectors-refused"]),
        (("--effect", "deny"), ["agent-users", "vectors-refused", "anonymous"]),
        (("--since", since), ["vectors-refused", "vectors-allowed", "anonymous"]),
        (("--surface", "aidre"), ["vectors-refused", "vectors-allowed"]),
    ]:
        assert named(shown(aigw_log(*args, str(logged.log)))) == expected, args


def log_lines(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    """`aigw policy log ARGS` run in this process (the filters' combinations, quickly)."""
    assert main(["policy", "log", *args]) == 0
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("args,expected", [
    (("--effect", "allow"), ["articles", "vectors-allowed"]),
    (("--caller", "agent-1"), ["articles", "agent-users", "vectors-refused"]),
    (("--caller", hashed_subject("bob")), ["vectors-allowed"]),  # as logged
    (("--caller", hashed_subject("bob")[:15]), ["vectors-allowed"]),  # as a line shows it
    (("--caller", "anonymous"), ["anonymous"]),
    (("--caller", "client"), ["articles", "agent-users", "vectors-refused", "vectors-allowed"]),
    (("--caller", "sha256:"), []),  # too short a hash matches no one
    (("--rule", "default"), ["vectors-refused", "vectors-allowed"]),  # the search's route
    (("--surface", "gateway", "--effect", "deny"), ["agent-users", "anonymous"]),
    (("--caller", "partner", "--effect", "deny"), []),
    (("--since", "1h"), ["articles", "agent-users", "vectors-refused", "vectors-allowed",
                         "anonymous"]),
    (("--since", "2099-01-01T00:00:00Z"), []),
])
def test_filters_and_their_combinations(logged: Logged, capsys, args, expected):
    lines = [line for line in log_lines(capsys, *args, str(logged.log))
             if not line.startswith("    ")]
    assert named(lines) == expected


def test_a_rule_that_did_not_decide_the_request_shows_its_own_decision_below(logged: Logged,
                                                                             capsys):
    """The partner's search was decided last by record visibility; the vector rule allowed
    its vectors before: that decision is shown below the request's line."""
    head, below = log_lines(capsys, "--rule", "vector-return.vector_return[0]", "--caller",
                            "partner", str(logged.log))
    assert "  aidre record_visibility articles  allow by default" in head
    assert below == "    aidre vector_return articles  allow by vector-return.vector_return[0] " \
                    "(vector_return rule)"


def test_verbose_shows_every_decision_of_the_request_with_its_ids(logged: Logged, capsys):
    head, ids, *decisions = log_lines(capsys, "-v", "--caller", "agent-1", "--surface", "aidre",
                                      str(logged.log))
    assert "  aidre vector_return articles  deny by vector-return.vector_return[0]" in head
    record = next(r for r in decision_lines(logged.log, 5)
                  if r["surface"] == "aidre" and r["principal"]["client_id"] == "agent-1")
    assert ids == f"    decision {record['decision_id']} request {record['request_id']} " \
                  f"revision {record['revision']}"
    assert len(decisions) == len(record["decisions"]) == 4
    assert decisions[0] == "    gateway route POST /search default_access=public  " \
                           "allow by default (no rule selects it: the default)"
    assert decisions[3].startswith("    aidre record_visibility articles visibility=public ")


def test_json_prints_the_records_kept_and_reads_back_the_same(logged: Logged, capsys):
    result = aigw_log("--json", "--caller", "agent-1", str(logged.log))
    assert result.returncode == 0, result.stderr
    kept = [json.loads(line) for line in result.stdout.splitlines()]
    written = decision_lines(logged.log, 5)
    assert kept == [r for r in written if r["principal"]["client_id"] == "agent-1"]
    again = aigw_log("-", stdin=result.stdout)
    assert shown(again) == log_lines(capsys, "--caller", "agent-1", str(logged.log))
    assert again.stderr == ""


def test_stdin_skips_and_counts_the_lines_that_are_not_decisions(logged: Logged):
    """The access log mixed in, as a shared stream would carry it."""
    access = logged.gateway.process.stdout().splitlines()
    assert access and all(json.loads(line)["type"] == "access" for line in access)
    mixed = "\n".join(line for pair in zip(access, logged.log.read_text().splitlines(),
                                           strict=False) for line in pair) + "\nnot json\n"
    result = aigw_log("--effect", "deny", "-", stdin=mixed)
    assert len(shown(result)) == 3
    assert result.stderr.strip() == f"{len(access) + 1} line(s) skipped: not decision records"


def test_by_default_decisions_go_to_stderr_which_policy_log_reads(backend: str, idp: FakeIdp,
                                                                  tmp_path: Path):
    gateway = logging_gateway(backend, idp, tmp_path)
    try:
        response = httpx.get(gateway.url + "/api/v1/users/u-001",
                             headers=bearer("agent-1", "alice", "articles:read"))
        assert response.status_code == 403
        deadline = time.monotonic() + 10
        while response.headers["x-aigw-decision-id"] not in gateway.process.stderr():
            assert time.monotonic() < deadline, "no decision line on stderr"
            time.sleep(0.05)
    finally:
        gateway.stop()
    assert '"decision"' not in gateway.process.stdout()  # the access log's alone
    result = aigw_log(str(gateway.process.stderr_path))
    [line] = shown(result)
    assert line.endswith("deny by users-need-messages (allow-listed, and the caller lacks "
                         "scope messages:read)")
    assert "line(s) skipped" in result.stderr  # the gateway's own log lines



SUBJECT = "u-4711-alice"


@pytest.mark.parametrize(("top", "rule"), [
    ({}, "hash"),
    ({"logging": {"subjects": "clear"}}, "clear"),
    ({"logging": {"subjects": "omit"}}, "omit"),
    ({"decision_log": {"subjects": "clear"}}, "clear"),  # the deprecated key: still read, by both
])
def test_one_rule_shows_the_subject_in_the_access_log_and_the_decision_log_alike(
        backend: str, idp: FakeIdp, tmp_path: Path, top: dict[str, Any], rule: str):
    decision_log = {"sink": "file", "path": "decisions.jsonl", **top.pop("decision_log", {})}
    gateway = logging_gateway(backend, idp, tmp_path, decision_log=decision_log, **top)
    try:
        headers = bearer("agent-1", SUBJECT, "articles:read")
        assert httpx.get(gateway.url + "/api/v1/articles/art-0001", headers=headers,
                         timeout=10).status_code == 200
        assert httpx.get(gateway.url + "/api/v1/users/u-001", headers=headers,
                         timeout=10).status_code == 403
        decisions = decision_lines(tmp_path / "decisions.jsonl", 2)
    finally:
        gateway.stop()
    [access] = [json.loads(line) for line in gateway.process.stdout().splitlines()
                if '"/api/v1/articles/art-0001"' in line]
    assert access["client_id"] == "agent-1"
    expected = {"hash": hashed_subject(SUBJECT), "clear": SUBJECT, "omit": None}[rule]
    shown = [access.get("subject")] + [d["principal"].get("subject") for d in decisions]
    assert shown == [expected] * 3
    written = gateway.process.stdout() + gateway.process.stderr() + json.dumps(decisions)
    assert (SUBJECT in written) == (rule == "clear")
    deprecated = "decision_log.subjects" in gateway.process.stderr()
    assert deprecated == ("subjects" in decision_log)  # `aigw run` warns of the old key

# --------------------------------------------------------------------------- units


@pytest.mark.parametrize("text,seconds", [
    ("90s", 90), ("15m", 900), ("2h", 7200), ("1d", 86400), ("1w", 604800), ("1h30m", 5400)])
def test_a_duration_counts_back_from_now(text, seconds):
    assert parse_since(text, now=10_000_000.0) == 10_000_000.0 - seconds


@pytest.mark.parametrize("text,expected", [
    ("2026-11-23T10:00:00Z", 1795428000.0),
    ("2026-11-23T10:00:00", 1795428000.0),  # UTC unless it says
    ("2026-11-23T12:00:00+02:00", 1795428000.0),
    ("2026-11-23", 1795392000.0),
])
def test_an_iso_time_is_read_as_utc_unless_it_names_its_offset(text, expected):
    assert parse_since(text) == expected


@pytest.mark.parametrize("text", ["", "15", "m", "-5m", "15 m", "1y", "yesterday", "2026-13-01"])
def test_other_times_are_refused(text):
    with pytest.raises(ValueError, match="neither a duration"):
        parse_since(text)


def _record(**changes: object) -> dict:
    entry = {"surface": "gateway", "kind": "route", "resource": "/api/v1/users",
             "rule": "legacy-users", "effect": "deny", "mode": "enforce",
             "why": "insufficient_scope", "attributes": {"method": "GET"}}
    record = {"type": "decision", "ts": 0.5, "decision_id": "d1", "request_id": "r1",
              "revision": "rev", "surface": "gateway", "kind": "route",
              "resource": "/api/v1/users", "rule": "legacy-users", "effect": "deny",
              "mode": "enforce", "fields_removed": [],
              "principal": {"kind": "client", "scopes": ["a:read", "b:read"],
                            "client_id": "partner", "subject": hashed_subject("alice")},
              "decisions": [entry]}
    return {**record, **changes}


def test_a_line_reads_time_caller_request_effect_rule_and_why():
    [line] = request_lines(_record())
    assert line == "1970-01-01T00:00:00.500Z  client partner sub=sha256:2bd806c9 " \
                   "[a:read b:read]  gateway route GET /api/v1/users  " \
                   "deny by legacy-users (insufficient_scope)"


def test_a_clear_subject_and_an_anonymous_caller():
    clear = {"kind": "owner", "scopes": [], "client_id": None, "subject": "u-001"}
    assert logview.caller(clear) == "owner sub=u-001"
    assert logview.caller({"kind": "anonymous", "scopes": [], "client_id": None}) == "anonymous"


def test_control_characters_a_client_sent_are_escaped():
    entry = {**_record()["decisions"][0], "resource": "/x\x1b[2J\nforged line"}
    [line] = request_lines(_record(resource=entry["resource"], decisions=[entry]))
    assert "/x\\x1b[2J\\x0aforged line" in line and "\n" not in line


def test_the_deciding_decision_is_the_first_denial_else_the_last():
    route = {**_record()["decisions"][0], "effect": "allow", "rule": None, "why": "admitted"}
    vectors = {"surface": "aidre", "kind": "vector_return", "resource": "articles",
               "rule": None, "effect": "allow", "mode": "enforce", "why": "no rule",
               "shadow": {"rule": "trial", "effect": "deny", "differs": True}}
    record = _record(surface="aidre", kind="vector_return", resource="articles", rule=None,
                     effect="allow", decisions=[route, vectors])
    [line] = request_lines(record)
    assert line.endswith("aidre vector_return articles  allow by default (no rule)  "
                         "shadow: trial would deny")
    lines = request_lines(record, verbose=True)
    assert lines[1:] == ["    decision d1 request r1 revision rev",
                         "    gateway route GET /api/v1/users  allow by default (admitted)",
                         "    aidre vector_return articles  allow by default (no rule)  "
                         "shadow: trial would deny"]


def test_filters_read_the_caller_in_every_form_it_is_logged():
    record = _record()
    for caller in ("partner", "client", "alice", hashed_subject("alice"), "sha256:2bd806c9"):
        assert Filters(caller=caller).admit(record), caller
    for caller in ("bob", "anonymous", "sha256:", "sha256:2bd8"):
        assert not Filters(caller=caller).admit(record), caller
    assert Filters(rule="default").admit(_record(decisions=[{"rule": None}]))
    assert not Filters(since=1.0).admit(record) and Filters(since=0.5).admit(record)


def test_the_reader_streams_and_skips_what_is_no_decision_record(monkeypatch):
    monkeypatch.setattr(logview, "MAX_LINE", 64)
    good = json.dumps(_record(), separators=(",", ":"))
    stream = io.BytesIO(b"\n".join([
        b"x" * 200,  # over-long: dropped as read
        b'{"type": "access", "request_id": "r0"}', b"[1, 2]", b"", b"\xff\xfe",
        b'{"type": "decision", "ts": "yesterday"}', b"   "]) + b"\n")
    assert [found for _, found in logview.records(stream)] == [None] * 5
    monkeypatch.setattr(logview, "MAX_LINE", 4096)
    out = io.BytesIO()
    stream = io.BytesIO(f"noise\n{good}\n{good}".encode())  # the last line without a newline
    assert logview.show(stream, out, Filters(), as_json=True) == 1
    assert out.getvalue().decode() == f"{good}\n{good}\n"


@pytest.mark.parametrize("args,message", [
    (["--since", "yesterday"], "argument --since: 'yesterday' is neither a duration"),
    (["--effect", "maybe"], "argument --effect: invalid choice"),
    (["--caller", " "], "argument --caller: must not be empty"),
    (["--json", "-v"], "not allowed with argument --json"),
])
def test_bad_arguments_are_refused_with_exit_2(capsys, args, message):
    with pytest.raises(SystemExit) as exit_:
        main(["policy", "log", *args, "-"])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_a_missing_file_is_refused_with_exit_2(capsys, tmp_path):
    assert main(["policy", "log", str(tmp_path / "nope.jsonl")]) == 2
    assert "nope.jsonl: No such file or directory" in capsys.readouterr().err
