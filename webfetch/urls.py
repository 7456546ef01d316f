"""URL validation, normalization, the address policy (which hosts the daemon may fetch) and the host gate
that applies it to every request a page makes."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from .addresses import cloud_metadata, is_public, not_public
from .dns import HostCache, IPAddress, Resolver
from .errors import BlockedUrl, InvalidUrl

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class AddressPolicy:
    allow_private: bool = False
    allow_hosts: frozenset[str] = field(default_factory=frozenset)    # host names, let through whatever
    allow_networks: tuple[IPNetwork, ...] = ()                          # addresses and networks let through
    # How host names become addresses: the system resolver behind a cache (dns.py); tests give a scripted
    # one (DNS rebinding), asked at every lookup.
    resolver: Resolver = field(default_factory=HostCache, compare=False, repr=False)
    # browse.allow_local: (host as typed, port or None for every port) that browse sessions may reach on
    # loopback. `browse` marks the policy of browse sessions, whose refusal of a loopback address names the
    # browse.allow_local line that would allow it; fetch's policy has neither.
    allow_local: tuple[tuple[str, int | None], ...] = ()  # in the config's order: the error quotes the line
    browse: bool = False

    @classmethod
    def from_config(cls, allow_private: bool, allow_hosts: list[str],
                    resolver: Resolver | None = None) -> AddressPolicy:
        """fetch.allow_hosts holds host names, addresses (`10.0.0.5`) and networks (`10.1.0.0/16`)."""
        names, networks = set(), []
        for entry in allow_hosts:
            entry = entry.strip().strip("[]").lower().rstrip(".")
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                names.add(entry)
        return cls(allow_private, frozenset(names), tuple(networks), resolver or HostCache())

    def allows_address(self, ip: IPAddress) -> bool:
        """Whether fetch.allow_hosts lets `ip` through: a listed network holds it, or, for a cloud metadata
        address (which answers with the machine's credentials), the address itself is listed: no network,
        and not fetch.allow_private, reaches one by accident."""
        if cloud_metadata(ip) is not None:
            return any(network.num_addresses == 1 and ip == network.network_address for network in self.allow_networks)
        return any(ip in network for network in self.allow_networks)

    def allows_all_but_metadata(self, ip: IPAddress) -> bool:
        """Whether fetch.allow_private lets `ip` through: every address but a cloud metadata one."""
        return self.allow_private and cloud_metadata(ip) is None

    def for_browse(self, allow_local: list[str]) -> AddressPolicy:
        """This policy as browse sessions apply it: the same, and the loopback ports browse.allow_local lists.
        The same means fetch.allow_hosts and fetch.allow_private open browse too, every port of a listed host:
        they are the user's list of what the daemon may reach (a LAN or tailnet host has no other way into
        browse, and a rendered fetch runs the page's scripts under them already); browse.allow_local is the
        narrower grant, one loopback port for browse sessions only. doctor and the docs say the same."""
        return replace(self, allow_local=tuple(dict.fromkeys(parse_local(entry) for entry in allow_local)),
                       browse=True)

    def allows_local(self, host: str, port: int | None) -> bool:
        """Whether browse.allow_local lists `host` as typed with `port` (or with `*`)."""
        return (host, port) in self.allow_local or (host, None) in self.allow_local


LOCAL_ENTRY = re.compile(r"(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.\-]+)):([0-9]{1,5}|\*)")


def parse_local(entry: str) -> tuple[str, int | None]:
    """One browse.allow_local entry, `host:port` or `host:*` (`[::1]:3000` for IPv6), as (host, port);
    ValueError saying what is wrong. A host given as an address must be a loopback one: the setting is for
    the user's own dev server, not a way around the policy for the private network (fetch.allow_hosts)."""
    m = LOCAL_ENTRY.fullmatch(entry.strip())
    if m is None:
        raise ValueError(f"browse.allow_local entry {entry!r} is not host:port or host:* (for example "
                         f"\"localhost:3000\", \"127.0.0.1:*\", \"[::1]:8080\")")
    host = (m.group(1) or m.group(2)).lower().rstrip(".")
    port = None if m.group(3) == "*" else int(m.group(3))
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f"browse.allow_local entry {entry!r}: the port must be 1-65535 or *")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host, port
    if not ip.is_loopback:
        raise ValueError(f"browse.allow_local entry {entry!r}: {host} is not a loopback address; browse.allow_local "
                         f"is for servers on this machine (fetch.allow_hosts lets the private network through)")
    return host, port


def local_entry(host: str, port: int | None) -> str:
    """The browse.allow_local entry for `host` and `port`, as the user writes it."""
    return f"{f'[{host}]' if ':' in host else host}:{'*' if port is None else port}"


class PolicyHolder:
    """The address policy in force, one object shared by everything that applies it (the pipeline, the
    proxy, each browse session's gate): `webfetch reload` puts a new policy in `current`, and each of them
    reads `current` when it decides, so the next request, connection or page request follows the new lists."""

    def __init__(self, policy: AddressPolicy) -> None:
        self.current = policy

    @staticmethod
    def of(policy: AddressPolicy | PolicyHolder) -> PolicyHolder:
        """`policy` if it is a holder, else a holder of its own (a fixed policy: a render, a test)."""
        return policy if isinstance(policy, PolicyHolder) else PolicyHolder(policy)


def parse_url(url: str) -> tuple[str, str, int | None, str, str]:
    """Split an absolute http(s) URL into (scheme, host, port, path, query); InvalidUrl otherwise."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidUrl("empty URL; pass a full URL such as https://example.com/page")
    text = url.strip()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as e:
        raise InvalidUrl(f"{text!r} is not a valid URL ({e}); pass a full URL such as "
                         f"https://example.com/page") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise InvalidUrl(f"{text!r} is not an http(s) URL; pass a full URL such as https://example.com/page")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise InvalidUrl(f"{text!r} has no host; pass a full URL such as https://example.com/page")
    try:
        host = ascii_host(host)
    except UnicodeError:
        raise InvalidUrl(f"{text!r} has a host name that is not valid: {host!r}") from None
    return scheme, host, port, parts.path or "/", parts.query


def ascii_host(host: str) -> str:
    """A host name as it goes on the wire: lower case, a Unicode name in its punycode form (IDNA), so a
    name typed either way is the same host. UnicodeError when it is no valid name."""
    return host.encode("idna").decode("ascii").lower() if not host.isascii() else host.lower()


def host_listed(host: str, hosts: list[str] | tuple[str, ...]) -> bool:
    """Whether `host` is one of `hosts` or a subdomain of one: the one rule for where a login may go (a
    profile's binding, `Profile.allows`; what an import or a login copies; the hosts the person's own
    browser may be used for, user_browser.hosts)."""
    try:
        host = ascii_host(host.rstrip("."))
    except UnicodeError:
        return False
    return any(host == h or host.endswith("." + h) for h in hosts)


USER_HOST_ENTRY = re.compile(r"(?:\[([0-9A-Fa-f:.]+)\]|([^\s:/\[\]@]+))(?::([0-9]{1,5}))?")


def on_loopback(host: str) -> bool:
    """Whether `host` names this machine by itself: `localhost` (and names under .localhost, which Chrome
    sends there), a loopback address, or an unspecified one (0.0.0.0 and :: reach this machine too)."""
    host = host.strip("[]").lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_unspecified


def parse_user_host(entry: str) -> tuple[str, int | None]:
    """One user_browser.hosts entry, `host` or `host:port` (`[::1]:8080` for IPv6), as (host, port or None
    for every port); ValueError saying what is wrong. A host on this machine must name its port: on
    loopback every port is another program (the browser's own DevTools endpoint, which hands out control of
    every tab, webfetch's view), and a bare `127.0.0.1` would let a page in the agent's tab reach them all."""
    m = USER_HOST_ENTRY.fullmatch(entry.strip())
    if m is None:
        raise ValueError(f"user_browser.hosts entry {entry!r} is not a host or host:port (for example "
                         f"\"github.com\", \"localhost:3000\", \"[::1]:8080\")")
    host = (m.group(1) or m.group(2)).lower().rstrip(".")
    port = None if m.group(3) is None else int(m.group(3))
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f"user_browser.hosts entry {entry!r}: the port must be 1-65535")
    if port is None and on_loopback(host):
        raise ValueError(f"user_browser.hosts entry {entry!r} is on this machine: add the port of the server you "
                         f"mean (\"{local_entry(host, None)[:-2]}:8080\"); every other local port, your "
                         f"browser's DevTools among them, stays out of the agent's reach")
    return host, port


def user_host_listed(host: str, port: int, hosts: list[str] | tuple[str, ...]) -> bool:
    """Whether user_browser.hosts lets the person's browser be used for `host` on `port` (the effective
    port): an entry with a port holds that host on that port alone, one without it the host and its
    subdomains (the rule of a profile's binding, `host_listed`) on every port."""
    names = []
    for entry in hosts:
        try:
            name, only = parse_user_host(entry)
        except ValueError:
            continue  # the config refused it at load: never reached
        if only is None or only == port:
            names.append(name)
    return host_listed(host, names)


def build_url(scheme: str, host: str, port: int | None, path: str, query: str) -> str:
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != {"http": 80, "https": 443}[scheme]:
        netloc += f":{port}"
    return urlunsplit((scheme, netloc, path, query, ""))


def host_of(url: str) -> str:
    return (urlsplit(url).hostname or "").rstrip(".").lower()


def same_host(a: str, b: str) -> bool:
    """Hosts compared without a leading `www.` (PROTOCOL.md); scheme and port do not matter."""
    return _strip_www(host_of(a)) == _strip_www(host_of(b))


def _strip_www(host: str) -> str:
    return host[4:] if host.startswith("www.") else host


# How a host the policy lets through is reached: on the public internet, or at an address that is not
# public (addresses.py: this machine, its private network, carrier-grade NAT…; allowed by fetch.allow_hosts
# or fetch.allow_private). Plain http stays http only for "local".
Reach = Literal["public", "local"]


def _unmapped(ip: IPAddress) -> IPAddress:
    return ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None else ip


async def vet_host(host: str, policy: AddressPolicy, port: int | None = None) -> tuple[list[IPAddress], Reach]:
    """The addresses `host` may be reached at (on `port`, when the caller knows it), and how it is reached.
    Raises BlockedUrl when the policy refuses the host: when any address it resolves to is not public
    (addresses.py: loopback, private, link-local, shared, documentation, a cloud metadata address, a
    6to4 or NAT64 form of one, …) and neither fetch.allow_hosts nor fetch.allow_private allows it, nor (a
    browse session's policy) browse.allow_local lists the host as typed with this port and every such
    address is loopback. So a name that resolves to 127.0.0.1 is not `localhost` unless it is listed by
    that name. A cloud metadata address passes only when fetch.allow_hosts lists the host or that very
    address: fetch.allow_private and a listed network leave it refused."""
    addrs = await policy.resolver(host)
    if host in policy.allow_hosts:
        return addrs, "local"
    local = [a for a in addrs if not is_public(a)]
    if not local:
        return addrs, "public"
    blocked = [a for a in local if not policy.allows_address(a) and not policy.allows_all_but_metadata(a)]
    if not blocked:
        return addrs, "local"
    if port is not None and policy.allows_local(host, port) and all(_unmapped(a).is_loopback for a in blocked):
        return addrs, "local"
    raise BlockedUrl(blocked_message(host, blocked[0], policy, port))


def blocked_message(host: str, ip: IPAddress, policy: AddressPolicy | None = None, port: int | None = None) -> str:
    """Why the policy refuses `host` at `ip`, and how to allow it, except for a cloud metadata address
    (169.254.169.254 and the others addresses.py lists: the machine's credentials) or any other link-local
    one (where some cloud may serve its own), which no message of ours may talk a model into opening. A
    browse session refused a loopback port is told the exact browse.allow_local line that lets it through."""
    literal = _is_address(host, ip)
    shown = host if literal else f"{host} ({ip})"
    why = not_public(ip)
    if why is not None and why.cloud is not None:
        return (f"{shown} is a cloud metadata address ({why.cloud}, which answers with the machine's "
                f"credentials), which webfetch does not fetch; it is not a web page to read")
    judged = ip if why is None else why.address
    if judged.is_link_local:
        return (f"{shown} is a link-local address (where a cloud's metadata service answers with the machine's "
                f"credentials), which webfetch does not fetch; it is not a web page to read")
    if policy is not None and policy.browse and port is not None and _unmapped(ip).is_loopback:
        entries = dict.fromkeys([*(local_entry(h, p) for h, p in policy.allow_local), local_entry(host, port)])
        line = ", ".join(f'"{e}"' for e in entries)
        return (f"{local_entry(host, port)}{'' if literal else f' ({ip})'} is a loopback address, which "
                f"browse sessions reach only when the config lists it: to let them reach this dev server, put "
                f"`browse.allow_local = [{line}]` in the [browse] table of the config, then run `webfetch reload` "
                f"(fetch still refuses it)")
    what = "" if why is None else f" ({why.describe()})"
    return (f"{shown} is not a public address{what}, which webfetch does not fetch by default; set "
            f"fetch.allow_private = true or add the host to fetch.allow_hosts in the config to allow it")


def _is_address(host: str, ip: IPAddress) -> bool:
    """Whether `host` is `ip` written out (in whichever of its forms), not a name that resolved to it."""
    try:
        return ipaddress.ip_address(host) == ip
    except ValueError:
        return False


async def admit_host(host: str, policy: AddressPolicy, port: int | None = None) -> Reach:
    """The policy's verdict on a host (on `port`, when known): BlockedUrl when refused, else how it is reached."""
    if host in policy.allow_hosts:
        return "local"  # the verdict needs no lookup (the proxy, which needs the addresses, calls vet_host)
    return (await vet_host(host, policy, port))[1]


def effective_port(scheme: str, port: int | None) -> int:
    return port if port is not None else {"http": 80, "https": 443}[scheme]


def _key(scheme: str, host: str, port: int | None, path: str, query: str, reach: Reach) -> str:
    if scheme == "http" and reach == "public":
        scheme = "https"
        if port == 80:
            port = None
    return build_url(scheme, host, port, path, query)


def likely_key(url: str, policy: AddressPolicy) -> str:
    """The cache key `prepare_url` gives, computed without DNS: what a cache lookup tries first, so a hit
    costs no name resolution. Exact for a host the policy lists and for an address (its reach needs no
    lookup: local when it is one of this machine's or a private network's); a name is taken for a public
    host, so one that resolves to a local address misses here. A key of an address the policy refuses is
    in no cache: entries exist only for URLs that passed the policy, and a new policy empties the cache."""
    scheme, host, port, path, query = parse_url(url)
    return _key(scheme, host, port, path, query, _likely_reach(host, policy))


def _likely_reach(host: str, policy: AddressPolicy) -> Reach:
    if host in policy.allow_hosts:
        return "local"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return "public"
    return "public" if is_public(ip) else "local"


async def prepare_url(url: str, policy: AddressPolicy) -> str:
    """Validate, apply the address policy, upgrade http to https (not for allowed local hosts), and
    normalize (lowercase host, default port and fragment dropped). The result is the cache key."""
    scheme, host, port, path, query = parse_url(url)
    return _key(scheme, host, port, path, query, await admit_host(host, policy, effective_port(scheme, port)))


def wildcard_match(pieces: tuple[str, ...], target: str, anchored: bool) -> bool:
    """Whether a `*` pattern, given as its literal `pieces` (the text between its `*`s), matches `target`
    from its start, and to its end when `anchored`: robots.txt's rules (crawl/robots.py) and browse's routes
    (browse/routes.py), which are text from a site or an agent matched in the event loop. Never a regular
    expression (`*` as `.*` backtracks: `/*a*a…*a*b` against a long URL ran for ever), but the pieces found
    left to right with `str.find`: a `*` may take as little as it likes, so each piece's leftmost place is as
    good as any, and the match is linear in the target and the pattern."""
    first, *rest = pieces
    if not rest:
        return target == first if anchored else target.startswith(first)
    if not target.startswith(first):
        return False
    at = len(first)
    *middle, last = rest
    for piece in middle:
        found = target.find(piece, at)
        if found < 0:
            return False
        at = found + len(piece)
    if anchored:
        return len(target) - len(last) >= at and target.endswith(last)
    return target.find(last, at) >= 0


# Every request a page makes is paused once, at the request stage, for a HostGate (CDP Fetch pattern).
# Render and browse each add the documents' response stage, for reasons of their own.
GATE_FETCH_PATTERN: dict[str, str] = {"urlPattern": "*", "requestStage": "Request"}


class HostGate:
    """The address policy for the requests a page makes (documents, frames, scripts, fetch, XHR, beacons):
    the one place that decides them, for a render and for a browse session alike. A host's verdict is kept
    for the gate's life (a render's page, a browse session), so a host costs one DNS admission.

    Only http(s) is let through, whatever the policy: Chrome pauses no request that needs no network
    (`data:`, `blob:`; tests/test_host_gate.py), so one of another scheme would be something we do not know.
    Chrome does not pause a websocket's handshake either; were one paused, it is the HTTP request to the
    same host that ws(s) stands for. What holds for those, and against a name that resolves differently
    when Chrome looks it up after this check, is the address-policy proxy (proxy.py); this gate is the
    only check when Chrome connects without it (an outbound proxy of its own, a remote browser).

    Given a `PolicyHolder` (a browse session's gate), the gate follows a reload: the verdicts it kept were
    made under the old policy, so they are forgotten when the holder's policy changes.

    In the person's own browser (`listed`: user_browser.hosts) the gate is the only check there is (the
    proxy is not in that browser's path), and every request carries the person's cookies: every request of
    the agent's tabs, whatever it is for (a document, a frame, a script, an image, a fetch), goes only to a
    listed host (`user_host_listed`); a listed host passes whatever its address, as fetch.allow_hosts does:
    the person named it (a company's intranet, a dev server). Never, listed or not: a port `closed` names on
    a host of this machine (the person's DevTools endpoint, which hands out control of every tab they have;
    webfetch's own view)."""

    def __init__(self, policy: AddressPolicy | PolicyHolder, listed: tuple[str, ...] | None = None,
                 closed: Callable[[], Mapping[int, str]] = dict) -> None:
        self._holder = PolicyHolder.of(policy)
        self._listed = listed
        self._closed = closed       # port -> what listens there on this machine, read at each check
        self._judged_by = self._holder.current      # the policy the kept verdicts were made under
        self._verdicts: dict[tuple[str, int], str | None] = {}  # (host, port) -> None (allowed) or why refused

    @property
    def policy(self) -> AddressPolicy:
        return self._holder.current

    @property
    def in_persons_browser(self) -> bool:
        """Whether this is the gate of the person's own browser (user_browser.hosts), the only check there."""
        return self._listed is not None

    async def check(self, url: str, navigation: bool = False) -> str | None:
        """None when the page may request `url` (`navigation`: as its top-level document), else why not (a
        BlockedUrl message)."""
        if url.startswith(("ws://", "wss://")):
            url = "http" + url[2:]
        try:
            scheme, host, port = parse_url(url)[:3]
        except InvalidUrl:
            return f"{url.split(':', 1)[0]}: URLs are not followed"
        port = effective_port(scheme, port)
        if self._listed is not None:
            return await self._check_listed(host, port, self._listed)
        policy = self._holder.current
        if policy is not self._judged_by:
            self._judged_by, self._verdicts = policy, {}
        verdicts = self._verdicts  # a reload during the lookup starts a new dict: this verdict is not for it
        key = (host, port)  # by port too: browse.allow_local lets a loopback host through on some ports only
        if key not in verdicts:
            try:
                await admit_host(host, policy, port)
                verdicts[key] = None
            except BlockedUrl as e:
                verdicts[key] = e.message
        return verdicts[key]

    async def _check_listed(self, host: str, port: int, listed: tuple[str, ...]) -> str | None:
        what = self._closed().get(port)
        if what is not None and await self._on_this_machine(host):
            return (f"{host}:{port} is {what}: a page in your browser never reaches it, whatever "
                    f"user_browser.hosts lists")
        if user_host_listed(host, port, listed):
            return None
        return (f"{host}{'' if port in (80, 443) else f':{port}'} is not in user_browser.hosts "
                f"({', '.join(listed)}): the agent uses your browser only for the sites you listed")

    async def _on_this_machine(self, host: str) -> bool:
        """Whether `host` reaches this machine: a loopback name or address, or a name that resolves to one
        (or does not resolve: then nothing is lost by refusing it)."""
        if on_loopback(host):
            return True
        try:
            addresses = await self._holder.current.resolver(host)
        except (OSError, BlockedUrl):
            return True
        return not addresses or any(on_loopback(str(ip)) for ip in addresses)
