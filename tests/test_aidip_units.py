"""AIDIP parts in process: the egress guard (each SSRF attempt), the breaker, BM25 ranking.

SSRF attempts only ever reach loopback: stub resolvers *answer* metadata, private or
link-local addresses, and the guard must refuse before any connection is made.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from ipaddress import ip_address

import httpx
import orjson
import pytest

from gateway.context import RequestContext
from gateway.errors import GatewayError
from gateway.model import Principal
from gateway.surfaces.aidip.breaker import Breaker
from gateway.surfaces.aidip.catalog import Agent, Catalog, Operation, from_record
from gateway.surfaces.aidip.config import Aidip
from gateway.surfaces.aidip.invoke import Invoker
from gateway.surfaces.aidip.owners import owner_of, record_owner
from gateway.surfaces.aidip.search import ranked
from gateway.surfaces.aidip.sending import Outgoing, outgoing
from gateway.surfaces.aidip.store import AgentStore, Created, MemoryStore, RedisStore
from gateway.surfaces.aidip.urls import url_fields
from gateway.upstream.egress.client import Answer, EgressClient, EgressPolicy, EgressRefused
from gateway.upstream.egress.config import Egress
from gateway.upstream.egress.urls import url_problem


class StubResolver:
    """Answers from a script, one answer per lookup (the last one repeats)."""

    def __init__(self, *answers: list[str]) -> None:
        self.answers = list(answers)
        self.lookups = 0

    async def resolve(self, host: str, port: int) -> list[str]:
        answer = self.answers[min(self.lookups, len(self.answers) - 1)]
        self.lookups += 1
        return answer


def egress(port: int, *, allow: list[str] | None = None, **origin: object) -> Egress:
    origins = [{"scheme": "http", "host": "agent.test", "ports": [port]},
               {"scheme": "http", "host": "127.0.0.1", "ports": [port]},
               {"scheme": "http", "host": "::1", "ports": [port]}]
    return Egress.model_validate({"origins": origins + ([origin] if origin else []),
                                  "allow_networks": allow or []})


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def received(echo: str) -> int:
    return httpx.get(echo + "/count").json()["others"]


@pytest.mark.parametrize("address", [
    "127.0.0.1", "169.254.169.254", "10.0.0.5", "192.168.1.1", "172.16.0.1", "100.64.0.1",
    "::1", "fe80::1", "fd00:ec2::254", "::ffff:127.0.0.1", "0.0.0.0",
    # IPv6 forms that carry a private IPv4 address (NAT64, 6to4, compatible, SIIT), site-local
    "::127.0.0.1", "64:ff9b::10.0.0.1", "64:ff9b::169.254.169.254", "2002:a9fe:a9fe::1",
    "::ffff:0:a9fe:a9fe", "fec0::1",
])
async def test_names_resolving_to_special_addresses_are_refused(echo: str, address: str):
    client = EgressClient(egress(port_of(echo)), StubResolver([address]))
    before = received(echo)
    with pytest.raises(EgressRefused):
        await client.post(f"http://agent.test:{port_of(echo)}/echo/x", b"{}", {})
    await client.aclose()
    assert received(echo) == before


@pytest.mark.parametrize(("address", "allowed"), [
    ("64:ff9b::93.184.216.34", True),  # NAT64 of a public address reaches a public address
    ("2002:5db8:d822::1", True),  # 6to4 relay of a public address
    ("64:ff9b::127.0.0.1", False),
    ("64:ff9b:1::a00:1", False),  # local-use NAT64 prefix
    ("2002:7f00:1::1", False),
    ("::ffff:0:10.0.0.1", False),
    ("::", False), ("::0.0.0.0", False), ("fec0::1", False), ("240.0.0.1", False),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", False),  # Teredo
])
def test_embedded_ipv4_addresses_are_judged_by_what_they_reach(address: str, allowed: bool):
    policy = EgressPolicy(egress(1))
    assert policy.address_allowed(ip_address(address)) is allowed


def test_reserved_and_site_local_are_refused_even_inside_allowed_networks():
    policy = EgressPolicy(egress(1, allow=["fec0::/10", "::/8", "240.0.0.0/4", "10.0.0.0/8"]))
    assert not policy.address_allowed(ip_address("fec0::1"))
    assert not policy.address_allowed(ip_address("::"))
    assert not policy.address_allowed(ip_address("240.0.0.1"))
    assert policy.address_allowed(ip_address("64:ff9b::10.0.0.1"))  # its IPv4 is allowed


class UnencodableResolver:
    async def resolve(self, host: str, port: int) -> list[str]:
        raise UnicodeError("label too long")  # what the idna codec raises


async def test_a_name_the_resolver_cannot_encode_is_refused_not_raised(echo: str):
    client = EgressClient(egress(port_of(echo)), UnencodableResolver())
    with pytest.raises(EgressRefused):
        await client.post(f"http://agent.test:{port_of(echo)}/echo/x", b"{}", {})


async def test_rebinding_between_check_and_connect_is_refused(echo: str):
    # The first lookup (the check) says public; the connection's own lookup says loopback.
    resolver = StubResolver(["93.184.216.34"], ["127.0.0.1"])
    client = EgressClient(egress(port_of(echo)), resolver)
    before = received(echo)
    with pytest.raises(EgressRefused):
        await client.post(f"http://agent.test:{port_of(echo)}/echo/x", b"{}", {})
    await client.aclose()
    assert resolver.lookups == 2 and received(echo) == before


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:{port}/echo/x",  # loopback literal
    "http://[::1]:{port}/echo/x",  # IPv6 loopback literal
    "https://agent.test:{port}/echo/x",  # scheme not allowed for this origin
    "http://agent.test:1/echo/x",  # port not allowed
    "http://other.test:{port}/echo/x",  # host not allowed
    "http://user:secret@agent.test:{port}/echo/x",  # credentials in the URL
])
async def test_urls_outside_the_rules_are_refused_before_resolution(echo: str, url: str):
    resolver = StubResolver(["127.0.0.1"])
    client = EgressClient(egress(port_of(echo), allow=[]), resolver)
    with pytest.raises(EgressRefused):
        await client.post(url.format(port=port_of(echo)), b"{}", {})
    assert resolver.lookups == 0


async def test_an_explicitly_allowed_network_is_reached(echo: str):
    client = EgressClient(egress(port_of(echo), allow=["127.0.0.1/32"]),
                          StubResolver(["127.0.0.1"]))
    answer = await client.post(f"http://agent.test:{port_of(echo)}/echo/ok", b"{}",
                               {"content-type": "application/json"})
    await client.aclose()
    assert answer.status == 200 and b"/echo/ok" in answer.body


async def test_a_get_sends_no_body_and_meets_the_same_rules(echo: str):
    client = EgressClient(egress(port_of(echo), allow=["127.0.0.1/32"]),
                          StubResolver(["127.0.0.1"]))
    answer = await client.get(f"http://agent.test:{port_of(echo)}/echo/look?q=g%2B%2B", {})
    echoed = orjson.loads(answer.body)
    assert (echoed["method"], echoed["raw_path"], echoed["query"]) == ("GET", "/echo/look",
                                                                      "q=g%2B%2B")
    assert echoed["body_length"] == 0
    assert not {name for name, _ in echoed["headers"]} & {"content-length", "content-type",
                                                           "transfer-encoding"}
    put = orjson.loads((await client.request("PUT", f"http://agent.test:{port_of(echo)}/echo/p",
                                             b"{}", {})).body)
    assert put["method"] == "PUT" and put["body_length"] == 2
    for method, body in (("GET", b"{}"), ("POST", None), ("DELETE", None), ("PATCH", b"{}")):
        with pytest.raises(ValueError):
            await client.request(method, f"http://agent.test:{port_of(echo)}/echo/x", body, {})
    await client.aclose()
    before = received(echo)
    metadata = EgressClient(egress(port_of(echo)), StubResolver(["169.254.169.254"]))
    with pytest.raises(EgressRefused):
        await metadata.get(f"http://agent.test:{port_of(echo)}/echo/x", {})
    await metadata.aclose()
    assert received(echo) == before


def test_the_breaker_opens_refuses_then_closes_after_a_successful_trial():
    now = [0.0]
    breaker = Breaker(failures=3, open_seconds=10, clock=lambda: now[0])
    for _ in range(3):
        assert breaker.retry_after() is None
        breaker.failure()
    assert breaker.retry_after() == 10
    now[0] = 9.5
    assert breaker.retry_after() == 1
    now[0] = 10.0
    assert breaker.retry_after() is None  # the trial call
    assert breaker.retry_after() == 1  # only one trial at a time
    breaker.success()
    assert breaker.retry_after() is None


def test_a_failed_trial_opens_the_breaker_again():
    now = [0.0]
    breaker = Breaker(failures=2, open_seconds=5, clock=lambda: now[0])
    breaker.failure()
    breaker.failure()
    now[0] = 5.0
    assert breaker.retry_after() is None
    breaker.failure()
    assert breaker.retry_after() == 5


def _agent(agent_id: str, name: str, description: str, capabilities: list[str],
           tags: list[str] | None = None) -> Agent:
    return Agent(agent_id, {"name": name, "description": description,
                            "capabilities": capabilities, "tags": tags or []}, {})


AGENTS = [
    _agent("translate", "Translator", "Translates text between Chinese and English.",
           ["translation"], ["nlp", "chinese"]),
    _agent("legal", "Legal Document Summarizer",
           "Summarizes long legal documents such as contracts.", ["summarization"],
           ["legal"]),
    _agent("news", "News Summarizer", "Summarizes news articles.", ["summarization"],
           ["news"]),
    _agent("twin-b", "Image tagger", "Tags images.", ["image_classification"]),
    _agent("twin-a", "Image tagger", "Tags images.", ["image_classification"]),
]


def test_free_text_is_ranked_by_bm25_best_first():
    order = [(agent.id, score) for agent, score in
             ranked(AGENTS, "summarize long legal documents in Chinese")]
    # "legal", "long" and "documents" beat "chinese" alone; no shared term, no result.
    assert [agent_id for agent_id, _ in order] == ["legal", "translate"]
    assert order[0][1] > order[1][1] > 0


def test_equal_scores_are_ordered_by_id():
    order = [agent.id for agent, _ in ranked(AGENTS, "image tagger")]
    assert order == ["twin-a", "twin-b"]
    assert ranked(AGENTS, "image classification")[0][0].id == "twin-a"


# --------------------------------------------------------------------------- invocation


class ScriptedCalls:
    """The pipeline's calls for a request, whose every call to a registered URL answers
    `status`, or raises `error`."""

    def __init__(self, status: int = 200, error: BaseException | None = None) -> None:
        self.status, self.error, self.calls = status, error, 0

    async def call_registered(self, method: str, url: str, body: bytes | None,
                              headers: dict[str, str]) -> Answer:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return Answer(self.status, "application/json", b'{"detail": "agent internals"}')


NO_INPUT = Outgoing("http://agent.test/", b"{}")


def _registered_agent() -> tuple[Agent, Operation]:
    operation = Operation("go", {"type": "object"}, {"type": "object"}, url="http://agent.test/")
    return Agent("a", {"name": "a"}, {"go": operation}, owner="sub:alice"), operation


@pytest.mark.parametrize(("agent_status", "status", "code"), [
    (400, 400, "InvalidInput"), (401, 403, "Forbidden"), (403, 403, "Forbidden"),
    (404, 404, "NotFound"), (409, 409, "Conflict"), (422, 422, "InvalidInput"),
    (429, 429, "RateLimited"), (418, 400, "InvalidInput"),
])
async def test_an_agent_4xx_is_the_callers_client_error_and_spares_the_breaker(
        agent_status: int, status: int, code: str):
    agent, operation = _registered_agent()
    calls = ScriptedCalls(agent_status)
    breaker = Breaker(failures=1, open_seconds=60)
    for _ in range(3):
        ctx = RequestContext("r", "POST", "/agents/a/invoke", "127.0.0.1")
        with pytest.raises(GatewayError) as raised:
            await Invoker(calls).run(agent, operation, [NO_INPUT], ctx, breaker, [])
        assert (raised.value.status, raised.value.code) == (status, code)
        assert "internals" not in raised.value.message and not raised.value.details
    assert calls.calls == 3 and breaker.retry_after() is None


@pytest.mark.parametrize(("agent_status", "opens"), [(500, True), (502, True), (503, True),
                                                     (302, False), (200, False)])
async def test_only_the_agents_own_failures_count_against_its_breaker(agent_status: int,
                                                                     opens: bool):
    agent, operation = _registered_agent()
    operation = Operation("go", {"type": "object"}, {"type": "array"}, url=operation.url)
    breaker = Breaker(failures=1, open_seconds=60)  # a 200 fails `outputs`: not the agent's fault
    ctx = RequestContext("r", "POST", "/agents/a/invoke", "127.0.0.1")
    with pytest.raises(GatewayError):
        await Invoker(ScriptedCalls(agent_status)).run(agent, operation, [NO_INPUT], ctx,
                                                       breaker, [])
    assert (breaker.retry_after() is not None) is opens


async def test_a_caller_going_away_mid_call_never_opens_the_breaker():
    agent, operation = _registered_agent()
    breaker = Breaker(failures=1, open_seconds=60)
    ctx = RequestContext("r", "POST", "/agents/a/invoke", "127.0.0.1")
    with pytest.raises(asyncio.CancelledError):
        await Invoker(ScriptedCalls(error=asyncio.CancelledError())).run(
            agent, operation, [NO_INPUT], ctx, breaker, [])
    assert breaker.retry_after() is None


# --------------------------------------------------------------------------- registration URLs


@pytest.mark.parametrize("url", [
    "https://agent.example.com/v1/run", "http://agent.example.com:8080/run?x=1&y=%2F",
    "http://127.0.0.1:1/x", "http://[2001:db8::1]:65535/x", "https://xn--bcher-kva.example/",
    "https://agent.example.com./x", "HTTPS://Agent.Example.COM/x",
])
def test_a_well_formed_url_passes_the_registration_rule(url: str):
    assert url_problem(url) is None


@pytest.mark.parametrize("url", [
    "http://agent.example.com:0/x",  # port 0
    "http://agent.example.com:65536/x", "http://agent.example.com:/x",
    "http://agent.example.com:+80/x", "http://agent.example.com:\uff18\uff10/x",
    "http://agent\\.example.com/x", "http://agent.example.com\\@evil.test/x",  # backslash
    "http://agent%2fexample.com/x", "http://agent.example.com%2f@evil.test/x",  # % in the host
    "http://[fe80::1%25eth0]/x",  # a zone id is percent-encoded too
    "http://agent.example.com/x\r\nX-Injected: 1", "http://agent.example.com/\nx",
    "http://agent.exa\tmple.com/x", "http://agent.example.com/a b", " http://agent.example.com/",
    "http://agent.example.com/\x00", "http://agent.example.com/\u3000", "http://bücher.example/",
    "http://user:pw@agent.example.com/x", "http://@agent.example.com/x",
    "ftp://agent.example.com/x", "http:/agent.example.com/x", "//agent.example.com/x",
    "http://agent.example.com/x#frag", "http://agent_1.example.com/x", "http://-a.example.com/",
    "http://0x7f.1/x", "http://0177.0.0.1/x", "http://2130706433/x", "http://[::1/x",
    "http://" + "a" * 64 + ".example.com/x",
])
def test_urls_that_can_never_be_called_fail_the_registration_rule(url: str):
    assert url_problem(url) is not None


def test_every_uri_field_of_the_metadata_is_found_for_the_check():
    from gateway.surfaces.aidip.metadata import AGENT_SCHEMA

    document = {"endpoint": "a", "name": "http://not-a-url-field",
                "operations": [{"name": "x"}, {"name": "y", "endpoint": "b"}, "junk"]}
    assert list(url_fields(AGENT_SCHEMA, document)) == [("endpoint", "a"),
                                                        ("operations[1].endpoint", "b")]
    schema = {"properties": {"docs": {"anyOf": [{"type": "string", "format": "uri"}]}}}
    assert list(url_fields(schema, {"docs": "c"})) == [("docs", "c")]


@pytest.mark.parametrize("url", ["http://agent.test:0/echo/x", "http://agent\\.test/echo/x",
                                 "http://agent%2etest/echo/x", "http://agent.test/echo/x\r\n"])
async def test_the_call_applies_the_same_rule_before_any_lookup(url: str):
    resolver = StubResolver(["93.184.216.34"])
    client = EgressClient(egress(1, scheme="http", host="agent.test"), resolver)
    assert client.policy.url_problem(url) is not None
    with pytest.raises(EgressRefused):
        await client.post(url, b"{}", {})
    assert resolver.lookups == 0


# --------------------------------------------------------------------------- owners


def test_owners_are_typed_so_a_client_id_is_never_a_subject():
    user, client = Principal(subject="alice", client_id="web"), Principal(client_id="alice")
    assert owner_of(user) == "sub:alice" and owner_of(client) == "client:alice"
    catalog = Catalog(Aidip(), MemoryStore(), "https://gw.example/agents", {})
    agent = from_record({"metadata": {"id": "a"}, "owner": owner_of(user), "format": 2})
    assert catalog.may_change(agent, user) and not catalog.may_change(agent, client)


def test_a_legacy_untyped_owner_is_read_as_a_subject():
    legacy = {"metadata": {"id": "a"}, "owner": "alice"}  # written before owners were typed
    assert record_owner(legacy) == "sub:alice"
    assert record_owner({**legacy, "owner": "client:bob"}) == "sub:client:bob"
    assert record_owner({**legacy, "owner": "client:bob", "format": 2}) == "client:bob"


# --------------------------------------------------------------------------- stores


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[AgentStore]:
    if request.param == "memory":
        yield MemoryStore()
        return
    prefix = f"aigw-test:{uuid.uuid4().hex}:"
    redis_store = RedisStore("redis://127.0.0.1:6379/15", prefix, 2.0)
    yield redis_store
    await redis_store.aclose()
    import redis

    client = redis.Redis(host="127.0.0.1", port=6379, db=15)
    client.delete(f"{prefix}agents")
    client.close()


def _owned(owner: str, version: str = "1") -> dict:
    return {"metadata": {"id": "x", "version": version}, "owner": owner, "format": 2}


async def test_concurrent_creates_of_one_id_leave_exactly_one_owner(store: AgentStore):
    owners = ["sub:alice", "sub:bob"] * 25
    outcomes = await asyncio.gather(*(store.create("x", _owned(owner), 100) for owner in owners))
    winners = [owner for owner, outcome in zip(owners, outcomes, strict=True)
               if outcome is Created.CREATED]
    assert len(winners) == 1 and outcomes.count(Created.TAKEN) == 49
    stored = await store.get("x")
    assert stored is not None and stored.record["owner"] == winners[0]


async def test_a_full_registry_refuses_a_new_id_but_reports_a_taken_one_as_taken(
        store: AgentStore):
    assert await store.create("x", _owned("sub:alice"), 1) is Created.CREATED
    assert await store.create("y", _owned("sub:alice"), 1) is Created.FULL
    assert await store.create("x", _owned("sub:bob"), 1) is Created.TAKEN


async def test_replace_and_delete_apply_only_to_the_record_that_was_read(store: AgentStore):
    await store.create("x", _owned("sub:alice"), 10)
    read = await store.get("x")
    assert read is not None
    await store.delete("x", read.stamp)  # meanwhile: deleted, and taken by someone else
    await store.create("x", _owned("sub:bob"), 10)
    assert not await store.replace("x", _owned("sub:alice", "2"), read.stamp)
    assert not await store.delete("x", read.stamp)
    now = await store.get("x")
    assert now is not None and now.record == _owned("sub:bob")
    assert await store.replace("x", _owned("sub:bob", "2"), now.stamp)
    assert not await store.replace("x", _owned("sub:bob", "3"), now.stamp)  # stale stamp
    latest = await store.get("x")
    assert latest is not None and await store.delete("x", latest.stamp)
    assert await store.get("x") is None


@pytest.mark.parametrize(("inputs", "says"), [
    ({"$ref": "http://127.0.0.1:9/internal"}, "only references inside the schema"),
    ({"$ref": "#"}, "loops back"),
    ({"type": "string", "pattern": "(a)\\1"}, "refused (invalid escape sequence)"),
])
def test_configured_schemas_meet_the_rules_registered_ones_do(tmp_path, inputs, says):
    import yaml
    from aidip_config import aidip_gateway_config, echo_operation

    from gateway.loader import ConfigError, load_config

    config = aidip_gateway_config("http://127.0.0.1:1", "http://127.0.0.1:2")
    config["aidip"]["agents"]["echoer"]["operations"] = [
        echo_operation("echo", "/echo/run", inputs=inputs)]
    file = tmp_path / "gateway.yaml"
    file.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError) as caught:
        load_config(file, env={})
    [issue] = caught.value.issues
    assert issue.path == "aidip.agents.echoer.operations[0].inputs" and says in issue.message


@pytest.mark.parametrize(("method", "path", "inputs", "says"), [
    ("GET", "/find", {"type": "object", "properties": {"tags": {"type": "array"}}},
     "property 'tags': a GET operation sends its input as query parameters"),
    ("GET", "/find", {"type": "object", "properties": {"q": {"type": ["string", "object"]}}},
     "property 'q'"),
    ("GET", "/find", {"type": "object", "properties": {"q": {"$ref": "#/$defs/q"}},
                      "$defs": {"q": {"type": "string"}}}, "property 'q'"),  # declare its type
    ("GET", "/find", {"type": "object", "additionalProperties": {"type": "object"}},
     "additionalProperties"),
    ("GET", "/find", {"type": "array"}, "expected type: object"),
    ("GET", "/packages/{id}", {"type": "object", "properties": {"id": {"type": "string"}}},
     "{id} in the path: expected a required input property"),
    ("POST", "/notes/{id}", {"type": "object", "required": ["id"],
                             "properties": {"id": {"type": ["string", "null"]}}},
     "{id} in the path"),
])
def test_inputs_a_configured_operation_cannot_send_are_refused_at_load(
        tmp_path, method, path, inputs, says):
    import yaml
    from aidip_config import aidip_gateway_config, echo_operation

    from gateway.loader import ConfigError, load_config

    config = aidip_gateway_config("http://127.0.0.1:1", "http://127.0.0.1:2")
    config["aidip"]["agents"]["echoer"]["operations"] = [
        echo_operation("echo", path, method=method, inputs=inputs)]
    file = tmp_path / "gateway.yaml"
    file.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError) as caught:
        load_config(file, env={})
    [issue] = caught.value.issues
    assert issue.path == "aidip.agents.echoer.operations[0].inputs" and says in issue.message


@pytest.mark.parametrize(("method", "path", "inputs"), [
    ("GET", "/find", {"type": "object", "properties": {
        "q": {"type": "string"}, "n": {"type": ["integer", "null"]}, "on": {"type": "boolean"},
        "kind": {"enum": ["a", "b", None]}, "v": {"const": 1}, "never": False}}),
    ("GET", "/find", {"type": "object"}),  # undeclared fields are checked at invoke
    ("GET", "/packages/{id}", {"type": "object", "required": ["id"],
                               "properties": {"id": {"type": "string"}}}),
    ("PUT", "/notes/{id}", {"type": "object", "required": ["id", "tags"],
                            "properties": {"id": {"type": "integer"},
                                           "tags": {"type": "array"}}}),
    ("POST", "/notes", {"type": "array"}),
])
def test_inputs_a_configured_operation_can_send_load(tmp_path, method, path, inputs):
    import yaml
    from aidip_config import aidip_gateway_config, echo_operation

    from gateway.loader import load_config

    config = aidip_gateway_config("http://127.0.0.1:1", "http://127.0.0.1:2")
    config["aidip"]["agents"]["echoer"]["operations"] = [
        echo_operation("echo", path, method=method, inputs=inputs)]
    file = tmp_path / "gateway.yaml"
    file.write_text(yaml.safe_dump(config))
    assert load_config(file, env={}).settings is not None


_STRING = {"type": "string"}


@pytest.mark.parametrize(("inputs", "field"), [
    ({"type": "object", "required": ["text"], "properties": {"text": _STRING}}, "text"),
    ({"type": "object", "required": ["text"],
      "properties": {"text": _STRING, "lang": _STRING}}, "text"),  # others optional
    ({"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}, None),
    ({"type": "object", "required": ["a", "b"], "properties": {"a": _STRING, "b": _STRING}},
     None),
    ({"type": "object", "properties": {"q": _STRING}}, None),  # nothing required
    ({"type": "object", "required": ["text"]}, None),  # its type not said
    ({"type": "array"}, None), ({"required": "text"}, None), ("junk", None),
])
def test_a_text_part_fills_the_one_required_string_property_only(inputs, field):
    assert Operation("op", inputs, {}).text_field == field


def test_the_configured_text_field_wins_and_must_fit_the_inputs(tmp_path):
    import yaml
    from aidip_config import aidip_gateway_config, echo_operation

    from gateway.loader import ConfigError, load_config

    inputs = {"type": "object", "properties": {"q": _STRING, "n": {"type": "integer"}}}
    cases = [("q", inputs, None), ("n", inputs, "expected a string property of inputs"),
             ("q", {**inputs, "required": ["n"]}, "inputs requires n too")]
    for field, schema, says in cases:
        config = aidip_gateway_config("http://127.0.0.1:1", "http://127.0.0.1:2")
        config["aidip"]["agents"]["echoer"]["operations"] = [
            echo_operation("echo", "/echo/run", inputs=schema, text_input=field)]
        file = tmp_path / "gateway.yaml"
        file.write_text(yaml.safe_dump(config))
        if says is None:
            agent = load_config(file, env={}).settings.aidip.agents["echoer"]  # type: ignore
            assert agent.operations[0].text_input == field
            continue
        with pytest.raises(ConfigError) as caught:
            load_config(file, env={})
        [issue] = caught.value.issues
        assert issue.path == "aidip.agents.echoer.operations[0]" and says in issue.message


def _operation(method: str, path: str = "/find", url: str | None = None) -> Operation:
    return Operation("op", {"type": "object"}, {}, method=method, url=url,
                     upstream=None if url else "up", path=path)


def test_a_get_sends_each_scalar_as_an_rfc3986_query_parameter_and_no_body():
    item = {"name": "g++", "n": 3, "on": True, "off": False, "gone": None, "f": 1.5,
            "u": "synthétique 包", "amp": "a&b=c/d?e#f~", "a b": "x"}
    sent = outgoing(_operation("GET", "/find?fixed=1"), item)
    assert sent.body is None
    assert sent.target == ("/find?fixed=1&name=g%2B%2B&n=3&on=true&off=false&f=1.5"
                           "&u=synth%C3%A9tique%20%E5%8C%85&amp=a%26b%3Dc%2Fd%3Fe%23f~&a%20b=x")
    registered = outgoing(_operation("GET", url="https://agent.example/look"), {"q": "x y"})
    assert (registered.target, registered.body) == ("https://agent.example/look?q=x%20y", None)
    assert outgoing(_operation("GET"), {}).target == "/find"


@pytest.mark.parametrize("identifier", ["g++", "synthetic/with-slash", "100%", "a b",
                                        "synthétique-包", "x?y#z", "..."])
def test_a_path_placeholder_is_one_percent_encoded_segment(identifier: str):
    from urllib.parse import unquote

    for method in ("GET", "PUT"):
        sent = outgoing(_operation(method, "/packages/{id}/notes"), {"id": identifier, "k": 1})
        segment = sent.target.removeprefix("/packages/").split("/notes")[0]
        assert unquote(segment) == identifier and "/" not in segment and "?" not in segment
        expected = ("/packages/{}/notes?k=1" if method == "GET" else "/packages/{}/notes")
        assert sent.target == expected.format(segment)
        assert sent.body == (None if method == "GET" else orjson.dumps({"id": identifier,
                                                                         "k": 1}))


@pytest.mark.parametrize(("method", "path", "item", "at", "field"), [
    ("GET", "/find", {"tags": ["a", "b"]}, "", "tags"),
    ("GET", "/find", {"filter": {"a": 1}}, "[3]", "[3].filter"),
    ("GET", "/packages/{id}", {"id": ".."}, "", "id"),
    ("GET", "/packages/{id}", {"id": ""}, "", "id"),
    ("PUT", "/packages/{id}", {"id": "a\nb"}, "", "id"),
    ("PUT", "/packages/{id}", {"id": "x" * 257}, "", "id"),
    ("GET", "/packages/{id}", {"id": None}, "[0]", "[0].id"),
    ("GET", "/packages/{id}", {"id": [1]}, "", "id"),
    ("GET", "/find", ["not", "an", "object"], "", "(body)"),
])
def test_a_value_the_request_cannot_carry_is_invalid_input_naming_it(method, path, item, at,
                                                                      field):
    with pytest.raises(GatewayError) as raised:
        outgoing(_operation(method, path), item, at)
    assert (raised.value.status, raised.value.code) == (400, "InvalidInput")
    assert [f["field"] for f in raised.value.details["fields"]] == [field]
    assert f"'{field}'" in raised.value.message


def test_post_sends_the_input_as_its_body_unchanged():
    item = {"tags": ["a"], "nested": {"x": None}}
    sent = outgoing(_operation("POST", "/notes"), item)
    assert (sent.target, sent.body) == ("/notes", orjson.dumps(item))
