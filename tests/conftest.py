from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from processes import Gateway, start_backend, start_echo


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

