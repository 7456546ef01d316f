"""The address policy where connections are made. Pages reach the network only through this SOCKS5 proxy
(chrome/browser.py gives every browser context it), which resolves each host name itself, checks the addresses
against the policy, and connects to exactly an address it checked. Chrome never resolves a page's host
names, so a name that answers with a public address for the check and a private one afterwards (DNS
rebinding) gains nothing; and every kind of connection a page can open — documents, subresources,
fetch/XHR, WebSockets from pages and workers, service workers — passes here.

SOCKS5 (RFC 1928), CONNECT only: Chrome speaks it with proxy-side name resolution, and it is a byte
tunnel, so HTTP, TLS and WebSocket need no parsing here. No authentication; a client that offers a user
name (RFC 1929: webfetch's own HTTP client, fetch/over_http.py) has it taken as a label, not a credential,
so that `close_labelled` can end its tunnels: a libcurl exchange in a worker thread cannot be interrupted,
but its connection can be closed under it when its request is cancelled. The handshake is a few
fixed-size reads; no maintained trio SOCKS server exists, and an asyncio one would sit outside the
daemon's cancellation."""

from __future__ import annotations

import errno
import ipaddress
import logging
import os
from collections import OrderedDict
from dataclasses import dataclass
from functools import partial
from urllib.parse import urlsplit

import trio

from .errors import BlockedUrl
from .trust.socket_trust import NoSockDiag, sock_diag_uid, tcp_peer_uid
from .urls import AddressPolicy, PolicyHolder, vet_host

log = logging.getLogger("webfetch.proxy")

HANDSHAKE_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 30.0  # Chrome gives up on a connection sooner; this only bounds a stuck one
CHUNK = 64 * 1024
REMEMBERED_FAILURES = 256
# Whose connection it is: the kernel is asked for that one socket (NETLINK_SOCK_DIAG, a hash lookup, constant
# time however many sockets another user opens), inline, with no thread and no queue: another local user's
# flood of connections costs the event loop a few microseconds each and never delays or refuses the daemon's
# own. Only where netlink cannot be asked is /proc/net/tcp scanned instead, in threads on a limiter of its
# own (never trio's default one, which DNS, libcurl and the disk cache share) with at most this many
# connections waiting; beyond that a connection is closed at once. That fallback is slower the more sockets
# exist and its queue is shared by all comers, so there a flood from another user CAN delay or refuse the
# daemon's own connections while it lasts.
PEER_CHECK_THREADS = 4
MAX_WAITING_PEER_CHECKS = 1024  # far above what the daemon's own Chrome opens at once

# reply codes (RFC 1928 §6)
OK, NOT_ALLOWED, HOST_UNREACHABLE, REFUSED, BAD_COMMAND, BAD_ADDRESS = 0, 2, 4, 5, 7, 8


@dataclass(frozen=True)
class Failure:
    blocked: bool  # the address policy refused it (message: why); otherwise message is a net::ERR_ name
    message: str


def _net_error(e: OSError) -> str:
    """The name Chrome gives a failed connect, so the messages read as they did without the proxy."""
    names = {errno.ECONNREFUSED: "CONNECTION_REFUSED", errno.ETIMEDOUT: "CONNECTION_TIMED_OUT",
             errno.ENETUNREACH: "ADDRESS_UNREACHABLE", errno.EHOSTUNREACH: "ADDRESS_UNREACHABLE",
             errno.ECONNRESET: "CONNECTION_RESET"}
    code = e.errno
    # trio.open_tcp_stream raises "all attempts … failed", the attempts' own errors as its cause
    causes = e.__cause__.exceptions if isinstance(e.__cause__, BaseExceptionGroup) else [e.__cause__]
    for cause in causes:
        if code is None and isinstance(cause, OSError):
            code = cause.errno
    return f"net::ERR_{names.get(code or 0, 'CONNECTION_FAILED')}"


class _Closed(Exception):
    """The client went away or spoke something that is not SOCKS5."""


class _Reader:
    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self.buf = bytearray()

    async def exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            data = await self.stream.receive_some(CHUNK)
            if not data:
                raise _Closed("the client closed the connection during the handshake")
            self.buf += data
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out


class PolicyProxy:
    """A SOCKS5 server on 127.0.0.1 that connects only where the address policy allows."""

    def __init__(self, policy: AddressPolicy | PolicyHolder,
                 browse_policy: AddressPolicy | PolicyHolder | None = None) -> None:
        self.policy = PolicyHolder.of(policy)  # read at each connection: a reload applies to the next one
        # Browse sessions' contexts connect to a port of their own, whose policy adds browse.allow_local:
        # the port a connection arrives on is the one thing that tells which kind of context opened it.
        self.browse_policy = PolicyHolder.of(browse_policy) if browse_policy is not None else self.policy
        self.peer_checks = trio.CapacityLimiter(PEER_CHECK_THREADS)
        self.port: int | None = None
        self.browse_port: int | None = None
        self.listening = trio.Event()  # set once both ports are known
        self.open_tunnels = 0
        self.refusals = 0
        # Chrome reports every failed SOCKS request as ERR_SOCKS_CONNECTION_FAILED: the latest failures
        # by host and port keep what really happened, so a failed navigation can say it (fetch/in_chrome.py). By
        # port too: a page of the same host on another port succeeding at the same moment must not wipe it.
        self._failures: OrderedDict[tuple[str, int], Failure] = OrderedDict()
        self._labelled: dict[str, set[trio.CancelScope]] = {}  # open tunnels by the label their client gave
        # Labels closed lately: a tunnel asked for under one is refused. libcurl tries a request again on a
        # new connection when a reused one dies before the response, which would reopen what was closed.
        self._closed_labels: OrderedDict[str, None] = OrderedDict()

    @property
    def url(self) -> str:
        """What fetch's contexts connect through."""
        return f"socks5://127.0.0.1:{self.port}"

    @property
    def browse_url(self) -> str:
        """What browse sessions' contexts connect through (browse.allow_local applies there only)."""
        return f"socks5://127.0.0.1:{self.browse_port}"

    def close_labelled(self, label: str) -> None:
        """End every open tunnel whose client gave `label` (both sides' connections are closed), and refuse
        the label's tunnels from now on."""
        self._closed_labels[label] = None
        while len(self._closed_labels) > REMEMBERED_FAILURES:
            self._closed_labels.popitem(last=False)
        for scope in self._labelled.pop(label, set()):
            scope.cancel()

    def failure(self, url: str) -> Failure | None:
        """Why the latest connection for `url` (its host and port) failed, if one did lately."""
        parts = urlsplit(url)
        try:
            port = parts.port or (443 if parts.scheme in ("https", "wss") else 80)
        except ValueError:
            return None
        return self._failures.get(((parts.hostname or "").rstrip(".").lower(), port))

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        browse_listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        self.browse_port = browse_listeners[0].socket.getsockname()[1]
        self.listening.set()
        log.debug("address-policy proxy on %s (browse sessions: %s)", self.url, self.browse_url)
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, partial(self._handle_safely, self.policy), listeners)
            await nursery.start(trio.serve_listeners, partial(self._handle_safely, self.browse_policy),
                                browse_listeners)
            task_status.started(self.port)

    async def _handle_safely(self, policy: PolicyHolder, client: trio.SocketStream) -> None:
        try:
            await self._handle(client, policy)
        except Exception:  # one bad connection must not take the proxy (and every page) down
            log.exception("address-policy proxy: a connection failed")

    async def _handle(self, client: trio.SocketStream, policy: PolicyHolder) -> None:
        async with client:
            if not await _ours(client, self.peer_checks):
                return
            reader = _Reader(client)
            label: list[str] = []
            try:
                with trio.fail_after(HANDSHAKE_TIMEOUT_S + CONNECT_TIMEOUT_S):
                    upstream = await self._handshake(client, reader, policy, label)
            except (_Closed, trio.TooSlowError, trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                return
            if upstream is None:
                return
            if label and label[0] in self._closed_labels:
                await upstream.aclose()
                return
            self.open_tunnels += 1
            scope = trio.CancelScope()
            tunnels = self._labelled.setdefault(label[0], set()) if label else set()
            tunnels.add(scope)
            try:
                with scope:
                    async with upstream:
                        if reader.buf:
                            await upstream.send_all(bytes(reader.buf))
                        async with trio.open_nursery() as nursery:
                            nursery.start_soon(_pipe, client, upstream)
                            nursery.start_soon(_pipe, upstream, client)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                pass
            finally:
                self.open_tunnels -= 1
                tunnels.discard(scope)
                if label and not tunnels and self._labelled.get(label[0]) is tunnels:
                    del self._labelled[label[0]]

    async def _handshake(self, client: trio.SocketStream, reader: _Reader, policy: PolicyHolder,
                         label: list[str]) -> trio.SocketStream | None:
        """The SOCKS5 exchange up to the CONNECT's reply: the upstream connection, or None when refused.
        A user name the client gave is appended to `label`."""
        with trio.fail_after(HANDSHAKE_TIMEOUT_S):
            version, count = await reader.exactly(2)
            if version != 5:
                raise _Closed(f"not SOCKS5 (version byte {version})")
            methods = await reader.exactly(count)
            if 2 in methods:  # user name and password (RFC 1929): the name is a label, the password unused
                await client.send_all(b"\x05\x02")
                await reader.exactly(1)  # the sub-negotiation's version
                name = await reader.exactly((await reader.exactly(1))[0])
                await reader.exactly((await reader.exactly(1))[0])
                label.append(name.decode("ascii", "replace"))
                await client.send_all(b"\x01\x00")
            elif 0 in methods:
                await client.send_all(b"\x05\x00")
            else:
                await client.send_all(b"\x05\xff")  # none of the methods it offers is one we speak
                return None
            version, command, _, kind = await reader.exactly(4)
            if kind == 1:
                host = str(ipaddress.IPv4Address(await reader.exactly(4)))
            elif kind == 3:
                host = (await reader.exactly((await reader.exactly(1))[0])).decode("ascii", "replace")
            elif kind == 4:
                host = str(ipaddress.IPv6Address(await reader.exactly(16)))
            else:
                await _reply(client, BAD_ADDRESS)
                return None
            port = int.from_bytes(await reader.exactly(2), "big")
            if command != 1:  # only CONNECT: no BIND, no UDP ASSOCIATE
                await _reply(client, BAD_COMMAND)
                return None
        host = host.strip("[]").rstrip(".").lower()
        try:
            addresses, _ = await vet_host(host, policy.current, port)
        except BlockedUrl as e:
            self.refusals += 1
            log.info("refused a connection to %s:%d (address policy)", host, port)
            await self._fail(client, (host, port), NOT_ALLOWED, Failure(True, e.message))
            return None
        if not addresses:
            await self._fail(client, (host, port), HOST_UNREACHABLE, Failure(False, "net::ERR_NAME_NOT_RESOLVED"))
            return None
        # Connect to the very addresses just checked, never to the name: a second lookup could answer
        # differently.
        failure = Failure(False, "net::ERR_CONNECTION_TIMED_OUT")
        with trio.move_on_after(CONNECT_TIMEOUT_S):
            for address in addresses:
                try:
                    upstream = await trio.open_tcp_stream(str(address), port)
                except OSError as e:
                    failure = Failure(False, _net_error(e))
                    continue
                self._failures.pop((host, port), None)
                await _reply(client, OK)
                return upstream
        await self._fail(client, (host, port), REFUSED, failure)
        return None

    async def _fail(self, client: trio.SocketStream, where: tuple[str, int], code: int, failure: Failure) -> None:
        self._failures[where] = failure
        self._failures.move_to_end(where)
        while len(self._failures) > REMEMBERED_FAILURES:
            self._failures.popitem(last=False)
        await _reply(client, code)


async def _ours(client: trio.SocketStream, checks: trio.CapacityLimiter) -> bool:
    """Whether the process at the other end runs as the daemon's user. The proxy's ports are on 127.0.0.1,
    where every local user can connect: without this, another user's tunnel would leave from the daemon's
    uid, to what its allow lists open (the private network, browse.allow_local's ports), and could write
    the failures a page's error reports."""
    try:
        peer, local = client.socket.getpeername(), client.socket.getsockname()
    except OSError:  # reset already: nothing to serve, nothing to log
        return False
    try:
        uid = sock_diag_uid((peer[0], peer[1]), (local[0], local[1]))
    except NoSockDiag:
        if checks.statistics().tasks_waiting >= MAX_WAITING_PEER_CHECKS:
            log.warning("refused a connection to the address-policy proxy from %s:%d: too many waiting to be "
                        "checked", peer[0], peer[1])
            return False
        uid = await trio.to_thread.run_sync(tcp_peer_uid, (peer[0], peer[1]), (local[0], local[1]),
                                            limiter=checks)
    if uid == os.geteuid():
        return True
    log.warning("refused a connection to the address-policy proxy from %s:%d: %s", peer[0], peer[1],
                "its owner is not known" if uid is None else f"it belongs to uid {uid}, not the daemon's")
    return False


async def _reply(client: trio.SocketStream, code: int) -> None:
    # bound address: 0.0.0.0:0 (Chrome does not use it)
    await client.send_all(bytes([5, code, 0, 1, 0, 0, 0, 0, 0, 0]))


async def _pipe(source: trio.SocketStream, sink: trio.SocketStream) -> None:
    """Copy until the source ends, then pass the end on (a half-close: the other direction goes on)."""
    try:
        while data := await source.receive_some(CHUNK):
            await sink.send_all(data)
        await sink.send_eof()
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        # one side is gone: end the tunnel both ways
        await sink.aclose()
        await source.aclose()
