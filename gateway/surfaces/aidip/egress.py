"""The locked-down client registered agents are called through (SSRF defence).

A registered endpoint is a URL a stranger chose. It is called only when its scheme, host and
port are on the configured allow-list, and only at addresses that are public (or inside a range
the config allows). Addresses are checked after resolution and again by the resolver the
connection itself uses, so an answer that changes between the two (DNS rebinding) is refused
too. Redirects are never followed, proxies from the environment are ignored, and nothing of
the configured upstreams (their credentials) is ever sent.
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address, ip_address, ip_network
from typing import Any, Protocol
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from gateway.surfaces.aidip.addresses import effective, is_public
from gateway.surfaces.aidip.config import Egress, Origin

_DEFAULT_PORTS = {"https": 443, "http": 80}


class EgressRefused(Exception):
    """The destination is not allowed; nothing was sent."""


class EgressFailed(Exception):
    """The call failed; `kind` is one of connect, timeout, too_large."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


class Resolver(Protocol):
    async def resolve(self, host: str, port: int) -> list[str]:
        """Every address `host` resolves to."""


class SystemResolver:
    """The `hosts` answers from config first, then the system's resolver."""

    def __init__(self, hosts: dict[str, list[str]] | None = None) -> None:
        self.hosts = {name.lower(): list(addresses) for name, addresses in (hosts or {}).items()}

    async def resolve(self, host: str, port: int) -> list[str]:
        if host.lower() in self.hosts:
            return self.hosts[host.lower()]
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, port, type=socket.SOCK_STREAM, family=socket.AF_UNSPEC)
        return [str(info[4][0]) for info in infos]


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    content_type: str
    body: bytes


class EgressPolicy:
    def __init__(self, egress: Egress) -> None:
        self.origins = egress.origins
        self.allowed = [ip_network(network) for network in egress.allow_networks]

    def url_problem(self, url: str) -> str | None:
        """Why the config does not allow calling `url`, or None."""
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            return "not a valid URL"
        if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
            return "expected an absolute https URL"
        if parts.username is not None or parts.password is not None:
            return "credentials in the URL are not allowed"
        if parts.fragment:
            return "a fragment is not allowed"
        if not _valid_host(parts.hostname):
            return "the host name is not valid"
        port = port or _DEFAULT_PORTS[parts.scheme]
        if not any(_origin_matches(o, parts.scheme, parts.hostname, port) for o in self.origins):
            return "this origin is not allowed for registered agents"
        literal = _literal(parts.hostname)
        if literal is not None and not self.address_allowed(literal):
            return "this address is not allowed for registered agents"
        return None

    def address_allowed(self, address: IPv4Address | IPv6Address) -> bool:
        reached = effective(address)
        if reached is None:
            return False
        if any(reached in network for network in self.allowed):
            return True
        return is_public(reached)

    def checked(self, addresses: list[str]) -> list[str]:
        """The addresses when every one is allowed; refused when any is not (or none came)."""
        if not addresses:
            raise EgressRefused("no address")
        for value in addresses:
            try:
                parsed = ip_address(value.split("%", 1)[0])
            except ValueError:
                raise EgressRefused("not an address") from None
            if not self.address_allowed(parsed):
                raise EgressRefused("address not allowed")
        return addresses


class _GuardedResolver(AbstractResolver):
    """What aiohttp resolves with when it connects: the same check, once more."""

    def __init__(self, resolver: Resolver, policy: EgressPolicy) -> None:
        self.resolver = resolver
        self.policy = policy

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        try:
            addresses = self.policy.checked(await self.resolver.resolve(host, port))
        except EgressRefused as exc:
            raise OSError(f"refused: {exc}") from None  # aiohttp reports a connect error
        return [ResolveResult(hostname=host, host=address, port=port,
                              family=socket.AF_INET6 if ":" in address else socket.AF_INET,
                              proto=0, flags=socket.AI_NUMERICHOST) for address in addresses]

    async def close(self) -> None:
        pass


class EgressClient:
    def __init__(self, egress: Egress, resolver: Resolver | None = None) -> None:
        self.policy = EgressPolicy(egress)
        self.resolver = resolver or SystemResolver(egress.hosts)
        self.timeout = egress.timeout
        self.max_bytes = egress.max_response_bytes
        self._session: aiohttp.ClientSession | None = None

    async def post(self, url: str, body: bytes, headers: dict[str, str],
                   timeout: float | None = None) -> Answer:
        """POST `body` to `url`; `EgressRefused` before anything is sent to a forbidden place."""
        if self.policy.url_problem(url) is not None:
            raise EgressRefused("url")
        parts = urlsplit(url)
        host = parts.hostname or ""
        if _literal(host) is None:  # aiohttp does not resolve literals; they were checked above
            port = parts.port or _DEFAULT_PORTS[parts.scheme]
            try:
                self.policy.checked(await self.resolver.resolve(host, port))
            except OSError:
                raise EgressFailed("connect") from None
            except ValueError:  # the name cannot be encoded (UnicodeError is a ValueError)
                raise EgressRefused("host name") from None
        try:
            async with asyncio.timeout(timeout or self.timeout):
                return await self._send(url, body, headers)
        except TimeoutError:
            raise EgressFailed("timeout") from None
        except ValueError:
            raise EgressRefused("url") from None

    async def _send(self, url: str, body: bytes, headers: dict[str, str]) -> Answer:
        session = self._session or self._open()
        try:
            async with session.post(url, data=body, headers=headers,
                                    allow_redirects=False) as response:
                payload = await _read_capped(response, self.max_bytes)
                return Answer(response.status, response.headers.get("content-type", ""),
                              payload)
        except aiohttp.ClientConnectorError as exc:
            if str(exc.os_error).startswith("refused:"):
                raise EgressRefused("address not allowed at connect") from None
            raise EgressFailed("connect") from None
        except aiohttp.ClientError:
            raise EgressFailed("connect") from None

    def _open(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(resolver=_GuardedResolver(self.resolver, self.policy),
                                         use_dns_cache=False, limit=100)
        self._session = aiohttp.ClientSession(
            connector=connector, trust_env=False, cookie_jar=aiohttp.DummyCookieJar(),
            auto_decompress=True)
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


async def _read_capped(response: Any, limit: int) -> bytes:
    chunks, size = [], 0
    async for chunk in response.content.iter_any():
        size += len(chunk)
        if size > limit:
            raise EgressFailed("too_large")
        chunks.append(chunk)
    return b"".join(chunks)


def _origin_matches(origin: Origin, scheme: str, host: str, port: int) -> bool:
    if origin.scheme != scheme:
        return False
    ports = origin.ports or [_DEFAULT_PORTS[scheme]]
    if port not in ports:
        return False
    pattern, host = origin.host.lower(), host.lower().rstrip(".")
    if pattern.startswith("*."):
        return host.endswith(pattern[1:]) and host != pattern[2:]
    return host == pattern


def _valid_host(host: str) -> bool:
    """A literal address, or a name DNS can carry (labels of 1-63 bytes, 253 in all)."""
    if _literal(host) is not None:
        return True
    try:
        encoded = host.rstrip(".").encode("idna")
    except UnicodeError:
        return False
    labels = encoded.split(b".")
    return len(encoded) <= 253 and all(0 < len(label) <= 63 for label in labels)


def _literal(host: str) -> IPv4Address | IPv6Address | None:
    try:
        return ip_address(host.strip("[]"))
    except ValueError:
        return None
