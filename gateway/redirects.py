"""Redirect rewriting: upstream URLs in `Location`, `Content-Location`, `Refresh` and `Link`
become public ones, as nginx's `proxy_redirect default` does.

A URL names the upstream when its scheme, host and port (default ports normalised, compared
case-insensitively) are the upstream URL's and its path lies under the upstream URL's path; that
prefix is replaced by the public base. Any other URL, and every relative one, is left alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

REWRITTEN_FIELDS = frozenset({b"location", b"content-location", b"refresh", b"link"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
_LINK_TARGET = re.compile(r"<([^>]*)>")
# HTML's shared declarative refresh: "5; url=...", "5, URL='...'", "0 ..." (url= optional).
# What follows is the URL; one that opens with a quote ends at the same quote or at the end.
_REFRESH = re.compile(r"""^\s*[\d.]+(?:\s*[;,]\s*|\s+)(?:url\s*=\s*)?""", re.IGNORECASE)
# WHATWG URL parsing of special schemes: a leading "http:" takes any run of / or \ as the
# authority's slashes ("http:\\h/", "http:/h", "http:h"); a leading \ is a /.
_SPECIAL_SCHEME = re.compile(r"^(https?):[/\\]*", re.IGNORECASE)
_C0_AND_SPACE = "".join(chr(code) for code in range(0x21))  # trimmed from both ends
_IGNORED = str.maketrans("", "", "\t\n\r")  # removed anywhere by the URL parser
_HOST = re.compile(r"^(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.?|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$")


@dataclass(frozen=True, slots=True)
class UpstreamOrigin:
    """Where an upstream lives: the prefix of URLs that must not reach a client."""

    scheme: str
    host: str
    port: int
    base_path: str  # "" or "/base", never a trailing slash

    @classmethod
    def from_url(cls, url: str) -> UpstreamOrigin:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        return cls(scheme, (parts.hostname or "").lower(),
                   parts.port or _DEFAULT_PORTS[scheme], parts.path.rstrip("/"))

    def rewrite(self, reference: str, public_base: str) -> str:
        """`reference` with the upstream prefix replaced by `public_base`, or unchanged.

        `public_base` is "scheme://host[/path]" without a trailing slash, or "" to give a
        path-absolute reference that the client resolves against the URL it asked for.
        """
        rest = self.path_after_origin(reference.strip())
        if rest is None:
            return reference
        if self.base_path:
            if not rest.startswith(self.base_path) \
                    or rest[len(self.base_path):][:1] not in ("", "/", "?", "#"):
                return reference
            rest = rest[len(self.base_path):]
        if not rest.startswith("/"):
            rest = "/" + rest
        return public_base + rest

    def path_after_origin(self, reference: str) -> str | None:
        """What follows the authority when `reference` names this origin; else None."""
        reference = _as_browsers_read(reference)
        if not (reference.startswith("//") or "://" in reference[:8]):
            return None  # most references are relative: skip parsing them
        try:
            parts = urlsplit(reference)
            port = parts.port
        except ValueError:
            return None
        if not parts.netloc:
            return None
        scheme = parts.scheme.lower() if parts.scheme else self.scheme  # "//host/x" too
        if scheme != self.scheme or (parts.hostname or "").lower() != self.host:
            return None
        if (port or _DEFAULT_PORTS.get(scheme)) != self.port:
            return None
        start = reference.index("//") + 2 + len(parts.netloc)
        return reference[start:]


def rewrite_field(name: bytes, value: bytes, upstream: UpstreamOrigin, public_base: str) -> bytes:
    """One response field (`name` lower-cased, one of REWRITTEN_FIELDS) with upstream URLs
    rewritten."""
    text = value.decode("latin-1")
    if name == b"link":
        rewritten = _LINK_TARGET.sub(
            lambda m: f"<{upstream.rewrite(m.group(1), public_base)}>", text)
    elif name == b"refresh":
        match = _REFRESH.match(text)
        if match is None:
            return value
        rewritten = text[:match.end()] + _rewrite_refresh_url(text[match.end():], upstream,
                                                               public_base)
    else:
        rewritten = upstream.rewrite(text, public_base)
    return rewritten.encode("latin-1")


def _rewrite_refresh_url(rest: str, upstream: UpstreamOrigin, public_base: str) -> str:
    quote = rest[:1] if rest[:1] in ("'", '"') else ""
    end = rest.find(quote, 1) if quote else -1
    url = rest[len(quote):end] if end > 0 else rest[len(quote):]
    tail = rest[end:] if end > 0 else ""
    if not quote:
        url, tail = url.rstrip(), url[len(url.rstrip()):]
    return quote + upstream.rewrite(url, public_base) + tail


def _as_browsers_read(reference: str) -> str:
    """`reference` as a browser's URL parser reads it, in the forms `urlsplit` understands."""
    reference = reference.strip(_C0_AND_SPACE).translate(_IGNORED)
    match = _SPECIAL_SCHEME.match(reference)
    if match is not None:
        return f"{match.group(1)}://" + reference[match.end():].replace("\\", "/")
    if reference[:1] in ("/", "\\"):
        return reference.replace("\\", "/")
    return reference


def public_base(public_base_url: str | None, scheme: str, host: bytes,
                forwarded_proto: bytes | None = None,
                forwarded_host: bytes | None = None) -> str:
    """The public prefix for rewritten URLs: `public_base_url` when set, else the scheme and
    host the client used (the forwarded ones only when passed, i.e. from a trusted proxy; of a
    list, the last value: the one the nearest proxy added).

    A host that is absent or not a plain host[:port] (a path, userinfo or scheme smuggled in)
    gives "": path-absolute references, which the client resolves against the URL it used.
    """
    if public_base_url:
        return public_base_url.rstrip("/")
    if forwarded_proto:
        proto = forwarded_proto.rsplit(b",", 1)[-1].strip().lower()
        if proto in (b"http", b"https"):
            scheme = proto.decode()
    if forwarded_host:
        host = forwarded_host.rsplit(b",", 1)[-1].strip()
    name = host.decode("latin-1")
    if not name or not _HOST.match(name):
        return ""
    return f"{scheme}://{name}"
