"""Request paths: refusing the ambiguous ones, and prefix matching for route and limit rules.

The gateway decides on the path it sees and forwards the raw path it received, so a path that
an upstream (or a client library in between) may read differently is refused rather than
guessed at: dot segments, empty segments, backslashes, control characters and encoded
slashes (Envoy and nginx offer the same protections as normalisation options).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_ENCODED_SEPARATOR = re.compile(rb"%(2f|5c)", re.IGNORECASE)
_DOT_SEGMENT = re.compile(r"(^|/)\.{1,2}(/|;|$)")
_ENCODED_DOT = re.compile(rb"%2e", re.IGNORECASE)
# Control characters (a decoded %0A would otherwise end a route pattern's `$` match early).
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")


def ambiguity(path: str, raw_path: bytes | None) -> str | None:
    """Why a request path is refused, or None when it is plain."""
    if not path.startswith("/"):
        return "the request target must be an absolute path"
    if CONTROL_CHARACTERS.search(path):
        return "control characters are not accepted in paths"
    if "\\" in path or "//" in path:
        return "empty segments and backslashes are not accepted in paths"
    if _DOT_SEGMENT.search(path):
        return "dot segments are not accepted in paths"
    if raw_path is not None and (_ENCODED_SEPARATOR.search(raw_path)
                                 or _ENCODED_DOT.search(raw_path)):
        return "encoded slashes, backslashes and dots are not accepted in paths"
    return None


def method_covered(method: str, methods: list[str] | None) -> bool:
    """Whether a rule's method list covers a request method; GET covers HEAD."""
    return methods is None or method in methods or (method == "HEAD" and "GET" in methods)


def matches_prefix(prefix: str, path: str) -> bool:
    """"/api" covers "/api", "/api/x" and "/api;x" but not "/apix"; "/" covers every path."""
    if not path.startswith(prefix):
        return False
    return prefix.endswith("/") or len(path) == len(prefix) or path[len(prefix)] in "/;"


def longest_prefix(prefixes: Iterable[str], path: str) -> str | None:
    """The longest of `prefixes` that covers `path` (as `matches_prefix` reads it), if any."""
    covering = [prefix for prefix in prefixes if matches_prefix(prefix, path)]
    return max(covering, key=len) if covering else None
