"""Upstream URLs in what surfaces answer: an upstream's JSON value that is a URL of a configured
upstream never reaches a client as it is.

Surfaces copy only what their mappings name (or, for an agent's answer, what its output schema
checks), and every value an upstream answers a surface call with passes through
`UpstreamUrls.scrub` first: a string that is a URL naming a configured upstream's origin (its
scheme, host and port, as browsers read a URL; see `gateway.redirects`) is

- rewritten onto `public_base_url` when the gateway passes that path through to that upstream
  (it is the `default_upstream`, the URL lies under its base path, and no surface or document
  owns the path), as a redirect's `Location` would be;
- dropped otherwise (an object member removed, a list element left out), and counted in
  `aigw_surface_upstream_urls_total`: no public URL reaches it.

Without `public_base_url` nothing is rewritten: what a surface reads may be kept and served to
many callers, so its URLs cannot come from one request's `Host`. Only whole values are URLs; a
URL inside prose is text. Before any walk, the raw body is searched for the upstreams' host
names, as a parsed string could spell them for `public` to find: in any case (the body
lower-cased when a host has letters), split by the JSON escapes of the characters URL parsers
remove (tab, CR, LF: those escapes are taken out first). An escape that could spell a host's
character (a `\\u` escape of an ASCII character or of the Kelvin sign, which lower-cases to
"k"; an escaped backslash, which leaves the other escapes ambiguous to a byte search) means the
document is walked. An answer that names none is returned as parsed, at the cost of a scan or
two (about half of what parsing it cost).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from gateway.observability import SURFACE_UPSTREAM_URLS
from gateway.redirects import UpstreamOrigin
from gateway.settings import Settings

# Field names that hold URLs: url, next, self, next_url, image-uri, nextUrl, selfLink, ...
_URL_NAME = re.compile(r"(?:^|[_\-])(?:url|uri|href|link|next|prev|previous|self)$",
                       re.IGNORECASE)
_CAMEL_URL_NAME = re.compile(r"[a-z0-9](?:Url|URL|Uri|URI|Href|Link)$")
_JMESPATH_NAME = re.compile(r'"((?:[^"\\]|\\.)*)"|([A-Za-z_][A-Za-z0-9_]*)')
# What a URL naming an origin opens with, leading C0 and spaces aside: a scheme or "//" ("\\").
_MAY_BE_URL = re.compile(r"[\x00-\x20]*(?:[A-Za-z][A-Za-z0-9+.\-]*:|[/\\]{2})")
# JSON escapes a byte search cannot see through: an escaped backslash (the escapes after it are
# ambiguous), an ASCII character (a host's, or one URL parsers remove) or the Kelvin sign, which
# `str.lower` (as `public` compares hosts) turns into "k". (Regexes: bytes.replace and `in` are
# several times slower on two-byte needles.)
_UNSURE_ESCAPE = re.compile(rb"\\(?:\\|u(?:00[0-7][0-9A-Fa-f]|212[Aa]))")
_REMOVED_BY_URL_PARSERS = re.compile(rb"\\[tnr]")  # tab, LF, CR as JSON escapes
_KELVIN = "\u212a".encode()


class UpstreamUrls:
    """The configured upstreams' URLs, and what a surface may give in their place."""

    def __init__(self, upstream_urls: Mapping[str, str], public_base_url: str | None,
                 passthrough: str | None, surface_owns: Callable[[str], bool]) -> None:
        """`upstream_urls` are the configured upstreams' `url`s by name, `passthrough` the
        upstream unowned paths go to (`default_upstream`), and `surface_owns(path)` whether a
        surface or a document answers a path instead."""
        self._origins = {name: UpstreamOrigin.from_url(url) for name, url in upstream_urls.items()}
        self._public = public_base_url.rstrip("/") if public_base_url else None
        self._passthrough = passthrough
        self._surface_owns = surface_owns
        hosts = {_host_as_written(url).lower() for url in upstream_urls.values()}
        self._unsure = any(not host.isascii() for host in hosts)  # \u-escaped in JSON, maybe
        # Searched for in the lower-cased body (a case-insensitive regex scans ten times slower).
        self._needles = tuple(host.encode() for host in sorted(hosts) if host and host.isascii())
        self._cased = any(host != host.upper() for host in hosts)  # a host with letters
        self._k = any("k" in host for host in hosts)

    def scrub(self, document: Any, raw: bytes) -> Any:
        """`document` (parsed from `raw`, changed in place) with every upstream URL rewritten or
        dropped; None when the document is itself such a URL, dropped."""
        if not self._may_name_upstream(raw):
            return document
        if isinstance(document, str):
            return self.public(document)
        stack = [document] if isinstance(document, dict | list) else []
        while stack:  # not recursive: an upstream decides how deep its JSON goes
            container = stack.pop()
            if isinstance(container, dict):
                self._scrub_members(container, stack)
            else:
                self._scrub_items(container, stack)
        return document

    def _may_name_upstream(self, raw: bytes) -> bool:
        """Whether a string parsed from the JSON text `raw` may name an upstream's host as
        `public` reads it: False only when no spelling of one can be in it."""
        if self._unsure or (self._k and _KELVIN in raw):
            return True
        if b"\\" in raw:
            if _UNSURE_ESCAPE.search(raw):
                return True
            raw = _REMOVED_BY_URL_PARSERS.sub(b"", raw)
        if self._cased:
            raw = raw.lower()
        return any(needle in raw for needle in self._needles)

    def public(self, value: str) -> str | None:
        """`value` as a client may see it: itself, the public URL, or None (dropped)."""
        if not _MAY_BE_URL.match(value):
            return value
        for name, origin in self._origins.items():
            rest = origin.path_after_origin(value)
            if rest is not None:
                public = self._public_url(name, origin, rest)
                SURFACE_UPSTREAM_URLS.labels(name, "dropped" if public is None
                                             else "rewritten").inc()
                return public
        return value

    def _scrub_members(self, members: dict[str, Any], stack: list[Any]) -> None:
        for key, item in list(members.items()):
            if isinstance(item, str):
                public = self.public(item)
                if public is None:
                    del members[key]
                elif public is not item:
                    members[key] = public
            elif isinstance(item, dict | list):
                stack.append(item)

    def _scrub_items(self, items: list[Any], stack: list[Any]) -> None:
        kept: list[Any] = []
        changed = False
        for item in items:
            if isinstance(item, str):
                public = self.public(item)
                changed = changed or public is not item
                if public is not None:
                    kept.append(public)
                continue
            if isinstance(item, dict | list):
                stack.append(item)
            kept.append(item)
        if changed:
            items[:] = kept

    def _public_url(self, name: str, origin: UpstreamOrigin, rest: str) -> str | None:
        if self._public is None or name != self._passthrough:
            return None
        if origin.base_path:
            if not rest.startswith(origin.base_path) \
                    or rest[len(origin.base_path):][:1] not in ("", "/", "?", "#"):
                return None  # outside the base path: no gateway path reaches it
            rest = rest[len(origin.base_path):]
        if not rest.startswith("/"):
            rest = "/" + rest
        path = unquote(re.split(r"[?#]", rest, maxsplit=1)[0])
        if self._surface_owns(path):
            return None  # the gateway answers that path itself, not with the upstream
        return self._public + rest


def _host_as_written(url: str) -> str:
    """The host of `url` in the case the config wrote it (`hostname` lower-cases it)."""
    authority = urlsplit(url).netloc.rsplit("@", 1)[-1]
    if authority.startswith("["):
        return authority[1:].split("]", 1)[0]
    return authority.split(":", 1)[0]


def url_field_warnings(settings: Settings, where: str, mapped: Mapping[str, Any]
                       ) -> list[tuple[str, str]]:
    """Config warnings for the fields of a mapping (name -> JMESPath expression) at `where`
    that look like URLs while `public_base_url` is unset: every upstream URL among their
    values is then dropped, none rewritten."""
    if settings.public_base_url:
        return []
    example = next(iter(settings.upstreams.values())).url
    return [(f"{where}.{name}",
             f"{name!r} looks like a URL: without public_base_url a value naming a "
             f"configured upstream (such as {example}/...) is dropped from answers rather "
             "than rewritten onto the gateway's public URL; set public_base_url")
            for name, expression in mapped.items()
            if looks_like_url(name) or (isinstance(expression, str)
                                        and looks_like_url(_last_name(expression)))]


def looks_like_url(name: str) -> bool:
    return bool(_URL_NAME.search(name) or _CAMEL_URL_NAME.search(name))


def _last_name(expression: str) -> str:
    """The last field a JMESPath expression names: `_links.next.href` -> `href`."""
    names = _JMESPATH_NAME.findall(expression)
    return (names[-1][0] or names[-1][1]) if names else ""
