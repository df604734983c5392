"""Reload (file change and SIGHUP) under load, and graceful shutdown, on real processes."""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from collections.abc import Callable

import httpx
import pytest
from processes import Gateway


def config_for(default: str, echo: str, echo_b: str, **extra: object) -> dict:
    return {"upstreams": {"a": {"url": echo}, "b": {"url": echo_b}},
            "default_upstream": default, **extra}


class Load:
    """Clients hammering the gateway from threads, recording every outcome."""

    def __init__(self, url: str, clients: int = 4) -> None:
        self.url = url
        self.outcomes: Counter[str] = Counter()
        self.last_upstream = ""
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run) for _ in range(clients)]

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _run(self) -> None:
        with httpx.Client(timeout=10) as client:
            while not self._stop.is_set():
                try:
                    response = client.get(self.url + "/echo/load")
                    outcome = f"{response.status_code} {response.headers.get('x-upstream')}"
                    upstream = response.headers.get("x-upstream", "")
                except httpx.HTTPError as exc:
                    outcome, upstream = f"error {type(exc).__name__}", ""
                with self._lock:
                    self.outcomes[outcome] += 1
                    self.last_upstream = upstream or self.last_upstream

    def failures(self) -> dict[str, int]:
        return {k: v for k, v in self.outcomes.items() if not k.startswith("200 ")}


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def test_reload_of_good_and_bad_config_under_load_fails_no_request(
    echo: str, echo_b: str, gateway_factory
):
    gateway: Gateway = gateway_factory(config_for("a", echo, echo_b))
    with Load(gateway.url) as load:
        wait_until(lambda: load.outcomes["200 echo"] > 20)

        gateway.write_config({**gateway.config, "default_upstream": "b"})
        wait_until(lambda: load.last_upstream == "echo-b")
        assert gateway.metric("aigw_config_reloads_total", result="success") == 1

        gateway.write_config_text("upstreams: {a: {url: 'not a url'}}\n")
        wait_until(lambda: gateway.metric("aigw_config_reloads_total", result="failure") == 1)
        served = load.outcomes["200 echo-b"]
        wait_until(lambda: load.outcomes["200 echo-b"] > served + 20)

        gateway.process.signal(signal.SIGHUP)  # still broken: rejected again, still serving
        wait_until(lambda: gateway.metric("aigw_config_reloads_total", result="failure") == 2)

        gateway.write_config(gateway.config)  # back to upstream a
        wait_until(lambda: load.last_upstream == "echo")
    assert load.failures() == {}
    assert load.outcomes["200 echo"] > 20 and load.outcomes["200 echo-b"] > 20
    assert "config reload rejected" in gateway.process.stderr()
    assert "not a url" not in gateway.process.stdout()


def test_sighup_reloads_when_file_watching_is_off(echo: str, echo_b: str, gateway_factory):
    config = config_for("a", echo, echo_b, reload={"watch": False, "interval": 0.1})
    gateway: Gateway = gateway_factory(config)
    gateway.write_config({**gateway.config, "default_upstream": "b"})
    time.sleep(0.5)
    assert httpx.get(gateway.url + "/echo").headers["x-upstream"] == "echo"
    gateway.process.signal(signal.SIGHUP)
    wait_until(lambda: httpx.get(gateway.url + "/echo").headers["x-upstream"] == "echo-b")
    assert gateway.metric("aigw_config_generation") == 2


def test_shutdown_finishes_in_flight_requests_then_exits(echo: str, echo_b: str,
                                                         gateway_factory):
    gateway: Gateway = gateway_factory(config_for("a", echo, echo_b))
    results: list[httpx.Response] = []
    slow = threading.Thread(target=lambda: results.append(
        httpx.get(gateway.url + "/slow?seconds=1.5", timeout=10)))
    slow.start()
    time.sleep(0.4)
    gateway.process.signal(signal.SIGTERM)
    time.sleep(0.3)
    readiness = httpx.get(gateway.admin_url + "/readyz")
    assert readiness.status_code == 503 and readiness.json()["draining"] is True
    with pytest.raises(httpx.ConnectError):
        httpx.get(gateway.url + "/echo")  # no new connections while draining
    slow.join()
    assert results[0].status_code == 200 and results[0].json() == {"slow": True}
    assert gateway.process.popen.wait(10) == 0
