"""Helpers shared by the command-line commands: loading a config or exiting with its problems,
and keeping credentials out of what a terminal shows."""

from __future__ import annotations

import logging
import re
import sys

from gateway.loader import ConfigError, LoadedConfig, load_config


def load_or_exit(path: str) -> LoadedConfig:
    try:
        return load_config(path)
    except ConfigError as exc:
        print(f"{path}: invalid configuration ({len(exc.issues)} problem(s)):", file=sys.stderr)
        for issue in exc.issues:
            print(f"  {issue}", file=sys.stderr)
        raise SystemExit(1) from None


def redact(text: str) -> str:
    """Credentials in URLs (scheme://user:secret@host) never reach a terminal or a log."""
    return re.sub(r"(//)[^/@\s]+@", r"\1***@", text)


def log_warnings(loaded: LoadedConfig) -> None:
    """Each config warning, once, as a gateway log line."""
    log = logging.getLogger("aigw.config")
    for issue in loaded.warnings:
        log.warning("config warning: %s", issue,
                    extra={"fields": {"file": issue.file, "path": issue.path}})
