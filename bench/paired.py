"""Paired comparison: two routes.py scenarios served at the same time, on the same core, under
the same load, so that whatever else the machine does hits both alike.

Both aigw processes run on the proxy core; two wrk processes (one per aigw, each with half the
connections) run together on the load core with the upstream (and the issuer and Redis the
scenarios need). Per round: each side's requests and CPU time, so its CPU per request, and the
ratio B / A; the rounds alternate which side starts first. On a shared machine, a difference of
a few per cent in CPU per request is lost in the drift between two runs measured one after the
other; measured side by side it is not.

With `--aigw-b EXE`, side B runs another aigw build: the same scenario twice compares two
versions of the code (before and after a change) under the same conditions.

Usage: .venv/bin/python bench/paired.py A B [--rounds N] [--duration S] [--connections N]
                                            [--aigw-b EXE]
  e.g. bench/paired.py jwt+ratelimit-redis jwt+ratelimit-redis+tracing-0%
       bench/paired.py open+tracing-0% open+tracing-0% --aigw OLD_BUILD
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import routes
import run
from routes import Issuer, RouteOptions, Scenario
from run import BenchError, Result, Service


@dataclass
class PairOptions(RouteOptions):
    first: str = ""
    second: str = ""
    aigw_b: str | None = None  # side B's aigw executable; None: the same as A's


@dataclass(frozen=True)
class Round:
    a: Result
    b: Result

    failed = False  # run.execute's exit status: a round that could not run raises instead

    @property
    def ratio(self) -> float | None:
        if self.a.cpu_us is None or self.b.cpu_us is None or not self.a.cpu_us:
            return None
        return self.b.cpu_us / self.a.cpu_us


def parse_args(argv: list[str] | None) -> PairOptions:
    parser = run.bench_parser(__doc__.splitlines()[0])
    parser.add_argument("first", help="scenario A (the reference), a routes.py scenario name")
    parser.add_argument("second", help="scenario B")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (the median is reported)")
    parser.add_argument("--aigw-b", help="side B's aigw executable (default: --aigw's)")
    run.add_placement_args(parser)
    args = parser.parse_args(argv)
    base = run.options_from(args, [routes.TRANSPORT])
    return PairOptions(**dataclasses.asdict(base), rounds=max(1, args.rounds),
                       only=(args.first, args.second), first=args.first, second=args.second,
                       aigw_b=args.aigw_b)


def start(scenario: Scenario, upstream_port: int, issuer: Issuer, opts: PairOptions,
          workdir: Path, binary: str | None) -> tuple[Service, int]:
    port = run.free_port()
    extra = routes.scenario_yaml(scenario, issuer, port, upstream_port)
    slug = f"aigw-{port}-" + scenario.name.replace("+", "-").replace("%", "pc")
    service = run.start_aigw(binary, upstream_port, port, routes.TRANSPORT, opts.proxy_core,
                             workdir, extra_config=extra, name=slug)
    try:
        routes.scenario_checks(scenario, port, issuer.token)
    except BaseException:
        run.stop(service)
        raise
    return service, port


def wrk(port: int, seconds: int, connections: int, opts: PairOptions,
        headers: dict[str, str] | None) -> subprocess.Popen[str]:
    cmd = ["taskset", "-c", str(opts.load_core), "wrk", "-t1", f"-c{connections}"]
    for header, value in (headers or {}).items():
        cmd += ["-H", f"{header}: {value}"]
    cmd += [f"-d{seconds}s", "--latency", f"http://127.0.0.1:{port}{run.PATH}"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def side_by_side(sides: list[tuple[Scenario, Service, int]], seconds: int, opts: PairOptions,
                 token: str) -> list[Result]:
    """Both wrk runs at once; each side's result with its CPU per request."""
    connections = max(1, opts.connections // 2)
    before = [run.cpu_seconds(service.proc.pid) for _, service, _ in sides]
    running = [wrk(port, seconds, connections, opts,
                   routes.bearer(token) if scenario.auth else None)
               for scenario, _, port in sides]
    outputs = [proc.communicate(timeout=seconds + 30)[0] for proc in running]
    results = []
    for (scenario, service, _), spent, out, proc in zip(sides, before, outputs, running,
                                                        strict=True):
        if proc.returncode != 0:
            raise BenchError(f"wrk failed ({proc.returncode}):\n{out}")
        result = run.parse_wrk(scenario.name, out)
        if result.requests:
            result.cpu_us = (run.cpu_seconds(service.proc.pid) - spent) * 1e6 / result.requests
        results.append(result)
    return results


def run_all(opts: PairOptions, workdir: Path) -> list[Round]:
    upstream_port = run.free_port()
    upstream = run.start_upstream(upstream_port, opts.load_core, workdir)
    redis, redis_url = routes.start_redis(opts.load_core, workdir)
    try:
        issuer_port = run.free_port()
        issuer_service = routes.start_issuer(issuer_port, upstream_port, opts, workdir)
        try:
            issuer = Issuer(issuer_port, routes.mint_token(opts, workdir / routes.ISSUER_CONFIG))
            found = {s.name: s for s in routes.with_redis(routes.scenarios(opts), redis_url)}
            # the same scenario twice: A/A, what the method reads as a difference where none is
            pair = [found[opts.first], dataclasses.replace(found[opts.second])]
            rounds = []
            for number in range(opts.rounds):
                order = pair if number % 2 == 0 else pair[::-1]
                rounds.append(one_round(order, upstream_port, issuer, opts, workdir, pair))
            return rounds
        finally:
            run.stop(issuer_service)
    finally:
        if redis is not None:
            run.stop(redis)
        run.stop(upstream)


def one_round(order: list[Scenario], upstream_port: int, issuer: Issuer, opts: PairOptions,
              workdir: Path, pair: list[Scenario]) -> Round:
    """Start both (in `order`), warm up and measure them together, stop them."""
    started: list[tuple[Scenario, Service, int]] = []
    try:
        for scenario in order:
            binary = opts.aigw_b if scenario is pair[1] and opts.aigw_b else opts.aigw
            service, port = start(scenario, upstream_port, issuer, opts, workdir, binary)
            started.append((scenario, service, port))
        side_by_side(started, run.WARMUP_SECONDS, opts, issuer.token)
        results = side_by_side(started, opts.duration, opts, issuer.token)
    finally:
        for _, service, _ in started:
            run.stop(service)
    done = Round(*(results if order[0] is pair[0] else results[::-1]))
    print(f"  round: A {run.fmt_us(done.a.cpu_us)}/req ({done.a.rps:,.0f} rps), "
          f"B {run.fmt_us(done.b.cpu_us)}/req ({done.b.rps:,.0f} rps), "
          f"B/A {done.ratio or 0:.3f}", flush=True)
    return done


def report(rounds: list[Round], opts: PairOptions, started: dt.datetime) -> str:
    ratios = [r.ratio for r in rounds if r.ratio is not None]
    lines = [
        "# aigw paired comparison",
        "",
        f"- date: {started.strftime('%Y-%m-%d %H:%M:%S UTC')}; machine: {os.uname().nodename}, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the end",
        f"- A: `{opts.first}` ({opts.aigw}), B: `{opts.second}` ({opts.aigw_b or opts.aigw}); "
        f"both aigw on core {opts.proxy_core} at "
        f"once, each loaded by its own wrk -t1 -c{max(1, opts.connections // 2)} "
        f"-d{opts.duration}s on core {opts.load_core} (with the upstream, issuer and Redis)",
        "",
        "| round | A CPU/request | A rps | B CPU/request | B rps | B / A (CPU) |",
        "|---|---|---|---|---|---|",
    ]
    for number, r in enumerate(rounds, 1):
        lines.append(f"| {number} | {run.fmt_us(r.a.cpu_us)} | {r.a.rps or 0:,.0f} | "
                     f"{run.fmt_us(r.b.cpu_us)} | {r.b.rps or 0:,.0f} | "
                     f"{'-' if r.ratio is None else f'{r.ratio:.3f}'} |")
    if ratios:
        lines += ["", f"Median B / A: **{statistics.median(ratios):.3f}** "
                  f"(range {min(ratios):.3f} to {max(ratios):.3f}, {len(ratios)} rounds)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    return run.execute(opts, run_all, report, prefix="paired-")  # type: ignore[arg-type]


if __name__ == "__main__":
    sys.exit(main())
