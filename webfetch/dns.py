"""Host name lookups for the address policy, made the way Chrome makes its own.

Pages reach the network through the address-policy proxy, which resolves every name itself (proxy.py),
so Chrome's host cache and its cap on concurrent lookups no longer apply: without them, each of the six
connections Chrome opens to a host was a lookup of its own, and a page naming twenty hosts sent forty
queries at once. Resolvers that are not built for that (home routers, the DNS forwarders of containers
and sandboxes) drop some of them, and glibc then waits its whole timeout (5 s) before asking again: a
parser-blocking script from such a host held a page's DOMContentLoaded until `browser.settle_s`. Chrome's
own answer is kept here: a name's addresses are kept for a minute, one lookup per name is in flight at a
time, and at most six run at once."""

from __future__ import annotations

import ipaddress
import socket
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import trio

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str], Awaitable[list[IPAddress]]]

# Chrome keeps a system lookup's answer for 60 s. A name that did not resolve is asked again soon: its
# failure is kept only as long as one page load's requests to it take to arrive (the render's check and
# Chrome's connections through the proxy ask within milliseconds of each other).
ANSWER_TTL_S = 60.0
FAILURE_TTL_S = 2.0
# Chrome's cap on concurrent system lookups ("some routers (or resolvers) appear to start to provide
# host-not-found if too many simultaneous resolutions are pending").
MAX_CONCURRENT_LOOKUPS = 6
MAX_NAMES = 1024  # the names remembered; the oldest go first


async def resolve(host: str) -> list[IPAddress]:
    """The addresses a host name stands for (the system resolver); [] when it does not resolve."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = await trio.socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return []
    out: list[IPAddress] = []
    for info in infos:
        addr = str(info[4][0]).split("%", 1)[0]
        try:
            out.append(ipaddress.ip_address(addr))
        except ValueError:
            continue
    return out


@dataclass(frozen=True)
class _Answer:
    addresses: list[IPAddress]
    expires: float  # trio.current_time()


class HostCache:
    """A resolver in front of another (the system's): answers kept ANSWER_TTL_S (FAILURE_TTL_S for a
    name that did not resolve), concurrent callers for one name share its lookup, and at most
    MAX_CONCURRENT_LOOKUPS lookups run at once. Callable as a Resolver."""

    def __init__(self, lookup: Resolver = resolve) -> None:
        self._lookup = lookup
        self._answers: OrderedDict[str, _Answer] = OrderedDict()
        self._in_flight: dict[str, trio.Event] = {}
        self._limiter = trio.CapacityLimiter(MAX_CONCURRENT_LOOKUPS)

    async def __call__(self, host: str) -> list[IPAddress]:
        try:
            return [ipaddress.ip_address(host)]  # an address needs no lookup, and no room in the cache
        except ValueError:
            pass
        while True:
            answer = self._answers.get(host)
            if answer is not None and answer.expires > trio.current_time():
                return answer.addresses
            done = self._in_flight.get(host)
            if done is None:
                break
            # Another caller is looking the name up: its answer serves this one too. (Had it been
            # cancelled, the loop makes this caller look it up instead.)
            await done.wait()
        done = self._in_flight[host] = trio.Event()
        try:
            async with self._limiter:
                addresses = await self._lookup(host)
            self._remember(host, addresses)
            return addresses
        finally:
            del self._in_flight[host]
            done.set()

    def _remember(self, host: str, addresses: list[IPAddress]) -> None:
        ttl = ANSWER_TTL_S if addresses else FAILURE_TTL_S
        self._answers[host] = _Answer(addresses, trio.current_time() + ttl)
        self._answers.move_to_end(host)
        while len(self._answers) > MAX_NAMES:
            self._answers.popitem(last=False)
