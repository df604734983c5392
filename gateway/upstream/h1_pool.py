"""A pool of HTTP/1.1 connections to one origin: at most `limit` open, idle ones reused LIFO.

`acquire` hands out an idle connection or opens a new one; at the limit it waits for a release.
The connect timeout covers that wait and the TCP (and TLS) handshake, as aiohttp's does.
Only a connection whose exchange ended exactly goes back to the pool (`H1Connection.reusable`),
and one that received anything while idle is closed rather than handed out (`ready`).
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque

from gateway.upstream.base import UpstreamError
from gateway.upstream.h1_connection import H1Connection
from gateway.upstream.headcaps import HeadCaps


class H1Pool:
    def __init__(self, host: str, port: int, tls: ssl.SSLContext | None, limit: int,
                 connect_timeout: float, read_timeout: float, caps: HeadCaps) -> None:
        self.host, self.port, self.tls = host, port, tls
        self.limit = limit
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.caps = caps
        self._idle: deque[H1Connection] = deque()
        self._open = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._closed = False

    async def acquire(self) -> tuple[H1Connection, bool]:
        """A connection and whether it was reused (a reused one may have gone stale)."""
        if (connection := self._take_idle()) is not None:
            return connection, True
        try:
            async with asyncio.timeout(self.connect_timeout):
                while self._open >= self.limit:
                    waiter = asyncio.get_running_loop().create_future()
                    self._waiters.append(waiter)
                    try:
                        await waiter
                    finally:
                        if waiter in self._waiters:
                            self._waiters.remove(waiter)
                    if (connection := self._take_idle()) is not None:
                        return connection, True
                self._open += 1
                try:
                    return await self._connect(), False
                except BaseException:
                    self._forget()
                    raise
        except TimeoutError:
            raise UpstreamError("timeout") from None

    async def acquire_new(self) -> H1Connection:
        """A new connection even when idle ones exist (for the retry after a stale one, whose
        slot has just been freed)."""
        try:
            async with asyncio.timeout(self.connect_timeout):
                self._open += 1
                try:
                    return await self._connect()
                except BaseException:
                    self._forget()
                    raise
        except TimeoutError:
            raise UpstreamError("timeout") from None

    def release(self, connection: H1Connection) -> None:
        """Back to the pool when reusable, else closed; either way a waiter may go on."""
        if not connection.reusable or self._closed:
            self.discard(connection)
            return
        connection.park()
        self._idle.append(connection)
        self._notify()

    def discard(self, connection: H1Connection) -> None:
        connection.close()
        self._forget()

    async def aclose(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop().close()

    def _take_idle(self) -> H1Connection | None:
        """The most recent idle connection that is still clean; the others are closed."""
        while self._idle:
            connection = self._idle.pop()
            if connection.ready:
                return connection
            self.discard(connection)
        return None

    async def _connect(self) -> H1Connection:
        loop = asyncio.get_running_loop()
        try:
            _, connection = await loop.create_connection(
                lambda: H1Connection(loop, self.read_timeout, self.caps), self.host, self.port,
                ssl=self.tls, server_hostname=self.host if self.tls else None,
            )
        except (OSError, ssl.SSLError) as exc:
            raise UpstreamError("connect") from exc
        return connection

    def _forget(self) -> None:
        self._open -= 1
        self._notify()

    def _notify(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
