"""Serve tests/check_origin.py once per case, each on its own loopback port, in one process.

    python tests/check_servers.py PORTS_FILE

Writes {case: port} to PORTS_FILE once every server listens; "good" is the conformant
origin, every other case breaks the one rule check_origin.BROKEN names. SIGTERM stops all.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import uvicorn
from check_origin import BROKEN, build


class _Server(uvicorn.Server):
    """Several servers share the process: the signals are this script's to handle."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def main(ports_file: Path) -> None:
    cases = ["good", "no_cors", *BROKEN]
    servers, tasks, ports = [], [], {}
    for case in cases:
        sock = socket.socket()
        # uvicorn leaves a socket it is handed as it is; accepted ones inherit this, so an
        # answer's body is not held back by Nagle until the client's delayed ACK (40 ms)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(("127.0.0.1", 0))
        ports[case] = sock.getsockname()[1]
        config = uvicorn.Config(build(None if case == "good" else case), log_level="warning",
                                lifespan="on")
        server = _Server(config)
        servers.append(server)
        tasks.append(asyncio.create_task(server.serve(sockets=[sock])))
    while not all(server.started for server in servers):
        await asyncio.sleep(0.02)
    ports_file.write_text(json.dumps(ports))
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: [setattr(s, "should_exit", True) for s in servers])
    await asyncio.gather(*tasks)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
