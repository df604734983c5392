"""The classes of the fourth security review, as `make fuzz` generators: search queries long
enough or with terms enough to cost the gateway (PDPP lexical and semantic, AIDRE, and the MCP
tools that wrap them), MCP tool arguments of every wrong JSON type, and event streams held open
against the MCP endpoints (`StreamHolders`, a thread beside the rest of the run).

A search query may be answered or refused; what must hold is the oracles' and the event loop's
(bench/fuzz.py reads the loop lag over the whole run). A tool argument of the wrong type must be
a JSON-RPC -32602; a held stream must be refused or end by itself.
"""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from fuzz_oracles import Caller, Exchange
from fuzz_raw import RawRequest, parse_response
from hypothesis import strategies as st

MCP_PATHS = ("/mcp", "/mcp/pdpp", "/mcp/aidre", "/mcp/aidip", "/mcp/aip", "/mcp/passthrough")
MCP_HEADERS = (("Content-Type", "application/json"),
               ("Accept", "application/json, text/event-stream"))
TERM_COUNTS = (1, 31, 32, 33, 100, 1000, 4000)
# Each search route and how a query reaches it: (method, target or tool, the query's member).
SEARCHES = (("GET", "/v1/search?limit=5&q={}", ""), ("GET", "/v1/search/semantic?limit=5&q={}", ""),
            ("POST", "/search", "query"), ("POST", "/agents/search", "query"),
            ("MCP", "pdpp_search", "q"), ("MCP", "aidre_search", "query"),
            ("MCP", "search_articles", "q"), ("MCP", "aidip_search_agents", "query"))
WRONG_VALUES: dict[str, tuple[Any, ...]] = {
    "null": (None,), "boolean": (True, False), "integer": (0, -1, 2**63),
    "number": (1.5, -0.25), "string": ("", "x", "1"), "array": ([], [1, 2], ["a"]),
    "object": ({}, {"a": 1}, {"": []}),
}


def _words(count: int, seed: int, length: int = 6) -> str:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return " ".join("".join(rng.choice(letters) for _ in range(length)) for _ in range(count))


def _mcp_call(tool: str, arguments: dict[str, Any], why: str = "",
              path: str = "/mcp") -> RawRequest:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}
    return RawRequest("POST", path, MCP_HEADERS, json.dumps(body).encode(), why)


@st.composite
def search_requests(draw: st.DrawFn) -> RawRequest:
    """A query of many distinct words, or one very long word, to every search there is."""
    method, where, member = draw(st.sampled_from(SEARCHES))
    if draw(st.booleans()):
        query = _words(draw(st.sampled_from(TERM_COUNTS)), draw(st.integers(0, 1000)))
    else:
        query = "x" * draw(st.sampled_from((999, 1000, 1001, 10_000, 60_000)))
    if method == "GET":
        return RawRequest("GET", where.format(quote(query)), (), b"")
    if method == "MCP":
        return _mcp_call(where, {member: query})
    return RawRequest("POST", where, (("Content-Type", "application/json"),),
                      json.dumps({member: query}).encode())


def _typed(schema: dict[str, Any]) -> set[str]:
    """The JSON types a property schema admits (integer is a number); empty: any."""
    declared = schema.get("type")
    kinds = {declared} if isinstance(declared, str) else set(declared or ())
    if "number" in kinds:
        kinds.add("integer")
    return kinds


def argument_requests(endpoints: dict[str, list[dict[str, Any]]]) -> st.SearchStrategy[RawRequest]:
    """tools/call, on each MCP endpoint for each tool it lists, with one argument of a JSON type
    its inputSchema does not admit and the other required ones well formed."""
    cases: list[tuple[str, str, dict[str, Any], str, str]] = []
    for path, tools in endpoints.items():
        for tool in tools:
            schema = tool.get("inputSchema") or {}
            properties = schema.get("properties") or {}
            valid = {name: _valid(properties.get(name) or {})
                     for name in schema.get("required") or ()}
            cases.extend((path, tool["name"], valid, name, kind)
                         for name, prop in properties.items() if (admitted := _typed(prop))
                         for kind in WRONG_VALUES if kind not in admitted)

    @st.composite
    def build(draw: st.DrawFn) -> RawRequest:
        path, tool, valid, name, kind = draw(st.sampled_from(cases))
        value = draw(st.sampled_from(WRONG_VALUES[kind]))
        return _mcp_call(tool, {**valid, name: value}, f"a tool argument of the wrong type "
                         f"({tool}.{name}: {kind})", path)
    return build()


def _valid(schema: dict[str, Any]) -> Any:
    kinds = _typed(schema)
    if "string" in kinds or not kinds:
        return "art-0001"
    return {"integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}.get(
        sorted(kinds)[0], "x")


HELD = "an event stream held open with nothing to push"


@dataclass
class StreamHolders:
    """Threads that keep opening `GET` event streams on the MCP endpoints as every caller, each
    read for up to `hold` seconds, while the rest of the run goes on. Each answer is recorded
    as an exchange the gateway must refuse; `held` counts the streams still open when their
    time ran out."""

    port: int
    callers: list[Caller]
    record: Callable[[Exchange], None]
    next_id: Callable[[], str]
    threads: int = 4
    pause: float = 1.0  # between one thread's streams, so refusals do not flood the run
    hold: float = 5.0
    held: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _workers: list[threading.Thread] = field(default_factory=list)

    def __enter__(self) -> StreamHolders:
        for n in range(self.threads):
            worker = threading.Thread(target=self._run, args=(n,), daemon=True)
            worker.start()
            self._workers.append(worker)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for worker in self._workers:
            worker.join(self.hold + 35)

    def _run(self, n: int) -> None:
        turn = n
        while not self._stop.is_set():
            path = MCP_PATHS[turn % len(MCP_PATHS)]
            caller = self.callers[turn % len(self.callers)]
            turn += self.threads
            self._hold_one(path, caller)
            self._stop.wait(self.pause)

    def _hold_one(self, path: str, caller: Caller) -> None:
        with self._lock:
            request_id = self.next_id()
        lines = [f"GET {path} HTTP/1.1", f"Host: 127.0.0.1:{self.port}", "Connection: close",
                 "Accept: text/event-stream", f"X-Request-Id: {request_id}",
                 *(f"{k}: {v}" for k, v in caller.headers.items())]
        raw, still_open = _read_for(self.port, "\r\n".join(lines).encode("latin-1"), self.hold)
        try:
            status, head, body = parse_response(raw)
        except (ValueError, IndexError):
            status, head, body = 200, {}, raw  # an unfinished stream: unparsable as a whole
        with self._lock:
            self.held += still_open
            self.record(Exchange(caller, "GET", path, head.get("x-request-id", request_id),
                                 path.encode(), status, head, body, HELD))


def _read_for(port: int, head: bytes, seconds: float) -> tuple[bytes, bool]:
    """Send a request and read its answer for up to `seconds`: (bytes read, still open)."""
    chunks: list[bytes] = []
    until = time.monotonic() + seconds
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head + b"\r\n\r\n")
        sock.settimeout(0.5)
        while time.monotonic() < until:
            try:
                data = sock.recv(65536)
            except TimeoutError:
                continue
            if not data:
                return b"".join(chunks), False
            chunks.append(data)
    return b"".join(chunks), True
