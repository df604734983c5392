"""Embedding off the event loop: a small pool of threads, bounded inputs, two deadlines.

Two threads at most, apart from the schema checks' (`gateway.untrusted_schema.running`), so a
burst of embedding queues here instead of taking every core. A call is refused before it queues
when it asks too much (`InputTooLarge`: more texts or longer ones than its bounds allow); work
no thread took within `queue_timeout` is dropped as `Overloaded`, so the queue never holds more
than that much waiting; a call not done within `queue_timeout + timeout` is abandoned
(`EmbeddingTimeout`; its thread finishes the bounded work it holds, the pool busy meanwhile).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from gateway.embeddings.base import Embedder, EmbeddingError
from gateway.embeddings.config import Bounds

_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="aigw-embed")


class InputTooLarge(ValueError):
    """A call asked for more than its bounds allow; nothing was embedded."""


class Overloaded(EmbeddingError):
    """No embedding thread took the work within `queue_timeout`; nothing was embedded."""


class EmbeddingTimeout(EmbeddingError):
    """The embedder did not finish within `timeout`."""


def check_inputs(texts: Sequence[str], bounds: Bounds) -> None:
    """Raise `InputTooLarge` unless `texts` fit `bounds`."""
    if len(texts) > bounds.max_texts:
        raise InputTooLarge(f"{len(texts)} texts in one call, more than {bounds.max_texts}")
    longest = max(map(len, texts), default=0)
    if longest > bounds.max_chars:
        raise InputTooLarge(f"a text of {longest} characters, more than {bounds.max_chars}")


def clip(text: str, bounds: Bounds) -> tuple[str, bool]:
    """`text` cut to `bounds.max_chars`, and whether it was cut (for a caller that must say)."""
    return text[:bounds.max_chars], len(text) > bounds.max_chars


async def embed_off_loop(embedder: Embedder, texts: Sequence[str],
                         bounds: Bounds) -> list[list[float]]:
    """`embedder.embed(texts)` in an embedding thread, within `bounds`."""
    check_inputs(texts, bounds)
    if not texts:
        return []
    deadline = time.monotonic() + bounds.queue_timeout
    batch = list(texts)  # the caller's sequence may change while the thread reads it

    def job() -> list[list[float]]:
        if time.monotonic() > deadline:
            raise Overloaded(f"no embedding thread was free within {bounds.queue_timeout} s")
        return embedder.embed(batch)

    work = asyncio.get_running_loop().run_in_executor(_POOL, job)
    try:
        return await asyncio.wait_for(work, bounds.queue_timeout + bounds.timeout)
    except TimeoutError:
        raise EmbeddingTimeout(f"embedding took longer than {bounds.timeout} s") from None
