"""The locked-down client for calls to URLs a client registered.

A URL is called only when its scheme, host and port are on the configured allow-list
(`config.Egress`), and only at addresses that are public (or inside a range the config allows).
Addresses are checked after resolution and again by the resolver the connection itself uses,
so an answer that changes between the two (DNS rebinding) is refused too. Redirects are never
followed, proxies from the environment are ignored, and nothing of the configured upstreams
(their credentials) is ever sent.
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address, ip_address, ip_network
from typing import Any, Protocol

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from gateway.upstream.egress.addresses import effective, is_public
from gateway.upstream.egress.config import Egress, Origin
from gateway.upstream.egress.urls import DEFAULT_PORTS, CheckedUrl, UrlProblem, checked_url

METHODS = ("GET", "POST", "PUT")  # what a registered URL may be called with


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
            checked = checked_url(url)
        except UrlProblem as problem:
            return str(problem)
        if not any(_origin_matches(origin, checked) for origin in self.origins):
            return "this origin is not allowed for registered URLs"
        if checked.literal is not None and not self.address_allowed(checked.literal):
            return "this address is not allowed for registered URLs"
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

    async def request(self, method: str, url: str, body: bytes | None,
                      headers: dict[str, str], timeout: float | None = None) -> Answer:
        """`method` (GET, POST or PUT) to `url`, with `body` unless it is a GET (which never
        carries one); `EgressRefused` before anything is sent to a forbidden place."""
        if method not in METHODS or (method == "GET") != (body is None):
            raise ValueError("expected a GET without a body, or a POST or PUT with one")
        if self.policy.url_problem(url) is not None:
            raise EgressRefused("url")
        checked = checked_url(url)
        if checked.literal is None:  # aiohttp does not resolve literals; they were checked above
            try:
                self.policy.checked(await self.resolver.resolve(checked.host, checked.port))
            except OSError:
                raise EgressFailed("connect") from None
            except ValueError:  # the name cannot be encoded (UnicodeError is a ValueError)
                raise EgressRefused("host name") from None
        try:
            async with asyncio.timeout(timeout or self.timeout):
                return await self._send(method, url, body, headers)
        except TimeoutError:
            raise EgressFailed("timeout") from None
        except ValueError:
            raise EgressRefused("url") from None

    async def get(self, url: str, headers: dict[str, str],
                  timeout: float | None = None) -> Answer:
        """GET `url` (see `request`)."""
        return await self.request("GET", url, None, headers, timeout)

    async def post(self, url: str, body: bytes, headers: dict[str, str],
                   timeout: float | None = None) -> Answer:
        """POST `body` to `url` (see `request`)."""
        return await self.request("POST", url, body, headers, timeout)

    async def _send(self, method: str, url: str, body: bytes | None,
                    headers: dict[str, str]) -> Answer:
        session = self._session or self._open()
        try:
            async with session.request(method, url, data=body, headers=headers,
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


def _origin_matches(origin: Origin, url: CheckedUrl) -> bool:
    if origin.scheme != url.scheme:
        return False
    if url.port not in (origin.ports or [DEFAULT_PORTS[url.scheme]]):
        return False
    pattern = origin.host.lower().strip("[]")
    if url.literal is not None:
        try:
            return ip_address(pattern) == url.literal
        except ValueError:
            return False
    if pattern.startswith("*."):
        return url.host.endswith(pattern[1:]) and url.host != pattern[2:]
    return url.host == pattern
