"""Which IP addresses a call to a URL a client registered may reach.

`is_global` alone is not enough: on the Python versions we run it calls the IPv6 forms that
*carry* an IPv4 address (NAT64, 6to4, IPv4-compatible, SIIT, Teredo) global whatever that
IPv4 address is, so `64:ff9b::169.254.169.254` would pass. The embedded IPv4 address is what a
translator or tunnel would actually reach, so that is the address judged.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address, IPv6Network

Address = IPv4Address | IPv6Address

_NAT64_WELL_KNOWN = IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = IPv6Network("64:ff9b:1::/48")  # RFC 8215: local use, never globally reachable
_IPV4_COMPATIBLE = IPv6Network("::/96")  # deprecated (RFC 4291 §2.5.5.1)
_SIIT = IPv6Network("::ffff:0:0:0/96")  # IPv4-translated (RFC 2765)
_LAST_32_BITS: tuple[IPv6Network, ...] = (_NAT64_WELL_KNOWN, _IPV4_COMPATIBLE, _SIIT)


def embedded_ipv4(address: IPv6Address) -> IPv4Address | None:
    """The IPv4 address an IPv6 form carries (mapped, NAT64, 6to4, compatible, SIIT), if any."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if any(address in network for network in _LAST_32_BITS):
        return IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def never_allowed(address: Address) -> bool:
    """Addresses refused whatever `allow_networks` says."""
    if address.is_unspecified or address.is_multicast:
        return True
    if isinstance(address, IPv6Address):
        return address.is_site_local or address in _NAT64_LOCAL or address.teredo is not None
    return address.is_reserved


def effective(address: Address) -> Address | None:
    """The address a connection would really reach, or None when it is refused outright."""
    if isinstance(address, IPv6Address):
        if never_allowed(address):
            return None
        inner = embedded_ipv4(address)
        if inner is None:
            # Checked after extraction: `::/8` (which holds the embedding forms) is reserved.
            return None if address.is_reserved else address
        address = inner
    return None if never_allowed(address) else address


def is_public(address: Address) -> bool:
    """Globally reachable unicast (the default rule when no allowed network matches)."""
    return address.is_global and not address.is_multicast and not address.is_reserved
