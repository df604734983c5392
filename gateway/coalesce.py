"""One write per response where possible: small writes made in one loop turn go out together.

uvicorn writes a response's head and its body with two `transport.write` calls, each a
`sendmsg` on an idle socket. This transport wrapper holds a small write until the next write or
the end of the loop turn, then sends what it holds in one call. Large writes are never copied:
what is held goes first, then the large write as it is. `close` and `write_eof` send what is held
before they act, so nothing is lost or reordered.
"""

from __future__ import annotations

import asyncio
from typing import Any

HOLD_LIMIT = 16 * 1024  # bytes: above this a write is sent at once, never copied


class CoalescingTransport:
    """Wraps an `asyncio.Transport`; every method but the writing ones is passed through."""

    __slots__ = ("_held", "_loop", "_scheduled", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None
        self._scheduled = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        held = self._held
        if held is None:
            if len(data) > HOLD_LIMIT:
                self._transport.write(data)
                return
            self._held = bytes(data)
            if not self._scheduled:
                self._scheduled = True
                self._loop.call_soon(self._flush_soon)
            return
        self._held = None
        if len(data) > HOLD_LIMIT:
            self._transport.write(held)
            self._transport.write(data)
        else:
            self._transport.write(held + data)

    def writelines(self, chunks: Any) -> None:
        for chunk in chunks:
            self.write(chunk)

    def flush(self) -> None:
        held, self._held = self._held, None
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def _flush_soon(self) -> None:
        self._scheduled = False
        self.flush()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + len(self._held or b"")

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
