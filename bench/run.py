"""Passthrough benchmark: upstream direct vs nginx vs aigw (one transport at a time), on loopback.

Layout: the upstream and wrk share the load core (0), each proxy runs alone on the proxy core (1).
Every process is started in its own process group and stopped on exit, Ctrl-C or error.

Usage: .venv/bin/python bench/run.py [--quick] [--duration S] [--connections N] [--transports a,b]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from email.message import Message
from functools import partial
from pathlib import Path
from types import FrameType
from typing import TypeVar

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
SHARED_NGINX_CONF = REPO_DIR.parent / "shared" / "bench" / "nginx.conf"
LOCAL_NGINX_CONF = BENCH_DIR / "nginx.conf"
NGINX_TEMPLATE_DIR = "/tmp/aigw-nginx"
BODY_SIZE = 1024
WARMUP_SECONDS = 2
QUICK_SECONDS = 3
READY_TIMEOUT = 30.0
STOP_TIMEOUT = 5.0
PATH = "/bench"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class BenchError(Exception):
    """A step of the benchmark could not be carried out."""


@dataclass
class Service:
    """A started process (the leader of its own process group) and its log file."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path


@dataclass
class Result:
    """One wrk measurement, or the reason there is none."""

    target: str
    rps: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    note: str = ""
    failed: bool = False
    cpu_us: float | None = None  # CPU time of the proxy's processes per request
    requests: int | None = None  # requests completed in the measured wrk run


@dataclass
class Options:
    duration: int
    connections: int
    transports: list[str]
    load_core: int
    proxy_core: int
    aigw: str | None
    workers: tuple[int, ...] = (1,)
    baseline: str | None = None  # another aigw executable, measured with aiohttp beside ours


# --------------------------------------------------------------------------- arguments


def bench_parser(description: str) -> argparse.ArgumentParser:
    """A parser with the load options (--duration, --connections) every harness shares."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--duration", type=int, default=8, help="seconds per measurement")
    parser.add_argument("--connections", type=int, default=32, help="wrk connections")
    return parser


def add_placement_args(parser: argparse.ArgumentParser) -> None:
    """--quick, the two cores and the aigw executable."""
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_SECONDS} s measurements")
    parser.add_argument("--load-core", type=int, default=0, help="core for upstream and wrk")
    parser.add_argument("--proxy-core", type=int, default=1, help="core for the proxy")
    parser.add_argument("--aigw", help="aigw executable (default: .venv/bin/aigw, else PATH)")


def options_from(args: argparse.Namespace, transports: list[str]) -> Options:
    return Options(
        duration=QUICK_SECONDS if args.quick else args.duration,
        connections=args.connections,
        transports=transports,
        load_core=args.load_core,
        proxy_core=args.proxy_core,
        aigw=args.aigw or aigw_bin(),
    )


def parse_args(argv: list[str] | None = None) -> Options:
    parser = bench_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--transports",
        default="httptools,aiohttp,httpx",
        help="comma-separated aigw upstream transports, measured one at a time ('' for none)",
    )
    parser.add_argument(
        "--workers", default="1",
        help="comma-separated `aigw run --workers` counts for the first transport, e.g. 1,2; "
        "above 1, aigw may run on every core (shared with wrk and the upstream)",
    )
    parser.add_argument("--baseline", help="another aigw executable (e.g. an older checkout), "
                        "measured with the aiohttp transport as 'aigw baseline'")
    add_placement_args(parser)
    args = parser.parse_args(argv)
    opts = options_from(args, [t.strip() for t in args.transports.split(",") if t.strip()])
    opts.workers = tuple(int(n) for n in args.workers.split(","))
    opts.baseline = args.baseline
    return opts


# --------------------------------------------------------------------------- prerequisites


def check_tools(opts: Options) -> None:
    """Fail early and clearly when a required tool or core is missing."""
    if shutil.which("wrk") is None:
        raise BenchError("wrk is not installed: run `make bench-deps` (installs wrk and nginx).")
    if shutil.which("taskset") is None:
        raise BenchError("taskset is not installed (util-linux): run `make bench-deps`.")
    allowed = os.sched_getaffinity(0)
    for core in (opts.load_core, opts.proxy_core):
        if core not in allowed:
            raise BenchError(f"core {core} is not available (allowed: {sorted(allowed)}).")
    if opts.load_core == opts.proxy_core:
        raise BenchError("--load-core and --proxy-core must differ.")


def python_bin() -> str:
    venv = REPO_DIR / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def aigw_bin() -> str | None:
    venv = REPO_DIR / ".venv" / "bin" / "aigw"
    return str(venv) if venv.exists() else shutil.which("aigw")


def nginx_version() -> str:
    if shutil.which("nginx") is None:
        return "not installed"
    out = subprocess.run(["nginx", "-v"], capture_output=True, text=True, check=False)
    return (out.stderr or out.stdout).strip().removeprefix("nginx version: ")


def process_tree(pid: int) -> list[int]:
    """pid and every process below it (workers of a multi-process server)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, ()))
    return found


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds used so far by pid and the processes below it."""
    ticks = 0
    for member in process_tree(pid):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --------------------------------------------------------------------------- processes


def spawn(name: str, cmd: list[str], core: int | str, workdir: Path) -> Service:
    """Start cmd pinned to core (or a taskset list such as "0,1"), in a new session (so Ctrl-C
    reaches only the harness)."""
    log = workdir / f"{name}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["taskset", "-c", str(core), *cmd],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=workdir,
        )
    return Service(name, proc, log)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


@contextlib.contextmanager
def _signals_ignored() -> Iterator[None]:
    """Keep a second Ctrl-C from cutting a clean-up short."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def stop(service: Service) -> None:
    """SIGTERM the process group, wait, then SIGKILL whatever is left of it."""
    with _signals_ignored():
        _stop_group(service)


def _stop_group(service: Service) -> None:
    pgid = service.proc.pid
    _signal_group(pgid, signal.SIGTERM)
    try:
        service.proc.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        _signal_group(pgid, signal.SIGKILL)
        service.proc.wait(timeout=STOP_TIMEOUT)
    _signal_group(pgid, signal.SIGKILL)


def log_tail(service: Service, lines: int = 20) -> str:
    try:
        text = service.log.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def http_fetch(
    url: str, timeout: float = 2.0, headers: Mapping[str, str] | None = None
) -> tuple[int, Message, bytes]:
    """GET url: status, response headers and body (4xx and 5xx answers included)."""
    request = urllib.request.Request(url, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def http_get(
    url: str, timeout: float = 2.0, headers: Mapping[str, str] | None = None
) -> tuple[int, bytes]:
    status, _, body = http_fetch(url, timeout, headers)
    return status, body


def wait_ready(service: Service, url: str, timeout: float = READY_TIMEOUT) -> None:
    """Poll url until it answers 200; fail if the process exits or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = service.proc.poll()
        if code is not None:
            raise BenchError(f"{service.name} exited with code {code}:\n{log_tail(service)}")
        with contextlib.suppress(OSError):
            if http_get(url, timeout=1.0)[0] == 200:
                return
        time.sleep(0.1)
    raise BenchError(
        f"{service.name} not ready at {url} after {timeout:.0f} s:\n{log_tail(service)}"
    )


def spawn_ready(name: str, cmd: list[str], core: int | str, workdir: Path, url: str) -> Service:
    """Spawn and wait until url answers 200; stop the process if it never does."""
    service = spawn(name, cmd, core, workdir)
    try:
        wait_ready(service, url)
    except BaseException:
        stop(service)
        raise
    return service


def check_passthrough(name: str, port: int, headers: Mapping[str, str] | None = None) -> None:
    """The proxy must pass the upstream's 200 and its 1,024-byte body through."""
    status, body = http_get(f"http://127.0.0.1:{port}{PATH}", headers=headers)
    if status != 200 or len(body) != BODY_SIZE:
        raise BenchError(f"{name}: GET {PATH} gave {status} with {len(body)} bytes, not 200/1024")


# --------------------------------------------------------------------------- targets


def start_upstream(port: int, core: int, workdir: Path) -> Service:
    cmd = [python_bin(), "-m", "uvicorn", "upstream:app", "--app-dir", str(BENCH_DIR)]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--loop", "uvloop", "--http", "httptools"]
    cmd += ["--no-access-log", "--log-level", "warning"]
    return spawn_ready("upstream", cmd, core, workdir, f"http://127.0.0.1:{port}{PATH}")


def nginx_template() -> Path:
    return SHARED_NGINX_CONF if SHARED_NGINX_CONF.exists() else LOCAL_NGINX_CONF


def write_nginx_conf(upstream_port: int, listen_port: int, workdir: Path) -> Path:
    """Substitute the two ports (and keep pid/error log inside workdir) into a copy."""
    nginx_dir = workdir / "nginx"
    nginx_dir.mkdir()
    text = nginx_template().read_text()
    text = text.replace("UPSTREAM_PORT", str(upstream_port))
    text = text.replace("LISTEN_PORT", str(listen_port))
    text = text.replace(NGINX_TEMPLATE_DIR, str(nginx_dir))
    conf = nginx_dir / "nginx.conf"
    conf.write_text(text)
    return conf


def start_nginx(upstream_port: int, port: int, core: int, workdir: Path) -> Service:
    conf = write_nginx_conf(upstream_port, port, workdir)
    prefix = f"{conf.parent}/"
    cmd = ["nginx", "-c", str(conf), "-p", prefix, "-e", str(conf.parent / "startup.log")]
    return spawn_ready("nginx", cmd, core, workdir, f"http://127.0.0.1:{port}{PATH}")


def aigw_config(upstream_port: int, port: int, admin_port: int, transport: str) -> str:
    return (
        f"listen: {{host: 127.0.0.1, port: {port}}}\n"
        f"admin: {{host: 127.0.0.1, port: {admin_port}}}\n"
        "upstreams:\n"
        "  bench:\n"
        f"    url: http://127.0.0.1:{upstream_port}\n"
        f"    transport: {transport}\n"
        "default_upstream: bench\n"
        "logging: {access_log: false}\n"
    )


def start_aigw(
    binary: str | None,
    upstream_port: int,
    port: int,
    transport: str,
    core: int | str,
    workdir: Path,
    extra_config: str = "",
    name: str = "",
    workers: int = 1,
) -> Service:
    """Run aigw (config: aigw_config plus extra_config) as service `name` (aigw-TRANSPORT)."""
    if binary is None:
        raise BenchError("aigw is not installed (expected .venv/bin/aigw or aigw on PATH).")
    name = name or f"aigw-{transport}"
    admin_port = free_port()
    config = workdir / f"{name}.yaml"
    config.write_text(aigw_config(upstream_port, port, admin_port, transport) + extra_config)
    cmd = [binary, "run", "--config", str(config)]
    if workers > 1:
        cmd += ["--workers", str(workers)]
    ready_url = f"http://127.0.0.1:{admin_port}/readyz"
    service = spawn_ready(name, cmd, core, workdir, ready_url)
    if workers > 1:
        try:
            wait_workers(admin_port, workers)
        except BaseException:
            stop(service)
            raise
    return service


def wait_workers(admin_port: int, workers: int, timeout: float = 120.0) -> None:
    """Until every worker's event loop runs: the supervisor answers /readyz before its workers
    have built their runtime, and a request they accept meanwhile waits for it. Each worker's
    lag probe ticks 10 times a second, and /metrics sums them."""
    def ticks() -> float:
        _, body = http_get(f"http://127.0.0.1:{admin_port}/metrics", timeout=10)
        found = re.search(r"^aigw_event_loop_lag_seconds_count (\S+)$", body.decode(), re.M)
        return float(found.group(1)) if found else 0.0

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = ticks()
        time.sleep(1.0)
        if ticks() - before >= 8 * workers:
            return
    raise BenchError(f"{workers} workers did not all run within {timeout:.0f} s")


# --------------------------------------------------------------------------- wrk


def run_wrk(
    port: int, seconds: int, opts: Options, latency: bool, headers: Mapping[str, str] | None = None
) -> str:
    """Run wrk pinned to the load core in its own process group; return its stdout."""
    cmd = ["taskset", "-c", str(opts.load_core), "wrk", "-t1", f"-c{opts.connections}"]
    for header, value in (headers or {}).items():
        cmd += ["-H", f"{header}: {value}"]
    cmd += [f"-d{seconds}s", *(["--latency"] if latency else []), f"http://127.0.0.1:{port}{PATH}"]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        out, _ = proc.communicate(timeout=seconds + 30)
    finally:
        if proc.poll() is None:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.returncode != 0:
        raise BenchError(f"wrk failed ({proc.returncode}):\n{out.decode(errors='replace')}")
    return out.decode(errors="replace")


_UNIT_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


def _percentile_ms(text: str, pct: int) -> float:
    match = re.search(rf"^\s*{pct}(?:\.0+)?%\s+([\d.]+)(us|ms|s|m)\s*$", text, re.MULTILINE)
    if match is None:
        raise BenchError(f"no {pct}% latency in wrk output:\n{text}")
    return float(match.group(1)) * _UNIT_MS[match.group(2)]


def parse_wrk(target: str, text: str) -> Result:
    rps = re.search(r"^Requests/sec:\s+([\d.]+)", text, re.MULTILINE)
    count = re.search(r"^\s*(\d+) requests in", text, re.MULTILINE)
    if rps is None:
        raise BenchError(f"no Requests/sec in wrk output:\n{text}")
    notes = [
        line.strip() for line in text.splitlines() if "Non-2xx" in line or "Socket errors" in line
    ]
    return Result(
        target,
        float(rps.group(1)),
        _percentile_ms(text, 50),
        _percentile_ms(text, 99),
        "; ".join(notes),
        requests=int(count.group(1)) if count else None,
    )


def measure(
    target: str, port: int, opts: Options, headers: Mapping[str, str] | None = None,
    pid: int | None = None,
) -> Result:
    """Check the target, warm it up, then measure it; headers go with every request.

    With `pid`, the CPU time of that process and its children over the measured run, divided
    by the requests wrk completed, becomes the result's `cpu_us`.
    """
    check_passthrough(target, port, headers)
    run_wrk(port, WARMUP_SECONDS, opts, latency=False, headers=headers)
    before = cpu_seconds(pid) if pid is not None else 0.0
    output = run_wrk(port, opts.duration, opts, latency=True, headers=headers)
    spent = cpu_seconds(pid) - before if pid is not None else None
    result = parse_wrk(target, output)
    if spent is not None and result.requests:
        result.cpu_us = spent * 1e6 / result.requests
    print(
        f"  {target}: {result.rps:,.0f} rps, p50 {fmt_ms(result.p50_ms)}, "
        f"p99 {fmt_ms(result.p99_ms)}, cpu {fmt_us(result.cpu_us)}/req",
        flush=True,
    )
    return result


def not_measured(target: str, exc: BenchError) -> Result:
    """Print the full reason; keep its first and last lines as the report's note."""
    print(f"  not measured: {exc}", file=sys.stderr, flush=True)
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    note = lines[0] if len(lines) < 2 else f"{lines[0]} ... {lines[-1]}"
    return Result(target, note=f"not measured: {note}", failed=True)


def measure_proxy(
    target: str,
    starter: Callable[[], Service],
    port: int,
    opts: Options,
    headers: Mapping[str, str] | None = None,
) -> Result:
    """Start one proxy, measure it, stop it; a failure becomes a note, not an abort."""
    print(f"- {target}", flush=True)
    try:
        service: Service = starter()
    except BenchError as exc:
        return not_measured(target, exc)
    try:
        return measure(target, port, opts, headers, service.proc.pid)
    except BenchError as exc:
        return not_measured(target, exc)
    finally:
        stop(service)


# --------------------------------------------------------------------------- report


def fmt_ms(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 10:
        return f"{value:.2f} ms"
    return f"{value:.1f} ms" if value < 100 else f"{value:.0f} ms"


def fmt_us(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} µs"


def fmt_ratio(num: float | None, den: float | None) -> str:
    return "-" if num is None or not den else f"{num / den:.3g}"


def results_table(results: list[Result]) -> list[str]:
    lines = ["| target | rps | p50 | p99 | CPU/request |", "|---|---|---|---|---|"]
    for r in results:
        rps = "-" if r.rps is None else f"{r.rps:,.0f}"
        lines.append(f"| {r.target} | {rps} | {fmt_ms(r.p50_ms)} | {fmt_ms(r.p99_ms)} "
                     f"| {fmt_us(r.cpu_us)} |")
    return lines


def ratio_table(results: list[Result]) -> list[str]:
    by_name = {r.target: r for r in results}
    direct, nginx = by_name.get("upstream direct"), by_name.get("nginx")
    lines = [
        "| aigw transport | rps aigw/nginx | rps aigw/direct | p99 aigw/nginx | p99 aigw/direct |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        if not r.target.startswith("aigw"):
            continue
        cells = [
            fmt_ratio(r.rps, nginx and nginx.rps),
            fmt_ratio(r.rps, direct and direct.rps),
            fmt_ratio(r.p99_ms, nginx and nginx.p99_ms),
            fmt_ratio(r.p99_ms, direct and direct.p99_ms),
        ]
        lines.append(f"| {r.target} | " + " | ".join(cells) + " |")
    return lines


def report(results: list[Result], opts: Options, started: dt.datetime) -> str:
    lines = [
        "# aigw passthrough benchmark",
        "",
        f"- date: {started.strftime('%Y-%m-%d %H:%M:%S UTC')}",
        f"- cores: {os.cpu_count()}; upstream and wrk on core {opts.load_core}, "
        f"the proxy alone on core {opts.proxy_core}",
        f"- nginx: {nginx_version()} (config {nginx_template()})",
        f"- wrk -t1 -c{opts.connections} -d{opts.duration}s --latency, "
        f"after a {WARMUP_SECONDS} s warm-up",
        f"- upstream: raw ASGI app on uvicorn (uvloop, httptools), {BODY_SIZE:,} bytes of JSON",
        "",
        *results_table(results),
        "",
        *ratio_table(results),
    ]
    return finish_report(lines, results)


def finish_report(lines: list[str], results: list[Result]) -> str:
    """The report's text: its lines, then a note for each target that has one."""
    notes = [f"- {r.target}: {r.note}" for r in results if r.note]
    if notes:
        lines = [*lines, "", "Notes:", "", *notes]
    return "\n".join(lines) + "\n"


def write_report(text: str, started: dt.datetime, prefix: str = "") -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{prefix}{started.strftime('%Y%m%dT%H%M%SZ')}.md"
    path.write_text(text)
    return path


# --------------------------------------------------------------------------- main


def run_all(opts: Options, workdir: Path) -> list[Result]:
    """Start the upstream, then measure direct, nginx and each aigw transport in turn."""
    upstream_port = free_port()
    upstream = start_upstream(upstream_port, opts.load_core, workdir)
    try:
        print("- upstream direct", flush=True)
        results = [measure("upstream direct", upstream_port, opts, pid=upstream.proc.pid)]
        if shutil.which("nginx") is None:
            print("- nginx: not on PATH, skipped (run `make bench-deps`)", flush=True)
            results.append(Result("nginx", note="skipped: nginx not on PATH"))
        else:
            port = free_port()
            start = partial(start_nginx, upstream_port, port, opts.proxy_core, workdir)
            results.append(measure_proxy("nginx", start, port, opts))
        for transport in opts.transports:
            port = free_port()
            start = partial(
                start_aigw, opts.aigw, upstream_port, port, transport, opts.proxy_core, workdir
            )
            results.append(measure_proxy(f"aigw ({transport})", start, port, opts))
        if opts.baseline:
            port = free_port()
            start = partial(start_aigw, opts.baseline, upstream_port, port, "aiohttp",
                            opts.proxy_core, workdir, name="aigw-baseline")
            results.append(measure_proxy("aigw baseline (aiohttp)", start, port, opts))
        for count in opts.workers:
            if count == 1 or not opts.transports:
                continue
            port = free_port()
            cores = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
            start = partial(start_aigw, opts.aigw, upstream_port, port, opts.transports[0],
                            cores, workdir, name=f"aigw-{count}w", workers=count)
            label = f"aigw ({opts.transports[0]}, {count} workers, cores {cores})"
            results.append(measure_proxy(label, start, port, opts))
        return results
    finally:
        stop(upstream)


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    """Turn SIGTERM/SIGHUP into the same unwinding as Ctrl-C, so every finally runs."""
    raise KeyboardInterrupt(signum)


OptionsT = TypeVar("OptionsT", bound=Options)


def execute(
    opts: OptionsT,
    runner: Callable[[OptionsT, Path], list[Result]],
    render: Callable[[list[Result], OptionsT, dt.datetime], str],
    prefix: str = "",
) -> int:
    """Run a harness in a temporary directory, print and write its report; the exit status.

    0: every target measured (or skipped); 1: a target failed; 2: the run could not start;
    128 + signal number: interrupted (every process stopped).
    """
    def measured(workdir: Path, _started: dt.datetime) -> list[Result]:
        check_tools(opts)
        return runner(opts, workdir)

    return frame(measured, lambda results, started: render(results, opts, started), prefix,
                 lambda results: 1 if any(r.failed for r in results) else 0)


FiguresT = TypeVar("FiguresT")


def frame(measure: Callable[[Path, dt.datetime], FiguresT],
          render: Callable[[FiguresT, dt.datetime], str], prefix: str,
          status: Callable[[FiguresT], int]) -> int:
    """What every harness's run does around its measurement: signals turned into unwinding, a
    temporary directory, its report printed and written to bench/results/. `measure` raises
    `BenchError` when the run cannot start (status 2); else the status is `status(figures)`."""
    for sig in STOP_SIGNALS[1:]:
        signal.signal(sig, _interrupt)
    started = dt.datetime.now(dt.UTC)
    workdir = Path(tempfile.mkdtemp(prefix="aigw-bench-"))
    try:
        figures = measure(workdir, started)
    except BenchError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        signum = exc.args[0] if exc.args else signal.SIGINT
        print("bench: interrupted, all processes stopped", file=sys.stderr)
        return 128 + int(signum)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    text = render(figures, started)
    path = write_report(text, started, prefix)
    print("\n" + text + f"\nwritten to {path.relative_to(REPO_DIR)}")
    return status(figures)


def main(argv: list[str] | None = None) -> int:
    return execute(parse_args(argv), run_all, report)


if __name__ == "__main__":
    sys.exit(main())
