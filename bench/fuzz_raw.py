"""Hypothesis-built raw requests for `make fuzz`, sent over a plain socket so that nothing
between the harness and the gateway normalises a path, a header or a body."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass

from hypothesis import strategies as st

PREFIXES = ("/search", "/collections", "/chunks", "/chunks/articles:", "/chunks/staff_notes:",
            "/.well-known/ai-discovery", "/.well-known/ai", "/ai", "/.well-known/aigw/openapi.json",
            "/.well-known/oauth-protected-resource", "/api/v1/articles", "/api/v1/users/u-001",
            "/api/v1/tasks/classify", "/api/v1/health", "/api/v1/embed", "/", "/api", "/x")
SEGMENTS = ("", "a", "articles", "art-0001", "articles:art-0001", "staff_notes:art-0002",
            "messages", "%2f", "%2F", "%5c", "%2e", "%2e%2e", "..", ".", "%00", "%0a", "%0d%0a",
            "%7f", "%25", "%252f", "%20", ";x", ";", "~", "%C3%A9", "%ff", "%c0%af", "x%3Ay",
            "*", "%7Bid%7D", "search", "..%2f", "%u002e")
QUERIES = ("", "?q=refund", "?access_token=abc", "?limit=-1&offset=x", "?x=%00", "?q=%ff",
           "?" + "a=1&" * 50)
METHODS = ("GET", "GET", "POST", "POST", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS", "PROPFIND")
CONTENT_TYPES = ("application/aidre+json", "application/json", "application/json; charset=utf-8",
                 "text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                 "APPLICATION/AIDRE+JSON", "", "application/aidre+json;;", "*/*")
SPOOFS = (("X-Aigw-Subject", "mallory"), ("X-Aigw-Scopes", "admin vectors:read staff:read"),
          ("X-Aigw-Client-Id", "demo-agent"), ("X-Forwarded-For", "10.0.0.1"),
          ("Forwarded", "for=10.0.0.1"), ("Authorization", "Bearer not-a-token"),
          ("Authorization", "Basic Zm9vOmJhcg=="), ("X-API-Key", "wrong-key"),
          ("Content-Encoding", "gzip"), ("Transfer-Encoding", "identity"),
          ("If-None-Match", '"x", *'), ("Accept", "application/aidre+json"))

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63) | st.floats(allow_nan=False,
                                                                          allow_infinity=False)
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner,
                                                                  max_size=5),
    max_leaves=20)
_token = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-", max_size=20)
_value = st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=80)
_aidre_value = st.one_of(_json, st.sampled_from(["articles", "staff_notes",
                                                 "wordllama-l2_supercat-256", ""]),
                         st.lists(st.floats(-1, 1), min_size=255, max_size=257))
_aidre_body = st.fixed_dictionaries({}, optional={
    key: _aidre_value for key in ("query", "query_vector", "embedding_space", "collection",
                                  "top_k", "return", "cursor")})


@dataclass(frozen=True)
class RawRequest:
    method: str
    target: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    must_refuse: str = ""  # why the gateway must refuse it (bench/fuzz_attacks.py)


@st.composite
def raw_requests(draw: st.DrawFn) -> RawRequest:
    segments = draw(st.lists(st.sampled_from(SEGMENTS), max_size=4))
    prefix = draw(st.sampled_from(PREFIXES))
    target = prefix + "".join(("/" if draw(st.booleans()) else "") + s for s in segments)
    target = (target if target.startswith("/") else "/" + target) + draw(st.sampled_from(QUERIES))
    headers = list(draw(st.lists(st.sampled_from(SPOOFS), max_size=3)))
    count = draw(st.sampled_from((0, 0, 1, 5, 40)))
    headers.extend((f"X-Fuzz-{i}-{draw(_token)}", draw(_value)) for i in range(count))
    content_type = draw(st.sampled_from(CONTENT_TYPES))
    if content_type:
        headers.append(("Content-Type", content_type))
    kind = draw(st.sampled_from(("none", "json", "aidre", "bytes")))
    body = {"none": lambda: b"", "bytes": lambda: draw(st.binary(max_size=200)),
            "json": lambda: json.dumps(draw(_json)).encode(),
            "aidre": lambda: json.dumps(draw(_aidre_body)).encode()}[kind]()
    return RawRequest(draw(st.sampled_from(METHODS)), target, tuple(headers), body)


def send(port: int, request: RawRequest, extra: dict[str, str],
         ) -> tuple[int, dict[str, str], bytes]:
    """One request on its own connection; the status, headers (lower-case) and body."""
    lines = [f"{request.method} {request.target} HTTP/1.1", f"Host: 127.0.0.1:{port}",
             "Connection: close", f"Content-Length: {len(request.body)}",
             *(f"{name}: {value}" for name, value in (*request.headers, *extra.items()))]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall("\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + request.body)
        chunks = []
        while data := sock.recv(65536):
            chunks.append(data)
    return parse_response(b"".join(chunks), head=request.method == "HEAD")


def parse_response(raw: bytes, head: bool = False) -> tuple[int, dict[str, str], bytes]:
    head_part, _, body = raw.partition(b"\r\n\r\n")
    lines = head_part.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.setdefault(name.strip().lower(), value.strip())
    if head:
        return status, headers, b""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = _unchunk(body)
    return status, headers, body


def _unchunk(data: bytes) -> bytes:
    out = []
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out.append(data[:size])
        data = data[size + 2:]
    return b"".join(out)
