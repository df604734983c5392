"""AIDIP parts in process: the egress guard (each SSRF attempt), the breaker, BM25 ranking.

SSRF attempts only ever reach loopback: stub resolvers *answer* metadata, private or
link-local addresses, and the guard must refuse before any connection is made.
"""

from __future__ import annotations

from ipaddress import ip_address

import httpx
import pytest

from gateway.surfaces.aidip.breaker import Breaker
from gateway.surfaces.aidip.catalog import Agent
from gateway.surfaces.aidip.config import Egress
from gateway.surfaces.aidip.egress import EgressClient, EgressPolicy, EgressRefused
from gateway.surfaces.aidip.search import ranked


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
