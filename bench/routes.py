"""Route benchmark: the cost of aigw's pipeline stages (auth, rate limits, tracing) on one route.

Scenarios, each an aigw process (aiohttp transport, access log off) in front of bench/upstream.py,
measured one at a time with run.py's wrk settings: `open` (no auth), `jwt` (a bearer JWT from the
demo issuer, scope-checked on /bench), and with --with-ratelimit (default) `jwt+ratelimit-memory`
and `jwt+ratelimit-redis` (the jwt scenario plus a `rate_limits` section that is never reached),
and with --with-tracing (default) `open+tracing`, `open+tracing-10%` and `open+tracing-0%`
(open with every request, one in ten, or none sampled: tracing on, spans exported over OTLP/HTTP
to the bench upstream, which answers the exports 200 like a collector; the 0% scenario is
the cost of tracing to a request the sampler leaves out), and with both
`jwt+ratelimit-redis+tracing-0%`.
The proxy runs alone on the proxy core (1); the upstream, the issuer and wrk on the load core (0).

With --profile, each scenario is measured once with py-spy sampling aigw during the measured
run (`--function`, 250 Hz, non-blocking); the report gets each scenario's top functions by self
and total samples, and the collapsed stacks go to bench/results/profile-routes-<scenario>-*.txt.

Usage: .venv/bin/python bench/routes.py [--quick] [--duration S] [--connections N]
                                        [--no-with-ratelimit] [--no-with-tracing] [--profile]
                                        [--scenarios open,open+tracing-0%]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import run
import spy
from run import BenchError, Options, Result, Service

TRANSPORT = "httptools"
AUDIENCE = "aigw-bench"
SCOPE = "bench:read"
TOKEN_TTL = 3600
REDIS_HOST, REDIS_PORT, REDIS_DB = "127.0.0.1", 6379, 15
REDIS_URL = f"redis://{REDIS_HOST}:{REDIS_PORT}/{REDIS_DB}"
REDIS = "redis"  # a scenario's storage placeholder: the run's own pinned redis-server
ISSUER_CONFIG = "issuer.yaml"  # in the run's temporary directory, next to the issuer's key
RATELIMIT_HEADERS = ("RateLimit-Remaining", "RateLimit")
GOALS = (("jwt", "open", 0.80), ("jwt+ratelimit-redis", "jwt+ratelimit-memory", 0.70))
# CPU per request, at most (issue 24): a cached JWT and one Redis rule cost at most 1.5x a bare
# passthrough's; an unsampled request costs < 5 % over tracing off.
CPU_GOALS = (("jwt+ratelimit-redis", "open", 1.5), ("jwt+ratelimit-redis-batched", "open", 1.5),
             ("open+tracing-0%", "open", 1.05),
             ("jwt+ratelimit-redis+tracing-0%", "jwt+ratelimit-redis", 1.05))


@dataclass
class RouteOptions(Options):
    with_ratelimit: bool = True
    with_tracing: bool = True
    rounds: int = 3
    profile: bool = False
    only: tuple[str, ...] = ()  # scenario names to measure; empty: every one chosen


@dataclass(frozen=True)
class Scenario:
    """One aigw configuration: its name and whether it has auth and which rate-limit storage."""

    name: str
    auth: bool = False
    storage: str | None = None
    tracing: float | None = None  # the sample ratio of new traces; None: tracing off
    sync: str = "exact"  # rate_limits.sync


@dataclass(frozen=True)
class Issuer:
    """The running demo issuer's port and the token it signed for the run."""

    port: int
    token: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


# --------------------------------------------------------------------------- arguments


def parse_args(argv: list[str] | None = None) -> RouteOptions:
    parser = run.bench_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--with-ratelimit",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also measure jwt+ratelimit-memory and jwt+ratelimit-redis",
    )
    parser.add_argument(
        "--with-tracing",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also measure open+tracing, open+tracing-10%% and open+tracing-0%% "
        "(sample ratios 1, 0.1 and 0)",
    )
    parser.add_argument(
        "--rounds", type=int, default=3,
        help="measure every scenario this many times, interleaved, and report the median",
    )
    parser.add_argument(
        "--profile", action="store_true",
        help="one round, with py-spy sampling aigw during each scenario's measured run",
    )
    parser.add_argument(
        "--scenarios", default="",
        help="comma-separated scenario names to measure, e.g. open,open+tracing-0%% "
        "(default: all)",
    )
    run.add_placement_args(parser)
    args = parser.parse_args(argv)
    base = run.options_from(args, [TRANSPORT])
    rounds = 1 if args.quick or args.profile else max(1, args.rounds)
    only = tuple(name.strip() for name in args.scenarios.split(",") if name.strip())
    return RouteOptions(**dataclasses.asdict(base), with_ratelimit=args.with_ratelimit,
                        with_tracing=args.with_tracing, rounds=rounds, profile=args.profile,
                        only=only)


def scenarios(opts: RouteOptions) -> list[Scenario]:
    found = [Scenario("open"), Scenario("jwt", auth=True)]
    if opts.with_tracing:
        found.append(Scenario("open+tracing", tracing=1.0))
        found.append(Scenario("open+tracing-10%", tracing=0.1))
        found.append(Scenario("open+tracing-0%", tracing=0.0))
    if opts.with_ratelimit:
        found.append(Scenario("jwt+ratelimit-memory", auth=True, storage="memory://"))
        found.append(Scenario("jwt+ratelimit-redis", auth=True, storage=REDIS))
        found.append(Scenario("jwt+ratelimit-redis-batched", auth=True, storage=REDIS,
                              sync="batched"))
        if opts.with_tracing:
            found.append(Scenario("jwt+ratelimit-redis+tracing-0%", auth=True, storage=REDIS,
                                  tracing=0.0))
    if opts.only:
        unknown = set(opts.only) - {s.name for s in found}
        if unknown:
            raise BenchError(f"no scenario named {', '.join(sorted(unknown))}")
        found = [s for s in found if s.name in opts.only]
    return found


# --------------------------------------------------------------------------- config


def auth_yaml(issuer_url: str, issuer_port: int, resource: str) -> str:
    """The `auth` section trusting the demo issuer, and the issuer's own `demo` section."""
    return (
        "auth:\n"
        f"  resource: {resource}\n"
        "  issuers:\n"
        f"    - issuer: {issuer_url}\n"
        f"      jwks_uri: {issuer_url}/.well-known/jwks.json\n"
        f"      audiences: [{AUDIENCE}]\n"
        "  routes:\n"
        f"    - {{path: {run.PATH}, scopes: ['{SCOPE}']}}\n"
        "demo:\n"
        "  issuer:\n"
        f"    url: {issuer_url}\n"
        f"    port: {issuer_port}\n"
        "    key_file: issuer.jwk.json\n"
        f"    audience: {AUDIENCE}\n"
    )


def ratelimit_yaml(storage: str, sync: str = "exact") -> str:
    """A rate limit far above what the run can reach: its cost, never its 429s."""
    # exact is the default, and not named, so an aigw from before `sync` still starts
    sync_line = f"  sync: {sync}\n" if sync != "exact" else ""
    return (
        "rate_limits:\n"
        f"  storage: {storage}\n"
        "  strategy: sliding-window-counter\n"
        f"{sync_line}"
        "  rules:\n"
        "    - name: bench\n"
        f"      paths: [{run.PATH}]\n"
        "      key: client\n"
        "      limit: 100000000/minute\n"
    )


def tracing_yaml(collector_port: int, ratio: float) -> str:
    """Requests traced at `ratio` and exported; the bench upstream stands in for the
    collector (it answers any POST with 200)."""
    return (
        "tracing:\n"
        "  enabled: true\n"
        f"  endpoint: http://127.0.0.1:{collector_port}/v1/traces\n"
        f"  sample_ratio: {ratio}\n"
    )


def scenario_yaml(scenario: Scenario, issuer: Issuer, port: int, upstream_port: int) -> str:
    text = "" if scenario.tracing is None else tracing_yaml(upstream_port, scenario.tracing)
    if not scenario.auth:
        return text
    text += auth_yaml(issuer.url, issuer.port, f"http://127.0.0.1:{port}")
    return text + (ratelimit_yaml(scenario.storage, scenario.sync) if scenario.storage else "")


# --------------------------------------------------------------------------- issuer and token


def start_issuer(port: int, upstream_port: int, opts: RouteOptions, workdir: Path) -> Service:
    """Write ISSUER_CONFIG (a valid gateway config with demo.issuer) and start the issuer."""
    url = f"http://127.0.0.1:{port}"
    base = run.aigw_config(upstream_port, run.free_port(), run.free_port(), TRANSPORT)
    (workdir / ISSUER_CONFIG).write_text(base + auth_yaml(url, port, url))
    cmd = [run.python_bin(), "-m", "gateway.demo.issuer", "--config", ISSUER_CONFIG]
    jwks = f"{url}/.well-known/jwks.json"
    return run.spawn_ready("issuer", cmd, opts.load_core, workdir, jwks)


def mint_token(opts: RouteOptions, config: Path) -> str:
    """One token for the whole run, from `aigw token` with the issuer's key."""
    if opts.aigw is None:
        raise BenchError("aigw is not installed (expected .venv/bin/aigw or aigw on PATH).")
    cmd = [opts.aigw, "token", "--config", str(config), "--scope", SCOPE]
    cmd += ["--ttl", str(TOKEN_TTL)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    token = out.stdout.strip()
    if out.returncode != 0 or token.count(".") != 2:
        raise BenchError(f"aigw token failed ({out.returncode}):\n{out.stderr.strip()}")
    return token


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# --------------------------------------------------------------------------- checks


def redis_answers(port: int = REDIS_PORT) -> str | None:
    """None when a Redis answers PING at REDIS_HOST:port, else why not."""
    try:
        with socket.create_connection((REDIS_HOST, port), timeout=2.0) as sock:
            sock.sendall(b"PING\r\n")
            reply = sock.recv(64)
    except OSError as exc:
        return f"no Redis at {REDIS_HOST}:{port} ({exc.strerror or exc})"
    if not reply.startswith(b"+PONG"):
        return f"Redis at {REDIS_HOST}:{port} answered PING with {reply.strip()!r}"
    return None


def start_redis(core: int, workdir: Path) -> tuple[Service | None, str]:
    """A redis-server of the run's own, pinned beside the upstream so it never shares the
    proxy's core; without redis-server installed, the machine's Redis (unpinned) instead."""
    if shutil.which("redis-server") is None:
        return None, REDIS_URL
    port = run.free_port()
    cmd = ["redis-server", "--port", str(port), "--bind", REDIS_HOST, "--save", "",
           "--appendonly", "no", "--dir", str(workdir)]
    service = run.spawn("redis", cmd, core, workdir)
    deadline = time.monotonic() + run.READY_TIMEOUT
    while redis_answers(port) is not None:
        if time.monotonic() > deadline:
            run.stop(service)
            raise BenchError(f"redis-server did not answer on port {port}")
        time.sleep(0.05)
    return service, f"redis://{REDIS_HOST}:{port}/0"


def check_auth(name: str, port: int, token: str) -> None:
    """/bench must refuse a request without the token (401) and pass one with it (200)."""
    url = f"http://127.0.0.1:{port}{run.PATH}"
    status, _ = run.http_get(url)
    if status != 401:
        raise BenchError(f"{name}: GET {run.PATH} without a token gave {status}, not 401")
    status, headers, body = run.http_fetch(url, headers=bearer(token))
    if status != 200:
        challenge = headers.get("WWW-Authenticate", "")
        detail = f"{challenge} {body[:200].decode(errors='replace')}".strip()
        raise BenchError(f"{name}: GET {run.PATH} with the token gave {status}: {detail}")


def check_ratelimit(name: str, port: int, token: str) -> None:
    """A working rate limit announces itself in the response headers."""
    _, headers, _ = run.http_fetch(f"http://127.0.0.1:{port}{run.PATH}", headers=bearer(token))
    if not any(headers.get(header) for header in RATELIMIT_HEADERS):
        wanted = " or ".join(RATELIMIT_HEADERS)
        raise BenchError(f"{name}: no {wanted} header in the response; rate limiting is off")


def checked(start: Callable[[], Service], check: Callable[[], None]) -> Service:
    """Start a service and run check on it; stop it when the check fails."""
    service = start()
    try:
        check()
    except BaseException:
        run.stop(service)
        raise
    return service


# --------------------------------------------------------------------------- scenarios


def scenario_checks(scenario: Scenario, port: int, token: str) -> None:
    if scenario.auth:
        check_auth(scenario.name, port, token)
    if scenario.storage:
        check_ratelimit(scenario.name, port, token)


def measure_scenario(
    scenario: Scenario, upstream_port: int, issuer: Issuer, opts: RouteOptions, workdir: Path
) -> Result:
    """Start aigw for the scenario, check its answers, measure it and stop it."""
    if scenario.storage == REDIS_URL and (reason := redis_answers()) is not None:
        print(f"- {scenario.name}: not measured: {reason}", flush=True)
        return Result(scenario.name, note=f"not measured: {reason}")
    port = run.free_port()
    slug = "aigw-" + scenario.name.replace("+", "-")
    extra = scenario_yaml(scenario, issuer, port, upstream_port)
    start = partial(run.start_aigw, opts.aigw, upstream_port, port, TRANSPORT, opts.proxy_core)
    start = partial(start, workdir, extra_config=extra, name=slug)
    starter = partial(checked, start, partial(scenario_checks, scenario, port, issuer.token))
    headers = bearer(issuer.token) if scenario.auth else None
    if opts.profile:
        return measure_profiled(scenario.name, starter, port, opts, headers)
    return run.measure_proxy(scenario.name, starter, port, opts, headers)


@dataclass
class Profiled(Result):
    profile: list[str] = dataclasses.field(default_factory=list)  # the summary's lines


PROFILE_RATE = 250


def measure_profiled(name: str, starter: Callable[[], Service], port: int, opts: RouteOptions,
                     headers: dict[str, str] | None) -> Result:
    """`run.measure_proxy` with py-spy recording aigw during the measured wrk run."""
    print(f"- {name} (profiled)", flush=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    raw = run.RESULTS_DIR / f"profile-routes-{name.replace('+', '-')}-{stamp}.txt"
    run.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    try:
        service = starter()
    except BenchError as exc:
        return run.not_measured(name, exc)
    try:
        run.check_passthrough(name, port, headers)
        run.run_wrk(port, run.WARMUP_SECONDS, opts, latency=False, headers=headers)
        recorder = spy.record(service.proc.pid, opts.duration, PROFILE_RATE, raw, "raw", True)
        before = run.cpu_seconds(service.proc.pid)
        output = run.run_wrk(port, opts.duration, opts, latency=True, headers=headers)
        spent = run.cpu_seconds(service.proc.pid) - before
        _, err = recorder.communicate(timeout=opts.duration + 30)
        if recorder.returncode != 0:
            raise BenchError(f"py-spy failed: {err.decode(errors='replace')}")
    except BenchError as exc:
        return run.not_measured(name, exc)
    finally:
        run.stop(service)
    parsed = run.parse_wrk(name, output)
    result = Profiled(**dataclasses.asdict(parsed), profile=spy.summary(raw, 20))
    if result.requests:
        result.cpu_us = spent * 1e6 / result.requests
    print(f"  {name}: {result.rps:,.0f} rps, cpu {run.fmt_us(result.cpu_us)}/req, "
          f"stacks in {raw.relative_to(run.REPO_DIR)}", flush=True)
    return result


def median_result(runs: list[Result]) -> Result:
    """The run with the median rps (machine noise hits single runs, rarely the middle one),
    with the median of the runs' CPU per request."""
    measured = sorted((r for r in runs if r.rps is not None), key=lambda r: r.rps or 0.0)
    if not measured:
        return runs[0]
    cpu = sorted(r.cpu_us for r in measured if r.cpu_us is not None)
    middle = measured[len(measured) // 2]
    return dataclasses.replace(middle, cpu_us=cpu[len(cpu) // 2] if cpu else None)


def with_redis(found: list[Scenario], url: str) -> list[Scenario]:
    return [dataclasses.replace(s, storage=url) if s.storage == REDIS else s for s in found]


def run_all(opts: RouteOptions, workdir: Path) -> list[Result]:
    """Start the upstream, the issuer and a Redis, mint the token, then measure each scenario."""
    upstream_port = run.free_port()
    upstream = run.start_upstream(upstream_port, opts.load_core, workdir)
    redis, redis_url = start_redis(opts.load_core, workdir) if opts.with_ratelimit \
        else (None, REDIS_URL)
    try:
        issuer_port = run.free_port()
        issuer_service = start_issuer(issuer_port, upstream_port, opts, workdir)
        try:
            issuer = Issuer(issuer_port, mint_token(opts, workdir / ISSUER_CONFIG))
            chosen = with_redis(scenarios(opts), redis_url)
            rounds = [[measure_scenario(s, upstream_port, issuer, opts, workdir) for s in chosen]
                      for _ in range(opts.rounds)]
            return [median_result(list(runs)) for runs in zip(*rounds, strict=True)]
        finally:
            run.stop(issuer_service)
    finally:
        if redis is not None:
            run.stop(redis)
        run.stop(upstream)


# --------------------------------------------------------------------------- report


def results_table(results: list[Result]) -> list[str]:
    base = next((r for r in results if r.target == "open"), None)
    lines = ["| scenario | rps | p50 | p99 | CPU/request | rps vs open | CPU vs open |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        rps = "-" if r.rps is None else f"{r.rps:,.0f}"
        cells = [r.target, rps, run.fmt_ms(r.p50_ms), run.fmt_ms(r.p99_ms), run.fmt_us(r.cpu_us),
                 run.fmt_ratio(r.rps, base and base.rps),
                 run.fmt_ratio(r.cpu_us, base and base.cpu_us)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def rps_ratio(results: list[Result], num: str, den: str) -> float | None:
    by_name = {r.target: r.rps for r in results}
    top, bottom = by_name.get(num), by_name.get(den)
    return None if top is None or not bottom else top / bottom


def cpu_ratio(results: list[Result], num: str, den: str) -> float | None:
    by_name = {r.target: r.cpu_us for r in results}
    top, bottom = by_name.get(num), by_name.get(den)
    return None if top is None or not bottom else top / bottom


def goals_table(results: list[Result]) -> list[str]:
    lines = ["| ratio | value | goal | met |", "|---|---|---|---|"]
    for num, den, goal in GOALS:
        value = rps_ratio(results, num, den)
        met = "not measured" if value is None else ("yes" if value >= goal else "no")
        shown = "-" if value is None else f"{value:.3g}"
        lines.append(f"| rps {num} / {den} | {shown} | ≥ {goal:.2f} | {met} |")
    for num, den, goal in CPU_GOALS:
        value = cpu_ratio(results, num, den)
        met = "not measured" if value is None else ("yes" if value <= goal else "no")
        shown = "-" if value is None else f"{value:.3g}"
        lines.append(f"| CPU/request {num} / {den} | {shown} | ≤ {goal:.2f} | {met} |")
    return lines


def report(results: list[Result], opts: RouteOptions, started: dt.datetime) -> str:
    lines = [
        "# aigw route benchmark (auth, rate limits, tracing)",
        "",
        f"- date: {started.strftime('%Y-%m-%d %H:%M:%S UTC')}",
        f"- cores: {os.cpu_count()}; upstream, issuer and wrk on core {opts.load_core}, "
        f"aigw alone on core {opts.proxy_core}",
        f"- wrk -t1 -c{opts.connections} -d{opts.duration}s --latency, "
        f"after a {run.WARMUP_SECONDS} s warm-up; median of {opts.rounds} interleaved "
        "round(s) per scenario; jwt scenarios send one "
        f"`Authorization: Bearer` JWT (scope {SCOPE}, ttl {TOKEN_TTL} s) on every request",
        f"- aigw: {TRANSPORT} transport, access log off; GET {run.PATH} to the bench upstream "
        f"({run.BODY_SIZE:,} bytes of JSON)",
        "- rate limits: sliding-window-counter, 100000000/minute per client; Redis: a "
        f"redis-server of the run's own on core {opts.load_core} (else {REDIS_URL})",
        "",
        *results_table(results),
        "",
        *goals_table(results),
    ]
    for result in results:
        if isinstance(result, Profiled):
            lines += ["", f"## Profile: {result.target} (py-spy, {PROFILE_RATE} Hz)", "",
                      *result.profile]
    return run.finish_report(lines, results)


def main(argv: list[str] | None = None) -> int:
    return run.execute(parse_args(argv), run_all, report, prefix="routes-")


if __name__ == "__main__":
    sys.exit(main())
