"""Which addresses are public: the one place that decides whether an address is one webfetch reaches by
default (globally reachable), and which addresses are cloud metadata services.

The decision is IANA's special-purpose address registries, written out below, not Python's
`ipaddress.is_global`/`is_private`: their ranges changed between 3.11 and 3.12.4, and `is_private` lets
through 100.64.0.0/10 (carrier-grade NAT, Tailscale, Alibaba Cloud's metadata service), most of
192.0.0.0/24 and every IPv6 form that carries an IPv4 address (6to4, NAT64). Those forms are unwrapped
first and the address they carry is judged; Teredo is refused whole (below)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, replace

from .dns import IPAddress

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Special:
    """One range of the registries: what it is, and whether webfetch reaches it by default."""
    network: IPNetwork
    name: str
    reachable: bool


def _table(*rows: tuple[str, str, bool]) -> tuple[Special, ...]:
    # most specific first: the first range that holds an address decides it (an exception inside a range)
    specials = [Special(ipaddress.ip_network(net), name, reachable) for net, name, reachable in rows]
    return tuple(sorted(specials, key=lambda s: -s.network.prefixlen))


# IANA IPv4 Special-Purpose Address Registry (https://www.iana.org/assignments/iana-ipv4-special-registry/,
# RFC 6890 and its updates; as of 2025): every entry whose "Globally Reachable" is False is refused. Added
# from the IPv4 Address Space registry: multicast and 240/4, which are not unicast at all. An address in
# no range is public.
SPECIAL_V4 = _table(
    ("0.0.0.0/8", "this network", False),  # RFC 791
    ("10.0.0.0/8", "private-use", False),  # RFC 1918
    ("100.64.0.0/10", "shared address space, carrier-grade NAT and Tailscale", False),  # RFC 6598
    ("127.0.0.0/8", "loopback", False),
    ("169.254.0.0/16", "link-local", False),
    ("172.16.0.0/12", "private-use", False),  # RFC 1918
    # All of it: the service continuity prefix (/29), the dummy address (.8), NAT64 discovery (.170,
    # .171), Oracle Cloud Classic's metadata service (.192). The registry marks PCP anycast (.9) and TURN
    # anycast (.10) globally reachable, but an anycast address reaches the nearest such server, which is
    # commonly the user's own router: refused with the rest.
    ("192.0.0.0/24", "IETF protocol assignments", False),  # RFC 6890
    ("192.0.2.0/24", "documentation (TEST-NET-1)", False),  # RFC 5737
    ("192.31.196.0/24", "AS112-v4", True),  # RFC 7535
    ("192.52.193.0/24", "AMT", True),  # RFC 7450
    ("192.88.99.0/24", "deprecated 6to4 relay anycast", False),  # RFC 7526
    ("192.168.0.0/16", "private-use", False),  # RFC 1918
    ("192.175.48.0/24", "AS112 direct delegation", True),  # RFC 7534
    ("198.18.0.0/15", "benchmarking", False),  # RFC 2544
    ("198.51.100.0/24", "documentation (TEST-NET-2)", False),  # RFC 5737
    ("203.0.113.0/24", "documentation (TEST-NET-3)", False),  # RFC 5737
    ("224.0.0.0/4", "multicast", False),  # RFC 5771
    ("240.0.0.0/4", "reserved", False),  # RFC 1112
    ("255.255.255.255/32", "limited broadcast", False),  # RFC 919
)

# IANA IPv6 Special-Purpose Address Registry (https://www.iana.org/assignments/iana-ipv6-special-registry/,
# RFC 6890 and its updates; as of 2025), and the IPv6 Address Space registry, which allocates only
# 2000::/3 to global unicast: everything outside it is refused (::/0 below) but for the forms that carry
# an IPv4 address, unwrapped before this table is read (`_carried_v4`): IPv4-mapped ::ffff:0:0/96,
# IPv4-compatible ::/96, NAT64's well-known prefix 64:ff9b::/96 (RFC 6052) and 6to4 2002::/16 (RFC 3056).
SPECIAL_V6 = _table(
    ("::/0", "outside global unicast (2000::/3), reserved by the IETF", False),
    ("2000::/3", "global unicast", True),
    ("::/128", "unspecified", False),
    ("::1/128", "loopback", False),
    ("64:ff9b:1::/48", "local-use IPv4/IPv6 translation (NAT64)", False),  # RFC 8215
    ("100::/64", "discard-only", False),  # RFC 6666
    ("100:0:0:1::/64", "dummy prefix", False),  # RFC 9780
    ("2001::/23", "IETF protocol assignments", False),  # RFC 2928
    # Teredo (RFC 4380) is refused whole, whatever the IPv4 addresses it carries: it is a dead transition
    # mechanism (the public Teredo servers were shut down; no web server is reached by one), a host with a
    # Teredo client sends its packets to the carried client address directly (so both carried addresses
    # would have to be judged), and the registry gives it no "Globally Reachable" of its own (N/A) inside
    # 2001::/23, which is not.
    ("2001::/32", "Teredo", False),  # RFC 4380
    # PCP (.1), TURN (.2) and DNS-SD SRP (.3) anycast: globally reachable in the registry, refused as
    # their IPv4 twins are (the nearest server is commonly the user's own router).
    ("2001:1::/48", "PCP, TURN and DNS-SD anycast", False),  # RFC 7723, RFC 8155, RFC 9665
    ("2001:2::/48", "benchmarking", False),  # RFC 5180
    ("2001:3::/32", "AMT", True),  # RFC 7450
    ("2001:4:112::/48", "AS112-v6", True),  # RFC 7535
    ("2001:10::/28", "deprecated ORCHID", False),  # RFC 4843
    # ORCHIDv2 and drone entity tags: globally reachable in the registry, but they are identifiers, which
    # RFC 7343 and RFC 9374 say are not routed at the IP layer: nothing is there to fetch.
    ("2001:20::/28", "ORCHIDv2 identifiers", False),  # RFC 7343
    ("2001:30::/28", "drone remote ID entity tags", False),  # RFC 9374
    ("2001:db8::/32", "documentation", False),  # RFC 3849
    ("2620:4f:8000::/48", "AS112 direct delegation", True),  # RFC 7534
    ("3fff::/20", "documentation", False),  # RFC 9637
    ("5f00::/16", "segment routing (SRv6) SIDs", False),  # RFC 9602
    ("fc00::/7", "unique-local", False),  # RFC 4193
    ("fe80::/10", "link-local", False),
    ("fec0::/10", "deprecated site-local", False),  # RFC 3879
    ("ff00::/8", "multicast", False),  # RFC 4291
)

# Where clouds serve the machine's metadata, credentials included: a refusal names them, and never says
# how to allow one. Each is refused even where the registries would not (Azure's WireServer is in
# Microsoft's public space, reached only from inside Azure).
CLOUD_METADATA: dict[IPAddress, str] = {ipaddress.ip_address(a): what for a, what in (
    ("169.254.169.254", "the instance metadata service of AWS, Google Cloud, Azure, Oracle Cloud, "
                        "DigitalOcean, OpenStack and others"),
    ("fd00:ec2::254", "AWS EC2's instance metadata service over IPv6"),
    ("169.254.170.2", "AWS ECS's task metadata and credentials endpoint"),
    ("169.254.170.23", "AWS EKS Pod Identity's credentials agent"),
    ("fd00:ec2::23", "AWS EKS Pod Identity's credentials agent over IPv6"),
    ("fe80::a9fe:a9fe", "OpenStack's instance metadata service over IPv6"),
    ("100.100.100.200", "Alibaba Cloud's instance metadata service"),
    ("192.0.0.192", "Oracle Cloud Classic's instance metadata service"),
    ("168.63.129.16", "Azure's WireServer, the host's channel to the VM agent"),
)}


@dataclass(frozen=True)
class NotPublic:
    """Why an address is not one webfetch reaches by default."""
    address: IPAddress   # the address judged: the one asked about, or the IPv4 address it carries
    range: Special       # the registry's range `address` is in
    via: str | None      # how the address asked about carries `address` ("6to4"…), None when it is it
    cloud: str | None    # the cloud metadata service there, when it is one

    def describe(self) -> str:
        """What the address is, for an error: `6to4 form of 127.0.0.1, in 127.0.0.0/8: loopback`."""
        carried = f"{self.via} form of {self.address}, in " if self.via is not None else ""
        return f"{carried}{self.range.network}: {self.range.name}"


def not_public(ip: IPAddress) -> NotPublic | None:
    """None when webfetch reaches `ip` by default: it is globally reachable (after unwrapping the IPv4
    address an IPv6 form carries) and no cloud's metadata service. Else why not."""
    if isinstance(ip, ipaddress.IPv6Address) and (carried := _carried_v4(ip)) is not None:
        via, v4 = carried
        inner = not_public(v4)
        return None if inner is None else replace(inner, via=via)
    special = next((s for s in (SPECIAL_V4 if ip.version == 4 else SPECIAL_V6) if ip in s.network), None)
    cloud = cloud_metadata(ip)
    if special is None or special.reachable:
        if cloud is None:
            return None
        special = Special(ipaddress.ip_network(ip), "cloud metadata", False)  # at a public address: Azure's
    return NotPublic(ip, special, None, cloud)


def is_public(ip: IPAddress) -> bool:
    """Whether webfetch reaches `ip` by default (`not_public` says why not)."""
    return not_public(ip) is None


def cloud_metadata(ip: IPAddress) -> str | None:
    """The cloud metadata service at `ip`, or at an IPv4 address it carries (Teredo's two included)."""
    if ip in CLOUD_METADATA:
        return CLOUD_METADATA[ip]
    if isinstance(ip, ipaddress.IPv6Address):
        carried = [c[1]] if (c := _carried_v4(ip)) is not None else list(ip.teredo or ())
        return next((CLOUD_METADATA[a] for a in carried if a in CLOUD_METADATA), None)
    return None


_COMPATIBLE = ipaddress.ip_network("::/96")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _carried_v4(ip: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    """The IPv4 address a connection to `ip` reaches, and the form that carries it: IPv4-mapped (the
    socket speaks IPv4 to it), IPv4-compatible (deprecated; a tunnel to it), 6to4 (a relay hands it over),
    NAT64's well-known prefix (the translator connects to it). None for any other address."""
    low = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.ipv4_mapped is not None:
        return "IPv4-mapped", ip.ipv4_mapped
    if ip in _COMPATIBLE and int(ip) > 1:  # :: and ::1 are themselves
        return "IPv4-compatible", low
    if ip.sixtofour is not None:
        return "6to4", ip.sixtofour
    if ip in _NAT64:
        return "NAT64", low
    return None
