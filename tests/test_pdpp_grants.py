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
    started = Gateway(cfg, tmp_path_factory.mktemp("pdpp-grants"))
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
        since, until = draw(st.sampled_from(BOUNDS)), draw(st.sampled_from(BOUNDS))
        if since or until:
            entry["time_constraint"] = {"field": TIME_FIELDS[name],
                                        **({"since": since} if since else {}),
                                        **({"until": until} if until else {})}
        granted.append(entry)
    return granted


def inside(record: dict, entry: dict) -> bool:
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
        expected = {k for k, r in everything[name].items() if inside(r, entry)}
        assert len(page["data"]) == min(100, len(expected))
    for path, schema in (("/v1/search", "lexical_search"),
                         ("/v1/search/semantic", "semantic_search")):
        page = get(f"{path}?q={q}&limit=50")
        check(page, schema)
        for result in page["data"]:
            name = result["stream"]
            assert name in by_name
            matchable = set(by_name[name]["fields"]) & DECLARED[name]
            assert set(result["matched_fields"]) <= matchable
            assert inside(everything[name][result["record_key"]], by_name[name])
            if "snippet" in result:
                field = result["snippet"]["field"]
                assert field in matchable
                assert result["snippet"]["text"] in everything[name][result["record_key"]][field]
