"""Profile aigw's passthrough under load: a py-spy flame graph into bench/results/.

The bench upstream and wrk run on the load core, aigw alone on the proxy core (as in run.py);
py-spy samples aigw (and its workers) while wrk runs, then writes an SVG flame graph and a
collapsed-stack text file next to the other reports.

Usage: .venv/bin/python bench/profile.py [--duration S] [--transport T] [--label NAME]
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import sys
import tempfile
from pathlib import Path

import run
from run import BenchError
from spy import record


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = run.bench_parser(__doc__.splitlines()[0])
    run.add_placement_args(parser)
    parser.add_argument("--transport", default="httptools")
    parser.add_argument("--extra-config", default="", help="YAML appended to aigw's config")
    parser.add_argument("--label", default="passthrough", help="part of the output file names")
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    return parser.parse_args(argv)


def profile(args: argparse.Namespace, workdir: Path) -> list[Path]:
    opts = run.options_from(args, [args.transport])
    run.check_tools(opts)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    run.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    outputs = [run.RESULTS_DIR / f"profile-{args.label}-{stamp}.{ext}" for ext in ("svg", "txt")]
    upstream_port, port = run.free_port(), run.free_port()
    upstream = run.start_upstream(upstream_port, opts.load_core, workdir)
    try:
        aigw = run.start_aigw(opts.aigw, upstream_port, port, args.transport, opts.proxy_core,
                              workdir, extra_config=args.extra_config)
        try:
            run.check_passthrough("aigw", port)
            run.run_wrk(port, run.WARMUP_SECONDS, opts, latency=False)
            recorders = [record(aigw.proc.pid, opts.duration, args.rate, path, fmt)
                         for path, fmt in zip(outputs, ("flamegraph", "raw"), strict=True)]
            result = run.parse_wrk("aigw", run.run_wrk(port, opts.duration + 1, opts, True))
            for recorder in recorders:
                _, err = recorder.communicate(timeout=opts.duration + 30)
                if recorder.returncode != 0:
                    raise BenchError(f"py-spy failed: {err.decode(errors='replace')}")
            print(f"aigw under py-spy: {result.rps:,.0f} rps, p99 {run.fmt_ms(result.p99_ms)}")
        finally:
            run.stop(aigw)
    finally:
        run.stop(upstream)
    return outputs


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="aigw-profile-"))
    try:
        for path in profile(args, workdir):
            print(f"written to {path.relative_to(run.REPO_DIR)}")
    except BenchError as exc:
        print(f"profile: {exc}", file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
