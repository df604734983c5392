"""The gateway inside the test process: no start-up of its own, upstreams in memory if wanted.

`InProcessGateway` is a `processes.Gateway` (url, admin_url, write_config, metric, stop) with
no process of its own: `GatewayApp(Runtime(...))` and the admin app, served on 127.0.0.1 by the
listener `aigw run` uses (the same edge protocol and head limits) from one event loop in a
background thread, with the config file watched for reloads. It costs milliseconds where a
process costs seconds. What it cannot show stays with `processes.Gateway`: logs on stderr,
signals, workers, exit codes, and anything global to a process (tracing, the metrics registry's
absolute values: every gateway of the session adds to the same counters, so compare before and
after; AIP's nonce stores and event sinks, shared by every gateway naming the same one).

`memory_gateway` is the socket-free form for async tests: the app behind
`httpx.ASGITransport`, on the test's own event loop.

Upstreams: a mapping of upstream name (or URL origin) to handler answers those upstreams in
memory (`gateway.upstream.memory`); without it, the configured URLs are called over loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import yaml
from processes import Gateway

from gateway.admin import create_admin_app
from gateway.app import GatewayApp
from gateway.loader import load_config
from gateway.reload import Reloader
from gateway.runtime import Runtime
from gateway.server import edge_options, listener
from gateway.upstream.memory import Handler, MemoryUpstreams

T = TypeVar("T")


class _LoopThread:
    """One event loop in a daemon thread, shared by every in-process gateway of the session."""

    _instance: _LoopThread | None = None

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="in-process-gateways",
                         daemon=True).start()

    @classmethod
    def shared(cls) -> _LoopThread:
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)


def _bound_socket() -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def as_upstreams(upstreams: Mapping[str, Handler] | MemoryUpstreams | None
                 ) -> MemoryUpstreams | None:
    if upstreams is None or isinstance(upstreams, MemoryUpstreams):
        return upstreams
    return MemoryUpstreams(upstreams)


def write_config(config_path: Path, config: dict[str, Any]) -> None:
    """Replace the file atomically, as `processes.Gateway.write_config` does."""
    staging = config_path.with_suffix(".tmp")
    staging.write_text(yaml.safe_dump(config))
    staging.replace(config_path)


def quiet(config: dict[str, Any]) -> dict[str, Any]:
    """No access or decision lines on stdout unless the config asks: stdout is pytest's here,
    and lines a gateway thread writes between two tests would land in its report."""
    logging = {"access_log": False, **config.get("logging", {})}
    return {"decision_log": {"sink": "none"}, **config, "logging": logging}


class InProcessGateway(Gateway):
    """`aigw run` without the process (so no `process` attribute): see the module docstring."""

    def __init__(self, config: dict[str, Any], workdir: Path,
                 upstreams: Mapping[str, Handler] | MemoryUpstreams | None = None) -> None:
        # Not Gateway.__init__, which starts a process.
        self._thread = _LoopThread.shared()
        self.upstreams = as_upstreams(upstreams)
        self._public_socket, self._admin_socket = _bound_socket(), _bound_socket()
        self.port = self._public_socket.getsockname()[1]
        self.admin_port = self._admin_socket.getsockname()[1]
        listen = {**config.get("listen", {}), "host": "127.0.0.1", "port": self.port}
        config = {**config, "listen": listen,
                  "admin": {"host": "127.0.0.1", "port": self.admin_port}}
        config.setdefault("reload", {"interval": 0.2})
        self.config = config
        self.config_path = workdir / f"gateway-{self.port}.yaml"
        self.write_config(config)
        self.url = f"http://127.0.0.1:{self.port}"
        self.admin_url = f"http://127.0.0.1:{self.admin_port}"
        self._tasks: list[asyncio.Future[Any]] = []
        self._thread.run(self._start())

    async def _start(self) -> None:
        loaded = load_config(self.config_path)
        self.runtime = Runtime(loaded, transports=self.upstreams)
        self.reloader = Reloader(self.runtime)
        settings = loaded.settings
        self._public = listener(GatewayApp(self.runtime), "127.0.0.1", self.port, lifespan="on",
                                grace=settings.shutdown.grace, **edge_options(settings.listen))
        self._admin = listener(create_admin_app(self.runtime), "127.0.0.1", self.admin_port,
                               **edge_options(settings.admin))
        self._tasks = [
            asyncio.ensure_future(self._public.serve(sockets=[self._public_socket])),
            asyncio.ensure_future(self._admin.serve(sockets=[self._admin_socket])),
            asyncio.ensure_future(self.reloader.watch()),
        ]
        while not (self._public.started and self._admin.started):
            if any(task.done() for task in self._tasks):
                await asyncio.gather(*self._tasks)  # raises what stopped it
                raise RuntimeError("the in-process gateway stopped while starting")
            await asyncio.sleep(0.005)

    def write_config(self, config: dict[str, Any]) -> None:
        super().write_config(quiet(config))

    def call(self, awaitable: Awaitable[T]) -> T:
        """Run `awaitable` on the gateway's event loop (to reach its runtime, say)."""

        async def wrapped() -> T:
            return await awaitable

        return self._thread.run(wrapped())

    def stop(self, wait: bool = True) -> int:
        """Stop serving; without `wait`, the shutdown (~0.2 s of uvicorn's) runs on behind."""
        stopping = asyncio.run_coroutine_threadsafe(self._stop(), self._thread.loop)
        if wait:
            stopping.result(30)
        return 0

    async def _stop(self) -> None:
        self.runtime.draining = True
        self._public.should_exit = True
        self._admin.should_exit = True
        self._tasks[2].cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


@dataclass
class MemoryGateway:
    client: httpx.AsyncClient
    runtime: Runtime
    upstreams: MemoryUpstreams | None


@contextlib.asynccontextmanager
async def memory_gateway(config: dict[str, Any], workdir: Path,
                         upstreams: Mapping[str, Handler] | MemoryUpstreams | None = None
                         ) -> AsyncIterator[MemoryGateway]:
    """The gateway app on this event loop behind `httpx.ASGITransport`: no socket at all."""
    path = workdir / "gateway.yaml"
    write_config(path, quiet(config))
    memory = as_upstreams(upstreams)
    runtime = Runtime(load_config(path), transports=memory)
    transport = httpx.ASGITransport(GatewayApp(runtime), client=("127.0.0.1", 50000))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway.test") as c:
            yield MemoryGateway(c, runtime, memory)
    finally:
        await runtime.aclose()
