"""Rate limits over real HTTP: headers, 429s, tiers, bursts, a Redis store shared by two
gateways (counted exactly, or batched within its stated bound), and a private Redis that stops
and comes back mid-test."""

from __future__ import annotations

import hashlib
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from processes import Gateway, free_port

KEYS = {"basic-key": ("acme", []), "premium-key": ("bigco", ["premium"])}


def config(echo: str, limits: dict, **rule: object) -> dict:
    api_keys = [{"sha256": hashlib.sha256(key.encode()).hexdigest(), "subject": client,
                 "client_id": client, "scopes": scopes}
                for key, (client, scopes) in KEYS.items()]
    rules = [{"name": "api", "paths": ["/echo"], "limit": "5/minute",
              "tiers": [{"scope": "premium", "limit": "8/minute"}], **rule}]
    return {
        "upstreams": {"legacy": {"url": echo}}, "default_upstream": "legacy",
        "auth": {"resource": "https://api.example.com", "default_access": "public",
                 "api_keys": {"keys": api_keys}},
        "rate_limits": {"strategy": "fixed-window", "rules": rules, **limits},
    }


def call(gateway: Gateway, key: str | None = None, path: str = "/echo") -> httpx.Response:
    headers = {"x-api-key": key} if key else {}
    return httpx.get(gateway.url + path, headers=headers, timeout=10)


def test_headers_count_down_then_429_with_retry_after(echo, gateway_factory):
    gateway = gateway_factory(config(echo, {}))
    remaining = []
    for _ in range(5):
        response = call(gateway, "basic-key")
        assert response.status_code == 200
        assert response.headers["ratelimit-limit"] == "5"
        remaining.append(int(response.headers["ratelimit-remaining"]))
        assert response.headers["ratelimit-policy"] == '"api";q=5;w=60'
        assert response.headers["ratelimit"].startswith(f'"api";r={remaining[-1]};t=')
    assert remaining == [4, 3, 2, 1, 0]
    refused = call(gateway, "basic-key")
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    assert refused.headers["ratelimit-remaining"] == "0"
    assert refused.json()["error"]["code"] == "rate_limited"
    assert refused.json()["error"]["request_id"] == refused.headers["x-request-id"]
    assert gateway.metric("aigw_ratelimit_decisions_total", rule="api", result="limited") == 1


def test_clients_are_counted_apart_and_tiers_pick_their_limit(echo, inprocess_factory):
    gateway = inprocess_factory(config(echo, {}))
    basic = [call(gateway, "basic-key").status_code for _ in range(6)]
    premium = [call(gateway, "premium-key").status_code for _ in range(9)]
    anonymous = [call(gateway).status_code for _ in range(6)]  # counted by address
    assert basic == [200] * 5 + [429]
    assert premium == [200] * 8 + [429]
    assert anonymous == [200] * 5 + [429]
    assert call(gateway, "premium-key").headers["ratelimit-limit"] == "8"


def test_unmatched_paths_are_not_limited_and_carry_no_fields(echo, inprocess_factory):
    gateway = inprocess_factory(config(echo, {}))
    response = call(gateway, "basic-key", "/status/200")
    assert response.status_code == 200 and "ratelimit-limit" not in response.headers


def test_the_window_resets(echo, inprocess_factory):
    gateway = inprocess_factory(config(echo, {}, limit="2/second", tiers=[]))
    assert [call(gateway, "basic-key").status_code for _ in range(3)] == [200, 200, 429]
    time.sleep(1.1)
    assert call(gateway, "basic-key").status_code == 200


def test_burst_is_a_second_limit_and_the_closest_one_is_reported(echo, inprocess_factory):
    gateway = inprocess_factory(config(echo, {}, limit="100/minute", burst="3/second", tiers=[]))
    responses = [call(gateway, "basic-key") for _ in range(4)]
    assert [r.status_code for r in responses] == [200, 200, 200, 429]
    first = responses[0]
    assert first.headers["ratelimit-policy"] == '"api-burst";q=3;w=1, "api";q=100;w=60'
    assert first.headers["ratelimit-limit"] == "3"  # burst: 2 left beats 99 left
    assert first.headers["ratelimit"].startswith('"api-burst";r=2;')


def test_requests_refused_by_the_burst_do_not_use_up_the_main_limit(echo, inprocess_factory):
    gateway = inprocess_factory(config(echo, {}, limit="5/minute", burst="2/second", tiers=[]))
    assert [call(gateway, "basic-key").status_code for _ in range(5)] == [200, 200] + [429] * 3
    time.sleep(1.1)  # a fresh burst window; the minute has only counted the 2 served requests
    assert [call(gateway, "basic-key").status_code for _ in range(2)] == [200, 200]
    time.sleep(1.1)
    assert [call(gateway, "basic-key").status_code for _ in range(2)] == [200, 429]


def test_header_styles_can_be_switched_off(echo, inprocess_factory):
    gateway = inprocess_factory(config(echo, {"headers": {"legacy": False, "ietf": True}}))
    response = call(gateway, "basic-key")
    assert "ratelimit-limit" not in response.headers and "ratelimit" in response.headers


def test_upstream_limits_are_never_made_to_look_more_permissive(echo, inprocess_factory):
    gateway = inprocess_factory(config(echo, {}, paths=["/own-limits"]))
    response = call(gateway, "basic-key", "/own-limits")
    assert response.headers["ratelimit-remaining"] == "1"  # the upstream's, stricter than 4
    assert response.headers["ratelimit-limit"] == "10"
    assert response.headers["ratelimit-policy"] == '"upstream";q=10;w=60, "api";q=5;w=60'
    assert response.headers["ratelimit"].startswith('"upstream";r=1;t=30, "api";r=4;')


# --------------------------------------------------------------------------- Redis


# sliding-window-counter takes the one-round-trip Lua path; the others go through `limits`.
STRATEGIES = ["sliding-window-counter", "moving-window", "fixed-window"]


def redis_config(echo: str, url: str, strategy: str, **rule: object) -> dict:
    prefix = f"aigw-test-{secrets.token_hex(4)}"
    return config(echo, {"storage": url, "key_prefix": prefix, "strategy": strategy}, **rule)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_two_gateways_sharing_redis_enforce_one_combined_limit(echo, inprocess_factory, strategy):
    shared = redis_config(echo, "redis://127.0.0.1:6379/15", strategy, limit="6/minute",
                          tiers=[])
    first, second = inprocess_factory(shared), inprocess_factory(shared)
    statuses = [call(gateway, "basic-key").status_code
                for gateway in [first, second] * 3 + [first, second]]
    assert statuses == [200] * 6 + [429, 429]
    remaining = call(second, "premium-key").headers["ratelimit-remaining"]
    assert remaining == "5"  # another client still has its own full count


def test_two_batched_gateways_sharing_redis_stay_within_the_limit_plus_the_stated_bound(
        echo, gateway_factory):
    limit = 20  # local_share 0.1: an allowance of 2 per process, so at most 20 + (2 - 1) x 2
    shared = redis_config(echo, "redis://127.0.0.1:6379/15", "sliding-window-counter",
                          limit=f"{limit}/minute", tiers=[])
    shared["rate_limits"].update(sync="batched", sync_interval=0.05, local_share=0.1)
    first, second = gateway_factory(shared), gateway_factory(shared)
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda gateway: call(gateway, "basic-key").status_code,
                                 [first, second] * 30))
    assert set(statuses) == {200, 429}
    assert limit <= statuses.count(200) <= limit + 2
    time.sleep(0.3)  # a few syncs: each gateway has seen the other's hits
    assert call(first, "basic-key").status_code == call(second, "basic-key").status_code == 429
    assert call(second, "premium-key").headers["ratelimit-remaining"] == "19"


class PrivateRedis:
    """A redis-server of the test's own, on a spare port, that can be stopped and restarted."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.workdir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while subprocess.run(["redis-cli", "-p", str(self.port), "ping"], capture_output=True,
                             text=True).stdout.strip() != "PONG":
            assert time.monotonic() < deadline, "private redis did not start"
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is not installed: run `make test`, which installs it")
    redis = PrivateRedis(tmp_path)
    redis.start()
    yield redis
    redis.stop()


@pytest.mark.parametrize("strategy", ["sliding-window-counter", "fixed-window"])
def test_store_outage_follows_on_store_error_and_recovers_without_restart(
    echo, gateway_factory, private_redis: PrivateRedis, strategy: str
):
    url = f"redis://127.0.0.1:{private_redis.port}/0"
    settings = redis_config(echo, url, strategy, paths=["/echo/open"], limit="100/minute",
                            tiers=[], on_store_error="allow")
    settings["rate_limits"]["rules"].append(
        {"name": "strict", "paths": ["/echo/closed"], "limit": "100/minute",
         "on_store_error": "deny"})
    gateway = gateway_factory(settings)
    assert call(gateway, "basic-key", "/echo/open").headers["ratelimit-remaining"] == "99"

    private_redis.stop()
    during = [call(gateway, "basic-key", "/echo/open") for _ in range(3)]
    closed = call(gateway, "basic-key", "/echo/closed")
    assert [r.status_code for r in during] == [200] * 3
    assert "ratelimit-remaining" not in during[0].headers
    assert closed.status_code == 503
    assert closed.json()["error"]["code"] == "rate_limit_unavailable"
    assert gateway.metric("aigw_ratelimit_store_errors_total", rule="api") == 3
    assert gateway.process.stderr().count("rate-limit store failed") == 1  # once per outage

    private_redis.start()  # same port, empty: counting starts again by itself
    deadline = time.monotonic() + 10
    while call(gateway, "basic-key", "/echo/closed").status_code != 200:
        assert time.monotonic() < deadline, "the gateway did not recover after Redis returned"
        time.sleep(0.2)
    assert "ratelimit-remaining" in call(gateway, "basic-key", "/echo/open").headers
    assert "rate-limit store recovered" in gateway.process.stderr()


def test_batched_store_outage_follows_on_store_error_and_recovers(
        echo, gateway_factory, private_redis: PrivateRedis):
    url = f"redis://127.0.0.1:{private_redis.port}/0"
    settings = redis_config(echo, url, "sliding-window-counter", paths=["/echo/open"],
                            limit="100/minute", tiers=[], on_store_error="allow")
    settings["rate_limits"]["rules"].append(
        {"name": "strict", "paths": ["/echo/closed"], "limit": "100/minute"})  # deny: default
    settings["rate_limits"].update(sync="batched", sync_interval=0.05)
    gateway = gateway_factory(settings)
    assert call(gateway, "basic-key", "/echo/open").headers["ratelimit-remaining"] == "99"
    assert call(gateway, "basic-key", "/echo/closed").status_code == 200

    private_redis.stop()
    time.sleep(0.3)  # longer than a sync: the outage is known by now
    during = [call(gateway, "basic-key", "/echo/open") for _ in range(3)]
    closed = call(gateway, "basic-key", "/echo/closed")
    assert [r.status_code for r in during] == [200] * 3
    assert "ratelimit-remaining" not in during[-1].headers
    assert closed.status_code == 503
    assert closed.json()["error"]["code"] == "rate_limit_unavailable"

    private_redis.start()  # empty: counting starts again by itself
    deadline = time.monotonic() + 10
    while call(gateway, "basic-key", "/echo/closed").status_code != 200:
        assert time.monotonic() < deadline, "the gateway did not recover after Redis returned"
        time.sleep(0.2)
    assert "ratelimit-remaining" in call(gateway, "basic-key", "/echo/open").headers
    assert "rate-limit store recovered" in gateway.process.stderr()
