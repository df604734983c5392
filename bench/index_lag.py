"""Event-loop lag while PDPP reads a big stream and builds its search indexes (issue 22).

An upstream (`records_upstream.py`) serves N records of ~1.1 KB; one aigw worker serves them
as a PDPP stream (lexical and semantic fields), as an AIDRE collection, and its discovery
document. Open-loop traffic (a fixed rate per route: discovery, AIDRE search, a PDPP listing)
runs while the first PDPP lexical and semantic searches read the whole stream and build its
indexes, then `--steady` seconds more, then while a second pair of searches runs on the built
indexes. The gateway's `aigw_event_loop_lag_seconds` histogram (and its count of full garbage
collections) is scraped between these windows: the report gives the lag's p99 and largest
bucket per window, the traffic's latencies, the searches' times and the gateway's RSS.

Usage: .venv/bin/python bench/index_lag.py [--records N] [--rate R] [--steady S] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import hashlib
import json
import os
import re
import secrets
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import loop_profile
import run
import yaml
from loop_profile import Profiler
from open_loop import Probe, Sample, percentile, send, steady
from prom_histogram import Histogram, parse_histogram, sample_value
from run import BenchError, Service

API_KEY = "index-lag-" + secrets.token_hex(16)
HEADERS = {"X-API-Key": API_KEY}
STREAM = "records"
LAG_METRIC = "aigw_event_loop_lag_seconds"
FULL_GCS = 'python_gc_collections_total{generation="2"}'
LAG_BUDGET = 0.050  # issue 22: p99 under 50 ms
STALLS = 8  # with --profile: the slowest discovery requests of the build, looked into
UPSTREAM_READY_TIMEOUT = 120.0  # the upstream makes its N records before it answers

TRAFFIC = (
    Probe("discovery `GET /.well-known/ai`", "GET", "/.well-known/ai"),
    Probe("AIDRE `POST /search`", "POST", "/search",
          json.dumps({"query": "refund", "collection": STREAM, "top_k": 5}).encode(),
          "application/aidre+json"),
    Probe(f"PDPP `GET /v1/streams/{STREAM}/records?limit=10`", "GET",
          f"/v1/streams/{STREAM}/records?limit=10"),
)


def searches(query: str, which: str) -> dict[str, Probe]:
    """A lexical and a semantic PDPP search of the stream, by kind."""
    q = query.replace(" ", "%20")
    return {"lexical": Probe(f"PDPP lexical search ({which})", "GET",
                             f"/v1/search?q={q}&streams[]={STREAM}&limit=10"),
            "semantic": Probe(f"PDPP semantic search ({which})", "GET",
                              f"/v1/search/semantic?q={q}&streams[]={STREAM}&limit=10")}


FIRST = searches("refund damaged parcel", "first: reads and indexes the stream")
SECOND = searches("password reset email", "second: on the built indexes")


@dataclass
class LagOptions:
    records: int
    page_size: int
    rate: float
    steady: float
    second: bool
    timeout: float
    lexical: tuple[str, ...]
    semantic: tuple[str, ...]
    profile: bool
    load_core: int
    proxy_core: int
    aigw: str | None
    embedder: str = "hash"

    def fields(self, kind: str) -> tuple[str, ...]:
        """The stream's fields of a kind of search (none: that search is not served)."""
        return self.lexical if kind == "lexical" else self.semantic


def parse_args(argv: list[str] | None) -> LagOptions:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=60_000, help="records in the stream")
    parser.add_argument("--page-size", type=int, default=1000, help="the stream's page_size")
    parser.add_argument("--rate", type=float, default=20.0, help="requests/s per traffic route")
    parser.add_argument("--steady", type=float, default=10.0,
                        help="seconds of traffic alone after the build")
    parser.add_argument("--second", action=argparse.BooleanOptionalAction, default=True,
                        help="a second lexical and semantic search on the built indexes")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="the most seconds a search may take")
    parser.add_argument("--lexical", default="title,body", help="the stream's lexical_fields")
    parser.add_argument("--semantic", default="title,body", help="the stream's semantic_fields")
    parser.add_argument("--profile", action="store_true",
                        help="py-spy record the gateway during the build: a summary of what "
                        "held the loop, and the speedscope file in bench/results/")
    parser.add_argument("--load-core", type=int, default=0,
                        help="core for the upstream, the traffic and py-spy")
    parser.add_argument("--proxy-core", type=int, default=1, help="core for aigw")
    parser.add_argument("--aigw", help="aigw executable (default: .venv/bin/aigw, else PATH)")
    parser.add_argument("--embedder", default="hash", choices=["hash", "wordllama"],
                        help="the semantic search's embedder (pdpp.semantic.embedder)")
    args = parser.parse_args(argv)
    return LagOptions(
        records=args.records, page_size=args.page_size, rate=args.rate, steady=args.steady,
        second=args.second, timeout=args.timeout,
        lexical=tuple(f for f in args.lexical.split(",") if f),
        semantic=tuple(f for f in args.semantic.split(",") if f), profile=args.profile,
        load_core=args.load_core, proxy_core=args.proxy_core, aigw=args.aigw or run.aigw_bin(),
        embedder=args.embedder)


def check_tools(opts: LagOptions) -> None:
    if shutil.which("taskset") is None:
        raise BenchError("taskset is not installed (util-linux).")
    allowed = os.sched_getaffinity(0)
    for core in (opts.load_core, opts.proxy_core):
        if core not in allowed:
            raise BenchError(f"core {core} is not available (allowed: {sorted(allowed)}).")
    if opts.load_core == opts.proxy_core:
        raise BenchError("--load-core and --proxy-core must differ.")
    if opts.aigw is None:
        raise BenchError("aigw is not installed (expected .venv/bin/aigw or aigw on PATH).")
    if opts.profile and py_spy() is None:
        raise BenchError("--profile needs py-spy: .venv/bin/pip install py-spy")


def py_spy() -> str | None:
    venv = run.REPO_DIR / ".venv" / "bin" / "py-spy"
    return str(venv) if venv.exists() else shutil.which("py-spy")


# --------------------------------------------------------------------------- processes


def start_upstream(opts: LagOptions, workdir: Path) -> tuple[Service, int]:
    port = run.free_port()
    cmd = [run.python_bin(), "-m", "uvicorn", "records_upstream:app", "--app-dir",
           str(run.BENCH_DIR), "--host", "127.0.0.1", "--port", str(port), "--loop", "uvloop",
           "--http", "httptools", "--no-access-log", "--log-level", "warning"]
    os.environ["AIGW_BENCH_RECORDS"] = str(opts.records)
    service = run.spawn("upstream", cmd, opts.load_core, workdir)
    try:
        run.wait_ready(service, f"http://127.0.0.1:{port}/health", UPSTREAM_READY_TIMEOUT)
    except BaseException:
        run.stop(service)
        raise
    return service, port


def aigw_config(opts: LagOptions, upstream_port: int, port: int, admin_port: int) -> str:
    """The upstream as a PDPP stream, an AIDRE collection and the discovery document; one
    owner API key; no rate limits; access log off."""
    hit = {"id": "id", "text": "body", "fields": {"title": "title", "category": "category"},
           "metadata": {"updated_at": "updated_at"}}
    text_search = {"upstream": "records", "path": "/records", "mapping": hit,
                   "query": {"q": "{query}", "_start": "{offset}", "_limit": "{limit}"}}
    config = {
        "version": 1,
        "listen": {"host": "127.0.0.1", "port": port},
        "admin": {"host": "127.0.0.1", "port": admin_port},
        "public_base_url": f"http://127.0.0.1:{port}",
        "upstreams": {"records": {"url": f"http://127.0.0.1:{upstream_port}",
                                  "health_path": "/health", "timeout": {"read": 30}}},
        "auth": {"api_keys": {"header": "X-API-Key", "keys": [
            {"sha256": hashlib.sha256(API_KEY.encode()).hexdigest(), "subject": "bench-owner",
             "client_id": "bench", "kind": "owner", "scopes": ["records:read"]}]}},
        "service": {"name": "Index lag bench", "description": "Generated help-centre records.",
                    "organization": {"name": "aigw bench", "url": "https://example.com"}},
        "ai_endpoint": {"capabilities": []},
        "aidre": {"default_collection": STREAM, "cursor_secret": secrets.token_hex(32),
                  "collections": {STREAM: {
                      "description": "Generated help-centre records.", "visibility": "public",
                      "text_search": text_search,
                      "chunk": {"upstream": "records", "path": "/records/{id}",
                                "mapping": hit}}}},
        "pdpp": {"cursor_secret": secrets.token_hex(32), "refresh_seconds": 86400,
                 "semantic": {"embedder": {"provider": opts.embedder}},
                 # a folder of this run's own: never an index a previous run left
                 "index": {"path": tempfile.mkdtemp(prefix="aigw-index-lag-")},
                 "streams": {STREAM: stream_config(opts)}},
        "logging": {"level": "warning", "access_log": False},
    }
    return yaml.safe_dump(config, sort_keys=False)


def stream_config(opts: LagOptions) -> dict[str, Any]:
    fields = {name: {"path": name} for name in ("title", "body", "category", "author")}
    return {
        "connector_id": "bench-records", "description": "Generated help-centre records.",
        "primary_key": "id", "cursor_field": "updated_at",
        "range_filters": {"updated_at": ["gte", "lt"]},
        "fields": {"id": {"path": "id", "required": True}, **fields,
                   "tags": {"path": "tags", "type": "array"},
                   "updated_at": {"path": "updated_at", "format": "date-time"}},
        "records": {"upstream": "records", "path": "/records", "mapping": {"id": "id"},
                    "query": {"_start": "{offset}", "_limit": "{limit}"}},
        "record": {"upstream": "records", "path": "/records/{id}", "mapping": {"id": "id"}},
        "page_size": opts.page_size, "max_records": max(opts.records, 1),
        "search": {"lexical_fields": list(opts.lexical), "semantic_fields": list(opts.semantic)},
    }


def start_aigw(opts: LagOptions, upstream_port: int, workdir: Path) -> tuple[Service, int, int]:
    port, admin_port = run.free_port(), run.free_port()
    config = workdir / "aigw-index-lag.yaml"
    config.write_text(aigw_config(opts, upstream_port, port, admin_port))
    service = run.spawn_ready("aigw", [str(opts.aigw), "run", "--config", str(config)],
                              opts.proxy_core, workdir, f"http://127.0.0.1:{admin_port}/readyz")
    return service, port, admin_port


def check_routes(port: int) -> None:
    """Discovery and AIDRE answer 200 (not the PDPP listing: it would read the stream before
    the measured window)."""
    for probe in TRAFFIC[:2]:
        status, body = call(port, probe)
        if status != 200:
            raise BenchError(f"{probe.name} gave {status}: {body[:300].decode(errors='replace')}")


def call(port: int, probe: Probe) -> tuple[int, bytes]:
    import urllib.error
    import urllib.request

    headers = {**HEADERS, **({"Content-Type": probe.content_type} if probe.content_type else {})}
    request = urllib.request.Request(f"http://127.0.0.1:{port}{probe.path}", method=probe.method,
                                     data=probe.body or None, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def rss_mib(pid: int) -> float:
    """Resident memory of pid and the processes below it, MiB."""
    total = 0
    for member in run.process_tree(pid):
        with contextlib.suppress(OSError):
            status = Path(f"/proc/{member}/status").read_text()
            found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
            total += int(found.group(1)) if found else 0
    return total / 1024


# --------------------------------------------------------------------------- the run


@dataclass(frozen=True)
class Scrape:
    """The gateway at one moment: its lag histogram, full collections, RSS and CPU time."""

    at: float  # the traffic loop's clock
    lag: Histogram
    full_gcs: float | None  # None: the process does not export them
    rss_mib: float
    cpu_s: float


@dataclass
class Figures:
    scrapes: list[Scrape] = field(default_factory=list)
    windows: list[str] = field(default_factory=list)  # windows[i]: scrapes[i] to [i + 1]
    traffic: list[Sample] = field(default_factory=list)
    searches: list[Sample] = field(default_factory=list)
    upstream_requests: dict[str, int] = field(default_factory=dict)
    profiled_from: float = 0.0  # when py-spy started, on the traffic loop's clock
    profile: list[str] = field(default_factory=list)

    def slowest(self, probe: Probe, count: int) -> list[tuple[float, float]]:
        """The `count` slowest requests of `probe` during the build: (due, latency), due in
        seconds since py-spy started."""
        built = self.scrapes[1].at
        found = [s for s in self.traffic if s.probe == probe.name and s.due < built]
        found.sort(key=lambda s: -s.latency)
        return sorted((s.due - self.profiled_from, s.latency) for s in found[:count])


def scrape(admin_port: int, pid: int, at: float) -> Scrape:
    status, body = run.http_get(f"http://127.0.0.1:{admin_port}/metrics", timeout=30)
    text = body.decode()
    lag = parse_histogram(text, LAG_METRIC)
    if status != 200 or lag is None:
        raise BenchError(f"GET /metrics gave {status} without {LAG_METRIC}")
    return Scrape(at, lag, sample_value(text, FULL_GCS), rss_mib(pid), run.cpu_seconds(pid))


async def drive(opts: LagOptions, port: int, admin_port: int, pid: int,
                profiler: Profiler | None) -> Figures:
    """Scrape; traffic and the first searches until both answered; scrape; traffic alone for
    `--steady` s; scrape; the second searches until both answered; scrape."""
    loop, base = asyncio.get_running_loop(), f"http://127.0.0.1:{port}"
    figures, stop = Figures(), asyncio.Event()

    async def mark(window: str | None) -> None:
        figures.scrapes.append(await asyncio.to_thread(scrape, admin_port, pid, loop.time()))
        if window:
            figures.windows.append(window)

    async def answered(probe: Probe, due: float) -> Sample:
        """The probe sent again while the gateway says the stream is being indexed (503
        index_building, after waiting 10 s for it): its time runs from the first try."""
        while True:
            sample = await send(session, base, probe, due, opts.timeout, HEADERS)
            if sample.status != 503 or loop.time() - due > opts.timeout:
                return sample
            await asyncio.sleep(1.0)

    async def search(pair: dict[str, Probe]) -> None:
        due = loop.time()
        figures.searches += await asyncio.gather(
            *(answered(probe, due) for kind, probe in pair.items() if opts.fields(kind)))

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        await mark(None)
        if profiler is not None:
            profiler.start()
            figures.profiled_from = loop.time()
        runners = [asyncio.create_task(steady(session, base, probe, opts.rate, HEADERS, stop,
                                              figures.traffic)) for probe in TRAFFIC]
        await search(FIRST)
        if profiler is not None:
            await asyncio.to_thread(profiler.stop)
        await mark("during the build (first searches)")
        await asyncio.sleep(opts.steady)
        await mark("traffic alone, after the build")
        if opts.second:
            await search(SECOND)
            await mark("second searches, on the built indexes")
        stop.set()
        await asyncio.gather(*runners)  # requests still owed count in the window they were due
    return figures


# --------------------------------------------------------------------------- report


def fmt_ms(seconds: float) -> str:
    return run.fmt_ms(seconds * 1000)


def fmt_bound(seconds: float) -> str:
    if seconds == float("inf"):
        return "+Inf"
    return f"{seconds * 1000:g} ms" if seconds < 1 else f"{seconds:g} s"


def lag_rows(figures: Figures) -> list[str]:
    budget = fmt_bound(LAG_BUDGET)
    lines = [f"| window | seconds | ticks | lag p99 | p99 < {budget} | lag p50 | mean | largest "
             f"(bucket) | ticks over {budget} | full GCs | gateway CPU |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, name in enumerate(figures.windows):
        start, end = figures.scrapes[i], figures.scrapes[i + 1]
        lag = end.lag.minus(start.lag)
        p99 = lag.quantile(0.99)
        low, high = lag.largest()
        gcs = "-" if start.full_gcs is None or end.full_gcs is None \
            else f"{end.full_gcs - start.full_gcs:.0f}"
        lines.append(
            f"| {name} | {end.at - start.at:.1f} | {lag.total:.0f} | {fmt_ms(p99)} | "
            f"{'yes' if p99 < LAG_BUDGET else '**no**'} | {fmt_ms(lag.quantile(0.5))} | "
            f"{fmt_ms(lag.mean())} | {fmt_bound(low)} to {fmt_bound(high)} | "
            f"{lag.above(LAG_BUDGET):.0f} | {gcs} | "
            f"{end.cpu_s - start.cpu_s:.1f} s |")
    return lines


def traffic_rows(figures: Figures) -> list[str]:
    lines = ["| route | window | requests | not 200 | p50 | p99 | max |",
             "|---|---|---|---|---|---|---|"]
    for probe in TRAFFIC:
        for i, name in enumerate(figures.windows):
            low, high = figures.scrapes[i].at, figures.scrapes[i + 1].at
            got = [s for s in figures.traffic if s.probe == probe.name and low <= s.due < high]
            if not got:
                lines.append(f"| {probe.name} | {name} | 0 | - | - | - | - |")
                continue
            latencies = [s.latency for s in got]
            lines.append(f"| {probe.name} | {name} | {len(got)} | "
                         f"{sum(1 for s in got if s.status != 200)} | "
                         f"{fmt_ms(percentile(latencies, 0.5))} | "
                         f"{fmt_ms(percentile(latencies, 0.99))} | {fmt_ms(max(latencies))} |")
    return lines


def report(figures: Figures, opts: LagOptions, started: dt.datetime) -> str:
    rss = ", ".join(f"{s.rss_mib:,.0f}" for s in figures.scrapes)
    lines = [
        "# aigw event-loop lag while a PDPP index builds",
        "",
        f"- date: {started.strftime('%Y-%m-%d %H:%M:%S UTC')}; machine: {os.uname().nodename}, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the end",
        f"- stream: {opts.records:,} records of ~1.1 KB (`records_upstream.py`), page_size "
        f"{opts.page_size}, lexical_fields [{', '.join(opts.lexical)}], semantic_fields "
        f"[{', '.join(opts.semantic)}]",
        f"- aigw: `aigw run`, one worker, on core {opts.proxy_core}; the upstream and the traffic "
        f"on core {opts.load_core}",
        f"- traffic: {opts.rate:g} requests/s per route, open loop (latency counted from when "
        "each was due)",
        f"- upstream requests: {json.dumps(figures.upstream_requests, sort_keys=True)}",
        f"- gateway RSS at each scrape (MiB): {rss}",
        "",
        "| search | status | time to the answer |",
        "|---|---|---|",
        *(f"| {s.probe} | {s.status} | {s.latency:.2f} s |" for s in figures.searches),
        "",
        f"`{LAG_METRIC}` (a tick due every 0.1 s; p50 and p99 interpolated within the "
        "histogram's buckets, as Prometheus' histogram_quantile):",
        "",
        *lag_rows(figures),
        "",
        *traffic_rows(figures),
    ]
    if figures.profile:
        lines += ["", "## What held the loop during the build (py-spy)", "", *figures.profile]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- main


def measure(opts: LagOptions, workdir: Path, started: dt.datetime) -> Figures:
    upstream, upstream_port = start_upstream(opts, workdir)
    try:
        aigw, port, admin_port = start_aigw(opts, upstream_port, workdir)
        profile = run.RESULTS_DIR / f"index-lag-{started:%Y%m%dT%H%M%SZ}.speedscope.json"
        profiler = None
        try:
            check_routes(port)
            if opts.profile:
                run.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
                profiler = Profiler(str(py_spy()), aigw.proc.pid, profile, workdir,
                                    opts.load_core)
            os.sched_setaffinity(0, {opts.load_core})
            print(f"- measuring: {opts.records:,} records, {opts.rate:g} requests/s per route",
                  flush=True)
            figures = asyncio.run(drive(opts, port, admin_port, aigw.proc.pid, profiler))
            _, body = run.http_get(f"http://127.0.0.1:{upstream_port}/__stats")
            figures.upstream_requests = json.loads(body)["requests"]
            if profiler is not None:
                slow = figures.slowest(TRAFFIC[0], STALLS)
                figures.profile = [*loop_profile.summary(profile, slow), "",
                                   f"Samples: `{profile.relative_to(run.REPO_DIR)}`"]
            return figures
        finally:
            if profiler is not None:
                profiler.stop()
            run.stop(aigw)
    finally:
        run.stop(upstream)


def main(argv: list[str] | None = None) -> int:
    """0: measured; 1: a search did not answer 200; 2: the run could not start."""
    opts = parse_args(argv)

    def measured(workdir: Path, started: dt.datetime) -> Figures:
        check_tools(opts)
        return measure(opts, workdir, started)

    return run.frame(measured, lambda figures, started: report(figures, opts, started),
                     "index-lag-",
                     lambda figures: 1 if any(s.status != 200 for s in figures.searches) else 0)

if __name__ == "__main__":
    sys.exit(main())
