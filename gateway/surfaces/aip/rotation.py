"""A JSON-lines file that rotates by size and keeps a bounded number of rotated files.

`file` is the current one; `file.1` is the newest rotated file, `file.N` the oldest kept. Every
batch of lines is appended under an exclusive `flock` on `file.lock`, so several processes (and
config generations) sharing the path never interleave half lines, never rotate twice at once,
and a writer whose file was rotated by another reopens the new one before writing: no line is
written to a file already rotated away. Lines are never split across files. The calls block
(file I/O and the lock): run them in a worker thread, never on the event loop.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gateway.private_files import open_private, private_folder


class RotatingFile:
    def __init__(self, path: str, max_bytes: int, keep: int) -> None:
        self.path = os.path.abspath(path)
        self._max = max_bytes
        self._keep = keep
        self._fd: int | None = None
        self._lock_fd: int | None = None

    def write(self, lines: list[bytes]) -> None:
        """Append whole lines, rotating first whenever the next one would pass the limit."""
        with self._locked():
            fd = self._open()
            size = os.fstat(fd).st_size
            pending: list[bytes] = []
            for line in lines:
                if size > 0 and size + len(line) > self._max:
                    _write_all(fd, b"".join(pending))
                    pending, size = [], 0
                    fd = self._rotate()
                pending.append(line)
                size += len(line)
            _write_all(fd, b"".join(pending))

    def close(self) -> None:
        for fd in (self._fd, self._lock_fd):
            if fd is not None:
                os.close(fd)
        self._fd = self._lock_fd = None

    @contextmanager
    def _locked(self) -> Iterator[None]:
        if self._lock_fd is None:
            private_folder(Path(self.path).parent, own=False)
            self._lock_fd = open_private(self.path + ".lock", os.O_RDWR, own=False)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _open(self) -> int:
        """The descriptor of the file now at `path` (reopened if another writer rotated it)."""
        if self._fd is not None:
            try:
                current = os.stat(self.path)
            except FileNotFoundError:
                current = None
            mine = os.fstat(self._fd)
            if current is not None and (current.st_ino, current.st_dev) == \
                    (mine.st_ino, mine.st_dev):
                return self._fd
            os.close(self._fd)
        self._fd = open_private(self.path, os.O_WRONLY | os.O_APPEND, own=False)
        return self._fd

    def _rotate(self) -> int:
        """file.N-1 -> file.N, ..., file -> file.1 (file.N is replaced, so dropped); a new file."""
        for index in range(self._keep - 1, 0, -1):
            older = f"{self.path}.{index}"
            if os.path.exists(older):
                os.replace(older, f"{self.path}.{index + 1}")
        os.replace(self.path, f"{self.path}.1")
        return self._open()


def rotated_files(path: str, keep: int) -> list[str]:
    """The files holding lines, oldest first: file.keep, ..., file.1, file (those that exist)."""
    names = [f"{path}.{index}" for index in range(keep, 0, -1)] + [path]
    return [name for name in names if os.path.exists(name)]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
