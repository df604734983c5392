from __future__ import annotations

import functools
import os
import ssl
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx._transports.default
import pytest
from datasette import start_datasette
from datasette import write_database as write_datasette_db
from inprocess import InProcessGateway
from processes import ROOT, Gateway, Process, free_port, start_backend, start_echo, wait_for_http

_create_ssl_context = httpx._transports.default.create_ssl_context


# Gateways the tests start from the demo's or the examples' config files keep their PDPP
# indexes in a folder of this run's own, not in the checkout's .aigw/.
os.environ.setdefault("AIGW_INDEX_DIR", tempfile.mkdtemp(prefix="aigw-test-index-"))

@functools.cache
def _default_ssl_context() -> ssl.SSLContext:
    return _create_ssl_context()


def _shared_default_ssl_context(verify: object = True, cert: object = None,
                                trust_env: bool = True) -> ssl.SSLContext:
    """Every `httpx.get(...)` builds a client, and every client an SSL context from certifi's
    bundle: ~20 ms each, about a third of the suite's time, for requests that are all plain
    HTTP to loopback. The default context is built once and shared (no one changes it);
    any other choice is built as httpx would."""
    if verify is True and cert is None and trust_env:
        return _default_ssl_context()
    return _create_ssl_context(verify=verify, cert=cert, trust_env=trust_env)


httpx._transports.default.create_ssl_context = _shared_default_ssl_context


@pytest.fixture(scope="session")
def logs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("logs")


@pytest.fixture(scope="session")
def echo(logs_dir: Path) -> Iterator[str]:
    process, url = start_echo(logs_dir)
    yield url
    process.stop()


@pytest.fixture(scope="session")
def echo_b(logs_dir: Path) -> Iterator[str]:
    process, url = start_echo(logs_dir, "echo-b")
    yield url
    process.stop()


@pytest.fixture(scope="session")
def backend(logs_dir: Path) -> Iterator[str]:
    """The demo help-centre backend, as its own process."""
    process, url = start_backend(logs_dir)
    yield url
    process.stop()


@pytest.fixture(scope="session")
def datasette_db(tmp_path_factory: pytest.TempPathFactory,
                 ) -> tuple[Path, dict[str, list[dict[str, Any]]]]:
    """The SQLite file Datasette serves (examples/datasette/build_db.py), and its records."""
    return write_datasette_db(tmp_path_factory.mktemp("datasette"))


@pytest.fixture(scope="session")
def datasette(datasette_db: tuple[Path, dict], logs_dir: Path) -> Iterator[str]:
    """Datasette over `datasette_db`, as its own process: its base URL (tests/datasette.py)."""
    process, url = start_datasette(datasette_db[0], logs_dir)
    yield url
    process.stop()


@pytest.fixture(scope="module")
def canned(logs_dir: Path) -> Iterator[str]:
    """The canned AIP content API (tests/aip_upstream.py), full of ad-tech fields."""
    port = free_port()
    process = Process([sys.executable, str(ROOT / "tests" / "aip_upstream.py"), str(port)],
                      logs_dir, f"aip-upstream-{port}")
    url = f"http://127.0.0.1:{port}"
    wait_for_http(url + "/ready", process=process.popen)
    yield url
    process.stop()


@pytest.fixture
def gateway_factory(tmp_path: Path) -> Iterator:
    started: list[Gateway] = []

    def start(config: dict) -> Gateway:
        gateway = Gateway(config, tmp_path)
        started.append(gateway)
        return gateway

    yield start
    for gateway in started:
        gateway.stop()


@pytest.fixture
def inprocess_factory(tmp_path: Path) -> Iterator:
    """Like `gateway_factory`, with each gateway served inside this process (tests/inprocess.py):
    for tests that need neither its logs, its signals nor its own metrics registry. Pass
    `upstreams={name or URL origin: handler}` to answer upstreams in memory."""
    started: list[InProcessGateway] = []

    def start(config: dict, upstreams: dict | None = None) -> InProcessGateway:
        gateway = InProcessGateway(config, tmp_path, upstreams)
        started.append(gateway)
        return gateway

    yield start
    for gateway in started:
        gateway.stop(wait=False)  # no test looks at it any more
