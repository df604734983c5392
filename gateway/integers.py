"""Integers from text a client or an upstream sent: ASCII digits only, bounded in length.

Python's `int()` accepts far more than an HTTP field or a query parameter may hold: other
scripts' decimal digits (`١٢`), surrounding whitespace, underscores (`1_000`) and, through
`str.isdigit()` checks, characters it then refuses (`²`). Every place that turns text it did not
write into a number goes through `ascii_int`, so they all accept exactly the same forms.
"""

from __future__ import annotations

import re

_UNSIGNED = re.compile(rb"[0-9]{1,18}")
_SIGNED = re.compile(rb"-?[0-9]{1,18}")


def ascii_int(text: str | bytes | None, *, signed: bool = False) -> int | None:
    """The integer `text` spells in ASCII digits (a leading `-` when `signed`), else None."""
    if text is None:
        return None
    if isinstance(text, str):
        if not text.isascii():
            return None
        text = text.encode("ascii")
    pattern = _SIGNED if signed else _UNSIGNED
    return int(text) if pattern.fullmatch(text) else None
