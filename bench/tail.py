"""Tail latency under mixed load (issue 24, target 4): the discovery document's p50 and p99
alone, under AIDRE, PDPP and AIP traffic, and under that traffic while a PDPP index refreshes.

pipelines.py's set-up (config/demo.yaml, JWT auth, a Redis rate limit, the replay upstream)
plus a stream of `--records` generated records (`records_upstream.py`) served as the PDPP
stream `records` (lexical and semantic search, `refresh_seconds` = `--refresh`). Its first
read and index build happen before anything is measured. Open-loop traffic (each request sent
when due, its latency counted from then; see open_loop.py) in three windows:

1. **discovery alone**: `GET /.well-known/ai` (no credentials: it is a public document);
2. **mixed traffic**: discovery plus AIDRE text search, AIP retrieve, PDPP search and listing
   of the demo's small `articles` stream, each at its rate, every request with the JWT;
3. **mixed traffic + index refresh**: the same plus a listing of the big `records` stream,
   which starts a background refresh whenever the gateway's copy is older than `--refresh` s;
   before each, `--churn` records change upstream, so the refresh re-reads every page and
   indexes those records again.

Per window: each route's requests, p50, p99 and max, `aigw_event_loop_lag_seconds` (a tick
every 0.1 s: p50, p99, largest bucket, ticks over 50 ms), refreshes done, gateway CPU. The
goal is discovery p99 ≤ 2 times its p50 in window 3. `--profile` records the gateway with py-spy
during windows 2 and 3 and summarises what held the loop while the slowest discovery requests
waited.

Usage: .venv/bin/python bench/tail.py [--records N] [--refresh S] [--churn N] [--scale X]
                                      [--alone S] [--mixed S] [--refreshing S] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime as dt
import os
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import index_lag
import loop_profile
import pipelines
import run
import yaml
from loop_profile import Profiler
from open_loop import Probe, Sample, percentile, steady
from prom_histogram import Histogram, parse_histogram
from run import BenchError, Service

LAG_METRIC = "aigw_event_loop_lag_seconds"
DURATION_METRIC = "aigw_request_duration_seconds"
DISCOVERY_SURFACE = "aiendpoint"
TICK = 0.010  # the harness's own loop-lag probe: a tick due every 10 ms
LAG_BUDGET = 0.050
GOAL = 2.0  # discovery p99 / p50, at most
STREAM = "records"
DISCOVERY = Probe("discovery `GET /.well-known/ai`", "GET", "/.well-known/ai")
BIG_LISTING = Probe(f"PDPP `GET /v1/streams/{STREAM}/records?limit=10`", "GET",
                    f"/v1/streams/{STREAM}/records?limit=10")
STALLS = 8  # with --profile: the slowest discovery requests of window 3, looked into


def _probe(name: str) -> Probe:
    route = next(r for r in pipelines.ROUTES if r.name == name)
    return Probe(f"{route.name} `{route.method} {route.path.split('?')[0]}`", route.method,
                 route.path, route.body.encode(), route.content_type if route.body else "")


# (probe, requests/s at --scale 1, sent with the JWT)
MIXED = [
    (DISCOVERY, 50.0, False),
    (_probe("AIDRE text search"), 20.0, True),
    (_probe("AIP retrieve"), 10.0, True),
    (_probe("PDPP search"), 10.0, True),
    (_probe("PDPP records"), 10.0, True),
]


@dataclass
class TailOptions:
    records: int
    refresh: float
    churn: int
    scale: float
    alone: float
    mixed: float
    refreshing: float
    profile: bool
    load_core: int
    proxy_core: int
    aigw: str | None
    connections: int = 32  # what pipelines' helpers expect of an Options
    duration: int = 1


@dataclass(frozen=True)
class Window:
    name: str
    probes: list[tuple[Probe, float, bool]]
    seconds: float
    churn: bool = False


@dataclass
class Scrape:
    at: float
    lag: Histogram
    discovery: Histogram  # the gateway's own time for discovery requests
    refreshes: dict[str, float]
    cpu_s: float


@dataclass
class Figures:
    windows: list[Window] = field(default_factory=list)
    scrapes: list[Scrape] = field(default_factory=list)  # before each window, and at the end
    samples: list[list[Sample]] = field(default_factory=list)  # per window
    harness_lag: list[list[float]] = field(default_factory=list)  # per window, seconds
    # the slowest discovery requests of windows 2 and 3: (s into the py-spy record, latency)
    stalls: list[tuple[float, float]] = field(default_factory=list)
    profile: list[str] = field(default_factory=list)
    build_seconds: float = 0.0


def parse_args(argv: list[str] | None) -> TailOptions:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000, help="records in the big stream")
    parser.add_argument("--refresh", type=float, default=10.0,
                        help="pdpp.refresh_seconds: a refresh at most this often")
    parser.add_argument("--churn", type=int, default=1_000,
                        help="records changed upstream before each refresh")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every rate")
    parser.add_argument("--alone", type=float, default=15.0, help="seconds of window 1")
    parser.add_argument("--mixed", type=float, default=30.0, help="seconds of window 2")
    parser.add_argument("--refreshing", type=float, default=60.0, help="seconds of window 3")
    parser.add_argument("--profile", action="store_true",
                        help="py-spy the gateway during windows 2 and 3 (summary in the report)")
    parser.add_argument("--load-core", type=int, default=0,
                        help="core for the upstreams, Redis, the issuer and the traffic")
    parser.add_argument("--proxy-core", type=int, default=1, help="core for aigw")
    parser.add_argument("--aigw", help="aigw executable (default: .venv/bin/aigw, else PATH)")
    args = parser.parse_args(argv)
    return TailOptions(args.records, args.refresh, args.churn, args.scale, args.alone,
                       args.mixed, args.refreshing, args.profile, args.load_core,
                       args.proxy_core, args.aigw or run.aigw_bin())


def windows(opts: TailOptions) -> list[Window]:
    rated = [(probe, rate * opts.scale, jwt) for probe, rate, jwt in MIXED]
    return [Window("discovery alone", rated[:1], opts.alone),
            Window("mixed traffic", rated, opts.mixed),
            Window("mixed traffic + index refresh",
                   [*rated, (BIG_LISTING, 5.0 * opts.scale, True)], opts.refreshing, True)]


# --------------------------------------------------------------------------- processes


def aigw_yaml(setup: pipelines.Setup, opts: TailOptions, records_port: int, port: int,
              admin_port: int) -> str:
    """pipelines' config, plus the records upstream as the PDPP stream `records` (readable
    with the run's token) and `refresh_seconds`."""
    config: dict[str, Any] = yaml.safe_load(pipelines.aigw_yaml(setup, port, admin_port))
    config["upstreams"][STREAM] = {"url": f"http://127.0.0.1:{records_port}",
                                   "timeout": {"read": 30}}
    lag_opts = index_lag.LagOptions(
        records=opts.records, page_size=1000, rate=0, steady=0, second=False, timeout=0,
        lexical=("title", "body"), semantic=("title", "body"), profile=False,
        load_core=opts.load_core, proxy_core=opts.proxy_core, aigw=opts.aigw)
    pdpp = config["pdpp"]
    pdpp["streams"][STREAM] = index_lag.stream_config(lag_opts)
    pdpp["refresh_seconds"] = opts.refresh
    pdpp["index"] = {"path": tempfile.mkdtemp(prefix="aigw-tail-index-")}
    config["auth"].setdefault("scope_grants", {}).setdefault("articles:read", {})[STREAM] = "*"
    return yaml.safe_dump(config, sort_keys=False)


def start_records(opts: TailOptions, workdir: Path) -> tuple[Service, int]:
    lag_opts = dataclasses.replace(index_lag.parse_args([]), records=opts.records,
                                   load_core=opts.load_core)
    return index_lag.start_upstream(lag_opts, workdir)


def start_aigw(setup: pipelines.Setup, opts: TailOptions, records_port: int,
               workdir: Path) -> tuple[Service, int, int]:
    port, admin_port = run.free_port(), run.free_port()
    config = workdir / "aigw-tail.yaml"
    config.write_text(aigw_yaml(setup, opts, records_port, port, admin_port))
    service = run.spawn_ready("aigw", [str(opts.aigw), "run", "--config", str(config)],
                              opts.proxy_core, workdir, f"http://127.0.0.1:{admin_port}/readyz")
    return service, port, admin_port


# --------------------------------------------------------------------------- the run


def scrape(admin_port: int, pid: int, at: float) -> Scrape:
    status, body = run.http_get(f"http://127.0.0.1:{admin_port}/metrics", timeout=30)
    text = body.decode()
    lag = parse_histogram(text, LAG_METRIC)
    if status != 200 or lag is None:
        raise BenchError(f"GET /metrics gave {status} without {LAG_METRIC}")
    refreshes = {}
    for line in text.splitlines():
        if line.startswith("aigw_index_refreshes_total{"):
            labels, value = line.rsplit(" ", 1)
            refreshes[labels.split("{", 1)[1].rstrip("}")] = float(value)
    label = f'surface="{DISCOVERY_SURFACE}"'
    own = "\n".join(line.replace(f",{label}", "").replace(f"{{{label}}}", "")
                    for line in text.splitlines() if label in line)
    discovery = parse_histogram(own, DURATION_METRIC) or Histogram((), 0.0, 0.0)
    return Scrape(at, lag, discovery, refreshes, run.cpu_seconds(pid))


async def harness_ticks(stop: asyncio.Event, lags: list[float]) -> None:
    """How late the harness's own loop runs a tick due every TICK s: the part of a measured
    latency that is the load generator's (and the machine's), not the gateway's."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        due = loop.time() + TICK
        await asyncio.sleep(TICK)
        lags.append(max(0.0, loop.time() - due))


async def first_read(session: aiohttp.ClientSession, base: str, token: str) -> float:
    """Read the big stream once (its first read and index build), retrying while the gateway
    answers 503 index_building; the seconds it took."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    while True:
        async with session.get(base + BIG_LISTING.path,
                               headers={"Authorization": f"Bearer {token}"},
                               timeout=aiohttp.ClientTimeout(total=900)) as response:
            await response.read()
            if response.status == 200:
                return loop.time() - started
            if response.status != 503:
                raise BenchError(f"{BIG_LISTING.name} gave {response.status}")
        await asyncio.sleep(1.0)


async def churn_every(records_port: int, count: int, every: float,
                      stop: asyncio.Event) -> None:
    """Change `count` records upstream every `every` s (once the gateway's copy is due); a
    connection each time (an idle one may be closed by the upstream as it is reused)."""
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(connector=connector) as session:
        while not stop.is_set():
            url = f"http://127.0.0.1:{records_port}/__churn?n={count}"
            async with session.post(url) as answer:
                await answer.read()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every)


async def drive(opts: TailOptions, setup: pipelines.Setup, port: int, admin_port: int,
                records_port: int, pid: int, profiler: Profiler | None) -> Figures:
    loop, base = asyncio.get_running_loop(), f"http://127.0.0.1:{port}"
    figures = Figures(windows=windows(opts))
    profiling, profiled_from = False, 0.0
    jwt = {"Authorization": f"Bearer {setup.issuer.token}"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        figures.build_seconds = await first_read(session, base, setup.issuer.token)
        for window in figures.windows:
            figures.scrapes.append(await asyncio.to_thread(scrape, admin_port, pid, loop.time()))
            stop, samples, ticks = asyncio.Event(), [], []
            tasks = [asyncio.create_task(steady(session, base, probe, rate, jwt if with_jwt
                                                else {}, stop, samples))
                     for probe, rate, with_jwt in window.probes]
            tasks.append(asyncio.create_task(harness_ticks(stop, ticks)))
            if window.churn:
                tasks.append(asyncio.create_task(
                    churn_every(records_port, opts.churn, opts.refresh, stop)))
            if profiler is not None and len(window.probes) > 1 and not profiling:
                profiler.start()
                profiling, profiled_from = True, loop.time()
            await asyncio.sleep(window.seconds)
            stop.set()
            await asyncio.gather(*tasks)
            figures.samples.append(samples)
            figures.harness_lag.append(ticks)
        figures.scrapes.append(await asyncio.to_thread(scrape, admin_port, pid, loop.time()))
    if profiling and profiler is not None:
        await asyncio.to_thread(profiler.stop)
        mixed = [s for samples in figures.samples[1:] for s in samples
                 if s.probe == DISCOVERY.name]
        slow = sorted(mixed, key=lambda s: -s.latency)[:STALLS]
        figures.stalls = sorted((s.due - profiled_from, s.latency) for s in slow)
    return figures


# --------------------------------------------------------------------------- report


def route_rows(figures: Figures) -> list[str]:
    lines = ["| window | route | rate | requests | not 200 | p50 | p99 | max | p99 / p50 |",
             "|---|---|---|---|---|---|---|---|---|"]
    for window, samples in zip(figures.windows, figures.samples, strict=True):
        for probe, rate, _ in window.probes:
            got = [s.latency for s in samples if s.probe == probe.name]
            if not got:
                continue
            bad = Counter(s.status for s in samples if s.probe == probe.name and s.status != 200)
            p50, p99 = percentile(got, 0.5), percentile(got, 0.99)
            shown = ", ".join(f"{n} ({status or 'no answer'})" for status, n in bad.items())
            lines.append(f"| {window.name} | {probe.name} | {rate:g}/s | {len(got)} | "
                         f"{shown or 0} | "
                         f"{index_lag.fmt_ms(p50)} | {index_lag.fmt_ms(p99)} | "
                         f"{index_lag.fmt_ms(max(got))} | {p99 / p50:.2f} |")
    return lines


def lag_rows(figures: Figures) -> list[str]:
    budget = index_lag.fmt_bound(LAG_BUDGET)
    lines = [f"| window | ticks | lag p50 | lag p99 | largest (bucket) | ticks over {budget} | "
             "refreshes (ok) | gateway CPU |", "|---|---|---|---|---|---|---|---|"]
    for i, window in enumerate(figures.windows):
        start, end = figures.scrapes[i], figures.scrapes[i + 1]
        lag = end.lag.minus(start.lag)
        low, high = lag.largest()
        done = sum(v - start.refreshes.get(k, 0.0) for k, v in end.refreshes.items()
                   if 'outcome="ok"' in k and f'collection="{STREAM}"' in k)
        lines.append(f"| {window.name} | {lag.total:.0f} | "
                     f"{index_lag.fmt_ms(lag.quantile(0.5))} | "
                     f"{index_lag.fmt_ms(lag.quantile(0.99))} | {index_lag.fmt_bound(low)} to "
                     f"{index_lag.fmt_bound(high)} | {lag.above(LAG_BUDGET):.0f} | {done:.0f} | "
                     f"{end.cpu_s - start.cpu_s:.1f} s |")
    return lines


def inside_rows(figures: Figures) -> list[str]:
    """The gateway's own time for discovery (its histogram) and the harness's loop lag."""
    lines = ["| window | discovery in the gateway: p50 | p99 | over 2.5 ms | harness loop lag: "
             "p50 | p99 | max |", "|---|---|---|---|---|---|---|"]
    for i, window in enumerate(figures.windows):
        own = figures.scrapes[i + 1].discovery.minus(figures.scrapes[i].discovery)
        ticks = figures.harness_lag[i] or [0.0]
        over = own.above(0.0025) / own.total if own.total else 0.0
        lines.append(f"| {window.name} | {index_lag.fmt_ms(own.quantile(0.5))} | "
                     f"{index_lag.fmt_ms(own.quantile(0.99))} | {over:.1%} | "
                     f"{index_lag.fmt_ms(percentile(ticks, 0.5))} | "
                     f"{index_lag.fmt_ms(percentile(ticks, 0.99))} | "
                     f"{index_lag.fmt_ms(max(ticks))} |")
    return lines


def verdict(figures: Figures) -> tuple[str, bool]:
    got = [s.latency for s in figures.samples[-1] if s.probe == DISCOVERY.name]
    if not got:
        return "Goal not measured: no discovery request in the last window.", False
    p50, p99 = percentile(got, 0.5), percentile(got, 0.99)
    met = p99 <= GOAL * p50
    return (f"Goal: discovery p99 ≤ {GOAL:g} times p50 under mixed traffic and an index refresh: "
            f"p99 {index_lag.fmt_ms(p99)} / p50 {index_lag.fmt_ms(p50)} = {p99 / p50:.2f}, "
            f"{'**met**' if met else '**not met**'}."), met


def report(figures: Figures, opts: TailOptions, started: dt.datetime) -> str:
    lines = [
        "# aigw tail latency under mixed load",
        "",
        f"- date: {started.strftime('%Y-%m-%d %H:%M:%S UTC')}; machine: {os.uname().nodename}, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the end",
        f"- aigw: one worker on core {opts.proxy_core}, config/demo.yaml as pipelines.py runs "
        f"it plus the PDPP stream `{STREAM}` ({opts.records:,} records of ~1.1 KB, lexical "
        f"and semantic fields, refresh_seconds {opts.refresh:g}); upstreams, Redis, issuer and "
        f"traffic on core {opts.load_core}",
        f"- first read and index build of `{STREAM}` (before the windows): "
        f"{figures.build_seconds:.1f} s",
        f"- window 3: {opts.churn:,} records change upstream every {opts.refresh:g} s",
        "- traffic: open loop, latency counted from when each request was due",
        "",
        *route_rows(figures),
        "",
        f"`{LAG_METRIC}` per window (p50 and p99 interpolated within buckets, as "
        "histogram_quantile):",
        "",
        *lag_rows(figures),
        "",
        f"Where a discovery request's time went: in the gateway (`{DURATION_METRIC}`, "
        f"surface {DISCOVERY_SURFACE}, from the start of its handling to the end of its "
        f"response; buckets 1, 2.5, 5, 10 ms) and in the load generator (its own loop lag, "
        f"a tick every {TICK * 1000:g} ms, on core {opts.load_core} with the upstreams):",
        "",
        *inside_rows(figures),
        "",
        verdict(figures)[0],
    ]
    if figures.profile:
        lines += ["", "## What held the loop in windows 2 and 3 (py-spy)", "", *figures.profile]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- main


def measure(opts: TailOptions, workdir: Path, started: dt.datetime) -> Figures:
    options = run.Options(duration=1, connections=32, transports=["httptools"],
                          load_core=opts.load_core, proxy_core=opts.proxy_core, aigw=opts.aigw)
    started_services, setup = pipelines.start_support(options, workdir)  # type: ignore[arg-type]
    profiler = None
    try:
        records, records_port = start_records(opts, workdir)
        started_services.append(records)
        aigw, port, admin_port = start_aigw(setup, opts, records_port, workdir)
        started_services.append(aigw)
        pipelines.discover(setup, port)
        profile = run.RESULTS_DIR / f"tail-{started:%Y%m%dT%H%M%SZ}.speedscope.json"
        if opts.profile:
            run.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
            profiler = Profiler(str(index_lag.py_spy()), aigw.proc.pid, profile, workdir,
                                opts.load_core)
        os.sched_setaffinity(0, {opts.load_core})
        print(f"- measuring: {opts.records:,} records, windows of {opts.alone:g}, "
              f"{opts.mixed:g} and {opts.refreshing:g} s", flush=True)
        figures = asyncio.run(drive(opts, setup, port, admin_port, records_port,
                                    aigw.proc.pid, profiler))
        if profiler is not None:
            figures.profile = [*loop_profile.summary(profile, figures.stalls), "",
                               f"Samples: `{profile.relative_to(run.REPO_DIR)}`"]
        return figures
    finally:
        if profiler is not None:
            profiler.stop()
        for service in reversed(started_services):
            run.stop(service)


def main(argv: list[str] | None = None) -> int:
    """0: the goal met; 1: not met; 2: the run could not start."""
    opts = parse_args(argv)

    def measured(workdir: Path, started: dt.datetime) -> Figures:
        if opts.aigw is None:
            raise BenchError("aigw is not installed (expected .venv/bin/aigw or aigw on PATH).")
        if opts.profile and index_lag.py_spy() is None:
            raise BenchError("--profile needs py-spy: .venv/bin/pip install py-spy")
        return measure(opts, workdir, started)

    return run.frame(measured, lambda figures, started: report(figures, opts, started), "tail-",
                     lambda figures: 0 if verdict(figures)[1] else 1)

if __name__ == "__main__":
    sys.exit(main())
