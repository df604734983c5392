"""AIP access and citation events: build, validate, and keep them in a durable sink.

Two sinks behind one protocol, and with both an answered `emit` is stored. `RedisStreamSink`
writes each event with one XADD, so every replica shares one stream. `JsonlSink` keeps a bounded
queue drained by one writer task that hands each batch (the events of every caller waiting) to
the sink's own thread (writer_thread.py), which appends whole lines under a file lock and
rotates the file by size (rotation.py), so processes and generations sharing the file never
interleave half lines or lose one to a rotation; each `emit` returns when its batch is written,
or raises when it could not be. A full queue makes `emit` wait rather than drop, and
`aclose()` stops taking events, drains the queue and closes the file, so a reload or SIGTERM
that closes the sink loses nothing. (A machine crash can lose what the kernel had not yet
written; there is no fsync.)
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Any, Protocol
from urllib.parse import urlsplit

import jsonschema
import orjson

from gateway import redis_url
from gateway.surfaces.aip.rotation import RotatingFile, rotated_files
from gateway.surfaces.aip.signing_config import Events
from gateway.surfaces.aip.writer_thread import WriterThread

AIP_VERSION = "0.1"
_HOSTNAME = re.compile(r"^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.?)+$")


class EventSinkUnavailable(Exception):
    """The sink could not store the event (e.g. Redis is down, or the sink is closed)."""


def load_schema(name: str) -> dict[str, Any]:
    text = (resources.files("gateway") / "schemas" / "aip" / name).read_text("utf-8")
    return json.loads(text)


def _format_checker() -> jsonschema.FormatChecker:
    """The default checker plus the formats the event schema uses that need extra packages."""
    checker = jsonschema.FormatChecker()
    checker.checks("date-time")(_is_datetime)
    checker.checks("hostname")(lambda value: not isinstance(value, str)
                               or bool(_HOSTNAME.match(value)))
    checker.checks("uri")(_is_uri)
    return checker


def _is_datetime(value: object) -> bool:
    if not isinstance(value, str):
        return True  # not a string: the `type` keyword reports it
    if "T" not in value.upper():
        return False
    try:
        return datetime.fromisoformat(value.upper()).tzinfo is not None
    except ValueError:
        return False


def _is_uri(value: object) -> bool:
    if not isinstance(value, str):
        return True
    parts = urlsplit(value)
    return bool(parts.scheme) and " " not in value


@cache
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(load_schema("access-citation-event.schema.json"),
                                           format_checker=_format_checker())


class _Clock:
    """The time now as events carry it (`%Y-%m-%dT%H:%M:%S.%fZ`, UTC): the part up to the
    seconds is formatted once a second, the microseconds appended each time."""

    def __init__(self) -> None:
        self._second = -1
        self._prefix = ""

    def now(self) -> str:
        second, nanoseconds = divmod(time.time_ns(), 1_000_000_000)
        if second != self._second:
            self._prefix = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S.")
            self._second = second
        return f"{self._prefix}{nanoseconds // 1000:06d}Z"


class _EventIds:
    """`evt_` and a random UUID (version 4) in hex, as `uuid.uuid4().hex` makes it: an access
    event's id must stay unguessable (a platform that could predict one could post a citation
    under it first), so the bytes come from `os.urandom` all the same, read a page at a time
    rather than once an event. A forked child starts a page of its own, so processes never
    share ids."""

    PAGE = 4096  # bytes of randomness read at once: 256 ids

    def __init__(self) -> None:
        self._page = memoryview(b"")
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self._page = memoryview(b"")

    def next(self) -> str:
        if len(self._page) < 16:
            self._page = memoryview(os.urandom(self.PAGE))
        raw = bytearray(self._page[:16])
        self._page = self._page[16:]
        raw[6] = (raw[6] & 0x0F) | 0x40  # the version and variant bits of uuid4
        raw[8] = (raw[8] & 0x3F) | 0x80
        return f"evt_{raw.hex()}"


_clock = _Clock()
_event_ids = _EventIds()


def _now() -> str:
    return _clock.now()


def access_event(
    *, request_id: str, publisher_id: str, publisher_domain: str, platform_id: str,
    chunks_returned: int, token_count: int,
) -> dict[str, Any]:
    """The `access` event of one `ok` retrieve."""
    return {
        "aip_version": AIP_VERSION, "event_id": _event_ids.next(),
        "event_type": "access", "timestamp": _now(), "request_id": request_id,
        "publisher": {"id": publisher_id, "domain": publisher_domain},
        "platform": {"id": platform_id},
        "access": {"chunks_returned": chunks_returned, "token_count": token_count,
                   "retrieval_mode": "chunks"},
    }


def event_problem(event: Any) -> tuple[str, str] | None:
    """The first failing field of an event (dotted path, message), or None when it is valid."""
    error = jsonschema.exceptions.best_match(_validator().iter_errors(event))
    if error is None:
        return None
    path = [str(part) for part in error.absolute_path]
    if error.validator == "required" and isinstance(error.instance, dict):
        path.append(next(name for name in error.validator_value if name not in error.instance))
        return ".".join(path), "is required"
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = error.schema.get("properties", {})
        path.append(next(name for name in error.instance if name not in known))
        return ".".join(path), "is not allowed"
    return ".".join(path) or "(body)", _short(error)


def citation_problem(event: Any) -> tuple[str, str] | None:
    """As `event_problem`, for an event a platform posts: it must be a `citation` event."""
    problem = event_problem(event)
    if problem is not None:
        return problem
    if event["event_type"] != "citation":
        return "event_type", "expected 'citation'"
    if "access" in event:
        return "access", "is not allowed in a citation event"
    if "citation" not in event:
        return "citation", "is required"
    return None


def _short(error: jsonschema.ValidationError) -> str:
    value = error.validator_value
    match error.validator:
        case "type":
            return f"expected {value}"
        case "enum" if isinstance(value, list):
            return f"expected one of {', '.join(map(str, value))}"
        case "const":
            return f"expected {value!r}"
        case "format":
            return f"expected a valid {value}"
        case "minimum":
            return f"expected at least {value}"
    return "is invalid"


class EventSink(Protocol):
    async def emit(self, event: dict[str, Any]) -> None: ...

    async def read(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Stored events, oldest first; with a limit, the newest `limit` of them."""
        ...

    async def aclose(self) -> None: ...


Pending = tuple[bytes, asyncio.Future[None]]  # a line, and whom to tell once it is written


class JsonlSink:
    def __init__(self, path: str, queue_size: int = 1000, max_file_bytes: int = 64 << 20,
                 keep_files: int = 5) -> None:
        self._path = path
        self._keep = keep_files
        self._file = RotatingFile(path, max_file_bytes, keep_files)
        self._queue: asyncio.Queue[Pending | None] = asyncio.Queue(queue_size)
        self._writer: asyncio.Task[None] | None = None
        self._thread = WriterThread("aip-events-file")
        self._closed = False

    async def emit(self, event: dict[str, Any]) -> None:
        """Returns once the line is written (handed to the kernel); a failed write raises."""
        if self._closed or (self._writer is not None and self._writer.done()):
            raise EventSinkUnavailable("sink is closed or its file cannot be written")
        if self._writer is None:
            self._writer = asyncio.create_task(self._drain(), name="aip-events-writer")
        written = asyncio.get_running_loop().create_future()
        await self._queue.put((orjson.dumps(event) + b"\n", written))
        await written

    async def _drain(self) -> None:
        try:
            while True:
                items = [await self._queue.get()]
                while not self._queue.empty():
                    items.append(self._queue.get_nowait())
                batch = [item for item in items if item is not None]
                if batch:
                    await self._write(batch)
                if None in items:
                    return
        finally:
            self._thread.stop()
            self._file.close()

    async def _write(self, batch: list[Pending]) -> None:
        """One batch, its file I/O, lock and any rotation in the sink's thread, off the loop."""
        failure: Exception | None = None
        lines = [line for line, _ in batch]
        try:
            await self._thread.run(lambda: self._file.write(lines))
        except Exception as exc:  # every waiting caller must hear of it, whatever it was
            failure = EventSinkUnavailable(type(exc).__name__)
        for _, written in batch:
            if written.done():  # its caller went away; the line is written all the same
                continue
            if failure is None:
                written.set_result(None)
            else:
                written.set_exception(failure)

    async def aclose(self) -> None:
        """Write every queued event, then close; later emits raise `EventSinkUnavailable`."""
        self._closed = True
        if self._writer is not None:
            await self._queue.put(None)
            await self._writer

    async def read(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Across the rotated files too, oldest first."""
        newest_first: list[bytes] = []
        for name in reversed(rotated_files(self._path, self._keep)):
            try:
                with open(name, "rb") as file:
                    lines = [line for line in file.read().splitlines() if line.strip()]
            except FileNotFoundError:  # rotated away meanwhile
                continue
            newest_first.extend(reversed(lines))
            if limit and len(newest_first) >= limit:
                break
        kept = newest_first[:limit] if limit else newest_first
        return [json.loads(line) for line in reversed(kept)]


class RedisStreamSink:
    def __init__(self, url: str, stream: str, max_len: int, timeout: float) -> None:
        # One key per command (XADD, XRANGE), so a cluster needs no hash tag.
        self._client = redis_url.connect(url, timeout)
        self._stream = stream
        self._max_len = max_len

    async def emit(self, event: dict[str, Any]) -> None:
        import redis.exceptions

        try:
            await self._client.xadd(self._stream, {"event": orjson.dumps(event)},
                                    maxlen=self._max_len, approximate=True)
        except (redis.exceptions.RedisError, OSError) as exc:
            raise EventSinkUnavailable(type(exc).__name__) from exc

    async def read(self, limit: int | None = None) -> list[dict[str, Any]]:
        import redis.exceptions

        try:
            if limit:
                entries = (await self._client.xrevrange(self._stream, count=limit) or [])[::-1]
            else:
                entries = await self._client.xrange(self._stream) or []
        except (redis.exceptions.RedisError, OSError) as exc:
            raise EventSinkUnavailable(type(exc).__name__) from exc
        # redis-py types the reply and an entry's fields as possibly None
        return [json.loads(fields[b"event"]) for _, fields in entries if fields is not None]

    async def aclose(self) -> None:
        await self._client.aclose()


def create_sink(events: Events) -> EventSink:
    if events.redis_url is not None:
        return RedisStreamSink(events.redis_url, events.stream, events.max_len,
                               events.store_timeout)
    return JsonlSink(events.file, events.queue_size, events.max_file_bytes, events.keep_files)
