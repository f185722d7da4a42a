"""Which addresses rostra may fetch an image from: public unicast ones, and those the operator allows.

Everything a request could use to reach inside the deployment is refused: loopback, private (RFC 1918, unique
local), link-local (cloud metadata at 169.254.169.254 and fd00:ec2::254 among them), carrier-grade NAT, multicast,
reserved, unspecified, documentation and benchmarking ranges, and IPv4 addresses wrapped in IPv6 (mapped, 6to4,
Teredo, NAT64), which are judged by the IPv4 address inside. Spellings do not matter: addresses are judged after
resolution (`2130706433`, `0x7f.1` and `0177.0.0.1` all resolve to 127.0.0.1).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def parse_ip(text: str) -> IPAddress | None:
    """`text` as an IP address in its standard spelling (brackets and an IPv6 zone allowed), else None."""
    try:
        return ipaddress.ip_address(text.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]  # the client's address
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def is_public(address: IPAddress) -> bool:
    if isinstance(address, ipaddress.IPv6Address):
        inner = embedded_ipv4(address)
        if inner is not None:
            return is_public(inner)
        if address.is_site_local:
            return False
    return address.is_global and not (address.is_multicast or address.is_reserved or address.is_link_local
                                      or address.is_loopback or address.is_unspecified or address.is_private)


@dataclass(frozen=True)
class HostPolicy:
    """Public addresses, plus the hosts the operator names: host names (exact, any case), IP addresses and
    networks (10.0.0.0/8)."""

    names: frozenset[str] = frozenset()
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()

    @classmethod
    def of(cls, allow_hosts: tuple[str, ...] | list[str]) -> HostPolicy:
        names, networks = set(), []
        for entry in allow_hosts:
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            except ValueError:
                names.add(entry.lower().rstrip("."))
        return cls(frozenset(names), tuple(networks))

    def allows_name(self, host: str) -> bool:
        """A host named in the allow-list: any address it resolves to may be fetched from."""
        return host.lower().rstrip(".") in self.names

    def allows_address(self, address: IPAddress) -> bool:
        return is_public(address) or any(address in network for network in self.networks
                                         if network.version == address.version)
