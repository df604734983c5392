"""`aigw run --workers N` on real processes: one listener, shared limits, one /metrics,
reloads reaching every worker, a dead worker replaced, SIGTERM draining them all."""

from __future__ import annotations

import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from processes import Gateway


def workers_of(gateway: Gateway) -> set[int]:
    """The pids of the processes the supervisor started."""
    pid = gateway.process.popen.pid
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def wait_until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


def fresh_get(url: str, **kwargs: object) -> httpx.Response:
    """A request on a new connection, so the kernel may hand it to any worker."""
    with httpx.Client(timeout=10) as client:
        return client.get(url, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def two_workers(echo: str, echo_b: str, tmp_path: Path) -> Iterator[Gateway]:
    config = {"upstreams": {"a": {"url": echo}, "b": {"url": echo_b}}, "default_upstream": "a"}
    gateway = Gateway(config, tmp_path, ("--workers", "2"))
    wait_until(lambda: len(workers_of(gateway)) == 2)
    wait_until(lambda: fresh_get(gateway.url + "/echo/x").status_code == 200)
    yield gateway
    gateway.stop()


def test_two_workers_serve_one_listener_and_metrics_add_up(two_workers: Gateway):
    before = two_workers.metric("aigw_requests_total", surface="passthrough", method="GET",
                                status="200")
    statuses = [fresh_get(two_workers.url + "/echo/x").status_code for _ in range(30)]
    assert statuses == [200] * 30
    assert len(workers_of(two_workers)) == 2
    after = two_workers.metric("aigw_requests_total", surface="passthrough", method="GET",
                               status="200")
    assert after - before == 30  # one /metrics on the admin listener, summed over workers
    # each worker times its own event loop, ten ticks a second; the supervisor sums them
    ticks = two_workers.metric("aigw_event_loop_lag_seconds_count")
    time.sleep(2)
    assert two_workers.metric("aigw_event_loop_lag_seconds_count") - ticks > 25  # one: 20


def test_a_dead_worker_is_replaced(two_workers: Gateway):
    first = workers_of(two_workers)
    victim = min(first)
    subprocess.run(["kill", "-KILL", str(victim)], check=True)
    wait_until(lambda: len(workers_of(two_workers)) == 2 and victim not in workers_of(
        two_workers))
    wait_until(lambda: all(fresh_get(two_workers.url + "/echo/x").status_code == 200
                           for _ in range(10)))


def test_a_reload_reaches_every_worker_with_one_generation(two_workers: Gateway):
    two_workers.write_config({**two_workers.config, "default_upstream": "b"})
    wait_until(lambda: httpx.get(two_workers.admin_url + "/readyz").json()[
        "config_generation"] == 2)
    time.sleep(0.5)  # the SIGHUP the supervisor sent has been acted on

    def all_on_b() -> bool:
        return all(fresh_get(two_workers.url + "/echo/x").headers["x-upstream"] == "echo-b"
                   for _ in range(20))

    wait_until(all_on_b, timeout=10)
    assert two_workers.metric("aigw_config_generation") == 2


def test_sigterm_drains_every_worker(two_workers: Gateway):
    results: list[int] = []

    def slow() -> None:
        results.append(fresh_get(two_workers.url + "/slow", params={"seconds": "1"}).status_code)

    threads = [threading.Thread(target=slow) for _ in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(0.4)
    children = workers_of(two_workers)
    two_workers.process.signal(signal.SIGTERM)
    for thread in threads:
        thread.join()
    assert results == [200] * 4
    assert two_workers.process.popen.wait(timeout=20) == 0
    assert not any(Path(f"/proc/{pid}").exists() for pid in children)


def test_rate_limits_in_redis_hold_across_workers(echo: str, tmp_path: Path):
    limits = {"storage": "redis://127.0.0.1:6379/15",
              "key_prefix": f"aigw-test-{secrets.token_hex(4)}",
              "rules": [{"name": "all", "paths": ["/echo"], "key": "client",
                         "limit": "6/minute"}]}
    gateway = Gateway({"upstreams": {"a": {"url": echo}}, "default_upstream": "a",
                       "rate_limits": limits}, tmp_path, ("--workers", "2"))
    try:
        wait_until(lambda: len(workers_of(gateway)) == 2)
        wait_until(lambda: fresh_get(gateway.url + "/healthcheck-none").status_code == 200)
        statuses = [fresh_get(gateway.url + "/echo/x").status_code for _ in range(12)]
    finally:
        gateway.stop()
    assert statuses.count(200) == 6 and statuses.count(429) == 6


def test_several_workers_refuse_a_memory_store_unless_allowed(echo: str, tmp_path: Path):
    config = {"upstreams": {"a": {"url": echo}}, "default_upstream": "a",
              "rate_limits": {"storage": "memory://", "rules": [
                  {"name": "all", "paths": ["/"], "limit": "100/minute"}]}}
    path = tmp_path / "memory.yaml"
    path.write_text(yaml.safe_dump(config))
    refused = subprocess.run([sys.executable, "-m", "gateway", "run", "--config", str(path),
                              "--workers", "2"], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2
    assert "rate_limits.storage" in refused.stderr and "--allow-memory-store" in refused.stderr
    allowed = Gateway(config, tmp_path, ("--workers", "2", "--allow-memory-store"))
    try:
        wait_until(lambda: len(workers_of(allowed)) == 2)
    finally:
        allowed.stop()
