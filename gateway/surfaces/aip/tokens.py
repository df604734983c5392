"""Token counts with a real BPE tokenizer that works offline (bpe-openai ships its tables).

When the encoding cannot be loaded the count falls back to the text's UTF-8 length in bytes:
every BPE token stands for at least one byte, so that count is never below the true one.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

log = logging.getLogger("aigw.aip")


class TokenCounter:
    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self._count = _bpe_counter(encoding)

    @property
    def exact(self) -> bool:
        """False when counting UTF-8 bytes instead of tokens."""
        return self._count is not None

    def count(self, text: str) -> int:
        if self._count is None:
            return len(text.encode("utf-8"))
        return self._count(text)


@functools.cache
def _bpe_counter(encoding: str) -> Callable[[str], int] | None:
    try:
        import bpe_openai

        tokenizer = bpe_openai.get_encoding(encoding)
    except Exception as exc:  # a missing package or table must not stop the gateway
        log.warning("BPE encoding unavailable; counting UTF-8 bytes instead",
                    extra={"fields": {"encoding": encoding, "error": type(exc).__name__}})
        return None
    return lambda text: len(tokenizer.encode_ordinary(text))
