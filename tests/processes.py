"""Start real processes on loopback for the integration tests, and stop them afterwards."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import IO, Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_http(url: str, timeout: float = 15.0, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode} before {url} answered")
        try:
            httpx.get(url, timeout=1.0)
            return
        except httpx.TransportError:
            time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer within {timeout} s")


class Process:
    """A child process with its output in files, stopped with SIGTERM (then SIGKILL)."""

    def __init__(self, args: list[str], logs: Path, name: str,
                 env: dict[str, str] | None = None) -> None:
        self.stdout_path = logs / f"{name}.out"
        self.stderr_path = logs / f"{name}.err"
        self._stdout: IO[bytes] = self.stdout_path.open("wb")
        self._stderr: IO[bytes] = self.stderr_path.open("wb")
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.popen = subprocess.Popen(args, stdout=self._stdout, stderr=self._stderr, cwd=ROOT,
                                      env=env)

    def signal(self, sig: int) -> None:
        self.popen.send_signal(sig)

    def stop(self, timeout: float = 10.0) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self._stdout.close()
        self._stderr.close()
        return self.popen.returncode

    def stdout(self) -> str:
        return self.stdout_path.read_text()

    def stderr(self) -> str:
        return self.stderr_path.read_text()


def start_echo(logs: Path, name: str = "echo") -> tuple[Process, str]:
    port = free_port()
    proc = Process([sys.executable, str(ROOT / "tests" / "echo_upstream.py"), str(port), name],
                   logs, f"upstream-{name}-{port}")
    url = f"http://127.0.0.1:{port}"
    wait_for_http(url + "/count", process=proc.popen)
    return proc, url


def start_backend(logs: Path) -> tuple[Process, str]:
    port = free_port()
    proc = Process([sys.executable, "-m", "gateway.demo.backend", "--port", str(port)], logs,
                   f"backend-{port}")
    url = f"http://127.0.0.1:{port}"
    wait_for_http(url + "/api/v1/health", process=proc.popen)
    return proc, url


class Gateway:
    """`aigw run` in its own process, with its config file written from a dict."""

    def __init__(self, config: dict[str, Any], workdir: Path, args: tuple[str, ...] = (), *,
                 public: bool = False) -> None:
        """`public`: its public_base_url is its own URL (for clients that follow the URLs its
        documents give, such as A2A clients)."""
        self.port = free_port()
        self.admin_port = free_port()
        listen = {**config.get("listen", {}), "host": "127.0.0.1", "port": self.port}
        config = {**config, "listen": listen,
                  "admin": {"host": "127.0.0.1", "port": self.admin_port}}
        if public:
            config["public_base_url"] = f"http://127.0.0.1:{self.port}"
        config.setdefault("reload", {"interval": 0.2})
        self.config_path = workdir / f"gateway-{self.port}.yaml"
        self.write_config(config)
        self.url = f"http://127.0.0.1:{self.port}"
        self.admin_url = f"http://127.0.0.1:{self.admin_port}"
        self.process = Process([sys.executable, "-m", "gateway", "run", "--config",
                                str(self.config_path), *args], workdir, f"gateway-{self.port}")
        wait_for_http(self.admin_url + "/healthz", process=self.process.popen)
        self.config = config

    def write_config(self, config: dict[str, Any]) -> None:
        self.write_config_text(yaml.safe_dump(config))

    def write_config_text(self, text: str) -> None:
        """Replace the file atomically, as editors and Kubernetes do, so no poll sees half."""
        staging = self.config_path.with_suffix(".tmp")
        staging.write_text(text)
        staging.replace(self.config_path)

    def metric(self, name: str, **labels: str) -> float:
        text = httpx.get(self.admin_url + "/metrics").text
        wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        for line in text.splitlines():
            if line.startswith(name) and (not labels or "{" + wanted + "}" in line):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def stop(self) -> int:
        return self.process.stop()


@contextlib.contextmanager
def counting_http_server(body: bytes, content_type: str) -> Iterator[tuple[str, list[str]]]:
    """A loopback HTTP server (in a thread) answering every GET with `body`, and the paths that
    reached it: the target that shows whether anything was fetched."""
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.send_header("content-type", content_type)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # polled every 50 ms (not 0.5 s), so shutdown() is quick
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", hits
    finally:
        server.shutdown()
        server.server_close()


def script_module(path: Path, name: str) -> ModuleType:
    """A script beside an example (not a package) imported as module `name`, once."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
