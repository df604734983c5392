"""Settings read once, when the process starts: the listeners' sockets and head limits, the
admin listener, tracing, the log level, the interpreter and the shutdown grace. A reload cannot
apply them, so a reload that changes one is refused, naming it, rather than half applied."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from gateway.settings import Settings
from gateway.settings_key import settings_key

# Body timeouts of `listen` are read per request from the serving generation: not here.
START_ONLY = ("listen.host", "listen.port", "listen.max_headers", "listen.max_header_bytes",
              "listen.header_timeout", "listen.keep_alive_timeout", "admin", "tracing",
              "logging.level", "interpreter", "shutdown.grace")


def start_only_changes(serving: Settings, loaded: Settings) -> list[str]:
    """The settings among START_ONLY whose value differs between the two configs."""
    return [path for path in START_ONLY if _value(serving, path) != _value(loaded, path)]


def _value(settings: Settings, path: str) -> Any:
    value: Any = settings
    for part in path.split("."):
        value = getattr(value, part)
    return settings_key(value) if isinstance(value, BaseModel) else value
