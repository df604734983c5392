"""AIDIP's agents over A2A, called by a2a-sdk's own client over real HTTP: a2a-sdk client ->
aigw (a process) -> the demo backend / the echo upstream (processes); tokens from a fake IdP."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.client import (
    A2ACardResolver,
    A2AClientError,
    AuthInterceptor,
    Client,
    ClientCallContext,
    ClientConfig,
    CredentialService,
    create_client,
)
from a2a.helpers import get_data_parts, new_data_part, new_text_part
from a2a.types import AgentCard, GetTaskRequest, Message, Part, Role, SendMessageRequest
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    InternalError,
    InvalidParamsError,
    TaskNotFoundError,
)
from a2a_cards import assert_valid_a2a_card
from aidip_config import agent as agent_config
from aidip_config import aidip_gateway_config
from google.protobuf.struct_pb2 import Struct
from idp_helpers import AUDIENCE, ISSUER, FakeIdp, SigningKey
from processes import ROOT, Gateway, Process, free_port, wait_for_http

SCOPE = "tasks:run"


@pytest.fixture(scope="module")
def idp(logs_dir) -> Iterator[tuple[FakeIdp, SigningKey]]:
    port = free_port()
    process = Process([sys.executable, str(ROOT / "tests" / "fake_idp.py"), str(port)],
                      logs_dir, f"idp-a2a-{port}")
    idp = FakeIdp(f"http://127.0.0.1:{port}")
    wait_for_http(idp.url + "/admin/stats", process=process.popen)
    key = SigningKey.ec("a2a")
    idp.publish(key)
    yield idp, key
    process.stop()


@pytest.fixture(scope="module")
def gateway(backend: str, echo: str, idp, tmp_path_factory) -> Iterator[Gateway]:
    config = aidip_gateway_config(backend, echo)
    config["auth"]["issuers"] = [{"issuer": ISSUER, "jwks_uri": idp[0].url + "/jwks",
                                  "audiences": [AUDIENCE], "token_url": idp[0].url + "/token"}]
    # The classifier's A2A endpoint needs the scope at the door; the registry's A2A endpoint
    # is public, and a call it makes to the classifier meets the rule of the invoke route.
    config["auth"]["routes"] = [{"path": p, "scopes": [SCOPE]}
                                for p in ("/agents/classifier/a2a", "/agents/classifier/invoke")]
    config["proxy"] = {"max_body_bytes": 64 * 1024}
    config["aidip"]["agents"] |= {
        # two required strings: a text part fills neither
        "pairer": agent_config("Pairer", "Joins two strings.", ["testing"], [{
            "name": "pair", "description": "Pair.", "upstream": "echo", "path": "/echo/pair",
            "inputs": {"type": "object", "required": ["left", "right"], "properties": {
                "left": {"type": "string"}, "right": {"type": "string"}}},
            "outputs": {"type": "object"}}]),
        # nothing required: the config names the field text fills
        "asker": agent_config("Asker", "Answers a question.", ["testing"], [{
            "name": "ask", "description": "Ask.", "upstream": "echo", "path": "/echo/ask",
            "inputs": {"type": "object", "properties": {
                "question": {"type": "string"}, "limit": {"type": "integer"}}},
            "outputs": {"type": "object"}, "text_input": "question"}])}
    started = Gateway(config, tmp_path_factory.mktemp("a2a"), public=True)
    yield started
    started.stop()


def token(idp, scope: str) -> str:
    return idp[1].token(sub="alice", client_id="agent-1", scope=scope)


class Token(CredentialService):
    """The caller's token, for the card's OAuth 2.0 scheme."""

    def __init__(self, value: str) -> None:
        self.value = value

    async def get_credentials(self, security_scheme_name: str,
                              context: ClientCallContext | None) -> str | None:
        return self.value if security_scheme_name == "oauth2" else None


async def card_of(gateway: Gateway, path: str = "/.well-known/agent-card.json") -> AgentCard:
    async with httpx.AsyncClient() as http:
        return await A2ACardResolver(http, gateway.url, path).get_agent_card()


async def client_for(card: AgentCard, credential: str | None = None) -> Client:
    interceptors = [AuthInterceptor(Token(credential))] if credential else []
    return await create_client(card, ClientConfig(streaming=False), interceptors=interceptors)


def message(*parts: Any, skill: str | None = None) -> SendMessageRequest:
    sent = Message(role=Role.ROLE_USER, message_id="m-1", parts=list(parts))
    if skill is not None:
        sent.metadata.CopyFrom(Struct())
        sent.metadata.update({"skill": skill})
    return SendMessageRequest(message=sent)


async def answer(client: Client, request: SendMessageRequest) -> Any:
    responses = [response async for response in client.send_message(request)]
    assert len(responses) == 1 and responses[0].HasField("message")
    reply = responses[0].message
    assert reply.role == Role.ROLE_AGENT
    [data] = get_data_parts(reply.parts)
    return data


async def refused(client: Client, request: SendMessageRequest) -> Exception:
    try:
        await answer(client, request)
    except Exception as exc:  # the SDK's error for the answer
        return exc
    raise AssertionError("the call was answered")


# --------------------------------------------------------------------------- the cards


async def test_an_agent_card_names_the_jsonrpc_binding_first_and_what_a_call_needs(gateway):
    card = httpx.get(gateway.url + "/agents/classifier/agent-card.json").json()
    assert_valid_a2a_card(card)
    assert [(i["protocolBinding"], i["url"]) for i in card["supportedInterfaces"]] == [
        ("JSONRPC", gateway.url + "/agents/classifier/a2a"),
        ("AIDIP", gateway.url + "/agents/classifier/invoke")]
    oauth2 = card["securitySchemes"]["oauth2"]["oauth2SecurityScheme"]
    flow = oauth2["flows"]["clientCredentials"]
    assert flow["tokenUrl"].endswith("/token") and SCOPE in flow["scopes"]
    assert oauth2["oauth2MetadataUrl"] == "https://idp.test/.well-known/oauth-authorization-server"
    assert "bearer" not in card["securitySchemes"]  # every issuer names its token endpoint
    assert {"schemes": {"oauth2": {"list": [SCOPE]}}} in card["securityRequirements"]
    assert {"schemes": {}} not in card["securityRequirements"]  # a token is required
    assert card["provider"] == {"organization": "Example Org", "url": "https://org.example.com"}


async def test_the_registry_card_is_served_at_both_well_known_paths(gateway):
    current = httpx.get(gateway.url + "/.well-known/agent-card.json")
    older = httpx.get(gateway.url + "/.well-known/agent.json")
    assert older.status_code == current.status_code == 200
    assert older.json() == current.json()
    assert_valid_a2a_card(older.json())
    skills = {skill["id"]: skill for skill in older.json()["skills"]}
    assert {"schemes": {}} in skills["agent-search"]["securityRequirements"]  # public
    assert {"schemes": {"oauth2": {"list": [SCOPE]}}} in \
        skills["classifier"]["securityRequirements"]


# --------------------------------------------------------------------------- calls


async def test_a2a_client_resolves_the_card_and_gets_the_classifiers_answer(gateway, idp):
    card = await card_of(gateway, "/agents/classifier/agent-card.json")
    client = await client_for(card, token(idp, SCOPE))
    async with client:
        output = await answer(client, message(new_data_part(
            {"text": "I was charged twice for my order"})))
    assert output["category"] == "billing"
    assert 0 <= output["confidence"] <= 1


async def test_the_registry_finds_agents_and_invokes_the_one_named_as_skill(gateway, idp):
    card = await card_of(gateway)  # what create_client(url) resolves
    client = await client_for(card, token(idp, SCOPE))
    async with client:
        found = await answer(client, message(new_data_part({"query": "support request"})))
        assert found[0]["id"] == "classifier"
        batch = await answer(client, message(new_data_part([{"text": "I cannot log in"}]),
                                             skill="classifier"))
    assert [output["category"] for output in batch] == ["login"]


async def test_a_token_without_the_scope_is_refused_at_the_door_and_inside(gateway, idp):
    weak = token(idp, "articles:read")
    card = await card_of(gateway, "/agents/classifier/agent-card.json")
    async with await client_for(card, weak) as client:
        error = await refused(client, message(new_data_part({"text": "hello"})))
    assert isinstance(error, A2AClientError) and "403" in str(error)
    registry = await card_of(gateway)
    async with await client_for(registry, weak) as client:  # admitted; the invocation is not
        error = await refused(client, message(new_data_part({"text": "hello"}),
                                              skill="classifier"))
    assert isinstance(error, A2AClientError) and "403" in str(error)
    for path in ("/agents/classifier/a2a", "/agents/a2a"):
        response = httpx.post(gateway.url + path, headers={
            "authorization": f"Bearer {weak}", "a2a-version": "1.0"}, json={
            "jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
                "messageId": "m", "role": "ROLE_USER", "parts": [{"data": {"text": "x"}}],
                "metadata": {"skill": "classifier"}}}})
        assert response.status_code == 403
        assert 'error="insufficient_scope"' in response.headers["www-authenticate"]
        error_object = response.json()["error"]
        assert error_object["code"] == "Forbidden"
        assert error_object["request_id"] == response.headers["x-request-id"]


async def test_an_invalid_input_is_invalid_params_naming_the_field(gateway, idp):
    card = await card_of(gateway, "/agents/classifier/agent-card.json")
    async with await client_for(card, token(idp, SCOPE)) as client:
        error = await refused(client, message(new_data_part({"txt": "hello"})))
        assert isinstance(error, InvalidParamsError)
        assert error.data["code"] == "InvalidInput" and error.data["request_id"]
        assert {"field": "text", "message": "required field is missing"} in error.data["errors"]
        two = await refused(client, message(new_text_part("a"), new_text_part("b")))
        assert isinstance(two, InvalidParamsError) and two.data["code"] == "InvalidInput"
    several = await card_of(gateway, "/agents/echoer/agent-card.json")
    async with await client_for(several) as client:  # which operation? the skill says
        unnamed = await refused(client, message(new_data_part({"text": "x"})))
        assert isinstance(unnamed, InvalidParamsError) and "skill" in str(unnamed)
        assert unnamed.data["errors"][0]["field"] == "metadata.skill"
        named = await answer(client, message(new_data_part({"text": "x", "n": 5}), skill="echo"))
    sent = json.loads(named["body"])  # what the agent received
    assert sent == {"text": "x", "n": 5} and isinstance(sent["n"], int)  # not 5.0


async def test_a_text_part_fills_the_one_required_string_field_or_the_one_configured(
        gateway, idp):
    """What most A2A clients send: Message(parts=[Part(text=...)])."""
    card = await card_of(gateway, "/agents/classifier/agent-card.json")
    async with await client_for(card, token(idp, SCOPE)) as client:
        output = await answer(client, message(Part(text="I was charged twice")))
    assert output["category"] == "billing"
    echoer = await card_of(gateway, "/agents/echoer/agent-card.json")
    asker = await card_of(gateway, "/agents/asker/agent-card.json")
    async with await client_for(echoer) as client, await client_for(asker) as other:
        echoed = await answer(client, message(new_text_part("hello there"), skill="echo"))
        asked = await answer(other, message(new_text_part("Why?", media_type="text/plain")))
    assert json.loads(echoed["body"]) == {"text": "hello there"}  # what the agent received
    assert json.loads(asked["body"]) == {"question": "Why?"}
    registry = await card_of(gateway)
    async with await client_for(registry, token(idp, SCOPE)) as client:
        found = await answer(client, message(new_text_part("support request")))
        assert found[0]["id"] == "classifier"  # the registry's search: text is its query
        invoked = await answer(client, message(new_text_part("I cannot log in"),
                                               skill="classifier"))
    assert invoked["category"] == "login"


async def test_text_where_the_input_does_not_map_is_content_type_not_supported(gateway):
    card = await card_of(gateway, "/agents/pairer/agent-card.json")
    async with await client_for(card) as client:
        error = await refused(client, message(new_text_part("left and right")))
        assert isinstance(error, ContentTypeNotSupportedError)
        assert error.data["code"] == "ContentTypeNotSupported" and error.data["request_id"]
        assert "data part" in str(error)
        joined = await answer(client, message(new_data_part({"left": "a", "right": "b"})))
    assert json.loads(joined["body"]) == {"left": "a", "right": "b"}  # data parts still work
    echoer = await card_of(gateway, "/agents/echoer/agent-card.json")
    async with await client_for(echoer) as client:  # a file is no text, where text maps too
        file = await refused(client, message(Part(url="https://x.test/a.pdf",
                                                  media_type="application/pdf"), skill="echo"))
        assert isinstance(file, ContentTypeNotSupportedError)
    response = httpx.post(gateway.url + "/agents/pairer/a2a", headers={"a2a-version": "1.0"},
                          json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
                              "message": {"messageId": "m", "role": "ROLE_USER",
                                          "parts": [{"text": "x"}]}}})
    assert response.json()["error"]["code"] == -32005
    hidden = await card_of(gateway, "/agents/classifier/agent-card.json")
    hidden.supported_interfaces[0].url = f"{gateway.url}/agents/partner-only/a2a"
    async with await client_for(hidden) as client:  # not told whether it would take text
        error = await refused(client, message(new_text_part("x")))
    assert isinstance(error, TaskNotFoundError) and error.data["code"] == "NotFound"


def test_the_cards_say_which_skills_take_text(gateway):
    def modes(path: str) -> tuple[list[str], dict[str, list[str]]]:
        card = httpx.get(path).json()
        assert_valid_a2a_card(card)
        return card["defaultInputModes"], {s["id"]: s["inputModes"] for s in card["skills"]}

    both, data = ["application/json", "text/plain"], ["application/json"]
    assert modes(gateway.url + "/agents/classifier/agent-card.json") == (both, {"classify": both})
    assert modes(gateway.url + "/agents/asker/agent-card.json") == (both, {"ask": both})
    assert modes(gateway.url + "/agents/pairer/agent-card.json") == (data, {"pair": data})
    default, skills = modes(gateway.url + "/.well-known/agent-card.json")
    assert default == data  # not every skill takes text
    assert skills["agent-search"] == skills["classifier"] == both and skills["pairer"] == data
    assert skills["echoer"] == data  # several operations: a call must name one, as data


async def test_an_unknown_or_hidden_agent_is_not_found(gateway):
    for agent in ("nobody", "partner-only"):
        card = await card_of(gateway, "/agents/classifier/agent-card.json")
        card.supported_interfaces[0].url = f"{gateway.url}/agents/{agent}/a2a"
        async with await client_for(card) as client:
            error = await refused(client, message(new_data_part({"text": "x"})))
        assert isinstance(error, TaskNotFoundError)
        assert error.data["code"] == "NotFound" and error.data["request_id"]


async def test_an_upstream_failure_is_an_internal_error_without_its_body(gateway):
    card = await card_of(gateway, "/agents/echoer/agent-card.json")
    async with await client_for(card) as client:
        error = await refused(client, message(new_data_part({"text": "x"}), skill="broken"))
        assert isinstance(error, InternalError)
        assert error.data["code"] == "AgentError"
        assert "500" not in str(error) and "Traceback" not in str(error)
        no_task = await refused_call(client.get_task(GetTaskRequest(id="t-1")))
        assert isinstance(no_task, TaskNotFoundError)


async def test_errors_the_sdk_makes_carry_the_code_and_request_id_too(gateway):
    body = {"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {"message": {
        "messageId": "m", "role": "ROLE_USER", "parts": [{"data": {"text": "x"}}]}}}
    for headers, sent in (({}, body), ({"a2a-version": "1.0"}, {**body, "method": "Nope"})):
        response = httpx.post(gateway.url + "/agents/echoer/a2a", json=sent, headers=headers)
        assert response.status_code == 200
        error = response.json()["error"]
        [info] = [d for d in error["data"] if d["@type"].endswith("ErrorInfo")]
        assert info["metadata"]["code"] == "InvalidInput"
        assert info["metadata"]["request_id"] == response.headers["x-request-id"]
    too_big = httpx.post(gateway.url + "/agents/echoer/a2a", content=b"[" * 70_000,
                         headers={"content-type": "application/json"})
    assert too_big.status_code == 413


async def refused_call(call: Any) -> Exception:
    try:
        await call
    except Exception as exc:
        return exc
    raise AssertionError("the call was answered")


# --------------------------------------------------------------------------- card security


def test_a_card_requires_both_paths_scopes_and_is_open_only_where_both_are():
    from gateway.auth.config import Auth
    from gateway.surfaces.aidip.a2a_security import CardSecurity

    auth = Auth.model_validate({
        "issuers": [{"issuer": "https://idp.example/realms/x", "jwks_uri": "https://idp.example/j",
                     "audiences": ["gw"], "token_url": "https://idp.example/token"},
                    {"issuer": "https://other.example", "jwks_uri": "https://other.example/j",
                     "audiences": ["gw"]}],
        "default_access": "public",
        "routes": [{"path": "/agents/x/a2a", "scopes": ["a2a:call"]},
                   {"path": "/agents/x/invoke", "scopes": ["tasks:run"]}]})
    security = CardSecurity(auth)
    assert set(security.schemes) == {"oauth2", "bearer"}  # the second issuer names no token URL
    oauth2 = security.schemes["oauth2"]["oauth2SecurityScheme"]
    assert oauth2["oauth2MetadataUrl"] == \
        "https://idp.example/.well-known/oauth-authorization-server/realms/x"  # RFC 8414 §3.1
    assert set(oauth2["flows"]["clientCredentials"]["scopes"]) == {"a2a:call", "tasks:run"}
    assert security.requirements("/agents/x/a2a", "/agents/x/invoke") == [
        {"schemes": {name: {"list": ["a2a:call", "tasks:run"]}}} for name in ("oauth2", "bearer")]
    assert security.requirements("/agents/y/a2a", "/agents/y/invoke")[0] == {"schemes": {}}
    assert CardSecurity(None).members("/agents/y/a2a") == {}
