"""Soak: minutes of mixed spec traffic with bad requests and a config reload midway.

The set-up is pipelines.py's (demo config, JWT auth, a Redis rate limit, the replay upstream);
clients cycle through every spec route, passthrough and requests that must fail (no token,
malformed JSON, an unknown chunk, an unknown agent). Halfway the config file changes and the
run waits for generation 2. Reported: every response that had not the expected status, the RSS
and open file descriptors of each aigw process after warm-up and at the end (goal: RSS growth
under 10 %), and the request count. Exit 1 when a goal is missed.

Usage: .venv/bin/python bench/soak.py [--minutes M] [--clients N] [--workers N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pipelines
import run
from pipelines import Route

RSS_GROWTH_GOAL = 0.10
WARMUP_SECONDS = 20
BAD = [
    Route("no token", "POST", "/search", json.dumps({"query": "x"}), "application/aidre+json",
          401),
    Route("malformed JSON", "POST", "/search", "{not json", "application/aidre+json", 400),
    Route("unknown chunk", "GET", "/chunks/articles:art-9999", status=404),
    Route("unknown agent", "POST", "/agents/nobody/invoke", "{}", status=404),
]


def process_facts(pid: int) -> dict[int, tuple[int, int]]:
    """RSS (KiB) and open descriptors of pid and every process below it."""
    facts = {}
    for member in run.process_tree(pid):
        try:
            status = Path(f"/proc/{member}/status").read_text()
            rss = next(int(line.split()[1]) for line in status.splitlines()
                       if line.startswith("VmRSS:"))
            facts[member] = (rss, len(os.listdir(f"/proc/{member}/fd")))
        except (OSError, StopIteration):
            continue
    return facts


class Traffic:
    def __init__(self, port: int, token: str, good: list[Route], clients: int) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.token = token
        self.mix = [*good, *BAD]
        self.counts: Counter[str] = Counter()
        self.unexpected: Counter[str] = Counter()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._loop, args=(i,)) for i in range(clients)]

    def _loop(self, offset: int) -> None:
        with httpx.Client(base_url=self.base, timeout=15) as client:
            i = offset
            while not self.stop.is_set():
                route = self.mix[i % len(self.mix)]
                i += 1
                headers = {"content-type": route.content_type}
                if route.name != "no token":
                    headers["authorization"] = f"Bearer {self.token}"
                try:
                    status = client.request(route.method, route.path, headers=headers,
                                            content=route.body or None).status_code
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                self.counts[route.name] += 1
                if status != route.status:
                    self.unexpected[f"{route.name}: {status}"] += 1


def soak(args: argparse.Namespace, workdir: Path) -> tuple[str, bool]:
    opts = pipelines.parse_args(["--workers", args.workers])
    opts.duration = 1
    services, setup = pipelines.start_support(opts, workdir)
    try:
        aigw, port = pipelines.start_aigw(setup, opts, workdir)
        services.append(aigw)
        pipelines.discover(setup, port)
        traffic = Traffic(port, setup.issuer.token, setup.routes, args.clients)
        for thread in traffic.threads:
            thread.start()
        time.sleep(WARMUP_SECONDS)
        start = process_facts(aigw.proc.pid)
        half = max(0.0, args.minutes * 60 / 2 - WARMUP_SECONDS)
        time.sleep(half)
        config = workdir / "aigw-pipelines.yaml"
        config.write_text(config.read_text().replace("Acme Help Centre", "Acme Help Centre 2"))
        reloaded = wait_generation(setup.admin_port, 2)
        time.sleep(args.minutes * 60 / 2)
        end = process_facts(aigw.proc.pid)
        traffic.stop.set()
        for thread in traffic.threads:
            thread.join()
    finally:
        for service in reversed(services):
            run.stop(service)
    return render(args, traffic, start, end, reloaded)


def wait_generation(admin_port: int, number: int) -> bool:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        _, body = run.http_get(f"http://127.0.0.1:{admin_port}/readyz")
        if json.loads(body).get("config_generation") == number:
            return True
        time.sleep(0.2)
    return False


def render(args: argparse.Namespace, traffic: Traffic, start: dict[int, tuple[int, int]],
           end: dict[int, tuple[int, int]], reloaded: bool) -> tuple[str, bool]:
    ok = reloaded and not traffic.unexpected
    lines = [
        "# aigw soak", "",
        f"- date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M:%S UTC')}; "
        f"{args.minutes} min, {args.clients} clients, workers: {args.workers}; "
        f"load average {os.getloadavg()[0]:.2f} at the end",
        f"- requests: {sum(traffic.counts.values()):,} "
        f"({', '.join(f'{k}: {v:,}' for k, v in traffic.counts.items())})",
        f"- config reload midway: {'generation 2 served' if reloaded else 'NOT seen'}",
        f"- responses with another status than expected: {sum(traffic.unexpected.values())}"
        + (f" ({dict(traffic.unexpected)})" if traffic.unexpected else ""),
        "",
        "| process | RSS after warm-up | RSS at end | growth | fds after warm-up | fds at end |",
        "|---|---|---|---|---|---|",
    ]
    for pid, (rss0, fds0) in start.items():
        rss1, fds1 = end.get(pid, (0, 0))
        growth = (rss1 - rss0) / rss0 if rss0 and rss1 else None
        if growth is None or growth >= RSS_GROWTH_GOAL:
            ok = False
        shown = "gone" if growth is None else f"{growth:+.1%}"
        lines.append(f"| {pid} | {rss0 / 1024:.1f} MiB | {rss1 / 1024:.1f} MiB | {shown} | "
                     f"{fds0} | {fds1} |")
    lines += ["", f"Goal: RSS growth < {RSS_GROWTH_GOAL:.0%} per process, every status as "
              f"expected, the reload served: {'met' if ok else 'NOT met'}."]
    return "\n".join(lines) + "\n", ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--workers", default="1")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="aigw-soak-"))
    try:
        text, ok = soak(args, workdir)
    except run.BenchError as exc:
        print(f"soak: {exc}", file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    path = run.write_report(text, dt.datetime.now(dt.UTC), "soak-")
    print(text + f"\nwritten to {path.relative_to(run.REPO_DIR)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
