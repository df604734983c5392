"""Upstream URLs in passthrough JSON bodies become public ones (`rewrite_body_urls`, opt-in per
upstream), as `gateway.redirects` does for `Location`.

The rewrite works on the JSON text, never parsing it: the upstream URL's prefix (its scheme,
host and port, default port written or not, host case-insensitive, then its base path) is
replaced by the public base wherever it opens a URL and ends at `/`, `?`, `#` or the end of the
string (`"`), the JSON-escaped forms `\\/` and `\\"` included. Outside its strings, JSON holds no
letters, so only string contents (values and, rarely, keys) can match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import orjson

from gateway.redirects import UpstreamOrigin

_DEFAULT_PORTS = {"http": 80, "https": 443}
_SLASH = rb"(?:/|\\/)"  # "/" as JSON may write it
# What may follow the prefix: the path, the query, the fragment, or the end of the string.
_PREFIX_END = rb"(?=[/?#\"]|\\[/\"])"
# A scheme starts at a boundary: "xhttp://up" is no URL of the upstream.
_URL_START = rb"(?<![A-Za-z0-9+.\-])"
# Response fields a rewritten body makes untrue: ranges and digests of the upstream's bytes.
_STALE_FIELDS = frozenset({b"content-length", b"accept-ranges", b"content-md5", b"digest",
                           b"content-digest", b"repr-digest"})


@dataclass(frozen=True, slots=True)
class JsonBodyUrls:
    """One upstream's URL prefix, found and replaced in JSON bodies up to `max_bytes`."""

    upstream: str  # its name, for metrics
    max_bytes: int
    pattern: re.Pattern[bytes]

    @classmethod
    def of(cls, upstream: str, origin: UpstreamOrigin, max_bytes: int) -> JsonBodyUrls:
        return cls(upstream, max_bytes, prefix_pattern(origin))

    def rewrite(self, body: bytes, public_base: str) -> bytes:
        """`body` with the upstream prefix replaced by `public_base` ("scheme://host[/path]",
        or "" for path-absolute URLs); the same object when nothing matched."""
        base = orjson.dumps(public_base)[1:-1]  # JSON-escaped, without its quotes

        def public(match: re.Match[bytes]) -> bytes:
            follows = body[match.end():match.end() + 2]
            return base if follows[:1] == b"/" or follows == b"\\/" else base + b"/"

        rewritten, count = self.pattern.subn(public, body)
        return rewritten if count else body


def prefix_pattern(origin: UpstreamOrigin) -> re.Pattern[bytes]:
    """The upstream's URL prefix as JSON text may write it."""
    host = f"[{origin.host}]" if ":" in origin.host else origin.host
    port = f":{origin.port}".encode()
    if origin.port == _DEFAULT_PORTS[origin.scheme]:
        port = rb"(?:" + port + rb")?"
    base = b"".join(_SLASH + re.escape(segment.encode())
                    for segment in origin.base_path.split("/")[1:])
    return re.compile(
        _URL_START + rb"(?i:" + re.escape(origin.scheme.encode()) + rb"):" + _SLASH * 2
        + rb"(?i:" + re.escape(host.encode("idna")) + rb")" + port + base + _PREFIX_END)


def is_json(content_type: bytes) -> bool:
    """`application/json` or a `+json` type, parameters aside."""
    media_type = content_type.split(b";", 1)[0].strip().lower()
    return media_type == b"application/json" or (
        media_type.startswith(b"application/") and media_type.endswith(b"+json"))


def rewritten_headers(headers: list[tuple[bytes, bytes]], length: int
                      ) -> list[tuple[bytes, bytes]]:
    """Response fields for a rewritten body of `length` bytes: its own `Content-Length`, a
    strong `ETag` made weak (the same resource, other bytes, as nginx's sub_filter does), and no
    ranges or digests of the upstream's bytes."""
    fields = [(name, _weak(value) if name.lower() == b"etag" else value)
              for name, value in headers if name.lower() not in _STALE_FIELDS]
    fields.append((b"content-length", str(length).encode()))
    return fields


def _weak(etag: bytes) -> bytes:
    return etag if etag.startswith(b"W/") else b"W/" + etag
