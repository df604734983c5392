"""Files and folders the gateway writes that hold data or secrets (its indexes of callers'
records, generated secrets and keys, event and decision logs): readable by their owner only,
files 0600 and folders 0700, whatever the process's umask. A mode given to `open` or `mkdir`
is cut by the umask, and `mkdir -p` makes parents with the umask's mode alone, so each is set
explicitly here.

A file or folder that is the gateway's own and was made looser (by an older version) is
tightened when opened (`own=True`); a folder an operator chose for a log (it may be shared
with a log shipper) keeps its mode, and only what is made in it is private."""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path

FILE_MODE = 0o600
FOLDER_MODE = 0o700
log = logging.getLogger("aigw")


def private_folder(path: Path, *, own: bool = True) -> Path:
    """`path` as a folder, each folder made here 0700; an existing `path` tightened (to its
    owner's bits) when it is the gateway's `own`: its parents never, they may be anyone's."""
    missing = []
    for folder in (path, *path.parents):  # up to the first that exists: one stat, usually
        if folder.exists():
            break
        missing.append(folder)
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=FOLDER_MODE)
        except FileExistsError:
            continue  # another process made it meanwhile
        os.chmod(folder, FOLDER_MODE)  # exactly: the umask may have taken the owner's bits
    if own and path not in missing:
        _tighten(path, os.stat(path), lambda mode: os.chmod(path, mode))
    return path


def open_private(path: Path | str, flags: int, *, own: bool = True) -> int:
    """`os.open(path, flags | O_CREAT)`: a file made here is 0600 (the umask can only take
    bits away); an existing one is tightened when it is the gateway's `own`."""
    descriptor = os.open(path, flags | os.O_CREAT, FILE_MODE)
    if own:
        try:
            _tighten(path, os.fstat(descriptor), lambda mode: os.fchmod(descriptor, mode))
        except BaseException:
            os.close(descriptor)
            raise
    return descriptor


def private_file(path: Path) -> Path:
    """`path` as a file of the gateway's own, 0600: made empty when missing (SQLite takes an
    empty file for a new database, and makes its -wal and -shm files with the database's
    mode), tightened when looser."""
    os.close(open_private(path, os.O_RDWR))
    return path


def tighten(path: Path) -> None:
    """An existing file or folder of the gateway's own made private (nothing when absent)."""
    with contextlib.suppress(FileNotFoundError):
        _tighten(path, os.stat(path), lambda mode: os.chmod(path, mode))


def _tighten(path: Path | str, status: os.stat_result, change: Callable[[int], None]) -> None:
    """Drop the group's and others' bits of a file or folder the gateway's user owns; one
    another user owns (a folder an operator chose, say) is left as it is, with a warning."""
    mode = stat.S_IMODE(status.st_mode)
    if not mode & 0o077:
        return
    if status.st_uid != os.geteuid():
        log.warning("readable by others and not this user's to change: %s", path)
        return
    change(mode & 0o700)
