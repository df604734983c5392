"""Redis Cluster and Sentinel: rate limits, AIDIP registrations, AIP nonces and AIP events
shared by two gateway processes through a real three-primary cluster and through a Sentinel,
keys that must share a slot, and a primary failover that no feature notices beyond a brief
refusal."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import limits
import pytest
import yaml
from aidip_config import aidip_gateway_config, registration
from processes import ROOT, Gateway
from redis_topologies import Cluster, Sentinel

from gateway.ratelimit.stores import create_counter
from gateway.surfaces.aip.signing import sign

TOPOLOGIES = {"cluster": Cluster, "sentinel": Sentinel}
AIP_SECRET = b"topology-platform-secret-0123456789"


def aip_section(redis_url: str, prefix: str, workdir: Path) -> dict:
    """AIP over the demo backend, signed with a nonce store and events in the topology."""
    (workdir / "platform.secret").write_bytes(AIP_SECRET)
    search = {"upstream": "helpcentre", "path": "/api/v1/articles/search",
              "query": {"q": "{query}", "limit": "{limit}"},
              "mapping": {"items": "items", "id": "id", "text": "snippet",
                          "fields": {"title": "title", "url": "url"}}}
    return {
        "publisher": {"id": "acme-help", "name": "Acme Help Centre",
                      "domain": "help.example.com"},
        "editorial_domains": ["support"],
        "signing": {"enabled": True, "required": True, "nonce_store": redis_url,
                    "nonce_key_prefix": f"{prefix}:nonce",
                    "keys": {"plat": {"secret_file": str(workdir / "platform.secret"),
                                      "platform": "assistant"}}},
        "event": {"path": "/pag/events"},
        "events": {"redis_url": redis_url, "stream": f"{prefix}:events"},
        "sources": {"articles": {"search": search, "search_texts": "excerpts"}},
    }


class Deployment:
    """A Redis topology with two gateways sharing it for rate limits and AIDIP registrations."""

    def __init__(self, kind: str, backend: str, echo: str, workdir: Path) -> None:
        self.redis = TOPOLOGIES[kind](workdir / "redis")
        self.prefix = f"aigw-test-{uuid.uuid4().hex[:8]}"
        rules = [{"name": "shared", "paths": ["/echo/shared"], "limit": "6/hour"},
                 {"name": "failover", "paths": ["/echo/failover"], "limit": "100/hour"},
                 {"name": "agents", "paths": ["/agents"], "limit": "10000/hour"}]
        config = aidip_gateway_config(
            backend, echo, default_upstream="echo",
            aidip={"registry": {"redis_url": self.redis.url, "key_prefix": self.prefix + ":"}},
            rate_limits={"storage": self.redis.url, "key_prefix": self.prefix,
                         "strategy": "sliding-window-counter", "rules": rules},
            aip=aip_section(self.redis.url, self.prefix, workdir))
        self.gateways: list[Gateway] = []
        try:
            self.gateways = [Gateway(config, workdir) for _ in range(2)]
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for gateway in self.gateways:
            gateway.stop()
        self.redis.stop()


@pytest.fixture(scope="module", params=list(TOPOLOGIES))
def deployment(request: pytest.FixtureRequest, backend: str, echo: str,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    started = Deployment(request.param, backend, echo, tmp_path_factory.mktemp(request.param))
    yield started
    started.stop()


def get(gateway: Gateway, path: str) -> httpx.Response:
    return httpx.get(gateway.url + path, headers={"x-api-key": "alice-key"}, timeout=10)


def register(gateway: Gateway, echo: str) -> str:
    response = httpx.post(gateway.url + "/agents", headers={"x-api-key": "alice-key"},
                          json=registration(echo + "/echo/agent"), timeout=10)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def test_two_gateways_enforce_one_combined_limit(deployment: Deployment):
    first, second = deployment.gateways
    statuses = [get(gateway, "/echo/shared").status_code for gateway in [first, second] * 4]
    assert statuses == [200] * 6 + [429, 429]


def test_a_registration_on_one_gateway_is_served_by_the_other(deployment: Deployment,
                                                               echo: str):
    first, second = deployment.gateways
    agent_id = register(first, echo)
    read = get(second, f"/agents/{agent_id}")
    assert read.status_code == 200 and read.json()["name"] == "Chinese-English Translator"
    assert agent_id in {agent["id"] for agent in get(second, "/agents?top=100").json()}


def test_the_counter_keys_of_one_client_share_a_cluster_slot(deployment: Deployment):
    if not isinstance(deployment.redis, Cluster):
        pytest.skip("slots exist only in a cluster")
    get(deployment.gateways[0], "/echo/shared")
    keys = deployment.redis.keys(f"{{{deployment.prefix}:*")
    assert keys, "the counters live in the cluster under the configured prefix"
    by_tag: dict[bytes, set[int]] = {}
    for key, slot in keys:
        by_tag.setdefault(key.split(b"}")[0], set()).add(slot)
    assert all(len(slots) == 1 for slots in by_tag.values())


async def test_a_batched_counter_syncs_through_the_topology(deployment: Deployment):
    item = limits.parse("5/hour")
    prefix = deployment.prefix + ":batched"
    counter = create_counter("sliding-window-counter", deployment.redis.url, prefix, 2.0,
                             sync="batched", sync_interval=0.05, local_share=0.5)
    results = [await counter.hit(item, "rule", client) for client in ["alice"] * 7 + ["bob"]]
    assert [r.allowed for r in results] == [True] * 5 + [False] * 2 + [True]
    await asyncio.sleep(0.2)  # a few syncs, one key per call on a cluster
    await counter.aclose()
    exact = create_counter("sliding-window-counter", deployment.redis.url, prefix, 2.0)
    assert (await exact.hit(item, "rule", "alice")).allowed is False
    assert (await exact.hit(item, "rule", "bob")).remaining == 3
    await exact.aclose()


def signed_post(gateway: Gateway, path: str, body: dict,
                headers: dict[str, str] | None = None) -> httpx.Response:
    raw = json.dumps(body).encode()
    headers = headers or sign(AIP_SECRET, "plat", "POST", path, raw)
    return httpx.post(gateway.url + path, content=raw, timeout=10,
                      headers={**headers, "content-type": "application/json"})


def retrieve_body(request_id: str) -> dict:
    return {"aip_version": "0.1", "request_id": request_id,
            "timestamp": "2026-01-15T14:30:00Z", "platform": {"id": "assistant"},
            "intent": {"domain": "support"},
            "context": {"language": "en-US", "placement": "conversation"},
            "runtime": {"session_id": "s1", "turn_index": 0, "query_text": "reset your password"}}


def stored_events(deployment: Deployment) -> list[dict]:
    """The events as `aigw aip events` reads them back from the topology."""
    config = deployment.gateways[0].config_path.with_name("events-only.yaml")
    events = deployment.gateways[0].config["aip"]["events"]
    config.write_text(yaml.safe_dump({"aip": {"events": events}}))
    result = subprocess.run([sys.executable, "-m", "gateway", "aip", "events", "--config",
                             str(config)], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_a_nonce_used_on_one_gateway_is_refused_by_the_other(deployment: Deployment):
    first, second = deployment.gateways
    body = retrieve_body(f"nonce-{uuid.uuid4().hex[:8]}")
    headers = sign(AIP_SECRET, "plat", "POST", "/pag/retrieve", json.dumps(body).encode())
    answered = signed_post(first, "/pag/retrieve", body, headers)
    assert answered.status_code == 200 and answered.json()["status"] == "ok", answered.text
    replay = signed_post(second, "/pag/retrieve", body, headers)
    assert replay.status_code == 403, replay.text
    assert replay.json()["error"] == {"code": "auth_failed", "message": "Nonce already used"}
    assert signed_post(second, "/pag/retrieve", body).status_code == 200  # a fresh nonce


def test_access_and_citation_events_from_both_gateways_share_one_stream(
        deployment: Deployment):
    first, second = deployment.gateways
    request_id = f"events-{uuid.uuid4().hex[:8]}"
    answered = signed_post(first, "/pag/retrieve", retrieve_body(request_id))
    assert answered.status_code == 200, answered.text
    access = [e for e in stored_events(deployment) if e.get("request_id") == request_id]
    assert [e["event_type"] for e in access] == ["access"]
    citation = {**{k: v for k, v in access[0].items() if k != "access"},
                "event_id": f"evt_{uuid.uuid4().hex}", "event_type": "citation",
                "citation": {"chunk_ids": [], "display_surface": "answer"}}
    posted = signed_post(second, "/pag/events", citation)
    assert posted.status_code == 202, posted.text
    kinds = [e["event_type"] for e in stored_events(deployment)
             if e.get("request_id") == request_id]
    assert kinds == ["access", "citation"]


# Last in the module: the old primary rejoins as a replica some seconds after the failover, and
# a client still connected to it meanwhile may write where no one reads.
def test_counts_and_registrations_survive_a_primary_failover(deployment: Deployment,
                                                              echo: str):
    first, second = deployment.gateways
    before = [get(first, "/echo/failover") for _ in range(5)]
    assert before[-1].headers["ratelimit-remaining"] == "95"
    agent_id = register(first, echo)

    if isinstance(deployment.redis, Cluster):
        deployment.redis.fail_over_every_primary()
    else:
        deployment.redis.fail_over()

    deadline = time.monotonic() + 20
    while (response := get(second, "/echo/failover")).status_code != 200:
        # While the clients find the new primary the rule fails closed (503), counting nothing.
        assert response.status_code == 503, response.text
        assert response.json()["error"]["code"] == "rate_limit_unavailable"
        assert time.monotonic() < deadline, "the gateway did not follow the failover"
        time.sleep(0.2)
    assert response.headers["ratelimit-remaining"] == "94"  # the count was replicated
    assert get(first, "/echo/failover").headers["ratelimit-remaining"] == "93"
    assert get(second, f"/agents/{agent_id}").status_code == 200
    assert register(second, echo)  # writes reach the new primary
