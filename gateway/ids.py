"""Ids an upstream gave, as they travel back to it: any id is addressable (percent-encoded
into its path or query, RFC 3986, by `operations.Operation`), bounded only in length and
refused only where no URL could carry it: control characters, and the dot segments `.` and
`..` that a path would resolve away."""

from __future__ import annotations

MAX_ID_CHARS = 256


def addressable(item: str) -> bool:
    return 0 < len(item) <= MAX_ID_CHARS and item not in (".", "..") \
        and not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in item)
