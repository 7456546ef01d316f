"""The address-policy proxy spoken to as Chrome speaks to it (SOCKS5 over a real socket), including by
clients that speak it badly: it refuses what the policy refuses, and keeps serving."""

import ipaddress
from functools import partial

import pytest
import trio

from webfetch.dns import resolve
from webfetch.proxy import PolicyProxy
from webfetch.urls import AddressPolicy

from .support.addresses import TABLE, name_of, resolver
from .support.site import ARTICLE_TEXT


async def start_proxy(nursery, **policy) -> PolicyProxy:
    proxy = PolicyProxy(AddressPolicy.from_config(policy.get("allow_private", False),
                                                  policy.get("allow_hosts", ["127.0.0.1"]), policy.get("resolver")))
    await nursery.start(proxy.run)
    return proxy


async def socks_connect(proxy: PolicyProxy, host: str, port: int, command: int = 1,
                        via: int | None = None) -> tuple[trio.SocketStream, int]:
    """Greet (on the proxy's port `via`, by default fetch's), ask to connect to host:port by name; the
    stream and the reply code."""
    stream = await trio.open_tcp_stream("127.0.0.1", via or proxy.port)
    await stream.send_all(b"\x05\x01\x00")
    assert await receive_exactly(stream, 2) == b"\x05\x00"
    name = host.encode()
    await stream.send_all(bytes([5, command, 0, 3, len(name)]) + name + port.to_bytes(2, "big"))
    reply = await receive_exactly(stream, 10)
    assert reply[0] == 5
    return stream, reply[1]


async def socks_connect_address(proxy: PolicyProxy, address: str, port: int) -> tuple[trio.SocketStream, int]:
    """Ask to connect to an address given as one (SOCKS5 address type 1 or 4), as a client that resolved
    the name itself would; the stream and the reply code."""
    ip = ipaddress.ip_address(address)
    stream = await trio.open_tcp_stream("127.0.0.1", proxy.port)
    await stream.send_all(b"\x05\x01\x00")
    assert await receive_exactly(stream, 2) == b"\x05\x00"
    await stream.send_all(bytes([5, 1, 0, 1 if ip.version == 4 else 4]) + ip.packed + port.to_bytes(2, "big"))
    reply = await receive_exactly(stream, 10)
    assert reply[0] == 5
    return stream, reply[1]


async def receive_exactly(stream: trio.SocketStream, n: int) -> bytes:
    data = b""
    with trio.fail_after(10):
        while len(data) < n:
            chunk = await stream.receive_some(n - len(data))
            if not chunk:
                break
            data += chunk
    return data


async def http_get(stream: trio.SocketStream, host: str, path: str) -> bytes:
    await stream.send_all(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    data = b""
    with trio.fail_after(10):
        while chunk := await stream.receive_some(65536):
            data += chunk
    return data


async def test_an_allowed_host_is_tunnelled(nursery, site):
    proxy = await start_proxy(nursery)
    stream, code = await socks_connect(proxy, "127.0.0.1", site.port)
    assert code == 0
    async with stream:
        answer = await http_get(stream, "127.0.0.1", "/article")
    assert answer.startswith(b"HTTP/1.1 200") and ARTICLE_TEXT[0].encode() in answer
    with trio.fail_after(5):
        while proxy.open_tunnels:
            await trio.sleep(0.01)  # both sides closed once the server ended its answer


@pytest.mark.parametrize("host", ["127.0.0.2", "169.254.169.254", "10.0.0.1", "::1"])
async def test_a_blocked_address_is_refused_with_not_allowed(nursery, host):
    proxy = await start_proxy(nursery)
    stream, code = await socks_connect(proxy, host, 80)
    async with stream:
        assert code == 2  # "connection not allowed by ruleset"
        assert await stream.receive_some(1) == b""  # and the connection is closed
    failure = proxy.failure(f"http://{f'[{host}]' if ':' in host else host}/")
    assert failure.blocked and ("cloud metadata address" if host.startswith("169.254.") else
                                "is not a public address") in failure.message


async def test_the_checked_address_is_the_one_connected_to(nursery, site):
    """The name is looked up once per connection and the connection goes to that very answer."""
    answers = iter(["127.0.0.1", "127.0.0.2"])

    async def resolver(host):
        return [ipaddress.ip_address(next(answers))] if host == "flip.test" else await resolve(host)

    proxy = await start_proxy(nursery, resolver=resolver)
    first, code = await socks_connect(proxy, "flip.test", site.port)
    async with first:
        assert code == 0 and (await http_get(first, "flip.test", "/article")).startswith(b"HTTP/1.1 200")
    second, code = await socks_connect(proxy, "flip.test", site.port)
    async with second:
        assert code == 2
    assert proxy.failure(f"http://flip.test:{site.port}/").message.startswith("flip.test (127.0.0.2)")


async def test_names_that_do_not_resolve_and_ports_nobody_listens_on(nursery):
    proxy = await start_proxy(nursery)
    stream, code = await socks_connect(proxy, "no-such-host.invalid", 80)
    await stream.aclose()
    assert code == 4  # host unreachable
    assert proxy.failure("http://no-such-host.invalid/").message == "net::ERR_NAME_NOT_RESOLVED"
    with trio.socket.socket() as s:
        await s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]  # bound, never listening: connections are refused
        stream, code = await socks_connect(proxy, "127.0.0.1", closed_port)
        await stream.aclose()
    assert code == 5  # connection refused
    assert proxy.failure(f"http://127.0.0.1:{closed_port}/").message == "net::ERR_CONNECTION_REFUSED"
    assert proxy.failure("http://127.0.0.1:1/") is None  # the host on another port failed nothing


@pytest.mark.parametrize("garbage", [
    b"", b"\x04\x01\x00\x50\x7f\x00\x00\x01\x00",   # nothing; SOCKS4
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",           # an HTTP request
    b"\x05\x01\x01",                                # offers only GSSAPI authentication
    b"\x05\x01\x02\x01\x09ab",                        # a user name longer than what follows, then silence
    b"\x05\x01\x00\x05\x01\x00\x09",                # an address type that does not exist
    b"\x05\x01\x00\x05\x01\x00\x03\xff" + b"a" * 10,  # a name longer than what follows, then silence
])
async def test_clients_that_speak_it_badly_do_not_stop_the_proxy(nursery, site, garbage):
    proxy = await start_proxy(nursery)
    bad = await trio.open_tcp_stream("127.0.0.1", proxy.port)
    await bad.send_all(garbage)
    if not garbage or garbage.endswith((b"a" * 10, b"ab")):  # silent: others are served meanwhile
        stream, code = await socks_connect(proxy, "127.0.0.1", site.port)  # served while that one hangs
        await stream.aclose()
        assert code == 0
    else:
        with trio.fail_after(5):
            while await bad.receive_some(100):
                pass  # the proxy answers what it can and closes
    await bad.aclose()
    stream, code = await socks_connect(proxy, "127.0.0.1", site.port)
    async with stream:
        assert code == 0 and (await http_get(stream, "127.0.0.1", "/article")).startswith(b"HTTP/1.1 200")


async def test_only_connect_is_offered(nursery, site):
    proxy = await start_proxy(nursery)
    for command in (2, 3):  # BIND, UDP ASSOCIATE
        stream, code = await socks_connect(proxy, "127.0.0.1", site.port, command)
        await stream.aclose()
        assert code == 7


async def test_browse_contexts_port_reaches_allow_local_and_fetchs_port_does_not(nursery, site):
    fetch = AddressPolicy()  # loopback refused
    proxy = PolicyProxy(fetch, fetch.for_browse([f"127.0.0.1:{site.port}"]))
    await nursery.start(proxy.run)
    assert proxy.browse_port not in (None, proxy.port)
    stream, code = await socks_connect(proxy, "127.0.0.1", site.port, via=proxy.browse_port)
    assert code == 0
    async with stream:
        assert ARTICLE_TEXT[0].encode() in await http_get(stream, "127.0.0.1", "/article")
    _, code = await socks_connect(proxy, "127.0.0.1", site.port)  # fetch's contexts: refused
    assert code == 2
    assert "fetch.allow_private" in proxy.failure(f"http://127.0.0.1:{site.port}/").message
    # on the browse port too: another loopback port, and the listed address under another name
    other = site.port + 1 if site.port < 65535 else 1
    _, code = await socks_connect(proxy, "127.0.0.1", other, via=proxy.browse_port)
    assert code == 2
    assert "browse.allow_local" in proxy.failure(f"http://127.0.0.1:{other}/").message
    _, code = await socks_connect(proxy, "localhost", site.port, via=proxy.browse_port)
    assert code == 2
    assert f'"localhost:{site.port}"' in proxy.failure(f"http://localhost:{site.port}/").message


@pytest.mark.parametrize("address,says", TABLE)
async def test_every_address_that_is_not_public_is_refused_before_any_connection(nursery, no_packet_leaves,
                                                                                  address, says):
    """The whole table (tests/support/addresses.py), asked for by a name that resolves there and by the
    address itself: a refused one is answered "not allowed" without a connection tried; a public one is
    let through, and its connection (to the address checked) is the one the guard sees and fails."""
    proxy = await start_proxy(nursery, allow_hosts=[], resolver=resolver)
    ip = ipaddress.ip_address(address)
    for host, ask in ((name_of(address), lambda: socks_connect(proxy, name_of(address), 8080)),
                      (f"[{ip}]" if ip.version == 6 else str(ip), lambda: socks_connect_address(proxy, address, 8080))):
        stream, code = await ask()
        await stream.aclose()
        failure = proxy.failure(f"http://{host}:8080/")
        if says is None:
            assert code == 5 and failure.message == "net::ERR_ADDRESS_UNREACHABLE", (host, code, failure)
            assert no_packet_leaves.attempts.pop() == (str(ip), 8080)
        else:
            assert code == 2 and failure.blocked and says in failure.message, (host, code, failure)
        assert no_packet_leaves.attempts == []


# Another local user's SOCKS5 client, run as `nobody` (setpriv) by the system's Python: greets the proxy,
# asks for host:port and prints what came back (the greeting's reply, the CONNECT's, the first bytes).
OTHER_USER_CLIENT = r"""
import socket, sys
port, host, target = int(sys.argv[1]), sys.argv[2].encode(), int(sys.argv[3])
s = socket.create_connection(("127.0.0.1", port))
s.settimeout(10)
try:
    s.sendall(b"\x05\x01\x00")
    print("greeting", s.recv(2).hex())
    s.sendall(bytes([5, 1, 0, 3, len(host)]) + host + target.to_bytes(2, "big"))
    print("connect", s.recv(10).hex())
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    print("page", s.recv(100))
except OSError as e:
    print("closed", type(e).__name__)
"""


@pytest.mark.skipif(__import__("os").geteuid() != 0, reason="another user's process (setpriv) needs root")
async def test_another_local_user_cannot_tunnel_through_the_proxy(nursery, site):
    """The proxy's ports are on 127.0.0.1, open to every local user: a tunnel of theirs would leave from the
    daemon's uid to what its allow lists open. Their connection is closed before a byte of SOCKS is read;
    the daemon's own user (this test) is served."""
    import pwd
    nobody = pwd.getpwnam("nobody")
    proxy = await start_proxy(nursery)
    for via in (proxy.port, proxy.browse_port):
        result = await trio.run_process(
            ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups",
             "/usr/bin/python3", "-c", OTHER_USER_CLIENT, str(via), "127.0.0.1", str(site.port)],
            capture_stdout=True, capture_stderr=True, check=False)
        # closed unanswered: the greeting gets no reply, the CONNECT none either (or the socket is reset)
        assert result.stdout.decode().split("\n")[0] in ("greeting ", "closed ConnectionResetError"), result.stdout
        assert b"connect 05" not in result.stdout and b"page" not in result.stdout, result.stdout
    stream, code = await socks_connect(proxy, "127.0.0.1", site.port)
    assert code == 0
    await stream.aclose()


# Another local user's flood of connections to the proxy's port, run as `nobody`: 1500 at a time, closed
# and opened again every 50 ms (each leaves a TIME_WAIT behind) until `seconds` have passed.
FLOOD = r"""
import resource, socket, sys, time
port, end = int(sys.argv[1]), time.time() + float(sys.argv[2])
resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
while time.time() < end:
    socks = []
    for _ in range(1500):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        except OSError:
            s.close()
            continue
        socks.append(s)
    time.sleep(0.05)
    for s in socks:
        s.close()
"""


@pytest.mark.skipif(__import__("os").geteuid() != 0, reason="another user's process (setpriv) needs root")
async def test_another_users_flood_does_not_refuse_the_daemons_own_connections(nursery, site):
    """Whose a connection is is asked of the kernel for that one socket, at once: another user's flood costs
    the daemon's own connections nothing (before, each was checked by scanning /proc/net/tcp, which the flood
    lengthened, behind a queue the flood filled: the daemon's Chrome was refused or kept waiting)."""
    import pwd
    nobody = pwd.getpwnam("nobody")
    proxy = await start_proxy(nursery)
    outcomes = []
    async with trio.open_nursery() as flooding:
        flooding.start_soon(partial(
            trio.run_process, ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups",
                               "/usr/bin/python3", "-c", FLOOD, str(proxy.port), "12"], check=False))
        await trio.sleep(3)  # the flood under way
        for _ in range(12):
            try:
                with trio.fail_after(10):
                    stream, code = await socks_connect(proxy, "127.0.0.1", site.port)
                    page = await http_get(stream, "127.0.0.1", "/article")
                    await stream.aclose()
                outcomes.append(("served", code, page.startswith(b"HTTP/1.1 200") and ARTICLE_TEXT[0].encode() in page))
            except (trio.TooSlowError, AssertionError, OSError, trio.BrokenResourceError) as e:
                outcomes.append(("failed", type(e).__name__, False))
            await trio.sleep(0.3)
    assert outcomes == [("served", 0, True)] * 12, outcomes
