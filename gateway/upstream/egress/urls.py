"""One strict rule for every URL a client registers, applied when it is registered and again
at each call (`client`).

`urlsplit` is lenient where a URL must be exact: it silently drops tabs, CR and LF, reads a
port of 0 as "no port", and keeps `%2f` or a backslash inside the host, which other parsers
then read differently. Here a URL is accepted only when it can mean one thing: printable ASCII
with no backslash, `http` or `https`, no user-info, a host that is a DNS name (letters, digits
and hyphens; international names in their `xn--` form) or an IP literal, an optional port from
1 to 65535, and no fragment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address
from urllib.parse import urlsplit

from gateway.integers import ascii_int

DEFAULT_PORTS = {"https": 443, "http": 80}
_PRINTABLE = re.compile(r"[!-\[\]-~]+")  # printable ASCII except the backslash
_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
_NUMERIC_LABEL = re.compile(r"[0-9]+|0[xX][0-9A-Fa-f]*")  # what URL parsers read as IPv4 parts


class UrlProblem(ValueError):
    """The URL breaks the rule; the message says how, without repeating the URL."""


@dataclass(frozen=True, slots=True)
class CheckedUrl:
    scheme: str
    host: str  # lower case, no trailing dot; an IP literal in its canonical form
    port: int
    literal: IPv4Address | IPv6Address | None  # the host, when it is an IP literal


def checked_url(url: str) -> CheckedUrl:
    """The URL's parts, or `UrlProblem`."""
    if not _PRINTABLE.fullmatch(url):
        raise UrlProblem("only printable ASCII without spaces, control characters or "
                         "backslashes is allowed")
    try:
        parts = urlsplit(url)
    except ValueError:
        raise UrlProblem("not a valid URL") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.netloc:
        raise UrlProblem("expected an absolute http or https URL")
    if "#" in url:
        raise UrlProblem("a fragment is not allowed")
    if "@" in parts.netloc:
        raise UrlProblem("credentials in the URL are not allowed")
    host, port_text = _host_and_port(parts.netloc)
    literal = _host(host)
    port = DEFAULT_PORTS[scheme] if port_text is None else ascii_int(port_text)
    if port is None or not 1 <= port <= 65535:
        raise UrlProblem("expected a port from 1 to 65535")
    name = str(literal) if literal is not None else host.rstrip(".").lower()
    return CheckedUrl(scheme, name, port, literal)


def url_problem(url: str) -> str | None:
    try:
        checked_url(url)
    except UrlProblem as problem:
        return str(problem)
    return None


def _host_and_port(netloc: str) -> tuple[str, str | None]:
    if netloc.startswith("["):
        host, bracket, rest = netloc.partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise UrlProblem("the host name is not valid")
        return host + "]", rest[1:] if rest else None
    host, colon, port = netloc.partition(":")
    return host, port if colon else None


def _host(host: str) -> IPv4Address | IPv6Address | None:
    """The IP literal the host is, None for a DNS name; `UrlProblem` for anything else."""
    if "%" in host:
        raise UrlProblem("percent-encoding is not allowed in the host")
    if host.startswith("["):
        try:
            return IPv6Address(host[1:-1])
        except ValueError:
            raise UrlProblem("the host is not a valid IPv6 address") from None
    name = host[:-1] if host.endswith(".") else host
    labels = name.split(".")
    if _NUMERIC_LABEL.fullmatch(labels[-1]):  # an IPv4 address, or a form that passes for one
        try:
            return IPv4Address(name)
        except ValueError:
            raise UrlProblem("the host is not a valid IPv4 address") from None
    if len(name) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise UrlProblem("the host name is not valid")
    return None

