"""`python tests/peak_memory.py FILE ARGS...`: run `aigw ARGS` in this process, then write its
peak resident size in KiB (VmHWM) to FILE.

The kernel's other measures (wait4's or getrusage's `ru_maxrss`) keep the high-water mark of
the memory a child had before `exec`: a copy of the parent's, so under a test run that grew
to hundreds of MB they say more about pytest than about the command. VmHWM is the peak of the
process's own memory since `exec`."""

from __future__ import annotations

import sys
from pathlib import Path

from gateway.cli import main


def peak_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


if __name__ == "__main__":
    code = 1
    try:
        code = main(sys.argv[2:])
    finally:
        Path(sys.argv[1]).write_text(str(peak_kib()))
    sys.exit(code)
