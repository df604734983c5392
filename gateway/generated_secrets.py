"""Secrets made once on this machine and kept in a file: `${generated_secret:PATH}` and
`${generated_secret_file:PATH}` in a config (PATH relative to the file that names it).

The first load that names PATH creates it: 256 random bits as 64 hex digits, mode 0600, written
atomically and never replaced, so every worker and every restart reads the same secret and
none is ever committed. `generated_secret` stands for the secret itself (a cursor or client
secret), `generated_secret_file` for the file's absolute path (for a setting that reads its
secret from a file, such as a signing key). Replicas on several machines would each make
their own: give those a secret they share (`${VAR}`, or a file they all mount).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from gateway.private_files import open_private, private_folder, tighten


def generated(form: str, path: Path) -> str:
    """The secret kept at `path` (or, for `generated_secret_file`, the path), created first
    when missing. Raises OSError when it can be neither created nor read."""
    path = path.resolve()
    if not path.exists():
        create_once(path, secrets.token_hex(32) + "\n")
    tighten(path)  # as an older version may have left it
    if form == "generated_secret_file":
        return str(path)  # read by the setting that names it
    secret = path.read_text(encoding="utf-8").strip()
    if not secret:
        raise OSError(f"{path} is empty")
    return secret


def create_once(path: Path, text: str) -> None:
    """Write `text` to a new file at `path`, readable by its owner only (in a folder made
    0700 when missing), unless one exists.

    The file appears whole (written aside, then linked into place) and an existing one is
    never replaced, so processes racing to create it all end up reading the same content.
    """
    private_folder(path.parent, own=False)  # a config's own folder keeps its mode
    staging = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    descriptor = open_private(staging, os.O_WRONLY | os.O_EXCL)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(text)
        os.link(staging, path)
    except FileExistsError:
        pass  # another process stored its file first; that one is used
    finally:
        staging.unlink()
