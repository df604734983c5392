"""Redis Cluster and Sentinel: rate limits and AIDIP registrations shared by two gateway
processes through a real three-primary cluster and through a Sentinel, keys that must share a
slot, and a primary failover that neither feature notices beyond a brief refusal."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from aidip_config import aidip_gateway_config, registration
from processes import Gateway
from redis_topologies import Cluster, Sentinel

TOPOLOGIES = {"cluster": Cluster, "sentinel": Sentinel}


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
                         "strategy": "sliding-window-counter", "rules": rules})
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
