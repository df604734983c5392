"""A gateway process in front of an upstream that misbehaves on purpose (hostile_upstream.py),
for each upstream transport: nothing one answer leaves behind reaches another client, and a
response head over the caps, or an endless run of 1xx, or an unasked-for 101 is a JSON 502."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from processes import ROOT, Gateway, Process, free_port, wait_for_http


@pytest.fixture(scope="module")
def hostile(logs_dir: Path) -> Iterator[str]:
    port = free_port()
    process = Process([sys.executable, str(ROOT / "tests" / "hostile_upstream.py"), str(port)],
                      logs_dir, f"upstream-hostile-{port}")
    url = f"http://127.0.0.1:{port}"
    wait_for_http(url + "/ready", process=process.popen)
    yield url
    process.stop()


@pytest.fixture(scope="module", params=["httptools", "aiohttp", "httpx"])
def gateway(request: pytest.FixtureRequest, hostile: str,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    upstream = {"url": hostile, "transport": request.param, "max_connections": 1,
                "timeout": {"connect": 0.5, "read": 1}}  # the head deadline: 1.5 s
    started = Gateway({"upstreams": {"legacy": upstream}, "default_upstream": "legacy"},
                      tmp_path_factory.mktemp("hostile"))
    yield started
    started.stop()


def assert_upstream_error(response: httpx.Response, status: int = 502,
                          code: str = "upstream_error") -> None:
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == code
    assert error["request_id"] == response.headers["x-request-id"]


def test_an_answer_sent_while_idle_never_reaches_the_next_client(gateway: Gateway):
    with httpx.Client(base_url=gateway.url, timeout=10) as first:
        answer = first.get("/inject")
    assert answer.text.startswith("own /inject on ")
    poisoned = answer.text.rsplit(" ", 1)[1]
    time.sleep(0.5)  # the upstream writes its unsolicited answer meanwhile
    with httpx.Client(base_url=gateway.url, timeout=10) as second:
        answer = second.get("/second")
    assert "INJECTED" not in answer.text
    assert answer.text.startswith("own /second on ")
    assert answer.text.rsplit(" ", 1)[1] != poisoned  # the poisoned connection was not reused


@pytest.mark.parametrize("path", [
    "/long-header?2000000", "/long-header?70000", "/many-headers?50000", "/many-headers?120",
])
def test_a_response_head_over_the_caps_is_a_502_and_not_relayed(gateway: Gateway, path: str):
    response = httpx.get(gateway.url + path, timeout=10)
    assert_upstream_error(response)
    assert not any(name.startswith(("x-long", "x-f")) for name in response.headers)


def test_a_response_head_within_the_caps_passes(gateway: Gateway):
    response = httpx.get(gateway.url + "/many-headers?90", timeout=10)
    assert response.status_code == 200 and response.headers["x-f89"] == "v"


def test_endless_interim_responses_are_a_bounded_502(gateway: Gateway):
    started = time.monotonic()
    response = httpx.get(gateway.url + "/continue-forever", timeout=10)
    if gateway.config["upstreams"]["legacy"]["transport"] == "httptools":
        assert_upstream_error(response)  # the eleventh interim response
    else:  # aiohttp and httpx cannot count them: the head deadline (connect + read) ends it
        assert_upstream_error(response, 504, "upstream_timeout")
    assert time.monotonic() - started < 5


def test_a_101_to_a_plain_get_is_a_502(gateway: Gateway):
    response = httpx.get(gateway.url + "/switch", timeout=10)
    assert_upstream_error(response)
    assert "RAW-PROTOCOL" not in response.text
