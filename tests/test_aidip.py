"""AIDIP over real HTTP: client -> aigw (a process, or in-process where a test starts its own)
-> demo backend / echo upstream processes."""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from a2a_cards import assert_valid_a2a_card
from aidip_config import (
    SECRET,
    SECRET_HEADER,
    TEXT_IN,
    agent,
    aidip_gateway_config,
    echo_operation,
    registration,
)
from idp_helpers import AUDIENCE, ISSUER, FakeIdp, SigningKey
from inprocess import InProcessGateway
from processes import ROOT, Gateway, Process, counting_http_server, free_port, wait_for_http


@pytest.fixture(scope="module")
def gateway(backend: str, echo: str,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    workdir = tmp_path_factory.mktemp("aidip")
    started = Gateway(aidip_gateway_config(backend, echo), workdir)
    yield started
    started.stop()


def call(gateway: Gateway, method: str, path: str, key: str | None = None,
         body: Any = None, **headers: str) -> httpx.Response:
    sent = dict(headers)
    if key:
        sent["x-api-key"] = key
    return httpx.request(method, gateway.url + path, json=body, headers=sent, timeout=15)


def assert_error(response: httpx.Response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == code and isinstance(error["message"], str)
    assert error["request_id"] == response.headers["x-request-id"]
    return error


def echo_count(echo: str) -> int:
    return httpx.get(echo + "/count").json()["others"]


def register(gateway: Gateway, key: str, **extra: Any) -> dict:
    echo_url = extra.pop("endpoint")
    body = registration(echo_url, id=f"t-{uuid.uuid4().hex[:12]}", **extra)
    response = call(gateway, "POST", "/agents", key, body)
    assert response.status_code == 201, response.text
    return response.json()


# --------------------------------------------------------------------------- registration


def test_registration_validates_and_names_each_invalid_field(gateway: Gateway):
    body = {"name": "", "description": "x", "capabilities": "translation",
            "endpoint": "https://example.com/a",
            "operations": [{"name": "go", "inputs": {"type": "object"}}]}
    error = assert_error(call(gateway, "POST", "/agents", "alice-key", body), 400,
                         "InvalidInput")
    fields = {f["field"] for f in error["details"]["fields"]}
    assert {"name", "version", "capabilities", "operations[0].outputs"} <= fields
    assert "'version'" in error["message"]


def test_registration_refuses_endpoints_outside_the_allow_list(gateway: Gateway, echo: str):
    for endpoint in ("https://elsewhere.example.com/agent", "ftp://127.0.0.1/x",
                     "http://user:pw@127.0.0.1/x"):
        error = assert_error(call(gateway, "POST", "/agents", "alice-key",
                                  registration(endpoint)), 400, "InvalidInput")
        assert error["details"]["fields"][0]["field"] == "endpoint"


@pytest.fixture(scope="module")
def default_ports(backend: str, echo: str,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """Registered agents may be on agent.test and its subdomains, at the default port."""
    egress = {"origins": [{"scheme": "http", "host": "agent.test"},
                          {"scheme": "http", "host": "*.agent.test"}]}
    started = InProcessGateway(aidip_gateway_config(backend, echo, aidip={"egress": egress}),
                               tmp_path_factory.mktemp("aidip-default-ports"))
    yield started
    started.stop()


@pytest.mark.parametrize(("field", "url"), [
    ("endpoint", "http://agent.test:0/x"),  # urlsplit reads port 0 as "the default port"
    ("endpoint", "http://a\\b.agent.test/x"),
    ("endpoint", "http://a%2fb.agent.test/x"),
    ("endpoint", "http://agent.test/x\r\nX-Injected: 1"),  # urlsplit drops CR and LF
    ("endpoint", "http://agent.te\tst/x"),
    ("operations[0].endpoint", "http://agent.test:0/x"),
    ("operations[0].endpoint", "http://agent.test/x\ny"),
])
def test_registration_refuses_urls_that_can_never_be_called(default_ports: Gateway, field: str,
                                                            url: str):
    body = registration("http://agent.test/ok")
    if field == "endpoint":
        body["endpoint"] = url
    else:
        body["operations"][0]["endpoint"] = url
    error = assert_error(call(default_ports, "POST", "/agents", "alice-key", body), 400,
                         "InvalidInput")
    assert [f["field"] for f in error["details"]["fields"]] == [field]
    assert call(default_ports, "POST", "/agents", "alice-key",
                registration("http://b.agent.test/ok")).status_code == 201


def test_registration_needs_credentials_and_the_scope(gateway: Gateway, echo: str):
    body = registration(echo + "/echo/agent")
    assert_error(call(gateway, "POST", "/agents", None, body), 401, "Unauthorized")
    assert_error(call(gateway, "POST", "/agents", "reader-key", body), 403, "Forbidden")


def test_register_assigns_an_id_then_post_again_updates(gateway: Gateway, echo: str):
    response = call(gateway, "POST", "/agents", "alice-key", registration(echo + "/echo/a"))
    assert response.status_code == 201, response.text
    created = response.json()
    uuid.UUID(created["id"])  # assigned by the registry
    assert created["endpoint"] == f"https://gw.example.com/agents/{created['id']}/invoke"
    assert echo not in response.text  # the upstream URL never leaves the gateway
    again = call(gateway, "POST", "/agents", "alice-key",
                 registration(echo + "/echo/a", id=created["id"], version="2.0.0"))
    assert again.status_code == 200 and again.json()["version"] == "2.0.0"
    read = call(gateway, "GET", f"/agents/{created['id']}").json()
    assert read["version"] == "2.0.0" and read["operations"][0]["name"] == "translateText"


def test_update_and_delete_are_for_the_owner_or_an_admin(gateway: Gateway, echo: str):
    agent = register(gateway, "alice-key", endpoint=echo + "/echo/b")
    path = f"/agents/{agent['id']}"
    changed = registration(echo + "/echo/b", version="3.0.0")
    assert_error(call(gateway, "PUT", path, "bob-key", changed), 403, "Forbidden")
    assert_error(call(gateway, "PUT", "/agents/no-such-agent", "alice-key", changed), 404,
                 "NotFound")
    assert call(gateway, "PUT", path, "alice-key", changed).json()["version"] == "3.0.0"
    assert_error(call(gateway, "DELETE", path, "bob-key"), 403, "Forbidden")
    assert_error(call(gateway, "PUT", "/agents/classifier", "admin-key", changed), 403,
                 "Forbidden")  # configured agents change only with the config
    assert call(gateway, "DELETE", path, "admin-key").status_code == 204
    assert_error(call(gateway, "GET", path), 404, "NotFound")


def test_a_taken_id_is_the_same_409_whether_or_not_you_may_see_its_agent(gateway: Gateway,
                                                                         echo: str):
    hidden = register(gateway, "alice-key", endpoint=echo + "/echo/h",
                      allowed_clients=["partner"])
    visible = register(gateway, "alice-key", endpoint=echo + "/echo/v")
    assert_error(call(gateway, "GET", f"/agents/{hidden['id']}", "bob-key"), 404, "NotFound")
    answers = []
    for agent_id in (hidden["id"], visible["id"], "partner-only", "classifier"):
        response = call(gateway, "POST", "/agents", "bob-key",
                        registration(echo + "/echo/mine", id=agent_id))
        error = assert_error(response, 409, "Conflict")
        per_request = ("date", "x-request-id", "x-aigw-decision-id", "ratelimit-remaining",
                       "ratelimit-reset", "ratelimit")  # ids and counters
        headers = {name: None if name in per_request else value
                   for name, value in response.headers.items()}
        answers.append(({**error, "request_id": None}, headers))
    assert all(answer == answers[0] for answer in answers)
    assert call(gateway, "GET", f"/agents/{hidden['id']}", "alice-key").status_code == 200


def test_a_client_id_never_owns_what_a_subject_of_the_same_name_registered(
        backend, echo, inprocess_factory, tmp_path):
    key = SigningKey.ec("aidip")
    port = free_port()
    idp_process = Process([sys.executable, str(ROOT / "tests" / "fake_idp.py"), str(port)],
                          tmp_path, "idp")
    try:
        idp = FakeIdp(f"http://127.0.0.1:{port}")
        wait_for_http(idp.url + "/admin/stats", process=idp_process.popen)
        idp.publish(key)
        config = aidip_gateway_config(backend, echo)
        config["auth"]["issuers"] = [{"issuer": ISSUER, "jwks_uri": idp.url + "/jwks",
                                      "audiences": [AUDIENCE]}]
        gateway = inprocess_factory(config)
        user = key.token(sub="alice", client_id="web", scope="agents:register")
        client = key.token(sub=None, client_id="alice", scope="agents:register")

        def as_(token: str, method: str, path: str, body: Any = None) -> httpx.Response:
            return call(gateway, method, path, body=body, authorization=f"Bearer {token}")

        for owner, other in ((user, client), (client, user)):
            agent_id = f"t-{uuid.uuid4().hex[:12]}"
            body = registration(echo + "/echo/typed", id=agent_id)
            assert as_(owner, "POST", "/agents", body).status_code == 201
            assert_error(as_(other, "POST", "/agents", body), 409, "Conflict")
            assert_error(as_(other, "PUT", f"/agents/{agent_id}", body), 403, "Forbidden")
            assert_error(as_(other, "DELETE", f"/agents/{agent_id}"), 403, "Forbidden")
            assert as_(owner, "PUT", f"/agents/{agent_id}", body).status_code == 200
            assert as_(owner, "DELETE", f"/agents/{agent_id}").status_code == 204
    finally:
        idp_process.stop()


# --------------------------------------------------------------------------- discovery


def test_filters_combine_with_and_and_lists_mean_containment(gateway: Gateway):
    def ids(filters: dict) -> set[str]:
        response = call(gateway, "POST", "/agents/search", None, {"filters": filters})
        assert response.status_code == 200, response.text
        return {agent["id"] for agent in response.json()}

    assert ids({"capabilities": ["classification"]}) == {"classifier"}
    assert ids({"capabilities": ["classification"], "tags": ["support", "nlp"]}) == \
        {"classifier"}
    assert ids({"capabilities": ["classification"], "tags": ["support", "vision"]}) == set()
    assert "classifier" not in ids({"supported_language": "fr"})
    assert "echoer" in ids({"supported_language": "fr"})  # no languages: language-agnostic
    listed = call(gateway, "GET", "/agents?capabilities=classification&tags=support&language=en")
    assert [a["id"] for a in listed.json()] == ["classifier"]
    assert set(listed.json()[0]) == {"id", "name", "description", "endpoint", "capabilities"}
    error = assert_error(call(gateway, "POST", "/agents/search", None,
                              {"filters": {"colour": "red"}}), 400, "InvalidInput")
    assert error["details"]["fields"][0]["field"] == "filters.colour"


@pytest.mark.parametrize("top", ["\u00b2", "\u0661\u0662", "1_0", " 5", "0x5", "-1"])
def test_a_top_that_is_not_plain_digits_is_invalid_input_not_a_500(gateway: Gateway, top: str):
    listed = assert_error(call(gateway, "GET", f"/agents?top={quote(top)}"), 400,
                          "InvalidInput")
    searched = assert_error(call(gateway, "POST", "/agents/search", None, {"top": top}), 400,
                            "InvalidInput")
    assert listed["details"]["fields"][0]["field"] == searched["details"]["fields"][0]["field"] \
        == "top"


def test_entitlements_hide_restricted_agents_from_other_clients(gateway: Gateway):
    assert_error(call(gateway, "GET", "/agents/partner-only", "reader-key"), 404, "NotFound")
    everyone = {a["id"] for a in call(gateway, "GET", "/agents", "reader-key").json()}
    found = call(gateway, "POST", "/agents/search", "reader-key",
                 {"query": "partner tool"}).json()
    assert "partner-only" not in everyone and found == []
    partner = {a["id"] for a in call(gateway, "GET", "/agents", "partner-key").json()}
    assert "partner-only" in partner
    assert call(gateway, "GET", "/agents/partner-only", "partner-key").status_code == 200
    assert_error(call(gateway, "POST", "/agents/partner-only/invoke", "reader-key",
                      {"text": "x"}), 404, "NotFound")


def test_registered_allowed_clients_restrict_visibility(gateway: Gateway, echo: str):
    agent = register(gateway, "alice-key", endpoint=echo + "/echo/c",
                     allowed_clients=["partner"])
    path = f"/agents/{agent['id']}"
    assert call(gateway, "GET", path, "alice-key").status_code == 200  # the owner
    assert call(gateway, "GET", path, "partner-key").status_code == 200
    assert "allowed_clients" not in call(gateway, "GET", path, "partner-key").json()
    assert_error(call(gateway, "GET", path, "bob-key"), 404, "NotFound")
    assert_error(call(gateway, "DELETE", path, "bob-key"), 404, "NotFound")


def test_listings_and_invocations_log_each_agent_access_decision(backend, echo,
                                                                  inprocess_factory, tmp_path):
    from test_policy_decisions import logged

    log = tmp_path / "decisions.jsonl"
    gateway = inprocess_factory(aidip_gateway_config(
        backend, echo, decision_log={"sink": "file", "path": str(log)}))
    for listing in (call(gateway, "GET", "/agents", "reader-key"),
                    call(gateway, "POST", "/agents/search", "reader-key", {})):
        assert listing.status_code == 200, listing.text
        record = logged(log, listing.headers["x-aigw-decision-id"])
        decided = {d["resource"]: (d["effect"], d["rule"]) for d in record["decisions"]
                   if d["kind"] == "agent_access" and d["surface"] == "aidip"}
        assert {agent for agent, (effect, _) in decided.items() if effect == "allow"} \
            == {agent["id"] for agent in listing.json()} == {"classifier", "echoer"}
        assert decided["partner-only"] == ("deny", "config:aidip.agents.partner-only.clients")
    invoked = call(gateway, "POST", "/agents/echoer/invoke/echo", "reader-key", {"text": "hi"})
    assert invoked.status_code == 200, invoked.text
    record = logged(log, invoked.headers["x-aigw-decision-id"])
    assert (record["surface"], record["kind"], record["resource"], record["effect"]) \
        == ("aidip", "agent_access", "echoer", "allow")
    refused = call(gateway, "POST", "/agents/partner-only/invoke", "reader-key", {"text": "x"})
    assert_error(refused, 404, "NotFound")
    record = logged(log, refused.headers["x-aigw-decision-id"])
    assert (record["kind"], record["resource"], record["effect"], record["rule"]) \
        == ("agent_access", "partner-only", "deny", "config:aidip.agents.partner-only.clients")
    assert record["principal"]["client_id"] == "reader-app"


def test_registry_endpoints_are_in_the_ai_discovery_document(gateway: Gateway):
    document = httpx.get(gateway.url + "/.well-known/ai").json()
    listed = {(c["method"], c["endpoint"]) for c in document["capabilities"]}
    assert {("GET", "/agents"), ("POST", "/agents"), ("POST", "/agents/search"),
            ("GET", "/agents/{id}"), ("PUT", "/agents/{id}"), ("DELETE", "/agents/{id}"),
            ("POST", "/agents/{id}/invoke/{operation}")} <= listed


def test_registry_answers_carry_rate_limit_fields(gateway: Gateway):
    response = call(gateway, "GET", "/agents")
    assert response.status_code == 200
    assert "ratelimit-policy" in response.headers


def test_the_metadata_schema_is_served(gateway: Gateway):
    schema = httpx.get(gateway.url + "/agents/schema.json").json()
    assert {"name", "description", "version", "capabilities", "endpoint"} <= \
        set(schema["required"])
    assert "operations" in schema["properties"]


# --------------------------------------------------------------------------- invocation


def test_invoking_a_configured_legacy_endpoint(gateway: Gateway):
    response = call(gateway, "POST", "/agents/classifier/invoke", None,
                    {"text": "I was charged twice on my card"})
    assert response.status_code == 200, response.text
    assert response.json()["category"] == "billing"
    batch = call(gateway, "POST", "/agents/classifier/invoke/classify", None,
                 [{"text": "I forgot my password"}, {"text": "Where is my parcel?"}])
    assert [item["category"] for item in batch.json()] == ["login", "shipping"]


def test_schema_invalid_input_is_refused_before_any_upstream_call(gateway: Gateway, echo: str):
    before = echo_count(echo)
    error = assert_error(call(gateway, "POST", "/agents/echoer/invoke/echo", None,
                              {"txt": "typo"}), 400, "InvalidInput")
    assert error["details"]["fields"] == [{"field": "text",
                                           "problem": "required field is missing"}]
    assert "'text'" in error["message"]
    assert_error(call(gateway, "POST", "/agents/echoer/invoke/echo", None,
                      [{"text": "a"}]), 400, "InvalidInput")  # no batch declared
    assert_error(call(gateway, "POST", "/agents/echoer/invoke", None, {"text": "a"}), 400,
                 "InvalidInput")  # several operations: the path must name one
    assert echo_count(echo) == before


def test_the_gateway_authenticates_itself_and_keeps_the_callers_token(gateway: Gateway):
    response = call(gateway, "POST", "/agents/echoer/invoke/echo", "alice-key",
                    {"text": "hi"})
    assert response.status_code == 200, response.text
    headers = {name.lower(): value for name, value in response.json()["headers"]}
    assert headers[SECRET_HEADER.lower()] == SECRET
    assert "authorization" not in headers and "x-api-key" not in headers
    forwarded = call(gateway, "POST", "/agents/echoer/invoke/forward", "alice-key",
                     {"text": "hi"}).json()  # configured to forward the caller's credential
    assert ["x-api-key", "alice-key"] in forwarded["headers"]


@pytest.mark.parametrize(("operation", "status", "code"), [
    ("broken", 502, "AgentError"),
    ("notjson", 502, "AgentError"),
    ("strict", 502, "AgentError"),  # the answer fails the outputs schema
    ("slow", 504, "AgentTimeout"),
])
def test_upstream_failures_map_to_the_drafts_errors(gateway: Gateway, operation: str,
                                                    status: int, code: str):
    response = call(gateway, "POST", f"/agents/echoer/invoke/{operation}", None,
                    {"text": "hi"})
    assert_error(response, status, code)
    assert "status" not in response.text and "plain words" not in response.text


def test_only_idempotent_operations_are_retried(gateway: Gateway, echo: str):
    before = echo_count(echo)
    assert_error(call(gateway, "POST", "/agents/echoer/invoke/flaky", None, {"text": "x"}),
                 502, "AgentError")
    assert echo_count(echo) == before + 1
    assert_error(call(gateway, "POST", "/agents/echoer/invoke/flaky-idempotent", None,
                      {"text": "x"}), 502, "AgentError")
    assert echo_count(echo) == before + 3


def test_a_registered_agent_is_called_without_any_configured_credential(gateway: Gateway,
                                                                        echo: str):
    agent = register(gateway, "alice-key", endpoint="http://agent.test:"
                     f"{echo.rsplit(':', 1)[1]}/echo/registered")
    response = call(gateway, "POST", f"/agents/{agent['id']}/invoke", "alice-key",
                    {"text": "hello"})
    assert response.status_code == 200, response.text
    received = response.json()
    assert received["raw_path"] == "/echo/registered"
    names = {name.lower() for name, _ in received["headers"]}
    assert SECRET_HEADER.lower() not in names
    assert not names & {"authorization", "x-api-key", "x-aigw-subject", "cookie"}


def test_redirects_from_a_registered_agent_are_not_followed(gateway: Gateway, echo: str):
    target = echo + "/echo/redirect-target"
    agent = register(gateway, "alice-key", endpoint=f"{echo}/redirect?to={target}")
    before = echo_count(echo)
    assert_error(call(gateway, "POST", f"/agents/{agent['id']}/invoke", None,
                      {"text": "x"}), 502, "AgentError")
    assert echo_count(echo) == before + 1  # the redirect itself, never its target


def test_an_endpoint_resolving_to_a_metadata_address_is_refused(backend, echo,
                                                                inprocess_factory):
    port = int(echo.rsplit(":", 1)[1])
    config = aidip_gateway_config(backend, echo, aidip={"egress": {
        "origins": [{"scheme": "http", "host": "metadata.test", "ports": [port]},
                    {"scheme": "http", "host": "127.0.0.1", "ports": [port]}],
        "hosts": {"metadata.test": ["169.254.169.254"]}}})
    strict = inprocess_factory(config)
    loopback = call(strict, "POST", "/agents", "alice-key", registration(echo + "/echo/x"))
    assert_error(loopback, 400, "InvalidInput")  # loopback is not allowed here
    agent = register(strict, "alice-key", endpoint=f"http://metadata.test:{port}/latest")
    assert_error(call(strict, "POST", f"/agents/{agent['id']}/invoke", None, {"text": "x"}),
                 502, "EndpointRefused")


def test_refused_and_unencodable_endpoints_answer_endpoint_refused_not_500(backend, echo,
                                                                          inprocess_factory):
    port = int(echo.rsplit(":", 1)[1])
    config = aidip_gateway_config(backend, echo, aidip={
        "breaker": {"failures": 1, "open_seconds": 60},
        "egress": {"origins": [{"scheme": "http", "host": "metadata.test", "ports": [port]},
                               {"scheme": "http", "host": "*.agent.test", "ports": [port]}],
                   "hosts": {"metadata.test": ["169.254.169.254"]}}})
    strict = inprocess_factory(config)
    for host in ("a" * 64 + ".agent.test", "x..agent.test"):  # DNS cannot carry these names
        error = assert_error(call(strict, "POST", "/agents", "alice-key",
                                  registration(f"http://{host}:{port}/x")), 400, "InvalidInput")
        assert error["details"]["fields"][0]["field"] == "endpoint"
    agent = register(strict, "alice-key", endpoint=f"http://metadata.test:{port}/latest")
    for _ in range(3):  # a refusal sends nothing, so it never opens the agent's breaker
        assert_error(call(strict, "POST", f"/agents/{agent['id']}/invoke", None,
                          {"text": "x"}), 502, "EndpointRefused")


def test_the_breaker_opens_after_failures_and_closes_after_a_good_call(
        backend, echo, inprocess_factory):
    config = aidip_gateway_config(backend, echo,
                                  aidip={"breaker": {"failures": 2, "open_seconds": 1}})
    gateway = inprocess_factory(config)
    agent = register(gateway, "alice-key", endpoint=echo + "/status/500")
    path = f"/agents/{agent['id']}/invoke"
    for _ in range(2):
        assert_error(call(gateway, "POST", path, None, {"text": "x"}), 502, "AgentError")
    before = echo_count(echo)
    refused = call(gateway, "POST", path, None, {"text": "x"})
    assert_error(refused, 503, "AgentUnavailable")
    assert int(refused.headers["retry-after"]) >= 1
    assert echo_count(echo) == before  # an open circuit calls nobody
    healed = registration(echo + "/echo/healed", id=agent["id"])
    assert call(gateway, "PUT", f"/agents/{agent['id']}", "alice-key", healed).status_code == 200
    import time

    time.sleep(1.2)  # the open period passes; the next call is the trial
    assert call(gateway, "POST", path, None, {"text": "x"}).status_code == 200
    assert call(gateway, "POST", path, None, {"text": "x"}).status_code == 200


def test_an_agents_4xx_is_the_callers_error_and_never_opens_its_breaker(backend, echo,
                                                                        inprocess_factory):
    config = aidip_gateway_config(backend, echo,
                                  aidip={"breaker": {"failures": 2, "open_seconds": 60}})
    config["aidip"]["agents"]["summarizer"] = agent(
        "Summarizer", "Summarizes a help-centre article.", ["summarization"],
        [{"name": "summarize", "description": "A summary of an article, by id.",
          "upstream": "helpcentre", "path": "/api/v1/tasks/summarize",
          "inputs": {"type": "object", "required": ["article_id"],
                     "properties": {"article_id": {"type": "string",
                                                   "pattern": "^art-[0-9]{4}$"}}},
          "outputs": {"type": "object", "required": ["summary"]}}])
    gateway = inprocess_factory(config)
    body = registration(echo + "/echo/fine", id="picky")
    body["operations"] += [
        {"name": name, "description": name, "inputs": {"type": "object"},
         "outputs": {"type": "object"}, "endpoint": f"{echo}/status/{status}"}
        for name, status in (("find", 404), ("check", 422), ("auth", 401))]
    assert call(gateway, "POST", "/agents", "alice-key", body).status_code == 201
    before = echo_count(echo)
    for operation, status, code, times in (("find", 404, "NotFound", 5),
                                           ("check", 422, "InvalidInput", 3),
                                           ("auth", 403, "Forbidden", 1)):
        for _ in range(times):
            response = call(gateway, "POST", f"/agents/picky/invoke/{operation}", None, {})
            error = assert_error(response, status, code)
            assert "details" not in error and "status" not in response.text  # no agent body
    assert echo_count(echo) == before + 9  # every call reached the agent: no open circuit
    fine = call(gateway, "POST", "/agents/picky/invoke/translateText", None, {"text": "x"})
    assert fine.status_code == 200, fine.text
    summarize = "/agents/summarizer/invoke"
    for _ in range(5):  # schema-valid, but the legacy backend knows no such article
        assert_error(call(gateway, "POST", summarize, None, {"article_id": "art-9999"}), 404,
                     "NotFound")
    summary = call(gateway, "POST", summarize, None, {"article_id": "art-0001"})
    assert summary.status_code == 200 and summary.json()["source_id"] == "art-0001"


# --------------------------------------------------------------------------- GET operations


LOOKUP = {"type": "object", "required": ["id"],
          "properties": {"id": {"type": "string", "minLength": 1},
                         "lang": {"type": "string"}, "top": {"type": "integer"},
                         "exact": {"type": "boolean"}, "note": {"type": ["string", "null"]}}}


@pytest.fixture
def lookup(backend: str, echo: str, inprocess_factory) -> InProcessGateway:
    """A gateway whose configured agent `lookup` reads the echo upstream with GET."""
    config = aidip_gateway_config(backend, echo)
    config["aidip"]["agents"]["lookup"] = agent(
        "Lookup", "Reads a record by id.", ["lookup"],
        [echo_operation("look", "/echo/look/{id}", method="GET", inputs=LOOKUP, batch=True),
         echo_operation("free", "/echo/free?fixed=1", method="GET", inputs={"type": "object"}),
         echo_operation("put", "/echo/put/{id}", method="PUT", inputs=LOOKUP)])
    return inprocess_factory(config)


def echoed_headers(answer: dict) -> dict[str, str]:
    return {name.lower(): value for name, value in answer["headers"]}


def test_a_configured_get_sends_the_input_as_its_path_and_query_and_no_body(
        lookup: InProcessGateway):
    response = call(lookup, "POST", "/agents/lookup/invoke/look", None,
                    {"id": "g++/x y", "lang": "中文", "top": 3, "exact": True, "note": None})
    assert response.status_code == 200, response.text
    echoed = response.json()
    assert echoed["method"] == "GET" and echoed["raw_path"] == "/echo/look/g%2B%2B%2Fx%20y"
    assert echoed["query"] == "lang=%E4%B8%AD%E6%96%87&top=3&exact=true"  # null: left out
    assert echoed["body_length"] == 0
    headers = echoed_headers(echoed)
    assert not {"content-type", "content-length", "transfer-encoding"} & set(headers)
    assert headers[SECRET_HEADER.lower()] == SECRET  # a configured upstream's call, as ever
    free = call(lookup, "POST", "/agents/lookup/invoke/free", None, {"q": "a&b=c"}).json()
    assert (free["raw_path"], free["query"]) == ("/echo/free", "fixed=1&q=a%26b%3Dc")
    put = call(lookup, "POST", "/agents/lookup/invoke/put", None, {"id": "a/b"}).json()
    assert (put["method"], put["raw_path"], put["body"]) == ("PUT", "/echo/put/a%2Fb",
                                                             '{"id":"a/b"}')
    batch = call(lookup, "POST", "/agents/lookup/invoke/look", None, [{"id": "a"}, {"id": "b"}])
    assert [item["raw_path"] for item in batch.json()] == ["/echo/look/a", "/echo/look/b"]


def test_a_get_input_no_query_can_carry_is_refused_before_any_call(lookup: InProcessGateway,
                                                                  echo: str):
    before = echo_count(echo)
    for operation, body, field in (
            ("look", {"id": "a", "tags": ["x", "y"]}, "tags"),  # undeclared, not a scalar
            ("free", {"filter": {"a": 1}}, "filter"),
            ("look", {"id": ".."}, "id"),  # a path would resolve it away
            ("look", [{"id": "a"}, {"id": "b", "more": {"x": 1}}], "[1].more")):
        error = assert_error(call(lookup, "POST", f"/agents/lookup/invoke/{operation}", None,
                                  body), 400, "InvalidInput")
        assert [f["field"] for f in error["details"]["fields"]] == [field]
        assert f"'{field}'" in error["message"]
    assert echo_count(echo) == before  # not even the batch's valid first input


def test_a_get_url_too_long_is_invalid_input_before_any_call(lookup: InProcessGateway,
                                                            gateway: Gateway, echo: str):
    before = echo_count(echo)
    long = "x" * 9000
    for body, field in (({"id": "a", "lang": long}, "(body)"),
                        ([{"id": "a"}, {"id": "b", "lang": long}], "[1]")):
        error = assert_error(call(lookup, "POST", "/agents/lookup/invoke/look", None, body),
                             400, "InvalidInput")
        assert error["details"]["fields"] == [{"field": field, "problem": "too long for a URL"}]
        assert "8192 bytes" in error["message"]
    agent = register(gateway, "alice-key", endpoint=f"{agent_test(echo)}/echo/registered",
                     **{"x-aigw-method": "GET"})
    assert_error(call(gateway, "POST", f"/agents/{agent['id']}/invoke", None, {"text": long}),
                 400, "InvalidInput")
    assert echo_count(echo) == before


def agent_test(echo: str) -> str:
    """The echo upstream as the module gateway's egress rules allow it (agent.test)."""
    return f"http://agent.test:{echo.rsplit(':', 1)[1]}"


def test_a_registered_agent_declares_get_per_operation(gateway: Gateway, echo: str):
    body = registration(f"{agent_test(echo)}/echo/registered?v=1", **{"x-aigw-method": "GET"})
    body["operations"].append({**body["operations"][0], "name": "post",
                               "x-aigw-method": "POST"})
    agent = register(gateway, "alice-key", **body)
    assert "x-aigw-method" not in json.dumps(agent)  # how the agent is called stays inside
    response = call(gateway, "POST", f"/agents/{agent['id']}/invoke/translateText",
                    "alice-key", {"text": "你好 world"})
    assert response.status_code == 200, response.text
    echoed = response.json()
    assert (echoed["method"], echoed["raw_path"]) == ("GET", "/echo/registered")
    assert echoed["query"] == "v=1&text=%E4%BD%A0%E5%A5%BD%20world"
    assert echoed["body_length"] == 0
    headers = echoed_headers(echoed)
    assert not {"content-type", "authorization", "x-api-key", SECRET_HEADER.lower()} & \
        set(headers)
    posted = call(gateway, "POST", f"/agents/{agent['id']}/invoke/post", None,
                  {"text": "hi"}).json()
    assert (posted["method"], posted["body"]) == ("POST", '{"text":"hi"}')


@pytest.mark.parametrize(("change", "field", "says"), [
    ({"x-aigw-method": "DELETE"}, "operations[0].x-aigw-method", "expected enum"),
    ({"method": "GET"}, "operations[0].method", "the gateway's is 'x-aigw-method'"),
    ({"x-aigw-method": "GET",
      "inputs": {"type": "object", "properties": {"words": {"type": "array"}}}},
     "operations[0].inputs", "property 'words': a GET operation sends its input as query"),
])
def test_a_method_the_gateway_cannot_call_with_is_refused_at_registration(
        gateway: Gateway, echo: str, change: dict, field: str, says: str):
    body = registration(f"{agent_test(echo)}/echo/x")
    body["operations"][0].update(change)
    error = assert_error(call(gateway, "POST", "/agents", "alice-key", body), 400,
                         "InvalidInput")
    [problem] = error["details"]["fields"]
    assert problem["field"] == field and says in problem["problem"]


def test_the_implied_operation_takes_the_agents_method(gateway: Gateway, echo: str):
    body = registration(f"{agent_test(echo)}/echo/implied", **{"x-aigw-method": "GET"})
    del body["operations"]
    body.update(inputs={"type": "object", "properties": {"ids": {"type": "array"}}},
                outputs={"type": "object"})
    error = assert_error(call(gateway, "POST", "/agents", "alice-key", body), 400,
                         "InvalidInput")
    assert [f["field"] for f in error["details"]["fields"]] == ["inputs"]
    body["inputs"] = TEXT_IN
    agent = register(gateway, "alice-key", **body)
    echoed = call(gateway, "POST", f"/agents/{agent['id']}/invoke", None, {"text": "a"}).json()
    assert (echoed["method"], echoed["query"]) == ("GET", "text=a")



# --------------------------------------------------------------------------- errors


def test_unknown_paths_and_methods_answer_in_aidips_dialect(gateway: Gateway):
    assert_error(call(gateway, "GET", "/agents/classifier/nothing"), 404, "NotFound")
    assert_error(call(gateway, "PATCH", "/agents/classifier"), 405, "MethodNotAllowed")
    assert_error(call(gateway, "POST", "/agents/classifier/invoke/nope", None, {}), 404,
                 "NotFound")


def test_405_allow_lists_every_method_served_at_the_path(gateway: Gateway):
    """Each method has a route of its own; Allow names all of them, not the last one tried."""
    item = call(gateway, "PATCH", "/agents/classifier")
    assert_error(item, 405, "MethodNotAllowed")
    assert item.headers["allow"] == "DELETE, GET, HEAD, PUT"
    collection = call(gateway, "DELETE", "/agents")
    assert_error(collection, 405, "MethodNotAllowed")
    assert collection.headers["allow"] == "GET, HEAD, POST"


# --------------------------------------------------------------------------- A2A cards


def test_the_registry_reads_as_a2a_agent_cards(gateway: Gateway):
    card = httpx.get(gateway.url + "/.well-known/agent-card.json").json()
    assert_valid_a2a_card(card)
    skills = [skill["id"] for skill in card["skills"]]
    assert "classifier" in skills and "partner-only" not in skills
    assert [(i["protocolBinding"], i["url"]) for i in card["supportedInterfaces"]] == [
        ("JSONRPC", "https://gw.example.com/agents/a2a"),
        ("AIDIP", "https://gw.example.com/agents")]
    assert card["securitySchemes"]["apiKey"]["apiKeySecurityScheme"]["name"] == "X-API-Key"
    agent_card = call(gateway, "GET", "/agents/classifier/agent-card.json").json()
    assert_valid_a2a_card(agent_card)
    assert [(i["protocolBinding"], i["url"]) for i in agent_card["supportedInterfaces"]] == [
        ("JSONRPC", "https://gw.example.com/agents/classifier/a2a"),
        ("AIDIP", "https://gw.example.com/agents/classifier/invoke")]
    assert agent_card["provider"] == {"organization": "Example Org",
                                      "url": "https://org.example.com"}
    assert [skill["id"] for skill in agent_card["skills"]] == ["classify"]
    assert_error(call(gateway, "GET", "/agents/partner-only/agent-card.json"), 404, "NotFound")


# --------------------------------------------------------------------------- Redis


def test_two_gateways_share_registrations_through_redis(backend, echo, inprocess_factory):
    prefix = f"aigw-test:{uuid.uuid4().hex}:"
    registry = {"redis_url": "redis://127.0.0.1:6379/15", "key_prefix": prefix}
    config = aidip_gateway_config(backend, echo, aidip={"registry": registry})
    first, second = inprocess_factory(config), inprocess_factory(config)
    try:
        agent = register(first, "alice-key", endpoint=echo + "/echo/shared")
        path = f"/agents/{agent['id']}"
        assert call(second, "GET", path).json()["name"] == agent["name"]
        assert call(second, "POST", path + "/invoke", None, {"text": "x"}).status_code == 200
        assert call(second, "DELETE", path, "alice-key").status_code == 204
        assert_error(call(first, "GET", path), 404, "NotFound")
        again = register(first, "alice-key", endpoint=echo + "/echo/kept")
        first.stop()
        restarted = inprocess_factory(config)  # registrations survive a restart
        assert call(restarted, "GET", f"/agents/{again['id']}").status_code == 200
    finally:
        import redis

        client = redis.Redis(host="127.0.0.1", port=6379, db=15)
        client.delete(f"{prefix}agents")
        client.close()


@pytest.fixture
def redis_registry() -> Iterator[dict[str, str]]:
    """A registry section on the real Redis, under a key prefix of its own."""
    import redis

    prefix = f"aigw-test:{uuid.uuid4().hex}:"
    yield {"redis_url": "redis://127.0.0.1:6379/15", "key_prefix": prefix}
    client = redis.Redis(host="127.0.0.1", port=6379, db=15)
    client.delete(f"{prefix}agents")
    client.close()


def stored_record(registry: dict[str, str], agent_id: str) -> dict:
    import redis

    client = redis.Redis(host="127.0.0.1", port=6379, db=15)
    try:
        return json.loads(client.hget(f"{registry['key_prefix']}agents", agent_id))
    finally:
        client.close()


async def test_owners_racing_to_register_one_id_leave_exactly_one_owner(
        backend, echo, inprocess_factory, redis_registry):
    config = aidip_gateway_config(backend, echo, aidip={"registry": redis_registry})
    first, second = inprocess_factory(config), inprocess_factory(config)
    ids = [f"race-{uuid.uuid4().hex[:8]}" for _ in range(10)]

    async def post(client: httpx.AsyncClient, gateway: Gateway, key: str,
                   agent_id: str) -> tuple[str, str, int]:
        response = await client.post(gateway.url + "/agents", headers={"x-api-key": key},
                                     json=registration(echo + "/echo/race", id=agent_id))
        return agent_id, key, response.status_code

    async with httpx.AsyncClient(timeout=15) as client:
        results = await asyncio.gather(*(
            post(client, gateway, key, agent_id) for agent_id in ids for _ in range(3)
            for gateway, key in ((first, "alice-key"), (second, "bob-key"))))
    for agent_id in ids:
        answers = [(key, status) for answered, key, status in results if answered == agent_id]
        winners = [key for key, status in answers if status == 201]
        assert len(winners) == 1, answers
        winner = winners[0]
        assert all(status == 409 for key, status in answers if key != winner), answers
        assert all(status in (200, 201, 409) for _, status in answers), answers
        owner = {"alice-key": "sub:alice", "bob-key": "sub:bob"}[winner]
        assert stored_record(redis_registry, agent_id)["owner"] == owner
        loser = "bob-key" if winner == "alice-key" else "alice-key"
        body = registration(echo + "/echo/race", id=agent_id)
        assert_error(call(second, "PUT", f"/agents/{agent_id}", loser, body), 403, "Forbidden")
        assert call(first, "PUT", f"/agents/{agent_id}", winner, body).status_code == 200


def test_a_legacy_untyped_owner_is_read_as_a_subject_and_typed_on_the_next_write(
        backend, echo, inprocess_factory, redis_registry):
    import redis

    config = aidip_gateway_config(backend, echo, aidip={"registry": redis_registry})
    gateway = inprocess_factory(config)
    agent_id = register(gateway, "alice-key", endpoint=echo + "/echo/legacy")["id"]
    legacy = stored_record(redis_registry, agent_id)
    del legacy["format"]
    legacy["owner"] = "alice"  # as the registry wrote owners before they were typed
    client = redis.Redis(host="127.0.0.1", port=6379, db=15)
    client.hset(f"{redis_registry['key_prefix']}agents", agent_id, json.dumps(legacy))
    client.close()
    body = registration(echo + "/echo/legacy", id=agent_id, version="2.0.0")
    assert_error(call(gateway, "PUT", f"/agents/{agent_id}", "bob-key", body), 403,
                 "Forbidden")
    assert call(gateway, "PUT", f"/agents/{agent_id}", "alice-key", body).status_code == 200
    rewritten = stored_record(redis_registry, agent_id)
    assert (rewritten["owner"], rewritten["format"]) == ("sub:alice", 2)


def test_a_redis_outage_fails_closed(backend, echo, inprocess_factory):
    from processes import free_port

    registry = {"redis_url": f"redis://127.0.0.1:{free_port()}/15", "timeout": 0.5}
    gateway = inprocess_factory(aidip_gateway_config(backend, echo, aidip={"registry": registry}))
    assert_error(call(gateway, "GET", "/agents"), 503, "RegistryUnavailable")
    assert_error(call(gateway, "POST", "/agents", "alice-key",
                      registration(echo + "/echo/x")), 503, "RegistryUnavailable")


# --------------------------------------------------------------------------- registered schemas


@pytest.fixture
def counting_server() -> Iterator[tuple[str, list[str]]]:
    """An HTTP server on loopback that counts what reaches it (the SSRF target)."""
    with counting_http_server(b'{"type": "object"}', "application/json") as server:
        yield server


def with_inputs(echo: str, inputs: Any, **operation: Any) -> dict:
    body = registration(echo + "/echo/schema", id=f"s-{uuid.uuid4().hex[:12]}")
    body["operations"] = [{**body["operations"][0], "inputs": inputs, **operation}]
    return body


def refused_schema(gateway: Gateway, body: dict) -> dict[str, str]:
    """The one field problem of a registration refused for its schema."""
    error = assert_error(call(gateway, "POST", "/agents", "alice-key", body), 400,
                         "InvalidInput")
    [problem] = error["details"]["fields"]
    return problem


def test_a_remote_ref_is_refused_at_registration_and_never_fetched(
        gateway: Gateway, echo: str, counting_server: tuple[str, list[str]]):
    target, hits = counting_server
    for inputs in ({"$ref": f"{target}/internal"},
                   {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": f"{target}/via-defs"}}},
                   {"$id": f"{target}/base", "$ref": "relative"},
                   {"type": "object", "properties": {"x": {"$ref": f"{target}/deep#/a"}}}):
        problem = refused_schema(gateway, with_inputs(echo, inputs))
        assert problem["field"] == "operations[0].inputs"
        assert "only references inside the schema" in problem["problem"]
    top = registration(echo + "/echo/top", inputs={"$ref": f"{target}/top"}, outputs={})
    del top["operations"]
    assert refused_schema(gateway, top)["field"] == "inputs"
    assert hits == []


@pytest.mark.parametrize(("inputs", "where", "says"), [
    ({"$ref": "#"}, "", "loops back"),
    ({"anyOf": [{"$ref": "#/$defs/a"}], "$defs": {"a": {"not": {"$ref": "#"}}}}, "/$defs/a/not",
     "loops back"),
    ({"type": "object", "properties": {"text": {"type": "string", "pattern": "(("}}},
     "/properties/text/pattern", "pattern '((' is refused"),
    ({"type": "string", "pattern": "(a)\\1"}, "/pattern", "refused (invalid escape"),
    ({"type": "object", "patternProperties": {"(?<=x)y": {}}}, "/patternProperties",
     "pattern '(?<=x)y' is refused"),
    ({"type": "nonsense"}, "/type", "not valid JSON Schema 2020-12"),
    ({"$ref": "#/nowhere"}, "/$ref", "points to nothing"),
    ({"$dynamicRef": "#meta"}, "/$dynamicRef", "not supported"),
    ({"$schema": "http://json-schema.org/draft-04/schema#"}, "/$schema", "2020-12"),
    ({"$ref": "#/$defs/d0", "$defs": {  # 2^20 subschemas for one value
        **{f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}] * 2} for i in range(20)},
        "d20": {"type": "object"}}}, "/$defs/d", "more than 512 subschemas"),
])
def test_schemas_that_would_fail_at_invoke_are_refused_at_registration(
        gateway: Gateway, echo: str, inputs: dict, where: str, says: str):
    problem = refused_schema(gateway, with_inputs(echo, inputs))
    assert problem["field"] == "operations[0].inputs"
    assert problem["problem"].startswith(f"{where}") and says in problem["problem"], problem


def nested(levels: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def test_deep_and_top_level_schemas_are_refused_at_registration_not_at_invoke(
        gateway: Gateway, echo: str):
    deep_top = registration(echo + "/echo/top", inputs=nested(260), outputs={})
    del deep_top["operations"]
    deep_example = with_inputs(echo, {"type": "object"}, examples=[{"input": nested(260)}])
    for body in (with_inputs(echo, nested(260)), deep_top, deep_example):
        error = assert_error(call(gateway, "POST", "/agents", "alice-key", body), 400,
                             "InvalidInput")
        assert error["details"]["fields"] == [
            {"field": "(body)", "problem": "too big: nested deeper than 35 levels"}]
    top = registration(echo + "/echo/top", inputs={"type": "nonsense"}, outputs={})
    del top["operations"]
    problem = refused_schema(gateway, top)
    assert problem["field"] == "inputs" and "/type" in problem["problem"]
    assert call(gateway, "POST", "/agents", "alice-key",
                with_inputs(echo, nested(15))).status_code == 201


def register_inputs(gateway: Gateway, echo: str, inputs: dict, **operation: Any) -> str:
    response = call(gateway, "POST", "/agents", "alice-key",
                    with_inputs(echo, inputs, **operation))
    assert response.status_code == 201, response.text
    return f"/agents/{response.json()['id']}/invoke"


def timed_call(gateway: Gateway, path: str, body: Any) -> tuple[httpx.Response, float]:
    started = time.perf_counter()
    response = call(gateway, "POST", path, None, body)
    return response, time.perf_counter() - started


BACKTRACKING = {"type": "object", "properties": {"text": {"type": "string",
                                                           "pattern": "^(a+)+$"}}}


def test_a_backtracking_pattern_runs_in_linear_time(gateway: Gateway, echo: str):
    path = register_inputs(gateway, echo, BACKTRACKING)
    for text in ("a" * 28 + "!", "a" * 200_000 + "!"):  # Python's re: 2^28 steps, then never
        response, elapsed = timed_call(gateway, path, {"text": text})
        error = assert_error(response, 400, "InvalidInput")
        assert error["details"]["fields"][0]["field"] == "text"
        assert elapsed < 1.0, elapsed
    response, _ = timed_call(gateway, path, {"text": "a" * 1000})
    assert response.status_code == 200, response.text


def test_unique_items_over_big_arrays_is_bounded(gateway: Gateway, echo: str):
    path = register_inputs(gateway, echo, {"type": "object", "properties": {
        "items": {"type": "array", "uniqueItems": True}}})
    distinct = [{"id": i, "tags": [str(i)]} for i in range(10_000)]  # pairwise: 50 million
    response, elapsed = timed_call(gateway, path, {"items": distinct})
    assert response.status_code == 200 and elapsed < 2.0, (response.text, elapsed)
    twice = [*distinct[:-1], {"tags": ["9"], "id": 9.0}]  # equal to item 9
    response, elapsed = timed_call(gateway, path, {"items": twice})
    error = assert_error(response, 400, "InvalidInput")
    assert error["details"]["fields"] == [{"field": "items",
                                           "problem": "uniqueItems: has non-unique elements"}]
    assert elapsed < 2.0, elapsed
    error = assert_error(call(gateway, "POST", path, None, {"items": list(range(10_001))}),
                         400, "InvalidInput")
    assert error["details"]["fields"] == [
        {"field": "items", "problem": "uniqueItems: more than 10000 items to compare"}]


# 2^depth evaluations of `allOf` for an input `depth` levels deep: only the budget stops it.
FAN_OUT = {"type": "object", "allOf": [{"$ref": "#/$defs/step"}, {"$ref": "#/$defs/step"}],
           "$defs": {"step": {"properties": {"a": {"$ref": "#"}}}}}


def chain(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def test_an_input_too_costly_to_check_is_refused_within_the_budget(gateway: Gateway,
                                                                    echo: str):
    path = register_inputs(gateway, echo, FAN_OUT)
    assert call(gateway, "POST", path, None, chain(5)).status_code == 200
    response, elapsed = timed_call(gateway, path, chain(40))
    error = assert_error(response, 400, "InvalidInput")
    assert error["details"]["fields"] == [{"field": "(body)",
                                           "problem": "too costly to check against the schema"}]
    assert elapsed < 3.0, elapsed
    response, _ = timed_call(gateway, path, chain(500))  # deeper than the gateway checks
    assert assert_error(response, 400, "InvalidInput")["details"]["fields"][0]["problem"] == \
        "nested deeper than 64 levels"


def test_hostile_schemas_and_inputs_never_hold_up_other_requests(gateway: Gateway, echo: str):
    """While other clients send costly inputs and register big schemas, discovery on the same
    gateway process answers in under 100 ms, and /metrics shows how late the loop ran."""
    from concurrent.futures import ThreadPoolExecutor

    import orjson

    big = with_inputs(echo, {"type": "object", "properties": {
        f"p{i}": {"type": "string", "maxLength": 9} for i in range(1200)}})
    # (path, key, body), encoded beforehand: this process's own work must not skew the timing
    attacks = [(register_inputs(gateway, echo, FAN_OUT), None, orjson.dumps(chain(40))),
               (register_inputs(gateway, echo, BACKTRACKING), None,
                orjson.dumps({"text": "a" * 30 + "!"})),
               ("/agents", "alice-key", orjson.dumps({**big, "id": f"big-{uuid.uuid4().hex}"}))]

    def attack(index: int) -> int:
        path, key, body = attacks[index % 3]
        headers = {"content-type": "application/json", **({"x-api-key": key} if key else {})}
        return httpx.post(gateway.url + path, content=body, headers=headers, timeout=15
                          ).status_code

    with ThreadPoolExecutor(3) as pool, httpx.Client(base_url=gateway.url) as client:
        client.get("/.well-known/ai")
        running = [pool.submit(attack, index) for index in range(9)]
        waits = []
        while not all(attack.done() for attack in running) or len(waits) < 20:
            started = time.perf_counter()
            assert client.get("/.well-known/ai").status_code == 200
            waits.append(time.perf_counter() - started)
            time.sleep(0.02)
        statuses = sorted(attack.result() for attack in running)
    assert statuses == [200] * 2 + [201] + [400] * 6, statuses  # the same id thrice: 201, 200
    assert max(waits) < 0.1, sorted(waits)[-5:]
    assert gateway.metric("aigw_event_loop_lag_seconds_count") > 0
