"""Script calls to one Redis server on one pipelined connection, framed by hiredis.

The rate limiter calls its counting script for nearly every request (`sync: exact`), and
redis-py spends about four times the CPU of the exchange itself on such a call: its command
layers, connection pool, retry wrapper and stream reader (bench/README.md, "Auth and limits").
This client sends `EVALSHA` (`EVAL` once when the server does not know the script) on a
connection of its own, as `asyncio.Protocol`, with redis-py's URL parser and hiredis (the
parser redis-py uses) for the wire format. It serves single servers without TLS (`redis://`,
`unix://`, `redis+unix://`); TLS, Cluster and Sentinel URLs keep redis-py (gateway.redis_url).

Replies are matched to calls in order. A call that is not answered within the timeout, a
reply that cannot be parsed or a closed connection fails every call waiting on that
connection, and the next call opens a new one.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
from collections.abc import Sequence
from typing import Any, cast
from urllib.parse import urlsplit

import hiredis

from gateway.redis_url import redis_py_url

_SINGLE_SERVER = {"redis", "unix", "redis+unix"}
_OPTIONS = {"host", "port", "db", "username", "password", "path", "connection_class"}


class ScriptError(Exception):
    """Redis answered the call with an error (the message is Redis's, naming no key)."""


def serves(url: str) -> bool:
    """Whether `url` is a single server this client can reach (no TLS, no other options)."""
    scheme = urlsplit(url).scheme
    return scheme in _SINGLE_SERVER and set(_parsed(url)) <= _OPTIONS


def _parsed(url: str) -> dict[str, Any]:
    from redis.asyncio.connection import parse_url

    return dict(parse_url(redis_py_url(url)))


class Script:
    """A Lua script, known to the server by its SHA1 once it has run."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()  # Redis names scripts so


class LeanRedis:
    def __init__(self, url: str, timeout: float) -> None:
        self._options = _parsed(url)
        self._timeout = timeout
        self._connection: _Connection | None = None
        self._opening = asyncio.Lock()
        self._closed = False

    async def run(self, script: Script, keys: Sequence[str], args: Sequence[int]) -> Any:
        """The script's reply. Raises `ScriptError` for an error reply, `ConnectionError`,
        `OSError` or `TimeoutError` when the server could not be asked or did not answer."""
        connection = await self._connected()
        reply = await connection.call(_command("EVALSHA", script.sha, len(keys), *keys, *args))
        if isinstance(reply, hiredis.ReplyError) and str(reply).startswith("NOSCRIPT"):
            reply = await connection.call(_command("EVAL", script.source, len(keys), *keys, *args))
        if isinstance(reply, hiredis.ReplyError):
            raise ScriptError(str(reply))
        return reply

    async def aclose(self) -> None:
        """Close the connection; a call from now on (or one still opening) raises."""
        self._closed = True
        async with self._opening:  # one being opened is stored first, then closed here
            if self._connection is not None:
                self._connection.fail(ConnectionError("closed"))
                self._connection = None

    async def _connected(self) -> _Connection:
        connection = self._connection
        if connection is not None and not connection.closed:
            return connection
        async with self._opening:
            if self._closed:
                raise ConnectionError("client closed")
            if self._connection is None or self._connection.closed:
                self._connection = await self._open()
            return self._connection

    async def _open(self) -> _Connection:
        loop = asyncio.get_running_loop()
        options = self._options
        async with asyncio.timeout(self._timeout):
            if "path" in options:
                _, connection = await loop.create_unix_connection(
                    lambda: _Connection(self._timeout), options["path"])
            else:
                _, connection = await loop.create_connection(
                    lambda: _Connection(self._timeout), options.get("host", "localhost"),
                    options.get("port", 6379))
        try:
            for command in _handshake(options):
                reply = await connection.call(_command(*command))
                if isinstance(reply, hiredis.ReplyError):
                    raise ScriptError(str(reply).split(" ", 1)[0])  # never echo credentials
        except BaseException:
            connection.fail(ConnectionError("handshake failed"))
            raise
        return connection


def _command(*parts: str | int) -> bytes:
    return hiredis.pack_command(cast(Any, parts))  # its stub types a 1-tuple


def _handshake(options: dict[str, Any]) -> list[tuple[str | int, ...]]:
    commands: list[tuple[str | int, ...]] = []
    if options.get("password") is not None:
        user = options.get("username")
        commands.append(("AUTH", user, options["password"]) if user
                        else ("AUTH", options["password"]))
    if options.get("db"):
        commands.append(("SELECT", int(options["db"])))
    return commands


class _Connection(asyncio.Protocol):
    def __init__(self, timeout: float) -> None:
        self._timeout = timeout
        self._reader = hiredis.Reader()
        self._waiting: collections.deque[asyncio.Future[Any]] = collections.deque()
        self._transport: asyncio.Transport | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self._reader.feed(data)
        try:
            while (reply := self._reader.gets()) is not False:
                future = self._waiting.popleft()  # IndexError: a reply nobody asked for
                if not future.done():  # its caller may have left
                    future.set_result(reply)
        except (hiredis.ProtocolError, IndexError):
            self.fail(ConnectionError("unexpected reply"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(ConnectionError("connection lost"))

    def fail(self, error: Exception) -> None:
        """Close the connection; every call waiting on it raises `error`."""
        self.closed = True
        if self._transport is not None:
            self._transport.close()
        while self._waiting:
            future = self._waiting.popleft()
            if not future.done():
                future.set_exception(error)

    async def call(self, command: bytes) -> Any:
        if self.closed or self._transport is None:
            raise ConnectionError("connection closed")
        future = asyncio.get_running_loop().create_future()
        self._waiting.append(future)
        self._transport.write(command)
        try:
            async with asyncio.timeout(self._timeout):
                return await future
        except TimeoutError:
            self.fail(TimeoutError())  # the late reply would answer the next call
            raise
