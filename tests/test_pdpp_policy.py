"""PDPP grants as policy decisions, over real HTTP: every stream and field decision of a
request in its decision-log line (what the grant left out as fields removed), rules in a policy
file that take a stream or a field away, rules that try to add one and cannot, and policy
files naming what the config does not serve."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import yaml
from pdpp_config import CLIENT_KEY, OWNER_KEY, SUBJECT_ONLY_KEY, check, config
from test_policy_decisions import logged

from gateway.loader import ConfigError, load_config
from gateway.model import Principal, TokenKind
from gateway.policy.fixtures import ask_of

MESSAGES = ["id", "thread_id", "from", "to", "subject", "body", "sent_at", "labels", "read",
            "priority"]
RULES = [
    {"id": "no-bodies", "kind": "pdpp_field", "streams": ["messages"], "fields": ["body"],
     "effect": "deny", "description": "Message bodies never leave, whatever the grant."},
    {"id": "no-articles-for-app", "kind": "pdpp_stream", "streams": ["articles"],
     "effect": "deny", "when": {"clients": ["app-client"]},
     "description": "This app reads no articles, whatever its grant."},
    {"id": "widen-fields", "kind": "pdpp_field", "streams": ["messages"],
     "fields": ["sent_at", "thread_id"], "description": "An allow cannot add to a grant."},
    {"id": "widen-streams", "kind": "pdpp_stream", "streams": ["articles"],
     "description": "Nor can an allow add a stream."},
]


def pdpp_config(backend: str, workdir: Path, *rules: dict) -> dict:
    policies = workdir / "policies"
    policies.mkdir(exist_ok=True)
    if rules:
        (policies / "pdpp.yaml").write_text(yaml.safe_dump({"rules": list(rules)}))
    return {**config(backend), "policies": str(policies),
            "decision_log": {"sink": "file", "path": str(workdir / "decisions.jsonl")}}


def get(gateway, path: str, key: str) -> httpx.Response:
    return httpx.get(gateway.url + path, headers={"X-API-Key": key}, timeout=30)


def decisions(record: dict, kind: str) -> dict[str, dict]:
    """A request's decisions of one kind, by stream (and field)."""
    return {".".join(filter(None, (d["resource"], d.get("attributes", {}).get("field")))): d
            for d in record["decisions"] if d["kind"] == kind}


def test_the_decision_log_shows_the_grant_decisions_of_records_and_search(
        backend, inprocess_factory, tmp_path):
    gateway = inprocess_factory(pdpp_config(backend, tmp_path))
    log = tmp_path / "decisions.jsonl"
    response = get(gateway, "/v1/streams/messages/records?limit=2", CLIENT_KEY)
    assert response.status_code == 200
    assert all(set(r["data"]) <= {"id", "subject", "sent_at"} for r in response.json()["data"])
    record = logged(log, response.headers["x-aigw-decision-id"])
    assert record["request_id"] == response.headers["request-id"]
    streams = decisions(record, "pdpp_stream")
    assert list(streams) == ["messages"]
    assert (streams["messages"]["effect"], streams["messages"]["rule"]) == ("allow", None)
    assert streams["messages"]["attributes"]["grant"] == "granted"
    fields = decisions(record, "pdpp_field")
    assert set(fields) == {f"messages.{name}" for name in MESSAGES}  # one decision each
    shown = {name for name, d in fields.items() if d["effect"] == "allow"}
    assert shown == {"messages.id", "messages.subject", "messages.sent_at"}
    assert fields["messages.id"]["attributes"]["grant"] == "required"
    assert fields["messages.body"]["attributes"]["grant"] == "not_granted"
    assert fields["messages.body"]["removed"] == ["messages.body"]
    assert record["fields_removed"] == sorted(set(fields) - shown)
    assert record["surface"] == "pdpp"

    search = get(gateway, "/v1/search?q=refund", SUBJECT_ONLY_KEY)
    assert search.status_code == 200
    record = logged(log, search.headers["x-aigw-decision-id"])
    streams = decisions(record, "pdpp_stream")
    assert {name: d["effect"] for name, d in streams.items()} == {"messages": "allow",
                                                                  "articles": "deny"}
    assert streams["articles"]["attributes"]["grant"] == "not_granted"
    assert record["fields_removed"] == sorted(f"messages.{name}" for name in MESSAGES
                                              if name not in ("id", "subject"))


def test_the_stream_list_logs_a_decision_on_every_stream(backend, inprocess_factory, tmp_path):
    gateway = inprocess_factory(pdpp_config(backend, tmp_path))
    response = get(gateway, "/v1/streams", SUBJECT_ONLY_KEY)
    assert [s["name"] for s in response.json()["data"]] == ["messages"]
    record = logged(tmp_path / "decisions.jsonl", response.headers["x-aigw-decision-id"])
    assert {name: d["effect"] for name, d in decisions(record, "pdpp_stream").items()} == \
        {"messages": "allow", "articles": "deny"}
    assert not decisions(record, "pdpp_field")  # a list of names shows no field


def test_policy_rules_narrow_a_grant_and_never_widen_it(backend, inprocess_factory, tmp_path):
    gateway = inprocess_factory(pdpp_config(backend, tmp_path, *RULES))
    owner = get(gateway, "/v1/streams/messages/records?limit=5", OWNER_KEY).json()
    check(owner, "record_list")
    assert owner["data"] and all("body" not in r["data"] and "thread_id" in r["data"]
                                 for r in owner["data"])
    refused = get(gateway, "/v1/streams/messages/records?fields=body", OWNER_KEY)
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "field_not_granted")
    one = get(gateway, f"/v1/streams/messages/records/{owner['data'][0]['id']}", OWNER_KEY)
    assert "body" not in one.json()["data"]

    listed = get(gateway, "/v1/streams", CLIENT_KEY).json()["data"]
    assert [s["name"] for s in listed] == ["messages"]  # the grant names articles too
    denied = get(gateway, "/v1/streams/articles/records", CLIENT_KEY)
    assert (denied.status_code, denied.json()["error"]["code"]) == \
        (403, "grant_stream_not_allowed")
    record = logged(tmp_path / "decisions.jsonl", denied.headers["x-aigw-decision-id"])
    assert (record["kind"], record["rule"], record["effect"]) == \
        ("pdpp_stream", "no-articles-for-app", "deny")
    owners = get(gateway, "/v1/streams", OWNER_KEY).json()["data"]
    assert {s["name"] for s in owners} == {"messages", "articles"}

    narrow = get(gateway, "/v1/streams/messages/records?limit=5", SUBJECT_ONLY_KEY)
    assert narrow.json()["data"]
    assert all(set(r["data"]) == {"id", "subject"} for r in narrow.json()["data"])
    record = logged(tmp_path / "decisions.jsonl", narrow.headers["x-aigw-decision-id"])
    sent_at = decisions(record, "pdpp_field")["messages.sent_at"]
    assert (sent_at["effect"], sent_at["rule"]) == ("deny", None)  # widen-fields: not selected
    widened = get(gateway, "/v1/streams/messages/records?fields=sent_at", SUBJECT_ONLY_KEY)
    assert widened.status_code == 403
    articles = get(gateway, "/v1/streams/articles", SUBJECT_ONLY_KEY)
    assert articles.status_code == 403
    record = logged(tmp_path / "decisions.jsonl", articles.headers["x-aigw-decision-id"])
    assert (record["kind"], record["rule"], record["effect"]) == ("pdpp_stream", None, "deny")


def test_a_rule_hides_a_field_from_search_matches_and_snippets(backend, inprocess_factory,
                                                               tmp_path):
    gateway = inprocess_factory(pdpp_config(backend, tmp_path, RULES[0]))
    page = get(gateway, "/v1/search?q=refund&streams[]=messages&limit=50", OWNER_KEY).json()
    check(page, "lexical_search")
    assert page["data"]
    for result in page["data"]:
        assert result["matched_fields"] == ["subject"]
        assert result.get("snippet", {}).get("field", "subject") == "subject"


def test_policy_files_may_not_name_a_stream_or_field_the_config_lacks(backend, tmp_path):
    rules = [{"id": "typo", "kind": "pdpp_stream", "streams": ["mesages"], "effect": "deny",
              "description": "Oops."},
             {"id": "no-such-field", "kind": "pdpp_field", "streams": ["messages"],
              "fields": ["bdy"], "effect": "deny", "description": "Oops."},
             {"id": "the-key", "kind": "pdpp_field", "fields": ["id"], "effect": "deny",
              "description": "A required field is always shown."}]
    settings = pdpp_config(backend, tmp_path, *rules)
    (tmp_path / "aigw.yaml").write_text(yaml.safe_dump(settings))
    with pytest.raises(ConfigError) as refused:
        load_config(tmp_path / "aigw.yaml", env={})
    problems = {issue.path: issue.message for issue in refused.value.issues}
    assert "expected one of the PDPP streams (articles, messages)" \
        in problems["rules[0].streams[0]"]
    assert "expected a field of the streams the rule names" in problems["rules[1].fields[0]"]
    assert "always shown" in problems["rules[2].fields[0]"]


@pytest.mark.parametrize("kind,expected", [("client", "allow"), ("owner", "allow"),
                                           ("anonymous", "deny")])
def test_fixtures_and_explain_assume_the_grant_covers_what_is_asked(backend, tmp_path, kind,
                                                                    expected):
    """A fixture need not spell `grant`: a client's covers what it asks, an owner's is an
    owner's; rules then narrow it. The same rule decides the gateway's own asks."""
    (tmp_path / "aigw.yaml").write_text(yaml.safe_dump(pdpp_config(backend, tmp_path,
                                                                   RULES[0])))
    loaded = load_config(tmp_path / "aigw.yaml", env={})
    assert loaded.bundle is not None
    principal = Principal("u", "app", frozenset(), TokenKind(kind))
    stream = loaded.bundle.kinds["pdpp_stream"]
    ask = stream.with_context(loaded.settings, ask_of(
        {"kind": "pdpp_stream", "resource": "messages"}, principal))
    assert loaded.bundle.decide(ask).effect == expected
    if expected == "allow":
        assert stream.projection is not None
        shown = stream.projection(loaded.settings, loaded.bundle, ask)
        assert sorted(shown) == sorted(name for name in MESSAGES if name != "body")
    field = loaded.bundle.kinds["pdpp_field"]
    body = field.with_context(loaded.settings, ask_of(
        {"kind": "pdpp_field", "resource": "messages", "field": "body"}, principal))
    assert (loaded.bundle.decide(body).effect, loaded.bundle.decide(body).rule) == \
        ("deny", "no-bodies" if kind != "anonymous" else None)


def test_a_request_asked_again_logs_the_same_decisions(backend, inprocess_factory, tmp_path):
    """The second request is answered from what the first one remembered (its access, its
    page) and its decision-log line reads the same."""
    gateway = inprocess_factory(pdpp_config(backend, tmp_path, RULES[0]))
    log = tmp_path / "decisions.jsonl"
    path = "/v1/streams/messages/records?limit=2"
    first, again = get(gateway, path, CLIENT_KEY), get(gateway, path, CLIENT_KEY)
    assert first.status_code == again.status_code == 200
    assert first.content == again.content  # its next_cursor too, reused for a second at most
    assert first.headers["x-aigw-decision-id"] != again.headers["x-aigw-decision-id"]
    records = [logged(log, r.headers["x-aigw-decision-id"]) for r in (first, again)]
    assert records[1]["request_id"] == again.headers["request-id"]
    volatile = ("ts", "decision_id", "request_id")
    kept = [{k: v for k, v in r.items() if k not in volatile} for r in records]
    assert kept[0] == kept[1]
    assert "messages.body" in records[1]["fields_removed"]
    owner = get(gateway, path, OWNER_KEY)  # another caller: its own access and page
    assert "thread_id" in owner.json()["data"][0]["data"]
    assert "thread_id" not in first.json()["data"][0]["data"]
    assert owner.json()["next_cursor"] != first.json()["next_cursor"]
    assert "messages.body" in logged(log, owner.headers["x-aigw-decision-id"])["fields_removed"]
