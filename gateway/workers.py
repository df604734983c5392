"""`aigw run --workers N`: one supervisor, N worker processes sharing the public socket.

The supervisor binds the public listener once and starts each worker as `aigw run --worker-fd`
on that socket (the kernel spreads connections over the processes accepting on it). It serves
the one admin listener: /metrics aggregates every worker's (prometheus-client multiprocess
mode, files in a private directory), /readyz answers for the node. It alone watches the config:
a reload that succeeds in the supervisor is sent to every worker as SIGHUP, so all serve the
same generation number. SIGTERM drains every worker (each finishes its in-flight requests within
`shutdown.grace`); a worker that dies otherwise is replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from gateway.loader import LoadedConfig

log = logging.getLogger("aigw.workers")
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
_POLL_SECONDS = 0.5
_RESPAWN_BACKOFF = 1.0  # a worker dying at start is not restarted in a tight loop


def worker_count(value: str) -> int:
    """`auto` is the cores this process may run on; otherwise a positive number."""
    if value == "auto":
        return len(os.sched_getaffinity(0))
    count = int(value)
    if count < 1:
        raise ValueError("--workers must be at least 1")
    return count


def local_state(loaded: LoadedConfig) -> list[str]:
    """Config parts whose state lives in one process's memory: workers would not share it."""
    from gateway import registry

    settings = loaded.settings
    found = []
    if settings.rate_limits is not None and settings.rate_limits.storage.startswith("memory"):
        found.append("rate_limits.storage (memory://)")
    for surface in registry.surfaces():
        found.extend(surface.process_local_state(settings))
    return found


def prepare_metrics_dir() -> str:
    """A fresh directory for the workers' metric files; set before prometheus_client loads."""
    directory = tempfile.mkdtemp(prefix="aigw-metrics-")
    os.environ[MULTIPROC_ENV] = directory
    return directory


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


class Workers:
    """The worker processes: started, replaced when they die, signalled, stopped."""

    def __init__(self, config_path: str, count: int, sock: socket.socket) -> None:
        self.config_path = config_path
        self.count = count
        self.sock = sock
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.stopping = False

    def start(self) -> None:
        for slot in range(self.count):
            self._spawn(slot)

    def _spawn(self, slot: int) -> None:
        fd = self.sock.fileno()
        cmd = [sys.executable, "-m", "gateway", "run", "--config", self.config_path,
               "--worker-fd", str(fd)]
        self.procs[slot] = subprocess.Popen(cmd, pass_fds=(fd,))
        log.info("worker started", extra={"fields": {"slot": slot,
                                                     "pid": self.procs[slot].pid}})

    async def supervise(self) -> None:
        """Replace any worker that exits while the node is not stopping."""
        while not self.stopping:
            await asyncio.sleep(_POLL_SECONDS)
            for slot, proc in list(self.procs.items()):
                if proc.poll() is None or self.stopping:
                    continue
                log.error("worker died; starting another",
                          extra={"fields": {"slot": slot, "pid": proc.pid,
                                            "code": proc.returncode}})
                _mark_dead(proc.pid)
                await asyncio.sleep(_RESPAWN_BACKOFF)
                if not self.stopping:
                    self._spawn(slot)

    def signal_all(self, sig: signal.Signals) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(sig)

    async def stop(self, grace: float) -> None:
        """SIGTERM every worker and wait for each to drain; SIGKILL what outlives the grace."""
        self.stopping = True
        self.signal_all(signal.SIGTERM)
        deadline = time.monotonic() + grace + 5
        while any(p.poll() is None for p in self.procs.values()):
            if time.monotonic() > deadline:
                self.signal_all(signal.SIGKILL)
            await asyncio.sleep(0.1)
        for proc in self.procs.values():
            _mark_dead(proc.pid)


def _mark_dead(pid: int) -> None:
    from prometheus_client import multiprocess

    with contextlib.suppress(OSError):
        multiprocess.mark_process_dead(pid)


async def supervise(loaded: LoadedConfig, count: int) -> None:
    from gateway.admin import create_admin_app
    from gateway.reload import Reloader
    from gateway.runtime import Runtime
    from gateway.server import edge_options, handle_signals, listener

    settings = loaded.settings
    sock = bind(settings.listen.host, settings.listen.port)
    workers = Workers(str(loaded.path), count, sock)
    runtime = Runtime(loaded)  # for /readyz's upstream probes and the generation number

    class FanOutReloader(Reloader):
        async def reload(self, reason: str) -> bool:
            done = await super().reload(reason)
            if done:
                workers.signal_all(signal.SIGHUP)
            return done

    reloader = FanOutReloader(runtime)
    admin = listener(create_admin_app(runtime), settings.admin.host, settings.admin.port,
                     **edge_options(settings.admin))
    stopped = asyncio.Event()
    def stop() -> None:
        runtime.draining = True
        stopped.set()

    loop = asyncio.get_running_loop()
    _reloading = handle_signals(loop, stop, reloader)  # held: keeps reload tasks alive
    workers.start()
    tasks = [asyncio.ensure_future(t) for t in (admin.serve(), workers.supervise(),
                                                reloader.watch())]
    try:
        await stopped.wait()
        await workers.stop(settings.shutdown.grace)
    finally:
        admin.should_exit = True
        for task in tasks[1:]:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await runtime.aclose()
        sock.close()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(sig)
    log.info("stopped")


def run_workers(loaded: LoadedConfig, count: int) -> None:
    import uvloop

    directory = os.environ[MULTIPROC_ENV]
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(supervise(loaded, count))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
