"""AIDIP over real HTTP: client -> aigw process -> demo backend / echo upstream processes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from aidip_config import SECRET, SECRET_HEADER, aidip_gateway_config, registration
from processes import Gateway


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
                                                                gateway_factory):
    port = int(echo.rsplit(":", 1)[1])
    config = aidip_gateway_config(backend, echo, aidip={"egress": {
        "origins": [{"scheme": "http", "host": "metadata.test", "ports": [port]},
                    {"scheme": "http", "host": "127.0.0.1", "ports": [port]}],
        "hosts": {"metadata.test": ["169.254.169.254"]}}})
    strict = gateway_factory(config)
    loopback = call(strict, "POST", "/agents", "alice-key", registration(echo + "/echo/x"))
    assert_error(loopback, 400, "InvalidInput")  # loopback is not allowed here
    agent = register(strict, "alice-key", endpoint=f"http://metadata.test:{port}/latest")
    assert_error(call(strict, "POST", f"/agents/{agent['id']}/invoke", None, {"text": "x"}),
                 502, "EndpointRefused")


def test_refused_and_unencodable_endpoints_answer_endpoint_refused_not_500(backend, echo,
                                                                          gateway_factory):
    port = int(echo.rsplit(":", 1)[1])
    config = aidip_gateway_config(backend, echo, aidip={
        "breaker": {"failures": 1, "open_seconds": 60},
        "egress": {"origins": [{"scheme": "http", "host": "metadata.test", "ports": [port]},
                               {"scheme": "http", "host": "*.agent.test", "ports": [port]}],
                   "hosts": {"metadata.test": ["169.254.169.254"]}}})
    strict = gateway_factory(config)
    for host in ("a" * 64 + ".agent.test", "x..agent.test"):  # DNS cannot carry these names
        error = assert_error(call(strict, "POST", "/agents", "alice-key",
                                  registration(f"http://{host}:{port}/x")), 400, "InvalidInput")
        assert error["details"]["fields"][0]["field"] == "endpoint"
    agent = register(strict, "alice-key", endpoint=f"http://metadata.test:{port}/latest")
    for _ in range(3):  # a refusal sends nothing, so it never opens the agent's breaker
        assert_error(call(strict, "POST", f"/agents/{agent['id']}/invoke", None,
                          {"text": "x"}), 502, "EndpointRefused")


def test_the_breaker_opens_after_failures_and_closes_after_a_good_call(
        backend, echo, gateway_factory):
    config = aidip_gateway_config(backend, echo,
                                  aidip={"breaker": {"failures": 2, "open_seconds": 1}})
    gateway = gateway_factory(config)
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


def _missing_required(message: Any, where: str = "") -> list[str]:
    """REQUIRED fields (google.api.field_behavior) left empty, anywhere in the message."""
    from google.api import field_behavior_pb2

    missing = []
    for field in message.DESCRIPTOR.fields:
        behaviours = field.GetOptions().Extensions[field_behavior_pb2.field_behavior]
        value = getattr(message, field.name)
        is_repeated = field.is_repeated
        if field_behavior_pb2.REQUIRED in behaviours and (
                (is_repeated and len(value) == 0)
                or (not is_repeated and field.message_type is not None
                    and not message.HasField(field.name))
                or (not is_repeated and field.message_type is None and value in ("", 0))):
            missing.append(where + field.name)
        if field.message_type is not None and not field.message_type.GetOptions().map_entry:
            present = value if is_repeated else [value] if message.HasField(field.name) else []
            for index, item in enumerate(present):
                missing += _missing_required(item, f"{where}{field.name}[{index}].")
    return missing


def assert_valid_a2a_card(card: dict) -> None:
    from a2a.client.card_resolver import parse_agent_card
    from a2a.types import AgentCard
    from google.protobuf.json_format import ParseDict

    strict = ParseDict(card, AgentCard(), ignore_unknown_fields=False)  # no unknown member
    assert _missing_required(strict) == []
    assert parse_agent_card(dict(card)).name == card["name"]  # what an A2A client does


def test_the_registry_reads_as_a2a_agent_cards(gateway: Gateway):
    card = httpx.get(gateway.url + "/.well-known/agent-card.json").json()
    assert_valid_a2a_card(card)
    skills = [skill["id"] for skill in card["skills"]]
    assert "classifier" in skills and "partner-only" not in skills
    assert card["supportedInterfaces"][0]["url"] == "https://gw.example.com/agents"
    assert card["securitySchemes"]["apiKey"]["apiKeySecurityScheme"]["name"] == "X-API-Key"
    agent_card = call(gateway, "GET", "/agents/classifier/agent-card.json").json()
    assert_valid_a2a_card(agent_card)
    assert agent_card["supportedInterfaces"][0]["url"] == \
        "https://gw.example.com/agents/classifier/invoke"
    assert [skill["id"] for skill in agent_card["skills"]] == ["classify"]
    assert_error(call(gateway, "GET", "/agents/partner-only/agent-card.json"), 404, "NotFound")


# --------------------------------------------------------------------------- Redis


def test_two_gateways_share_registrations_through_redis(backend, echo, gateway_factory):
    prefix = f"aigw-test:{uuid.uuid4().hex}:"
    registry = {"redis_url": "redis://127.0.0.1:6379/15", "key_prefix": prefix}
    config = aidip_gateway_config(backend, echo, aidip={"registry": registry})
    first, second = gateway_factory(config), gateway_factory(config)
    try:
        agent = register(first, "alice-key", endpoint=echo + "/echo/shared")
        path = f"/agents/{agent['id']}"
        assert call(second, "GET", path).json()["name"] == agent["name"]
        assert call(second, "POST", path + "/invoke", None, {"text": "x"}).status_code == 200
        assert call(second, "DELETE", path, "alice-key").status_code == 204
        assert_error(call(first, "GET", path), 404, "NotFound")
        again = register(first, "alice-key", endpoint=echo + "/echo/kept")
        first.stop()
        restarted = gateway_factory(config)  # registrations survive a restart
        assert call(restarted, "GET", f"/agents/{again['id']}").status_code == 200
    finally:
        import redis

        client = redis.Redis(host="127.0.0.1", port=6379, db=15)
        client.delete(f"{prefix}agents")
        client.close()


def test_a_redis_outage_fails_closed(backend, echo, gateway_factory):
    from processes import free_port

    registry = {"redis_url": f"redis://127.0.0.1:{free_port()}/15", "timeout": 0.5}
    gateway = gateway_factory(aidip_gateway_config(backend, echo, aidip={"registry": registry}))
    assert_error(call(gateway, "GET", "/agents"), 503, "RegistryUnavailable")
    assert_error(call(gateway, "POST", "/agents", "alice-key",
                      registration(echo + "/echo/x")), 503, "RegistryUnavailable")
