"""Spec pipeline benchmark: every spec route through the whole pipeline, beside passthrough.

aigw runs config/demo.yaml with three changes: every spec route needs a bearer JWT (the demo
issuer's, verified against its JWKS), one rate-limit rule counts every request in a Redis of the
run's own (never reached), and the upstream is `replay.py`, which answers the demo backend's
legacy JSON from memory. Each route is checked for its expected status, then measured with wrk;
nginx proxies the legacy call the route makes (the first, when it makes several) to the same
replay upstream. Rows: rps, p50, p99, aigw CPU µs per request, rps ratios to that nginx row and
to authenticated aigw passthrough, with issue 24's goal for each route. Median of --rounds
interleaved rounds.

Beside them, other aigw processes measured on passthrough alone (each round): **bare** (a
config with the replay upstream only: no JWT, no rate limit), with `--tracing` the demo config
with tracing on at sample ratios 0 and 0.1 (spans exported to a stand-in collector), and with
`--scale-workers N` the demo config with N workers on the `--pin` cores. A second table gives
the ratios of issue 24's targets: auth and limits against bare, tracing against off, N workers
against one.

Usage: .venv/bin/python bench/pipelines.py [--quick] [--duration S] [--rounds N] [--workers N]
                                           [--tracing] [--scale-workers N] [--pin CORES]
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import routes
import run
import yaml
from run import BenchError, Options, Result, Service

SCOPES = "articles:read tasks:run"
DEMO_CONFIG = run.REPO_DIR / "config" / "demo.yaml"
GOAL_VS_PASSTHROUGH = 0.5  # a spec route's rps against authenticated passthrough (issue 24)
GOAL_NO_UPSTREAM = 1.0  # a route that makes no upstream call
GOAL_AUTH_CPU = 1.5  # authenticated passthrough's CPU per request against bare, at most
GOAL_TRACING_CPU = 1.05  # tracing on, request unsampled, against tracing off, at most


@dataclass(frozen=True)
class Route:
    name: str
    method: str
    path: str
    body: str = ""
    content_type: str = "application/json"
    status: int = 200
    goal: float | None = GOAL_VS_PASSTHROUGH  # rps against authenticated passthrough


def _aip(query: str) -> str:
    return json.dumps({
        "aip_version": "0.1", "request_id": "bench", "timestamp": "2026-01-15T14:30:00Z",
        "platform": {"id": "bench"}, "intent": {"domain": "support.billing"},
        "context": {"language": "en-US", "placement": "conversation"},
        "runtime": {"session_id": "bench", "turn_index": 0, "query_text": query},
    })


PASSTHROUGH = Route("passthrough (JWT + Redis limit)", "GET",
                    "/api/v1/articles/search?q=refund&limit=5", goal=None)
ROUTES = [
    PASSTHROUGH,
    Route("AIDRE text search", "POST", "/search",
          json.dumps({"query": "refund for a damaged item", "collection": "articles",
                      "top_k": 5}), "application/aidre+json"),
    Route("AIDRE vector search", "POST", "/search", "VECTOR", "application/aidre+json"),
    Route("AIDRE chunk read", "GET", "/chunks/articles:art-0001"),
    Route("AI Discovery document", "GET", "/.well-known/ai", goal=GOAL_NO_UPSTREAM),
    Route("AIP retrieve", "POST", "/pag/retrieve", _aip("refund for a damaged item")),
    Route("AIDIP invoke", "POST", "/agents/classifier/invoke/classify",
          json.dumps({"text": "I was charged twice for my order"})),
    Route("PDPP search", "GET", "/v1/search?q=refund&streams[]=articles&limit=5"),
    Route("PDPP records", "GET", "/v1/streams/articles/records?limit=5",
          goal=GOAL_NO_UPSTREAM),  # served from the gateway's copy of the stream
]
BARE = "passthrough, bare (no JWT, no rate limit)"


@dataclass(frozen=True)
class Variant:
    """Another aigw, measured on passthrough alone: bare (no auth, no rate limit), the demo
    config with tracing on at a sample ratio, or the demo config with more workers."""

    name: str
    bare: bool = False
    sample_ratio: float | None = None
    workers: int = 1
    cores: str | None = None  # a taskset list; None: the proxy core


@dataclass
class PipelineOptions(Options):
    rounds: int = 1
    workers: str = "1"  # type: ignore[assignment]  # passed to `aigw run --workers` as is
    tracing: bool = False
    scale_workers: int = 0
    pin: str = ""  # cores of the --scale-workers aigw; empty: every core this process may use
    passthrough_only: bool = False  # no spec route: passthrough, its nginx row and variants


@dataclass
class Setup:
    """What a run shares: ports, token, the legacy call behind each route."""

    replay_port: int
    issuer: routes.Issuer
    redis_url: str
    routes: list[Route] = field(default_factory=list)
    legacy: dict[str, dict[str, str]] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    admin_port: int = 0
    collector_port: int = 0  # a stand-in OTLP collector (bench/upstream.py), with --tracing


def parse_args(argv: list[str] | None) -> PipelineOptions:
    parser = run.bench_parser(__doc__.splitlines()[0])
    run.add_placement_args(parser)
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds (median)")
    parser.add_argument("--workers", default="1", help="aigw run --workers")
    parser.add_argument("--tracing", action="store_true",
                        help="also authenticated passthrough with tracing on, ratios 0 and 0.1")
    parser.add_argument("--scale-workers", type=int, default=0, metavar="N",
                        help="also authenticated passthrough with N workers (on --pin cores)")
    parser.add_argument("--pin", default="", metavar="CORES",
                        help="taskset cores of the --scale-workers aigw, e.g. 1 or 0,1 "
                        "(default: every core; wrk stays on --load-core)")
    parser.add_argument("--passthrough-only", action="store_true",
                        help="measure passthrough (and the rows above) only, no spec route")
    args = parser.parse_args(argv)
    base = run.options_from(args, ["httptools"])
    fields = {k: v for k, v in vars(base).items() if k != "workers"}
    return PipelineOptions(**fields, rounds=args.rounds, workers=args.workers,
                           tracing=args.tracing, scale_workers=args.scale_workers, pin=args.pin,
                           passthrough_only=args.passthrough_only)


def variants(opts: PipelineOptions) -> list[Variant]:
    found = [Variant(BARE, bare=True)]
    if opts.tracing:
        found += [Variant(f"{PASSTHROUGH.name}, tracing on, {ratio:.0%} sampled",
                          sample_ratio=ratio) for ratio in (0.0, 0.1)]
    if opts.scale_workers > 1:
        cores = opts.pin or ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
        found.append(Variant(f"{PASSTHROUGH.name}, {opts.scale_workers} workers (cores {cores})",
                             workers=opts.scale_workers, cores=cores))
    return found


def aigw_yaml(setup: Setup, port: int, admin_port: int) -> str:
    config: dict[str, Any] = yaml.safe_load(DEMO_CONFIG.read_text())
    config["listen"]["port"], config["admin"]["port"] = port, admin_port
    config["public_base_url"] = f"http://127.0.0.1:{port}"
    config["policies"] = str(run.REPO_DIR / "policies")
    config["upstreams"]["helpcentre"]["url"] = f"http://127.0.0.1:{setup.replay_port}"
    auth = config["auth"]
    auth.pop("introspection", None)
    auth["issuers"] = [{"issuer": setup.issuer.url, "audiences": [routes.AUDIENCE],
                        "jwks_uri": f"{setup.issuer.url}/.well-known/jwks.json"}]
    spec_paths = ("/search", "/collections", "/chunks", "/pag/retrieve", "/agents")
    auth["routes"] = [
        {"path": rule["path"], "scopes": ["articles:read"]}
        if rule["path"] in spec_paths else rule for rule in auth.get("routes", [])
    ]
    config["rate_limits"] = {"storage": setup.redis_url, "rules": [
        {"name": "bench", "paths": ["/"], "key": "client", "limit": "100000000/minute"}]}
    config.pop("demo", None)
    events = (config.get("aip") or {}).get("events") or {}
    if events.get("file"):
        events["file"] = str(workdir_events(setup))
    config["logging"] = {"level": "warning", "access_log": False}
    return yaml.safe_dump(config, sort_keys=False)


def workdir_events(setup: Setup) -> Path:
    return Path(tempfile.gettempdir()) / f"aigw-bench-events-{setup.replay_port}.jsonl"


def start_aigw(setup: Setup, opts: PipelineOptions, workdir: Path) -> tuple[Service, int]:
    port, admin_port = run.free_port(), run.free_port()
    setup.admin_port = admin_port
    config = workdir / "aigw-pipelines.yaml"
    config.write_text(aigw_yaml(setup, port, admin_port))
    service = spawn_aigw(opts, config, opts.workers, opts.proxy_core, workdir, admin_port)
    return service, port


def spawn_aigw(opts: PipelineOptions, config: Path, workers: str, cores: int | str,
               workdir: Path, admin_port: int) -> Service:
    cmd = [str(opts.aigw), "run", "--config", str(config)]
    if workers != "1":  # the demo's AIDIP registry is in memory; the bench registers none
        cmd += ["--workers", workers, "--allow-memory-store"]
    service = run.spawn_ready(f"aigw-{config.stem}", cmd, cores, workdir,
                              f"http://127.0.0.1:{admin_port}/readyz")
    if workers.isdigit() and int(workers) > 1:
        try:
            run.wait_workers(admin_port, int(workers))
        except BaseException:
            run.stop(service)
            raise
    return service


def variant_yaml(setup: Setup, variant: Variant, port: int, admin_port: int) -> str:
    if variant.bare:
        return run.aigw_config(setup.replay_port, port, admin_port, "httptools") + \
            "logging: {level: warning, access_log: false}\n"
    config: dict[str, Any] = yaml.safe_load(aigw_yaml(setup, port, admin_port))
    if variant.sample_ratio is not None:
        config["tracing"] = {
            "enabled": True, "sample_ratio": variant.sample_ratio,
            "endpoint": f"http://127.0.0.1:{setup.collector_port}/v1/traces"}
    return yaml.safe_dump(config, sort_keys=False)


def measure_variant(setup: Setup, variant: Variant, opts: PipelineOptions,
                    workdir: Path) -> Result:
    """Start the variant's aigw, measure passthrough through it, stop it."""
    port, admin_port = run.free_port(), run.free_port()
    config = workdir / f"variant-{len(variant.name)}-{variant.workers}.yaml"
    config.write_text(variant_yaml(setup, variant, port, admin_port))
    cores = variant.cores if variant.cores is not None else opts.proxy_core
    try:
        service = spawn_aigw(opts, config, str(variant.workers), cores, workdir, admin_port)
    except BenchError as exc:
        return run.not_measured(variant.name, exc)
    try:
        token = None if variant.bare else setup.issuer.token
        return measure(variant.name, port, PASSTHROUGH, token, opts, workdir, service.proc.pid)
    except BenchError as exc:
        return run.not_measured(variant.name, exc)
    finally:
        run.stop(service)


def mint(opts: PipelineOptions, workdir: Path) -> str:
    cmd = [str(opts.aigw), "token", "--config", str(workdir / routes.ISSUER_CONFIG),
           "--scope", SCOPES, "--ttl", str(routes.TOKEN_TTL)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    if out.returncode != 0:
        raise BenchError(f"aigw token failed: {out.stderr.strip()}")
    return out.stdout.strip()


def call(port: int, route: Route, token: str | None) -> tuple[int, bytes]:
    import urllib.error
    import urllib.request

    headers = {"content-type": route.content_type}
    if token:
        headers["authorization"] = f"Bearer {token}"
    request = urllib.request.Request(f"http://127.0.0.1:{port}{route.path}", method=route.method,
                                     data=route.body.encode() or None, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def seen(setup: Setup) -> list[dict[str, str]]:
    _, body = run.http_get(f"http://127.0.0.1:{setup.replay_port}/__replay/seen")
    return json.loads(body)


def discover(setup: Setup, port: int) -> None:
    """Fill the vector body, check each route's status, note the legacy calls it makes."""
    vector_route = Route("embed", "POST", "/api/v1/embed", json.dumps({"text": "refund"}))
    status, body = call(port, vector_route, setup.issuer.token)
    if status != 200:
        raise BenchError(f"POST /api/v1/embed gave {status}")
    vector = json.loads(body)["embedding"]
    for route in ROUTES:
        if route.body == "VECTOR":
            route = Route(route.name, route.method, route.path, json.dumps({
                "collection": "articles", "embedding_space": "wordllama-l2_supercat-256",
                "top_k": 5, "query_vector": vector}), route.content_type)
        before = len(seen(setup))
        status, body = call(port, route, setup.issuer.token)
        if status != route.status:
            raise BenchError(f"{route.name}: {route.method} {route.path} gave {status}: "
                             f"{body[:300].decode(errors='replace')}")
        made = seen(setup)[before:]
        setup.routes.append(route)
        setup.calls[route.name] = len(made)
        if made:
            setup.legacy[route.name] = made[0]


def wrk_script(route: Route, token: str | None, workdir: Path, name: str) -> Path:
    headers = {"Content-Type": route.content_type}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    lines = [f'wrk.method = "{route.method}"', f"wrk.body = {json.dumps(route.body)}"]
    lines += [f'wrk.headers["{k}"] = "{v}"' for k, v in headers.items()]
    path = workdir / f"{name}.lua"
    path.write_text("\n".join(lines) + "\n")
    return path


def measure(name: str, port: int, route: Route, token: str | None, opts: PipelineOptions,
            workdir: Path, pid: int) -> Result:
    script = wrk_script(route, token, workdir, "route")
    base = ["taskset", "-c", str(opts.load_core), "wrk", "-t1", f"-c{opts.connections}",
            "-s", str(script)]
    url = f"http://127.0.0.1:{port}{route.path}"
    subprocess.run([*base, f"-d{run.WARMUP_SECONDS}s", url], capture_output=True, check=False)
    before = run.cpu_seconds(pid)
    out = subprocess.run([*base, f"-d{opts.duration}s", "--latency", url],
                         capture_output=True, text=True, check=False)
    spent = run.cpu_seconds(pid) - before
    result = run.parse_wrk(name, out.stdout)
    if result.requests:
        result.cpu_us = spent * 1e6 / result.requests
    print(f"  {name}: {result.rps:,.0f} rps, p99 {run.fmt_ms(result.p99_ms)}, "
          f"cpu {run.fmt_us(result.cpu_us)}/req {result.note}", flush=True)
    return result


def one_round(setup: Setup, opts: PipelineOptions, workdir: Path, nginx: Service | None,
              nginx_port: int) -> dict[str, Result]:
    results: dict[str, Result] = {}
    if nginx is not None:
        for route in setup.routes:
            legacy = setup.legacy.get(route.name)
            if legacy is None:
                continue
            plain = Route(route.name, legacy["method"], legacy["target"], legacy["body"],
                          legacy["content_type"] or "application/json")
            results["nginx:" + route.name] = measure(
                f"nginx: {route.name}", nginx_port, plain, None, opts, workdir, nginx.proc.pid)
    aigw, port = start_aigw(setup, opts, workdir)
    try:
        for route in setup.routes:
            results[route.name] = measure(route.name, port, route, setup.issuer.token, opts,
                                          workdir, aigw.proc.pid)
    finally:
        run.stop(aigw)
    for variant in variants(opts):
        results[variant.name] = measure_variant(setup, variant, opts, workdir)
    return results


def start_nginx(replay_port: int, port: int, opts: PipelineOptions, workdir: Path) -> Service:
    conf = run.write_nginx_conf(replay_port, port, workdir)
    cmd = ["nginx", "-c", str(conf), "-p", f"{conf.parent}/", "-e", str(conf.parent / "e.log")]
    return run.spawn_ready("nginx", cmd, opts.proxy_core, workdir,
                           f"http://127.0.0.1:{port}/__replay/seen")


def start_support(opts: PipelineOptions, workdir: Path) -> tuple[list[Service], Setup]:
    """The demo backend, the replay upstream, a Redis and the issuer; the run's token."""
    backend_port, replay_port = run.free_port(), run.free_port()
    started: list[Service] = []
    try:
        started.append(run.spawn_ready(
            "backend", [run.python_bin(), "-m", "uvicorn", "gateway.demo.backend:create_app",
                        "--factory", "--port", str(backend_port), "--log-level", "warning"],
            opts.load_core, workdir, f"http://127.0.0.1:{backend_port}/api/v1/health"))
        os.environ["AIGW_BENCH_BACKEND"] = f"http://127.0.0.1:{backend_port}"
        started.append(run.spawn_ready(
            "replay", [run.python_bin(), "-m", "uvicorn", "replay:app", "--app-dir",
                       str(run.BENCH_DIR), "--port", str(replay_port), "--loop", "uvloop",
                       "--http", "httptools", "--no-access-log", "--log-level", "warning"],
            opts.load_core, workdir, f"http://127.0.0.1:{replay_port}/__replay/seen"))
        redis, redis_url = routes.start_redis(opts.load_core, workdir)
        if redis is not None:
            started.append(redis)
        issuer_port = run.free_port()
        started.append(routes.start_issuer(issuer_port, replay_port, opts, workdir))  # type: ignore[arg-type]
        setup = Setup(replay_port, routes.Issuer(issuer_port, mint(opts, workdir)), redis_url)
        if getattr(opts, "tracing", False):  # answers every export 200, as a collector would
            setup.collector_port = run.free_port()
            started.append(run.start_upstream(setup.collector_port, opts.load_core, workdir))
    except BaseException:
        for service in reversed(started):
            run.stop(service)
        raise
    return started, setup


def run_all(opts: PipelineOptions, workdir: Path) -> list[Result]:
    nginx_port = run.free_port()
    started, setup = start_support(opts, workdir)
    try:
        aigw, port = start_aigw(setup, opts, workdir)
        try:
            discover(setup, port)
        finally:
            run.stop(aigw)
        if opts.passthrough_only:
            setup.routes = [route for route in setup.routes if route.name == PASSTHROUGH.name]
        nginx = start_nginx(setup.replay_port, nginx_port, opts, workdir) \
            if shutil.which("nginx") else None
        if nginx is not None:
            started.append(nginx)
        rounds = [one_round(setup, opts, workdir, nginx, nginx_port)
                  for _ in range(opts.rounds)]
    finally:
        for service in reversed(started):
            run.stop(service)
    return collect(setup, rounds)


def collect(setup: Setup, rounds: list[dict[str, Result]]) -> list[Result]:
    keys = list(rounds[0])
    merged = [routes.median_result([r[key] for r in rounds]) for key in keys]
    for result in merged:
        result.note = str(setup.calls.get(result.target, ""))
    return merged


def goal_cells(result: Result, route: Route | None, auth: Result | None) -> list[str]:
    """rps against authenticated passthrough, the route's goal, and whether it is met."""
    ratio = None if auth is None or not auth.rps or result.rps is None else result.rps / auth.rps
    shown = "-" if ratio is None else f"{ratio:.3g}"
    if route is None or route.goal is None or ratio is None:
        return [shown, "-", "-"]
    return [shown, f"≥ {route.goal:g}", "yes" if ratio >= route.goal else "**no**"]


def table(results: list[Result], setup_routes: list[Route]) -> list[str]:
    by = {r.target: r for r in results}
    auth = by.get(PASSTHROUGH.name)
    lines = ["| route | legacy calls | rps | p50 | p99 | CPU/request | vs nginx (same legacy "
             "call) | CPU vs authenticated passthrough | rps vs authenticated passthrough | goal "
             "| met |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    names = [route.name for route in setup_routes]
    if BARE in by:
        names.insert(names.index(PASSTHROUGH.name) + 1 if PASSTHROUGH.name in names else 0, BARE)
    for name in names:
        r, route = by.get(name), next((x for x in setup_routes if x.name == name), None)
        if r is None:
            continue
        if r.rps is None:
            lines.append(f"| {name} | - | - | - | - | - | - | - | - | - | {r.note} |")
            continue
        nginx = by.get(f"nginx:{name}") or by.get(f"nginx:{PASSTHROUGH.name}" if name == BARE
                                                   else "")
        calls = r.note or ("1" if name == BARE else "0")
        cells = [name, calls, f"{r.rps:,.0f}", run.fmt_ms(r.p50_ms), run.fmt_ms(r.p99_ms),
                 run.fmt_us(r.cpu_us), run.fmt_ratio(r.rps, nginx.rps if nginx else None),
                 run.fmt_ratio(r.cpu_us, auth.cpu_us if auth else None),
                 *goal_cells(r, route, auth)]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "| nginx row (legacy call) | rps | p50 | p99 | CPU/request |",
              "|---|---|---|---|---|"]
    for r in results:
        if r.target.startswith("nginx:") and r.rps is not None:
            lines.append(f"| {r.target[6:].strip()} | {r.rps:,.0f} | {run.fmt_ms(r.p50_ms)} | "
                         f"{run.fmt_ms(r.p99_ms)} | {run.fmt_us(r.cpu_us)} |")
    return lines


def variant_table(results: list[Result], opts: PipelineOptions) -> list[str]:
    """The other aigw configurations measured on authenticated passthrough."""
    by = {r.target: r for r in results}
    auth = by.get(PASSTHROUGH.name)
    shown = [v for v in variants(opts) if not v.bare and v.name in by]
    if not shown:
        return []
    lines = ["", "| authenticated passthrough, other aigw | rps | p50 | p99 | CPU/request | "
             "rps vs 1 worker, tracing off | CPU vs 1 worker, tracing off |",
             "|---|---|---|---|---|---|---|"]
    for variant in shown:
        r = by[variant.name]
        lines.append(f"| {variant.name} | {'-' if r.rps is None else f'{r.rps:,.0f}'} | "
                     f"{run.fmt_ms(r.p50_ms)} | {run.fmt_ms(r.p99_ms)} | {run.fmt_us(r.cpu_us)} "
                     f"| {run.fmt_ratio(r.rps, auth and auth.rps)} | "
                     f"{run.fmt_ratio(r.cpu_us, auth and auth.cpu_us)} |")
    return lines


def _ratio(num: float | None, den: float | None) -> float | None:
    return None if num is None or not den else num / den


def _target(name: str, what: str, value: float | None, goal: str,
            met: bool | None) -> str:
    shown = "-" if value is None else f"{value:.3g}"
    verdict = "-" if met is None or value is None else ("yes" if met else "**no**")
    return f"| {name} | {what} | {shown} | {goal} | {verdict} |"


def targets_table(results: list[Result], setup_routes: list[Route],
                  opts: PipelineOptions) -> list[str]:
    """Issue 24's targets, as ratios of this run's rows."""
    by = {r.target: r for r in results}
    auth, bare = by.get(PASSTHROUGH.name), by.get(BARE)
    cpu = {name: r.cpu_us for name, r in by.items()}
    rps = {name: r.rps for name, r in by.items()}
    lines = ["| target | ratio | value | goal | met |", "|---|---|---|---|---|",
             _target("1. auth and limits", "CPU/request, authenticated / bare passthrough",
                     value := _ratio(cpu.get(PASSTHROUGH.name), bare and bare.cpu_us),
                     f"≤ {GOAL_AUTH_CPU:g}", value is not None and value <= GOAL_AUTH_CPU)]
    judged = [(route, _ratio(rps.get(route.name), auth and auth.rps)) for route in setup_routes
              if route.goal is not None and rps.get(route.name) is not None]
    met = sum(1 for route, ratio in judged if ratio is not None and ratio >= (route.goal or 0))
    if judged:
        lines.append(f"| 2. spec routes | rps / authenticated passthrough, each at its goal | "
                     f"{met} of {len(judged)} met | every one | "
                     f"{'yes' if met == len(judged) else '**no**'} |")
    for variant in variants(opts):
        if variant.sample_ratio is not None:
            value = _ratio(cpu.get(variant.name), auth and auth.cpu_us)
            unsampled = variant.sample_ratio == 0
            lines.append(_target(
                "3. tracing" if unsampled else "3. tracing (for reference)",
                f"CPU/request, {variant.sample_ratio:.0%} sampled / tracing off", value,
                f"≤ {GOAL_TRACING_CPU:g}" if unsampled else "-",
                value is not None and value <= GOAL_TRACING_CPU if unsampled else None))
        elif variant.workers > 1:
            lines.append(_target("5. workers", f"rps, {variant.workers} workers (cores "
                                 f"{variant.cores}) / 1 worker (core {opts.proxy_core})",
                                 _ratio(rps.get(variant.name), auth and auth.rps),
                                 "scales with cores (bench/README.md, Workers)", None))
    lines.append("| 4. tail latency | discovery p99 / p50 under mixed load | `make bench-tail` "
                 "| ≤ 2 | - |")
    return lines


def report(results: list[Result], opts: PipelineOptions, started: dt.datetime) -> str:
    for r in results:  # the nginx rows are keyed "nginx:<route>" by one_round
        if r.target.startswith("nginx: "):
            r.target = "nginx:" + r.target[7:]
    setup_routes = ROUTES
    lines = [
        "# aigw spec pipeline benchmark",
        "",
        f"- date: {started.strftime('%Y-%m-%d %H:%M:%S UTC')}; machine: {os.uname().nodename}, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the end",
        f"- aigw (workers: {opts.workers}) and nginx on core {opts.proxy_core}; replay "
        f"upstream, demo backend, issuer, Redis and wrk on core {opts.load_core}",
        f"- wrk -t1 -c{opts.connections} -d{opts.duration}s --latency after a "
        f"{run.WARMUP_SECONDS} s warm-up; median of {opts.rounds} interleaved round(s) (rps, "
        "p50, p99 of the median-rps round; CPU/request the median of the rounds)",
        "- every aigw route: bearer JWT verified (cached after the first), Redis rate limit "
        "counted, the demo config's mapping, policy and envelope; the bare passthrough is "
        "another aigw whose config has the replay upstream only",
        "- CPU/request: user + system CPU of aigw's processes over the wrk run / requests; on a "
        "shared machine it is far steadier than rps, so the CPU ratios are the ones to trust",
        "",
        *table(results, setup_routes),
        *variant_table(results, opts),
        "",
        f"Goals (issue 24): every spec route ≥ {GOAL_VS_PASSTHROUGH} times authenticated "
        f"passthrough rps, ≥ {GOAL_NO_UPSTREAM:g} for a route that makes no upstream call.",
        "",
        *targets_table(results, setup_routes, opts),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    return run.execute(parse_args(argv), run_all, report, prefix="pipelines-")


if __name__ == "__main__":
    sys.exit(main())
