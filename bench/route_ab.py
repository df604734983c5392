"""Spec routes side by side: two aigw executables (or one), interleaved, and optionally a py-spy
profile of each route under load.

`pipelines.py` measures one aigw; this harness measures the routes it names on `--aigw` and on
`--baseline` (an older checkout: any executable that runs `aigw run`, e.g. a shell script setting
PYTHONPATH), both running at once and each route measured on one then the other, back to back,
so machine noise hits both alike. It prints medians over the rounds of CPU µs/request and of
the ratios to that aigw's own passthrough: by rps, and by CPU (what rps would be for a CPU-bound
aigw; steadier when other work shares the machine). With `--profile`, py-spy samples the first
executable during each named route and the hottest functions (self and inclusive) are printed;
`--alone` leaves passthrough out (for a profiler wrapped around `--aigw`).

Usage: .venv/bin/python bench/route_ab.py [--quick] [--rounds N] [--baseline EXE]
       [--only 'AIDRE text,PDPP records'] [--profile] [--top N] [--alone]
"""

from __future__ import annotations

import argparse
import collections
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pipelines
import run
from pipelines import PipelineOptions, Route, Setup
from run import BenchError, Service


def parse_args(argv: list[str] | None) -> tuple[PipelineOptions, argparse.Namespace]:
    parser = run.bench_parser(__doc__.splitlines()[0])
    run.add_placement_args(parser)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", help="another aigw executable, measured in turn")
    parser.add_argument("--only", default="", help="comma-separated route name prefixes")
    parser.add_argument("--profile", action="store_true", help="py-spy each route (first aigw)")
    parser.add_argument("--top", type=int, default=25, help="functions listed per profile")
    parser.add_argument("--alone", action="store_true",
                        help="measure the named routes without passthrough (for a profiler "
                        "wrapped around --aigw)")
    args = parser.parse_args(argv)
    base = run.options_from(args, ["httptools"])
    fields = {k: v for k, v in vars(base).items() if k != "workers"}
    return PipelineOptions(**fields, rounds=args.rounds), args


def chosen(setup: Setup, only: str) -> list[Route]:
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    return [r for r in setup.routes if r is setup.routes[0]
            or not wanted or any(r.name.startswith(w) for w in wanted)]


def one_round(setup: Setup, opts: PipelineOptions, exes: dict[str, str], workdir: Path,
              routes: list[Route]) -> dict[str, dict[str, run.Result]]:
    """Every executable started at once (each idle while another is measured), then each
    route measured on each in turn: back to back, so machine noise hits them alike."""
    started: dict[str, tuple[Service, int]] = {}
    try:
        for name, exe in exes.items():
            opts.aigw = exe
            (workdir / name).mkdir(exist_ok=True)
            started[name] = pipelines.start_aigw(setup, opts, workdir / name)
        found: dict[str, dict[str, run.Result]] = {name: {} for name in exes}
        for route in routes:
            for name, (aigw, port) in started.items():
                found[name][route.name] = pipelines.measure(
                    f"{name}: {route.name}", port, route, setup.issuer.token, opts, workdir,
                    aigw.proc.pid)
        return found
    finally:
        for aigw, _ in started.values():
            run.stop(aigw)


def profile_route(setup: Setup, opts: PipelineOptions, route: Route, workdir: Path,
                  top: int) -> None:
    aigw, port = pipelines.start_aigw(setup, opts, workdir)
    try:
        script = pipelines.wrk_script(route, setup.issuer.token, workdir, "profile")
        url = f"http://127.0.0.1:{port}{route.path}"
        base = ["taskset", "-c", str(opts.load_core), "wrk", "-t1", f"-c{opts.connections}",
                "-s", str(script)]
        subprocess.run([*base, f"-d{run.WARMUP_SECONDS}s", url], capture_output=True, check=False)
        raw = workdir / "profile.txt"
        spy = subprocess.Popen([_py_spy(), "record", "--pid", str(aigw.proc.pid), "--duration",
                                str(opts.duration), "--rate", "500", "--format", "raw",
                                "--output", str(raw), "--nonblocking"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        subprocess.run([*base, f"-d{opts.duration + 1}s", url], capture_output=True, check=False)
        spy.communicate(timeout=opts.duration + 30)
        print_profile(route.name, raw, top)
    finally:
        run.stop(aigw)


def _py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(found).exists():
        raise BenchError("py-spy is not installed: .venv/bin/pip install py-spy")
    return found


def print_profile(name: str, raw: Path, top: int) -> None:
    """Self and inclusive sample shares per function, from py-spy's collapsed stacks."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        frames = [_short(f) for f in stack.split(";")[1:]]  # [0] is the process/thread
        total += int(count)
        if frames:
            own[frames[-1]] += int(count)
        for frame in set(frames):
            inclusive[frame] += int(count)
    print(f"\n## {name}: {total} samples")
    for title, counter in (("self", own), ("inclusive", inclusive)):
        print(f"### {title}")
        for frame, count in counter.most_common(top):
            print(f"{100 * count / total:5.1f}%  {frame}")


def _short(frame: str) -> str:
    return frame.replace(str(run.REPO_DIR) + "/", "").replace("/work/main/.venv/lib/", "")


PASSTHROUGH = pipelines.PASSTHROUGH.name


def report(results: dict[str, list[dict[str, run.Result]]], routes: list[Route]) -> None:
    """Medians over the rounds: CPU µs/request, and the route's rps and CPU ratios to the same
    executable's passthrough (passthrough CPU / route CPU: the rps ratio of a CPU-bound aigw,
    less exposed to other load on the machine than the rps itself)."""
    print("\n| route | " + " | ".join(f"{n} CPU/req | {n} rps ratio | {n} CPU ratio"
                                      for n in results) + " |")
    print("|---|" + "---|---|---|" * len(results))
    for route in routes:
        cells = []
        for rounds in results.values():
            cpu = statistics.median(r[route.name].cpu_us or 0 for r in rounds)
            rps = statistics.median((r[route.name].rps or 0)
                                    / (r[PASSTHROUGH].rps or 1 if PASSTHROUGH in r else 1)
                                    for r in rounds)
            by_cpu = statistics.median((r[PASSTHROUGH].cpu_us or 0 if PASSTHROUGH in r else 0)
                                       / (r[route.name].cpu_us or 1) for r in rounds)
            cells += [f"{cpu:,.0f} µs", f"{rps:.3f}", f"{by_cpu:.3f}"]
        print(f"| {route.name} | " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    opts, args = parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="aigw-route-ab-"))
    started: list[Service] = []
    try:
        started, setup = pipelines.start_support(opts, workdir)
        exe = opts.aigw or ""
        aigw, port = pipelines.start_aigw(setup, opts, workdir)
        try:
            pipelines.discover(setup, port)
        finally:
            run.stop(aigw)
        routes = chosen(setup, args.only)
        if args.alone:
            routes = routes[1:]
        if args.profile:
            for route in routes:
                profile_route(setup, opts, route, workdir, args.top)
            return 0
        exes = {"new": exe, **({"base": args.baseline} if args.baseline else {})}
        results: dict[str, list[dict[str, run.Result]]] = {name: [] for name in exes}
        for _ in range(opts.rounds):
            for name, found in one_round(setup, opts, exes, workdir, routes).items():
                results[name].append(found)
        report(results, routes)
    except BenchError as exc:
        print(f"route_ab: {exc}", file=sys.stderr)
        return 2
    finally:
        for service in reversed(started):
            run.stop(service)
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
