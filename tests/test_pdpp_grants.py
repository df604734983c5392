"""Property: for random grants (streams, fields, time windows) carried by real JWTs, no
response on any PDPP endpoint carries a stream, field, snippet or record outside the grant."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from idp_helpers import AUDIENCE, ISSUER, FakeIdp, SigningKey
from inprocess import InProcessGateway
from pdpp_config import OWNER_KEY, check, config
from processes import ROOT, Gateway, Process, free_port, wait_for_http

KEY = SigningKey.rsa("pdpp")
FIELDS = {"messages": ["id", "thread_id", "from", "to", "subject", "body", "sent_at", "labels",
                       "read", "priority"],
          "articles": ["id", "title", "category", "tags", "url", "updated_at"]}
TIME_FIELDS = {"messages": "sent_at", "articles": "updated_at"}
REQUIRED = {"id"}
DECLARED = {"messages": {"subject", "body"}, "articles": {"title"}}
BOUNDS = ["2022-01-01T00:00:00Z", "2023-06-01T00:00:00Z", "2024-06-01T00:00:00Z", None]


@pytest.fixture(scope="module")
def gateway(backend: str, tmp_path_factory) -> Iterator[Gateway]:
    port = free_port()
    idp_process = Process([sys.executable, str(ROOT / "tests" / "fake_idp.py"), str(port),
                           "gw", "gw-secret"], Path(tmp_path_factory.mktemp("idp")), "idp")
    idp = FakeIdp(f"http://127.0.0.1:{port}")
    wait_for_http(idp.url + "/admin/stats", process=idp_process.popen)
    idp.publish(KEY)
    cfg = config(backend)
    cfg["auth"]["issuers"] = [{"issuer": ISSUER, "jwks_uri": idp.url + "/jwks",
                               "audiences": [AUDIENCE]}]
    started = InProcessGateway(cfg, tmp_path_factory.mktemp("pdpp-grants"))
    yield started
    started.stop()
    idp_process.stop()


@pytest.fixture(scope="module")
def everything(gateway: Gateway) -> dict[str, dict[str, dict]]:
    """Every record as the owner sees it, to judge what a client was shown."""
    found = {}
    for stream in FIELDS:
        data, cursor = {}, ""
        while True:
            page = httpx.get(f"{gateway.url}/v1/streams/{stream}/records?limit=100{cursor}",
                             headers={"X-API-Key": OWNER_KEY}, timeout=30).json()
            data.update({r["id"]: r["data"] for r in page["data"]})
            if not page["has_more"]:
                break
            cursor = f"&cursor={page['next_cursor']}"
        found[stream] = data
    return found


@st.composite
def grants(draw) -> list[dict]:
    streams = draw(st.lists(st.sampled_from(sorted(FIELDS)), unique=True, max_size=2))
    granted = []
    for name in streams:
        fields = draw(st.lists(st.sampled_from(FIELDS[name]), unique=True, min_size=1))
        entry = {"name": name, "fields": fields}
        picks = draw(st.none() | st.lists(st.integers(0, 99), unique=True, min_size=1,
                                          max_size=6))
        if picks is not None:
            entry["resources"] = picks  # indexes: turned into record ids by the test
        since, until = draw(st.sampled_from(BOUNDS)), draw(st.sampled_from(BOUNDS))
        if since or until:
            entry["time_constraint"] = {"field": TIME_FIELDS[name],
                                        **({"since": since} if since else {}),
                                        **({"until": until} if until else {})}
        granted.append(entry)
    return granted


def inside(record: dict, entry: dict) -> bool:
    if "resources" in entry and record["id"] not in entry["resources"]:
        return False
    window = entry.get("time_constraint")
    if window is None:
        return True
    value = record[window["field"]]
    return (window.get("since") is None or value >= window["since"]) and \
        (window.get("until") is None or value < window["until"])


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(grant=grants(), q=st.sampled_from(["card payment", "password reset", "refund",
                                          "kind regards", "invoice vat"]))
def test_no_response_leaves_the_grant(gateway, everything, grant, q):
    for entry in grant:
        if "resources" in entry:
            keys = sorted(everything[entry["name"]])
            entry["resources"] = sorted({keys[i % len(keys)] for i in entry["resources"]})
    token = KEY.token(sub="u-001", pdpp_token_kind="client", authorization_details=[
        {"type": "pdpp_grant", "grant_id": "g-prop", "streams": grant}])
    headers = {"Authorization": f"Bearer {token}"}
    by_name = {entry["name"]: entry for entry in grant}

    def get(path: str) -> dict:
        response = httpx.get(gateway.url + path, headers=headers, timeout=30)
        assert response.status_code == 200, response.text
        return response.json()

    assert {s["name"] for s in get("/v1/streams")["data"]} == set(by_name)
    for name in FIELDS:
        if name not in by_name:
            refused = httpx.get(f"{gateway.url}/v1/streams/{name}/records", headers=headers)
            assert refused.status_code == 403
            continue
        entry, allowed = by_name[name], set(by_name[name]["fields"]) | REQUIRED
        page = get(f"/v1/streams/{name}/records?limit=100")
        check(page, "record_list")
        for record in page["data"]:
            assert set(record["data"]) <= allowed
            assert inside(everything[name][record["id"]], entry)
            if TIME_FIELDS[name] not in allowed:  # emitted_at is read from it: not shown
                assert record["emitted_at"] == page["freshness"]["captured_at"]
        expected = {k for k, r in everything[name].items() if inside(r, entry)}
        assert len(page["data"]) == min(100, len(expected))
        if "resources" in entry:
            assert page["has_more"] is False and "next_cursor" not in page
    for path, schema in (("/v1/search", "lexical_search"),
                         ("/v1/search/semantic", "semantic_search")):
        page = get(f"{path}?q={q}&limit=50")
        check(page, schema)
        if schema == "lexical_search":
            assert len(page["data"]) == min(50, page["meta"]["count"])  # visible hits only
        for result in page["data"]:
            name = result["stream"]
            assert name in by_name
            matchable = set(by_name[name]["fields"]) & DECLARED[name]
            assert set(result["matched_fields"]) <= matchable
            stored = everything[name][result["record_key"]]
            assert inside(stored, by_name[name])
            if TIME_FIELDS[name] not in set(by_name[name]["fields"]) | REQUIRED:
                assert result["emitted_at"] != stored[TIME_FIELDS[name]]
            if "snippet" in result:
                field = result["snippet"]["field"]
                assert field in matchable
                assert result["snippet"]["text"] in everything[name][result["record_key"]][field]


def client_token(*streams: dict, **members) -> dict[str, str]:
    token = KEY.token(sub="u-001", pdpp_token_kind="client", authorization_details=[
        {"type": "pdpp_grant", "grant_id": "g-1", "streams": list(streams), **members}])
    return {"Authorization": f"Bearer {token}"}


def search_keys(gateway: Gateway, path: str, q: str, headers: dict) -> list[str]:
    page = httpx.get(f"{gateway.url}{path}?q={q}&limit=50", headers=headers, timeout=30).json()
    return [r["record_key"] for r in page["data"]]


def test_resources_restrict_list_get_search_and_counts(gateway, everything):
    """spec-core §7: a grant's `resources` are the only records it reads, everywhere."""
    words = "hello%20kind%20regards%20team%20thanks"
    owner = httpx.get(f"{gateway.url}/v1/search?q={words}&streams[]=messages&limit=50",
                      headers={"X-API-Key": OWNER_KEY}, timeout=30).json()
    assert owner["meta"]["count"] > 1  # the same search over every record finds several
    one = owner["data"][-1]["record_key"]
    headers = client_token({"name": "messages", "fields": ["id", "subject", "body"],
                            "resources": [one]})
    page = httpx.get(f"{gateway.url}/v1/streams/messages/records?limit=100", headers=headers,
                     timeout=30).json()
    check(page, "record_list")
    assert [r["id"] for r in page["data"]] == [one]
    assert page["has_more"] is False and "next_cursor" not in page
    assert httpx.get(f"{gateway.url}/v1/streams/messages/records/{one}",
                     headers=headers).status_code == 200
    for other in [key for key in sorted(everything["messages"]) if key != one][:3]:
        missing = httpx.get(f"{gateway.url}/v1/streams/messages/records/{other}",
                            headers=headers)
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert search_keys(gateway, "/v1/search", words, headers) == [one]
    assert set(search_keys(gateway, "/v1/search/semantic", words, headers)) <= {one}
    lexical = httpx.get(f"{gateway.url}/v1/search?q={words}", headers=headers,
                        timeout=30).json()
    assert lexical["meta"]["count"] == 1


def test_resources_restrict_cursors_to_the_granted_records(gateway, everything):
    granted = sorted(everything["messages"])[2:9:2]  # four of them, not adjacent
    headers = client_token({"name": "messages", "fields": ["id", "subject", "sent_at"],
                            "resources": granted})
    seen, cursor = [], ""
    while True:
        page = httpx.get(f"{gateway.url}/v1/streams/messages/records?limit=1&order=asc{cursor}",
                         headers=headers, timeout=30).json()
        seen += [r["id"] for r in page["data"]]
        if not page["has_more"]:
            break
        cursor = f"&cursor={page['next_cursor']}"
    assert sorted(seen) == granted and len(seen) == 4
    wider = client_token({"name": "messages", "fields": ["id", "subject", "sent_at"]})
    refused = httpx.get(f"{gateway.url}/v1/streams/messages/records?limit=1&order=asc{cursor}",
                        headers=wider)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_cursor"
    for path in ("/v1/search", "/v1/search/semantic"):
        keys, search_cursor = [], ""
        while True:
            page = httpx.get(f"{gateway.url}{path}?q=hello%20kind%20regards%20team%20thanks"
                             f"&limit=1{search_cursor}", headers=headers, timeout=30).json()
            keys += [r["record_key"] for r in page["data"]]
            if not page["has_more"]:
                break
            search_cursor = f"&cursor={page['next_cursor']}"
        assert set(keys) <= set(granted)


MALFORMED = {
    "time_constraint without field": [{"name": "messages", "fields": ["id", "subject"],
                                       "time_constraint": {"until": "2000-01-01T00:00:00Z"}}],
    "stream without fields": [{"name": "messages"}],
    "same stream twice": [
        {"name": "messages", "fields": ["id"],
         "time_constraint": {"field": "sent_at", "until": "2000-01-01T00:00:00Z"}},
        {"name": "messages", "fields": ["id", "subject"]}],
    "unknown constraint": [{"name": "messages", "fields": ["id"], "where": {"read": True}}],
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_grants_are_refused_with_invalid_token(gateway, case):
    """Each of these read as a wider grant before: all 27 messages, or every field."""
    response = httpx.get(f"{gateway.url}/v1/streams/messages/records?limit=100",
                         headers=client_token(*MALFORMED[case]), timeout=30)
    assert response.status_code == 401, response.text
    body = response.json()
    check(body, "error")
    assert body["error"]["code"] == "authentication_error"
    assert body["error"]["request_id"] == response.headers["request-id"]
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


def test_the_same_stream_with_two_windows_across_details_is_still_refused(gateway):
    token = KEY.token(sub="u-001", pdpp_token_kind="client", authorization_details=[
        {"type": "pdpp_grant", "streams": [{"name": "messages", "fields": ["id"],
         "time_constraint": {"field": "sent_at", "until": "2000-01-01T00:00:00Z"}}]},
        {"type": "pdpp_grant", "streams": [{"name": "messages", "fields": ["id"]}]}])
    response = httpx.get(f"{gateway.url}/v1/streams/messages/records",
                         headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


def test_an_expired_grant_is_refused_as_grant_expired(gateway):
    headers = client_token({"name": "messages", "fields": ["id"]},
                           expires_at="2020-01-01T00:00:00Z")
    response = httpx.get(f"{gateway.url}/v1/streams/messages/records", headers=headers)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "grant_expired"
    live = client_token({"name": "messages", "fields": ["id"]}, expires_at="2999-01-01T00:00:00Z")
    assert httpx.get(f"{gateway.url}/v1/streams/messages/records", headers=live).status_code \
        == 200


def test_a_time_constraint_on_a_field_the_stream_lacks_is_grant_invalid(gateway):
    headers = client_token({"name": "messages", "fields": ["id"], "time_constraint": {
        "field": "received_at", "since": "2020-01-01T00:00:00Z"}})
    response = httpx.get(f"{gateway.url}/v1/streams/messages/records", headers=headers)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "grant_invalid"
