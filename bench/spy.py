"""py-spy helpers for the harnesses: record a process under load, summarise what it sampled."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import run
from run import BenchError


def py_spy() -> str:
    beside = Path(sys.executable).parent / "py-spy"  # the running venv's
    found = shutil.which("py-spy") or str(beside if beside.exists()
                                          else run.REPO_DIR / ".venv" / "bin" / "py-spy")
    if not Path(found).exists():
        raise BenchError("py-spy is not installed: .venv/bin/pip install py-spy")
    return found


def record(pid: int, seconds: int, rate: int, output: Path, fmt: str,
           by_function: bool = False) -> subprocess.Popen[bytes]:
    """py-spy sampling `pid` (and its children); `by_function` folds a function's lines."""
    cmd = [py_spy(), "record", "--pid", str(pid), "--subprocesses", "--duration", str(seconds),
           "--rate", str(rate), "--format", fmt, "--output", str(output), "--nonblocking"]
    if by_function:
        cmd.append("--function")
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def collapsed(raw: Path) -> list[tuple[list[str], int]]:
    """The stacks of a py-spy raw (collapsed) file, outermost frame first, with their counts."""
    stacks = []
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks.append((stack.split(";"), int(count)))
    return stacks


def summary(raw: Path, top: int = 25) -> list[str]:
    """The functions with the most samples on top of the stack (self), and the most samples
    anywhere in it (total), as Markdown tables of shares of all samples."""
    stacks = collapsed(raw)
    total = sum(count for _, count in stacks) or 1
    own: dict[str, int] = {}
    anywhere: dict[str, int] = {}
    for frames, count in stacks:
        own[frames[-1]] = own.get(frames[-1], 0) + count
        for frame in set(frames):
            anywhere[frame] = anywhere.get(frame, 0) + count
    lines = [f"{total:,} samples", ""]
    for title, counts in (("self", own), ("total", anywhere)):
        lines += [f"| {title} | function |", "|---|---|"]
        ranked = sorted(counts.items(), key=lambda item: -item[1])[:top]
        lines += [f"| {100 * n / total:.1f} % | `{frame}` |" for frame, n in ranked]
        lines.append("")
    return lines
