"""Header hygiene for a forwarding proxy (RFC 9110 §7.6): hop-by-hop removal, Via, X-Forwarded-*,
client-IP fields only from trusted proxies.

Header names from uvicorn arrive lower-cased; those from upstream clients may not, so every
comparison lower-cases first.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from ipaddress import IPv4Network, IPv6Network, ip_address, ip_network

from gateway.asgi import RawHeaders, Scope

# RFC 9110 §7.6.1 and the proxy-only fields; `Connection` may name more.
HOP_BY_HOP = frozenset({
    b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer",
    b"transfer-encoding", b"upgrade", b"proxy-authenticate", b"proxy-authorization",
})
_FORWARDED = frozenset(
    {b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host", b"forwarded"}
)
# Client-address fields that CDNs and proxies set; anyone else could forge them.
_CLIENT_IP = frozenset(
    {b"x-real-ip", b"true-client-ip", b"x-client-ip", b"cf-connecting-ip"}
)
# Fields the gateway sets itself, so any incoming copy is dropped.
_HOST = re.compile(r"(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")
_REQUEST_OWNED = frozenset({b"host", b"x-request-id", b"expect", b"via"})
_RESPONSE_OWNED = frozenset({b"x-request-id", b"date", b"server", b"via"})


@dataclass(frozen=True, slots=True)
class ClientInfo:
    """Where the request came from, as the gateway itself saw it."""

    address: str
    scheme: str
    host: bytes


def parse_networks(values: list[str]) -> tuple[IPv4Network | IPv6Network, ...]:
    return tuple(ip_network(value, strict=False) for value in values)


def is_trusted(address: str, networks: tuple[IPv4Network | IPv6Network, ...]) -> bool:
    if not networks or not address:
        return False
    try:
        ip = ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)


def client_address(peer: str, headers: RawHeaders,
                   networks: tuple[IPv4Network | IPv6Network, ...]) -> str:
    """The caller's address: the peer, or behind trusted proxies the first untrusted hop of
    X-Forwarded-For read from the right (the only entries a client cannot forge)."""
    if not is_trusted(peer, networks):
        return peer
    hops = [hop.strip() for name, value in headers if name == b"x-forwarded-for"
            for hop in value.decode("latin-1").split(",")]
    for hop in reversed(hops):
        if hop and not is_trusted(hop, networks):
            return hop
    return hops[0] if hops and hops[0] else peer


def nearest_forwarded(headers: RawHeaders, name: bytes) -> bytes | None:
    """The last value of an X-Forwarded-* list: the one the nearest (trusted) proxy added.

    Earlier values come from further away, and a proxy that appends rather than replaces
    passes on whatever the client sent; so, as for X-Forwarded-For, the nearest hop counts.
    """
    values = [value for field, value in headers if field == name]
    if not values:
        return None
    return values[-1].rsplit(b",", 1)[-1].strip() or None


def request_origin(scope: Scope, networks: tuple[IPv4Network | IPv6Network, ...]) -> str:
    """`scheme://host[:port]` the client used: from X-Forwarded-Proto and -Host when the peer
    is a trusted proxy, else from the connection and Host. A malformed host is never echoed."""
    peer = scope["client"][0] if scope.get("client") else ""
    fields = {name: value.decode("latin-1") for name, value in reversed(scope["headers"])}
    scheme, host = scope.get("scheme", "http"), fields.get(b"host", "")
    if is_trusted(peer, networks):
        proto = (nearest_forwarded(scope["headers"], b"x-forwarded-proto") or b"").decode(
            "latin-1").lower()
        scheme = proto if proto in ("http", "https") else scheme
        host = (nearest_forwarded(scope["headers"], b"x-forwarded-host") or b"").decode(
            "latin-1") or host
    if not _HOST.fullmatch(host):
        server = scope.get("server") or ("localhost", None)
        host = server[0] if server[1] is None else f"{server[0]}:{server[1]}"
    return f"{scheme}://{host}"


_NO_NAMES: frozenset[bytes] = frozenset()


def connection_options(headers: RawHeaders) -> frozenset[bytes]:
    """Field names listed in `Connection`, which are hop-by-hop too."""
    names: set[bytes] | None = None
    for name, value in headers:
        if name.lower() == b"connection":
            names = names or set()
            names.update(token.strip().lower() for token in value.split(b","))
    return _NO_NAMES if names is None else frozenset(names)


@lru_cache(maxsize=256)
def _request_drop(drop_also: frozenset[bytes], trusted: bool) -> frozenset[bytes]:
    """The fields never forwarded upstream, built once per (extra fields, trust) pair."""
    drop = HOP_BY_HOP | _REQUEST_OWNED | drop_also
    return drop if trusted else drop | _FORWARDED | _CLIENT_IP


_RESPONSE_DROP = HOP_BY_HOP | _RESPONSE_OWNED


def upstream_request_headers(
    headers: RawHeaders,
    client: ClientInfo,
    *,
    trusted: bool,
    via: bytes,
    request_id: bytes,
    host: bytes,
    drop_also: frozenset[bytes] = frozenset(),
    add: RawHeaders | None = None,
) -> RawHeaders:
    """Headers to send upstream: cleaned, with Via, X-Forwarded-* and the request id.

    `drop_also` names more fields to remove (credentials, identity headers); `add` is appended
    after the cleaning, so it can never be overridden by the client.
    """
    drop = _request_drop(drop_also, trusted)
    if options := connection_options(headers):
        drop = drop | options
    out: RawHeaders = [(b"host", host)]
    incoming: dict[bytes, list[bytes]] = {}
    for name, value in headers:
        # Many frameworks (CGI, WSGI, Rack, PHP) read "X_Foo" as "X-Foo": compare them so.
        lowered = name.lower().replace(b"_", b"-")
        if lowered in drop:
            if lowered == b"via":
                incoming.setdefault(lowered, []).append(value)
            continue
        if lowered in _FORWARDED:
            incoming.setdefault(lowered, []).append(value)
        else:
            out.append((name, value))
    out.extend(_forwarded_fields(incoming, client))
    out.append((b"via", _join(incoming.get(b"via"), via)))
    out.append((b"x-request-id", request_id))
    if add:
        out.extend(add)
    return out


def client_response_headers(
    headers: RawHeaders, via: bytes,
    rewrite: Callable[[bytes, bytes], bytes] | None = None,
    rewrite_names: frozenset[bytes] = frozenset(),
) -> RawHeaders:
    """Upstream response headers minus hop-by-hop and gateway-owned ones, with Via appended.

    Fields named in `rewrite_names` (lower-case) are passed through `rewrite(name, value)`.
    """
    drop = _RESPONSE_DROP
    if options := connection_options(headers):
        drop = drop | options
    out: RawHeaders = []
    vias: list[bytes] = []
    for name, value in headers:
        lowered = name.lower()
        if lowered == b"via":
            vias.append(value)
        elif lowered in drop:
            continue
        elif lowered in rewrite_names and rewrite is not None:
            out.append((name, rewrite(lowered, value)))
        else:
            out.append((name, value))
    out.append((b"via", _join(vias, via)))
    return out


def _forwarded_fields(incoming: dict[bytes, list[bytes]], client: ClientInfo) -> RawHeaders:
    fields: RawHeaders = []
    if b"forwarded" in incoming:
        fields.extend((b"forwarded", value) for value in incoming[b"forwarded"])
    address = client.address.encode("latin-1")
    fields.append((b"x-forwarded-for", _join(incoming.get(b"x-forwarded-for"), address)))
    proto = incoming.get(b"x-forwarded-proto")
    fields.append((b"x-forwarded-proto", proto[0] if proto else client.scheme.encode()))
    forwarded_host = incoming.get(b"x-forwarded-host")
    if forwarded_host or client.host:
        fields.append((b"x-forwarded-host", forwarded_host[0] if forwarded_host else client.host))
    return fields


def _join(previous: list[bytes] | None, value: bytes) -> bytes:
    return b", ".join([*previous, value]) if previous else value
