"""What holds a gateway's event loop: a `py-spy record` of every thread (idle ones too, in time
order, without pausing the process) and a summary of it.

A sample of the loop's thread (MainThread) is either in uvloop's own C code (the innermost
Python frame is `Runner.run`: polling epoll, running its C callbacks, or waiting for the GIL at
a callback's start) or running Python code that a callback started: a request's handler, a
task. A run of consecutive Python samples is a stretch in which the loop could serve nothing
else; the summary lists the stretches of 50 ms and more by the gateway function most of their
samples were in, and what the loop ran overall. The other threads are summarised by the task
their executor ran and the gateway function they were in. Given the times some requests
waited, the summary also says what every thread was doing meanwhile (threads started after the
recording are aligned by its end: every thread is sampled until then).

py-spy reads Python frames only (native frames would need it to pause the process on every
sample), so time the loop spends waiting for the GIL in the middle of Python code counts as
that code's.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import run
from run import Service

LOOP_THREAD = "MainThread"
LOOP_FRAME = "Runner.run"  # asyncio.run's frame: below it, uvloop runs in C
LONG_STRETCH = 0.050
FROZEN = 0.100


class Profiler:
    """`py-spy record` of pid from start() to stop() (SIGINT: it writes what it has)."""

    def __init__(self, binary: str, pid: int, out: Path, workdir: Path, core: int,
                 rate: int = 100) -> None:
        self.binary, self.pid, self.out, self.workdir = binary, pid, out, workdir
        self.core, self.rate = core, rate
        self.service: Service | None = None

    def start(self) -> None:
        cmd = [self.binary, "record", "--pid", str(self.pid), "--rate", str(self.rate),
               "--nonblocking", "--threads", "--idle", "--format", "speedscope",
               "-o", str(self.out)]
        self.service = run.spawn("py-spy", cmd, self.core, self.workdir)

    def stop(self) -> None:
        """Idempotent: a second call (the harness's clean-up) does nothing."""
        service, self.service = self.service, None
        if service is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(service.proc.pid, signal.SIGINT)
        try:
            service.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            run.stop(service)


@dataclass(frozen=True)
class Frame:
    name: str
    file: str
    line: int

    def label(self, line: bool = False) -> str:
        where = self.file.split("/site-packages/")[-1].split("/lib/python3")[-1]
        with contextlib.suppress(ValueError):
            where = str(Path(self.file).relative_to(run.REPO_DIR))
        return f"{self.name} ({where}:{self.line})" if line else f"{self.name} ({where})"


Stack = tuple[Frame, ...]  # innermost first


def load(path: Path) -> tuple[dict[str, list[Stack]], float]:
    """Every thread's samples in time order (innermost frame first), and the sample period."""
    document = json.loads(path.read_text())
    frames = [Frame(f["name"], f.get("file") or "", f.get("line") or 0)
              for f in document["shared"]["frames"]]
    threads: dict[str, list[Stack]] = {}
    period = 0.0
    for profile in document["profiles"]:
        name = profile["name"].split('"')[1] if '"' in profile["name"] else profile["name"]
        threads.setdefault(name, []).extend(
            tuple(frames[i] for i in reversed(sample)) for sample in profile["samples"])
        period = period or (profile["weights"][0] if profile["weights"] else 0.0)
    return threads, period


def in_python(stack: Stack) -> bool:
    """Whether the loop's thread is running Python code a callback started."""
    return bool(stack) and stack[0].name != LOOP_FRAME


def owner(stack: Stack) -> str:
    """The innermost frame of the gateway's own code, else the innermost frame."""
    for frame in stack:
        if frame.file.startswith(str(run.REPO_DIR / "gateway")):
            return frame.label()
    return stack[0].label() if stack else "?"


def work(stack: Stack) -> str:
    """For an executor thread: the function it was handed (the frame inside _WorkItem.run)."""
    for inner, outer in itertools.pairwise(stack):
        if outer.name == "_WorkItem.run":
            return inner.label()
    return "(no task: waiting for one)"


def stretches(samples: list[Stack]) -> list[list[Stack]]:
    """Runs of consecutive samples in which the loop's thread ran Python code."""
    runs = (list(group) for busy, group in itertools.groupby(samples, in_python) if busy)
    return list(runs)


def frozen(samples: list[Stack], period: float, top: int) -> list[tuple[float, str]]:
    """Runs of ≥ FROZEN identical samples (every frame and line the same) inside a task:
    the thread made no progress in Python, so it was in a C call, or stopped while a
    garbage collection ran (in whichever thread triggered it: every thread stops)."""
    runs = []
    for stack, group in itertools.groupby(samples):
        length = sum(1 for _ in group) * period
        if length >= FROZEN and work(stack) != work(()):
            runs.append((length, stack[0].label(line=True)))
    return sorted(runs, reverse=True)[:top]


def share_table(title: str, counts: Counter[str], total: int, top: int) -> list[str]:
    lines = [f"| {title} | samples | share |", "|---|---|---|"]
    for key, count in counts.most_common(top):
        lines.append(f"| `{key}` | {count} | {count / max(total, 1):.1%} |")
    return lines


def stretch_table(long: list[list[Stack]], period: float, top: int) -> list[str]:
    """Long stretches grouped by the gateway function most of their samples were in."""
    groups: dict[str, list[int]] = {}
    for stretch in long:
        main = Counter(owner(s) for s in stretch).most_common(1)[0][0]
        groups.setdefault(main, []).append(len(stretch))
    lines = ["| stretches ≥ 50 ms, mostly in | stretches | total | longest |", "|---|---|---|---|"]
    for main, sizes in sorted(groups.items(), key=lambda g: -sum(g[1]))[:top]:
        lines.append(f"| `{main}` | {len(sizes)} | {sum(sizes) * period * 1000:,.0f} ms | "
                     f"{max(sizes) * period * 1000:,.0f} ms |")
    return lines


def during(samples: list[Stack], total: int, period: float, start: float,
           length: float) -> list[Stack]:
    """A thread's samples from `start` s for `length` s. Threads are sampled until the end;
    one started after the recording has fewer samples than `total`, the loop thread's."""
    offset = total - len(samples)
    first = max(0, round(start / period) - offset)
    return samples[first:max(first, round((start + length) / period) - offset + 1)]


def doing(samples: list[Stack], loop: bool) -> str:
    """What a thread did over some samples: the loop's Python code, or the innermost line
    an executor thread was at most (and whether it never moved)."""
    if not samples:
        return "-"
    if loop:
        python = [owner(s) for s in samples if in_python(s)]
        if not python:
            return "uvloop (C)"
        top, count = Counter(python).most_common(1)[0]
        return f"Python {len(python) / len(samples):.0%}, mostly `{top}` ({count})"
    if all(work(s) == work(()) for s in samples):
        return "no task"
    top, count = Counter(s[0].label(line=True) for s in samples).most_common(1)[0]
    still = " (never moved)" if len(set(samples)) == 1 and len(samples) >= 5 else ""
    return f"`{top}` {count}/{len(samples)}{still}"


def stalls(threads: dict[str, list[Stack]], period: float,
           slow: Sequence[tuple[float, float]]) -> list[str]:
    """For each (start, length) a probe request waited: what every thread was doing then."""
    loop = threads.get(LOOP_THREAD, [])
    names = [LOOP_THREAD, *sorted(n for n in threads if n.startswith("aigw-"))]
    lines = ["| at (s) | waited | " + " | ".join(names) + " |",
             "|---|---|" + "---|" * len(names)]
    for start, length in slow:
        cells = [doing(during(threads[n], len(loop), period, start, length), n == LOOP_THREAD)
                 for n in names]
        lines.append(f"| {start:.1f} | {length * 1000:,.0f} ms | " + " | ".join(cells) + " |")
    return lines


def summary(path: Path, slow: Sequence[tuple[float, float]] = (), top: int = 10) -> list[str]:
    """Markdown: the loop thread's long stretches and what it ran, the other threads' work,
    and what every thread did while the `slow` requests (start, length, in seconds since the
    recording began) waited."""
    if not path.exists():
        return ["(no py-spy output)"]
    threads, period = load(path)
    loop = threads.get(LOOP_THREAD, [])
    python = [s for s in loop if in_python(s)]
    long = [s for s in stretches(loop) if len(s) * period >= LONG_STRETCH]
    lines = [
        f"{len(loop)} samples of the loop's thread, one every {period * 1000:g} ms; running "
        f"Python code in {len(python) / max(len(loop), 1):.1%} of them, in {len(long)} "
        f"stretches of ≥ {LONG_STRETCH * 1000:g} ms in a row "
        f"({sum(map(len, long)) / max(len(loop), 1):.1%} of the window). A stretch is an "
        "upper bound of one hold of the loop: a return to epoll shorter than the sample "
        "period (between two upstream pages, say) goes unseen.",
        "",
        *stretch_table(long, period, top),
        "",
        *share_table("the loop running Python, in", Counter(owner(s) for s in python),
                     len(loop), top),
    ]
    for name, samples in threads.items():
        if not name.startswith("aigw-"):
            continue
        busy = [s for s in samples if work(s) != work(())]
        lines += ["", f"Thread {name}: {len(samples)} samples, {len(busy)} in a task", "",
                  *share_table("its task", Counter(work(s) for s in busy), len(samples), 5),
                  "", *share_table("in (gateway frame)", Counter(owner(s) for s in busy),
                                   len(samples), 6)]
        stops = frozen(samples, period, 5)
        if stops:
            lines += ["", f"Its longest stops at one line (≥ {FROZEN * 1000:g} ms, in a task): "
                      + "; ".join(f"{length * 1000:,.0f} ms at `{where}`"
                                  for length, where in stops)]
    if slow:
        lines += ["", "The slowest probe requests, and what each thread did while they waited "
                  "(samples aligned to ±0.1 s):", "", *stalls(threads, period, slow)]
    return lines
