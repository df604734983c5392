"""Serve the public and admin listeners in one event loop, with reload and graceful shutdown.

SIGTERM or SIGINT: /readyz turns 503, the public listener stops accepting, in-flight requests
finish (up to `shutdown.grace`), upstream clients close, then the admin listener stops.
SIGHUP: reload the config. Tracing starts before the listeners and flushes after them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import signal
import socket
from collections.abc import Callable, Generator, Sequence
from typing import Any, Literal

import uvicorn

from gateway import observability, telemetry
from gateway.admin import create_admin_app
from gateway.app import GatewayApp
from gateway.asgi import ASGIApp
from gateway.background import serving_process
from gateway.edge import protocol_for
from gateway.gctune import tune_after_startup
from gateway.headlimits import HeadLimits
from gateway.loader import LoadedConfig
from gateway.reload import Reloader
from gateway.runtime import Runtime
from gateway.settings import Listener

log = logging.getLogger("aigw.server")


class Server(uvicorn.Server):
    """A uvicorn server that leaves signal handling to `serve`, which owns several servers."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def listener(
    app: ASGIApp, host: str, port: int, *, lifespan: Literal["auto", "on", "off"] = "off",
    grace: float = 30.0, limits: HeadLimits | None = None, keep_alive: float = 15.0,
) -> Server:
    config = uvicorn.Config(
        app, host=host, port=port, lifespan=lifespan, loop="none",
        http=protocol_for(limits or HeadLimits()), ws="none",  # upgrades reach the app as HTTP
        log_config=None, access_log=False, server_header=False, proxy_headers=False,
        timeout_graceful_shutdown=math.ceil(grace),
        # uvicorn annotates an int, but only hands it to loop.call_later: fractions work
        timeout_keep_alive=keep_alive,  # type: ignore[arg-type]
    )
    return Server(config)


def edge_options(settings: Listener) -> dict[str, Any]:
    limits = HeadLimits(settings.max_headers, settings.max_header_bytes, settings.header_timeout)
    return {"limits": limits, "keep_alive": settings.keep_alive_timeout}


async def serve(loaded: LoadedConfig, companions: Sequence[Server] = (),
                sock: socket.socket | None = None) -> None:
    """Run the gateway until a stop signal; `companions` (the demo backend) stop after it.

    With `sock` this process is a worker of `aigw run --workers`: it serves the public listener
    on that inherited socket, and leaves the admin listener and the config watch to the
    supervisor, which sends SIGHUP to reload.
    """
    settings = loaded.settings
    tracer_provider = telemetry.start(settings.tracing)
    runtime = Runtime(loaded)
    reloader = Reloader(runtime)
    public = listener(GatewayApp(runtime), settings.listen.host, settings.listen.port,
                      lifespan="on", grace=settings.shutdown.grace, **edge_options(settings.listen))
    admin = listener(create_admin_app(runtime), settings.admin.host, settings.admin.port,
                     **edge_options(settings.admin))
    servers = (*companions,) if sock is not None else (admin, *companions)

    def stop() -> None:
        if runtime.draining:
            public.force_exit = True  # a second signal: stop waiting for in-flight requests
        runtime.draining = True
        public.should_exit = True

    loop = asyncio.get_running_loop()
    _reloading = handle_signals(loop, stop, reloader)  # held: keeps reload tasks alive
    others = [asyncio.ensure_future(s.serve()) for s in servers]
    watcher = asyncio.ensure_future(
        reloader.watch() if sock is None else observability.publish_in_flight())
    tune_after_startup()
    try:
        await public.serve(sockets=[sock] if sock is not None else None)
    finally:
        watcher.cancel()
        for server in servers:
            server.should_exit = True
        await asyncio.gather(*others, return_exceptions=True)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(sig)
        await asyncio.to_thread(telemetry.stop, tracer_provider)
    log.info("stopped")


def handle_signals(loop: asyncio.AbstractEventLoop, stop: Callable[[], None],
                   reloader: Reloader) -> set[asyncio.Task[Any]]:
    """SIGTERM and SIGINT call `stop`; SIGHUP reloads the config. Returns the set that keeps
    reload tasks alive until they finish."""
    background: set[asyncio.Task[Any]] = set()

    def reload() -> None:
        task = asyncio.ensure_future(reloader.reload("SIGHUP"))
        background.add(task)
        task.add_done_callback(background.discard)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)
    loop.add_signal_handler(signal.SIGHUP, reload)
    return background


def run(loaded: LoadedConfig, companions: Sequence[Server] = (),
        sock: socket.socket | None = None) -> None:
    import uvloop

    serving_process(loaded.settings.interpreter.switch_interval)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(serve(loaded, companions, sock))
