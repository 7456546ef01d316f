"""The address table the policy tests share: every special-purpose range of IANA's IPv4 and IPv6 registries
(and the forms that carry an IPv4 address), with what the refusal must say, beside public addresses that
must pass; names that resolve to them (the DNS server is the one thing faked); and a guard that sees every
connection the policy proxy makes, refusing any that is not to loopback, so that no packet of a test
leaves the machine and a test can tell "refused before connecting" from "tried and failed"."""

from __future__ import annotations

import errno
import ipaddress

import trio

from webfetch.dns import resolve

# (address, what the refusal of a URL on it says) — None: public, the policy lets it through
METADATA = "is a cloud metadata address ("
LINK_LOCAL = "is a link-local address ("
TABLE: list[tuple[str, str | None]] = [
    # IPv4 special-purpose registry
    ("0.0.0.0", "(0.0.0.0/8: this network)"),
    ("0.1.2.3", "(0.0.0.0/8: this network)"),
    ("10.1.2.3", "(10.0.0.0/8: private-use)"),
    ("100.64.0.1", "(100.64.0.0/10: shared address space, carrier-grade NAT and Tailscale)"),
    ("100.127.255.254", "(100.64.0.0/10: shared address space"),
    ("100.100.100.200", METADATA + "Alibaba Cloud's instance metadata service"),
    ("127.0.0.1", "(127.0.0.0/8: loopback)"),
    ("127.255.255.254", "(127.0.0.0/8: loopback)"),
    ("169.254.1.1", LINK_LOCAL),
    ("169.254.169.254", METADATA + "the instance metadata service of AWS, Google Cloud, Azure"),
    ("169.254.170.2", METADATA + "AWS ECS's task metadata and credentials endpoint"),
    ("169.254.170.23", METADATA + "AWS EKS Pod Identity's credentials agent"),
    ("172.16.0.1", "(172.16.0.0/12: private-use)"),
    ("172.31.255.255", "(172.16.0.0/12: private-use)"),
    ("192.0.0.1", "(192.0.0.0/24: IETF protocol assignments)"),       # service continuity prefix
    ("192.0.0.8", "(192.0.0.0/24: IETF protocol assignments)"),       # dummy address
    ("192.0.0.9", "(192.0.0.0/24: IETF protocol assignments)"),       # PCP anycast
    ("192.0.0.10", "(192.0.0.0/24: IETF protocol assignments)"),      # TURN anycast
    ("192.0.0.170", "(192.0.0.0/24: IETF protocol assignments)"),     # NAT64/DNS64 discovery
    ("192.0.0.192", METADATA + "Oracle Cloud Classic's instance metadata service"),
    ("192.0.2.1", "(192.0.2.0/24: documentation (TEST-NET-1))"),
    ("192.88.99.1", "(192.88.99.0/24: deprecated 6to4 relay anycast)"),
    ("192.168.1.1", "(192.168.0.0/16: private-use)"),
    ("198.18.0.1", "(198.18.0.0/15: benchmarking)"),
    ("198.19.255.255", "(198.18.0.0/15: benchmarking)"),
    ("198.51.100.7", "(198.51.100.0/24: documentation (TEST-NET-2))"),
    ("203.0.113.9", "(203.0.113.0/24: documentation (TEST-NET-3))"),
    ("224.0.0.1", "(224.0.0.0/4: multicast)"),
    ("239.255.255.250", "(224.0.0.0/4: multicast)"),
    ("240.0.0.1", "(240.0.0.0/4: reserved)"),
    ("255.255.255.255", "(255.255.255.255/32: limited broadcast)"),
    ("168.63.129.16", METADATA + "Azure's WireServer"),             # public space, but Azure's host channel
    # IPv4: public, at the edges of the ranges above and in the registry's globally reachable entries
    ("8.8.8.8", None),
    ("1.1.1.1", None),
    ("100.63.255.255", None),
    ("100.128.0.0", None),
    ("172.32.0.1", None),
    ("192.0.1.1", None),
    ("192.31.196.1", None),                                          # AS112
    ("192.52.193.1", None),                                          # AMT
    ("192.175.48.1", None),                                          # AS112
    ("198.20.0.1", None),
    ("223.255.255.255", None),
    # IPv6 special-purpose registry
    ("::", "(::/128: unspecified)"),
    ("::1", "(::1/128: loopback)"),
    ("::ffff:127.0.0.1", "(IPv4-mapped form of 127.0.0.1, in 127.0.0.0/8: loopback)"),
    ("::ffff:10.0.0.1", "(IPv4-mapped form of 10.0.0.1, in 10.0.0.0/8: private-use)"),
    ("::ffff:169.254.169.254", METADATA + "the instance metadata service of AWS"),
    ("::127.0.0.1", "(IPv4-compatible form of 127.0.0.1, in 127.0.0.0/8: loopback)"),
    ("::100.64.0.1", "(IPv4-compatible form of 100.64.0.1, in 100.64.0.0/10: shared address space"),
    ("64:ff9b::7f00:1", "(NAT64 form of 127.0.0.1, in 127.0.0.0/8: loopback)"),
    ("64:ff9b::a00:1", "(NAT64 form of 10.0.0.1, in 10.0.0.0/8: private-use)"),
    ("64:ff9b::a9fe:a9fe", METADATA + "the instance metadata service of AWS"),
    ("64:ff9b:1::1", "(64:ff9b:1::/48: local-use IPv4/IPv6 translation (NAT64))"),
    ("100::1", "(100::/64: discard-only)"),
    ("100:0:0:1::1", "(100:0:0:1::/64: dummy prefix)"),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "(2001::/32: Teredo)"),  # a public server and client: still refused
    ("2001:0:4136:e378:8000:63bf:5601:5601", METADATA + "the instance metadata service"),  # client 169.254.169.254
    ("2001:1::1", "(2001:1::/48: PCP, TURN and DNS-SD anycast)"),
    ("2001:1::2", "(2001:1::/48: PCP, TURN and DNS-SD anycast)"),
    ("2001:2::1", "(2001:2::/48: benchmarking)"),
    ("2001:10::1", "(2001:10::/28: deprecated ORCHID)"),
    ("2001:20::1", "(2001:20::/28: ORCHIDv2 identifiers)"),
    ("2001:30::1", "(2001:30::/28: drone remote ID entity tags)"),
    ("2001:100::1", "(2001::/23: IETF protocol assignments)"),
    ("2001:db8::1", "(2001:db8::/32: documentation)"),
    ("2002:7f00:1::", "(6to4 form of 127.0.0.1, in 127.0.0.0/8: loopback)"),
    ("2002:c0a8:101::1", "(6to4 form of 192.168.1.1, in 192.168.0.0/16: private-use)"),
    ("2002:6464:64c8::", METADATA + "Alibaba Cloud's"),               # 6to4 of 100.100.100.200
    ("3fff::1", "(3fff::/20: documentation)"),
    ("5f00::1", "(5f00::/16: segment routing (SRv6) SIDs)"),
    ("fc00::1", "(fc00::/7: unique-local)"),
    ("fd12:3456::1", "(fc00::/7: unique-local)"),
    ("fd00:ec2::254", METADATA + "AWS EC2's instance metadata service over IPv6"),
    ("fd00:ec2::23", METADATA + "AWS EKS Pod Identity's credentials agent over IPv6"),
    ("fe80::1", LINK_LOCAL),
    ("fe80::a9fe:a9fe", METADATA + "OpenStack's instance metadata service over IPv6"),
    ("fec0::1", "(fec0::/10: deprecated site-local)"),
    ("ff02::1", "(ff00::/8: multicast)"),
    ("ff0e::1", "(ff00::/8: multicast)"),
    ("4000::1", "(::/0: outside global unicast (2000::/3), reserved by the IETF)"),
    ("::ffff:0:7f00:1", "(::/0: outside global unicast"),              # SIIT's translated form: not carried
    # IPv6: public
    ("2606:4700::1111", None),
    ("2001:4860:4860::8888", None),
    ("2a00:1450:4001:82a::200e", None),
    ("2002:808:808::", None),                                          # 6to4 of 8.8.8.8
    ("64:ff9b::808:808", None),                                        # NAT64 of 8.8.8.8
    ("::ffff:8.8.8.8", None),
    ("2001:3::1", None),                                               # AMT
    ("2001:4:112::1", None),                                           # AS112-v6
    ("2620:4f:8000::1", None),                                         # AS112 direct delegation
]
EXPECTED = dict(TABLE)

# Through every path: a few per family, among them the three holes the old policy had (100.100.100.200,
# 192.0.0.192, 2002:7f00:1::), and one public address per family that must pass the policy.
SAMPLE = ["100.100.100.200", "192.0.0.192", "100.64.0.1", "198.18.0.1",
          "2002:7f00:1::", "64:ff9b::a9fe:a9fe", "fd00:ec2::254", "2001:db8::1"]
PUBLIC = ["8.8.8.8", "2606:4700::1111"]


def name_of(address: str) -> str:
    """The test name that resolves to `address`: at-100-64-0-1.test, at-2002x7f00x1xx.test."""
    return f"at-{address.replace('.', '-').replace(':', 'x')}.test"


NAMES = {name_of(a): a for a, _ in TABLE}


async def resolver(host: str) -> list:
    """The DNS server of these tests: each table address under its name, and the system's answer else."""
    if host in NAMES:
        return [ipaddress.ip_address(NAMES[host])]
    return await resolve(host)


class NoPacketLeaves:
    """Put in place of trio.open_tcp_stream (what the policy proxy connects with): a connection to a
    loopback address is made; any other is recorded in `attempts` and fails as an unreachable network
    would, before a socket exists."""

    def __init__(self) -> None:
        self.attempts: list[tuple[str, int]] = []
        self._open = trio.open_tcp_stream

    async def __call__(self, host: str | bytes, port: int, **kwargs) -> trio.SocketStream:
        text = host.decode() if isinstance(host, bytes) else host
        try:
            loopback = ipaddress.ip_address(text).is_loopback
        except ValueError:
            loopback = text == "localhost"
        if not loopback:
            self.attempts.append((text, port))
            raise OSError(errno.ENETUNREACH, f"the tests reach no address off this machine ({text})")
        return await self._open(host, port, **kwargs)
