"""Memory of idle keep-alive connections: one gateway process, N clients that each made one
request and then stay silent. Prints the gateway's RSS before and after, and the delta.

Usage: .venv/bin/python bench/idle_connections.py [--connections N]
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parent.parent
REQUEST = b"GET /bench HTTP/1.1\r\nHost: bench\r\n\r\n"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def wait_for(url: str) -> None:
    for _ in range(300):
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer")


def one_request(port: int) -> socket.socket:
    """A connection that has had one full exchange and is now idle (kept alive)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(REQUEST)
    answer = b""
    while b"\r\n\r\n" not in answer or not answer.endswith(b"}"):
        answer += sock.recv(65536)
    return sock


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--connections", type=int, default=1000)
    args = parser.parse_args()
    upstream_port, port, admin_port = free_port(), free_port(), free_port()
    work = Path(tempfile.mkdtemp(prefix="aigw-idle-"))
    config = work / "gateway.yaml"
    config.write_text(
        f"upstreams: {{bench: {{url: 'http://127.0.0.1:{upstream_port}'}}}}\n"
        "default_upstream: bench\nlogging: {access_log: false}\n"
        f"listen: {{port: {port}, keep_alive_timeout: 600, header_timeout: 600}}\n"
        f"admin: {{port: {admin_port}}}\n"
    )
    upstream = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "bench.upstream:app", "--port", str(upstream_port),
         "--log-level", "warning", "--no-access-log"], cwd=REPO_DIR)
    gateway = subprocess.Popen([sys.executable, "-m", "gateway", "run", "--config", str(config)],
                               cwd=REPO_DIR, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    clients: list[socket.socket] = []
    try:
        wait_for(f"http://127.0.0.1:{admin_port}/healthz")
        for _ in range(20):  # warm the pools and the allocator before the baseline
            one_request(port).close()
        time.sleep(1)
        before = rss_kib(gateway.pid)
        clients = [one_request(port) for _ in range(args.connections)]
        time.sleep(2)
        after = rss_kib(gateway.pid)
        per = (after - before) / args.connections
        print(f"connections={args.connections} rss_before={before} KiB rss_after={after} KiB "
              f"delta={after - before} KiB per_connection={per:.1f} KiB")
    finally:
        for sock in clients:
            sock.close()
        for proc in (gateway, upstream):
            proc.terminate()
            proc.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
