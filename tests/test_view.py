"""The view's front door (issue 37): `webfetch serve` as a real process, its page driven in a real Chromium
over our own CDP client, the door spoken to with raw HTTP (a wrong Host is what a rebound name sends), and
MCP over HTTP through the MCP SDK's streamable-HTTP client."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import httpx2
import pytest
import trio
import trio_websocket
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from webfetch.chrome.cdp import open_cdp
from webfetch.config import ServerConfig, ViewConfig
from webfetch.daemon import Daemon, bind_socket
from webfetch.frontends.client import Client as SocketClient
from webfetch.view.address import own_address
from webfetch.view.server import bind_loopback

from .support.chromium import Chromium
from .support.client import run_cli
from .support.daemon import ServedDaemon, make_config
from .support.site import ARTICLE_TEXT, Site

pytestmark = pytest.mark.chromium


def listening(pid: int) -> set[tuple[str, int]]:
    """The TCP addresses process `pid` listens on, read from /proc (its socket fds, matched in /proc/net)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                continue
            hex_address, hex_port = fields[1].split(":")
            raw = bytes.fromhex(hex_address)
            # the kernel prints each 32-bit word in host (little-endian) order
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            found.add((socket.inet_ntop(family, raw), int(hex_port, 16)))
    return found


def view_host() -> str:
    """The address the tests' daemons' views listen on: this install's own (view/address.py), which they all
    read from the tests' $XDG_STATE_HOME, as this process does."""
    return own_address()


def raw_request(port: int, head: str, body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 request to the view's `port` written by hand (any Host header we like): its status,
    headers and body."""
    with socket.create_connection((view_host(), port), timeout=20) as s:
        s.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
            if b"\r\n\r\n" in data:
                header, _, rest = data.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in header.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), None)
                if (length is not None and len(rest) >= length) or header.startswith(b"HTTP/1.1 101"):
                    break  # a websocket accepted stays open: its status is the answer
    header, _, rest = data.partition(b"\r\n\r\n")
    lines = header.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, rest


WS_UPGRADE = ("Upgrade: websocket\nConnection: Upgrade\nSec-WebSocket-Version: 13\n"
              "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\n")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A daemon with the view on (and loopback pages allowed, for the test site), its token and port."""
    d = ServedDaemon(Path(tmp_path_factory.mktemp("view")), "[view]\nenabled = true\n[fetch]\nallow_private = true\n"
                                                                  '[search]\nbrave_api_key = "brave-s3cr3t"\n')
    try:
        d.wait_ready(60)
        deadline = time.monotonic() + 30  # the door opens beside the browser, once MCP's module is loaded
        while (status := d.status())["view"] is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert status["view"] is not None, (d.tmp / "daemon.log").read_text()
        d.view_port = int(status["view"].rsplit(":", 1)[1].strip("/"))
        d.token = (d.tmp / "view-token").read_text().strip()  # /mcp's bearer
        d.view_url = lambda: view_url(d.sock)
        yield d
    finally:
        d.stop()


def view_url(sock: Path) -> str:
    """The page's URL with a new one-time key, as `webfetch view` gets it."""
    with SocketClient(sock, autostart=False, timeout=30) as c:
        answer = list(c.request("view"))[-1]
    assert answer["type"] == "result", answer
    return answer["url"]


def sign_in(port: int, url: str) -> str:
    """The Cookie header a browser sends after opening `url` (its key traded at the door)."""
    path = url.split(str(port), 1)[1]
    status, headers, _ = raw_request(port, f"GET {path} HTTP/1.1\nHost: 127.0.0.1:{port}\nConnection: close\n")
    assert status == 303, (status, headers)
    return headers["set-cookie"].split(";")[0]


def test_the_view_is_off_by_default_and_webfetch_view_opens_it_on_loopback_alone(short_tmp):
    d = ServedDaemon(short_tmp, "")
    try:
        d.wait_ready(60)
        before = listening(d.proc.pid)
        assert d.status()["view"] is None
        where = ("--socket", str(d.sock), "--config", str(short_tmp / "config.toml"))
        assert "\nview:     off (`webfetch view` opens it;" in run_cli("status", *where).stdout
        out = run_cli("view", "--no-open", "--socket", str(d.sock), "--config", str(short_tmp / "config.toml"))
        assert out.returncode == 0, out.stderr
        url = out.stdout.strip()
        port = int(url.split(":")[2].split("/")[0])
        token = (short_tmp / "view-token").read_text().strip()
        key = url.split("?token=")[1]
        host = view_host()
        assert host.startswith("127.") and not host.startswith("127.0.")  # an address of its own
        assert url == f"http://{host}:{port}/?token={key}" and len(key) == 64 and key != token
        assert f"ssh -L {port}:{host}:{port} HOST, then open http://127.0.0.1:{port}/?token={key} there" in out.stderr
        assert os.stat(short_tmp / "view-token").st_mode & 0o777 == 0o600
        opened = listening(d.proc.pid) - before
        assert opened == {(host, port)}, opened  # not 127.0.0.1, whose cookies are every local server's
        assert all(a.startswith("127.") or a == "::1" for a, _ in listening(d.proc.pid))
        assert d.status()["view"] == f"http://{host}:{port}/"
        status = run_cli("status", *where).stdout
        assert f"\nview:     http://{host}:{port}/ (`webfetch view` prints it" in status and key not in status
        again = run_cli("view", "--no-open", "--socket", str(d.sock), "--config", str(short_tmp / "config.toml"))
        assert listening(d.proc.pid) - before == opened  # the same door, a new one-time key
        assert again.stdout.strip().split("?token=")[0] == url.split("?token=")[0] and again.stdout.strip() != url
    finally:
        d.stop()


def test_the_door_wants_the_token_a_loopback_host_and_its_own_origin(served):
    port, token = served.view_port, served.token
    host = f"127.0.0.1:{port}"
    status, _, body = raw_request(port, f"GET / HTTP/1.1\nHost: {host}\nConnection: close\n")
    assert status == 401 and b"webfetch view" in body
    wrong = f"Cookie: webfetch_view_{port}=wrong\n"
    assert raw_request(port, f"GET / HTTP/1.1\nHost: {host}\n{wrong}Connection: close\n")[0] == 403
    assert raw_request(port, f"GET /?token=wrong HTTP/1.1\nHost: {host}\nConnection: close\n")[0] == 403
    # the bearer is never a URL key nor a cookie: neither opens the page
    status, _, body = raw_request(port, f"GET /?token={token} HTTP/1.1\nHost: {host}\nConnection: close\n")
    assert status == 403 and b"webfetch view" in body and token.encode() not in body
    as_cookie = f"Cookie: webfetch_view_{port}={token}\n"
    assert raw_request(port, f"GET / HTTP/1.1\nHost: {host}\n{as_cookie}Connection: close\n")[0] == 403
    key = served.view_url().split("?token=")[1]
    status, headers, _ = raw_request(port, f"GET /?token={key} HTTP/1.1\nHost: {host}\nConnection: close\n")
    assert status == 303 and headers["location"] == "/"
    value = headers["set-cookie"].split(";")[0].split("=", 1)[1]
    assert headers["set-cookie"] == f"webfetch_view_{port}={value}; Path=/; HttpOnly; SameSite=Strict"
    assert len(value) == 64 and value not in (token, key)
    # the key works once: opened again it opens nothing, unless the browser is signed in already
    status, _, body = raw_request(port, f"GET /?token={key} HTTP/1.1\nHost: {host}\nConnection: close\n")
    assert status == 403 and b"used already" in body
    cookie = f"Cookie: webfetch_view_{port}={value}\n"
    status, headers, _ = raw_request(port, f"GET /?token={key} HTTP/1.1\nHost: {host}\n{cookie}Connection: close\n")
    assert status == 303 and headers["location"] == "/" and "set-cookie" not in headers
    assert raw_request(port, f"GET / HTTP/1.1\nHost: {host}\n{cookie}Connection: close\n")[0] == 200
    assert raw_request(port, f"GET / HTTP/1.1\nHost: localhost:{port}\n{cookie}Connection: close\n")[0] == 200
    # DNS rebinding: a foreign name pointed at 127.0.0.1 sends its own name; the right cookie changes nothing
    status, _, body = raw_request(port, f"GET / HTTP/1.1\nHost: rebind.example:{port}\n{cookie}Connection: close\n")
    assert status == 403 and b"127.0.0.1" in body
    assert raw_request(port, f"GET / HTTP/1.1\nHost: 127.0.0.1.rebind.example\n{cookie}Connection: close\n")[0] == 403
    assert raw_request(port, f"GET / HTTP/1.1\nHost: 127.0.0.1:x\n{cookie}Connection: close\n")[0] == 403
    # `ssh -L 18765:127.0.0.1:PORT`: the person's browser names its own end's port, and its page is its origin
    forwarded = "127.0.0.1:18765"
    assert raw_request(port, f"GET / HTTP/1.1\nHost: {forwarded}\n{cookie}Connection: close\n")[0] == 200
    ws = f"GET /live HTTP/1.1\nHost: {forwarded}\n{cookie}{WS_UPGRADE}"
    assert raw_request(port, ws + f"Origin: http://{forwarded}\n")[0] == 101
    assert raw_request(port, ws + f"Origin: http://{host}\n")[0] == 403  # not that page's own origin
    # websockets and POSTs: only from the page's own origin
    live = f"GET /live HTTP/1.1\nHost: {host}\n{cookie}{WS_UPGRADE}"
    assert raw_request(port, live + "Origin: http://evil.example\n")[0] == 403
    assert raw_request(port, live + f"Origin: http://127.0.0.1:{port + 1}\n")[0] == 403
    assert raw_request(port, live)[0] == 403  # no Origin: not a page of ours
    assert raw_request(port, live + f"Origin: http://{host}\n")[0] == 101
    post = f"POST / HTTP/1.1\nHost: {host}\n{cookie}Content-Length: 0\nConnection: close\n"
    assert raw_request(port, post + "Origin: http://evil.example\n")[0] == 403
    assert raw_request(port, post)[0] == 403
    assert raw_request(port, post + f"Origin: http://{host}\n")[0] == 405  # through the door: no POST route
    # MCP: the bearer, never the cookie; no Origin is an MCP client, a foreign one is refused
    mcp = f"POST /mcp HTTP/1.1\nHost: {host}\nContent-Type: application/json\nContent-Length: 2\nConnection: close\n"
    assert raw_request(port, mcp, b"{}")[0] == 401
    assert raw_request(port, mcp + cookie, b"{}")[0] == 401
    assert raw_request(port, mcp + f"Authorization: Bearer {value}\n", b"{}")[0] == 403  # the cookie's secret
    assert raw_request(port, mcp + "Authorization: Bearer wrong\n", b"{}")[0] == 403
    bearer = f"Authorization: Bearer {token}\n"
    assert raw_request(port, mcp + bearer + "Origin: http://evil.example\n", b"{}")[0] == 403
    assert raw_request(port, mcp.replace(host, f"rebind.example:{port}") + bearer, b"{}")[0] == 403
    assert raw_request(port, mcp + bearer, b"{}")[0] not in (401, 403)  # the SDK's own answer to `{}`


async def evaluate(conn, session: str, expression: str):
    reply = await conn.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                 "awaitPromise": True}, session)
    return reply["result"].get("value")


async def wait_for(conn, session: str, expression: str, seconds: float = 30):
    with trio.fail_after(seconds):
        while not (value := await evaluate(conn, session, expression)):
            await trio.sleep(0.1)
    return value


async def open_view(conn, url: str) -> str:
    """A new tab of the person's browser (`conn`) that opened the view at `url` and went live: its session."""
    tab = await conn.call("Target.createTarget", {"url": "about:blank"})
    session = (await conn.call("Target.attachToTarget", {"targetId": tab["targetId"], "flatten": True}))["sessionId"]
    await conn.call("Page.navigate", {"url": url}, session)
    await wait_for(conn, session, "document.getElementById('live')?.textContent === 'live'")
    return session


async def test_the_dashboard_in_chromium_shows_a_request_made_meanwhile_live(served, tmp_path):
    site = Site().start()
    browser = Chromium(tmp_path / "user-chrome")
    try:
        async with open_cdp(browser.ws_url) as conn:
            session = await open_view(conn, served.view_url())
            # the token left the address bar; the cookie is not the page's to read
            assert await evaluate(conn, session, "location.href") == f"http://{view_host()}:{served.view_port}/"
            assert await evaluate(conn, session, "document.cookie") == ""
            assert f"pid{served.proc.pid}" in await evaluate(conn, session,
                                                              "document.getElementById('daemon').textContent")
            await evaluate(conn, session, "window.notReloaded = true")
            frame, _ = await trio.to_thread.run_sync(served.fetch, site.url("/article?api_key=s3cr3t"))
            assert ARTICLE_TEXT[0] in frame["content"]
            shown = site.url("/article?api_key=<redacted>")  # the secrets rule (redact.py)
            row = await wait_for(conn, session, "[...document.querySelectorAll('#recent tbody tr')].map(r => "
                                 f"r.textContent).find(t => t.includes({json.dumps(shown)}))")
            assert "fetch" in row and "ok" in row
            text = await evaluate(conn, session, "document.body.textContent")
            assert "search.brave_api_key" in text and "s3cr3t" not in text
            assert await evaluate(conn, session, "window.notReloaded") is True

            # another origin in the same browser (same site: SameSite sends the cookie) cannot open the feed
            await conn.call("Page.navigate", {"url": site.url("/article")}, session)
            await wait_for(conn, session, "document.readyState === 'complete' && location.port !== "
                                          f"'{served.view_port}'")
            opened = await evaluate(conn, session, f"""new Promise(done => {{
                const ws = new WebSocket('ws://{view_host()}:{served.view_port}/live');
                ws.onopen = () => done('opened'); ws.onclose = () => done('refused');
            }})""")
            assert opened == "refused"
    finally:
        browser.stop()
        site.stop()


async def test_mcp_over_http_lists_and_calls_the_tools_with_the_bearer_alone(served):
    site = Site().start()
    endpoint = f"http://{view_host()}:{served.view_port}/mcp"
    try:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {served.token}"})
        with trio.fail_after(60):
            async with Client(streamable_http_client(endpoint, http_client=http), mode="legacy") as client:
                tools = [t.name for t in (await client.list_tools()).tools]
                assert tools == ["web_fetch", "web_search", "agent_browser"]
                r = await client.call_tool("web_fetch", {"url": site.url("/article")})
                assert not r.is_error and ARTICLE_TEXT[0] in r.content[0].text
        for headers, refusal in (({}, 401), ({"Authorization": "Bearer wrong"}, 403)):
            answered: list[int] = []

            async def record(response: httpx2.Response, answered: list[int] = answered) -> None:
                answered.append(response.status_code)

            http = create_mcp_http_client(headers=headers)
            http.event_hooks["response"].append(record)
            with pytest.raises(Exception), trio.fail_after(30):  # noqa: B017 - the SDK's error names no status
                async with Client(streamable_http_client(endpoint, http_client=http), mode="legacy") as client:
                    await client.list_tools()
            assert answered and set(answered) == {refusal}, answered
    finally:
        site.stop()


async def test_a_daemon_started_on_demand_does_not_exit_while_its_view_is_watched(short_tmp):
    config = make_config(server=ServerConfig(idle_exit_s=0.5), view=ViewConfig(enabled=True))
    daemon = Daemon(config)
    ended = trio.Event()

    async def run(task_status=trio.TASK_STATUS_IGNORED):
        await daemon.run(bind_socket(short_tmp / "wf.sock"), exit_when_idle=True, task_status=task_status)
        ended.set()

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(run)
            while daemon.view.port is None:
                await trio.sleep(0.05)
            port, cookie = daemon.view.port, daemon.view.passes.cookie
            async with trio_websocket.open_websocket_url(
                    f"ws://{daemon.view.host}:{port}/live",
                    extra_headers=[("Cookie", f"webfetch_view_{port}={cookie}"),
                                   ("Origin", f"http://{daemon.view.host}:{port}")]) as ws:
                for _ in range(4):  # 4 s of frames: eight idle times, and the daemon is still there
                    assert json.loads(await ws.get_message())["status"]["daemon"]["pid"] == os.getpid()
                assert not ended.is_set() and daemon.view.watchers == 1
            await ended.wait()  # unwatched, it exits as an idle daemon does


async def test_what_another_local_port_gets_from_the_persons_browser_opens_neither_mcp_nor_the_token(
        served, tmp_path):
    # another server on 127.0.0.1 (another user's, a dev server's hostile code), visited by the person's browser
    # signed in to the view: browsers do not scope cookies by port, but the view is a host of its own
    seen: list[str] = []  # the Cookie headers it received
    other = Site()
    other.route("/", lambda h: (seen.append(h.headers.get("Cookie") or ""),
                                h.reply(200, "text/html", "<title>another local server</title><p>hello</p>",
                                        {"Set-Cookie": "theirs=1; Path=/"})))
    other.start()
    browser = Chromium(tmp_path / "user-chrome")
    try:
        async with open_cdp(browser.ws_url) as conn:
            session = await open_view(conn, served.view_url())
            for _ in range(2):  # the second visit carries what the browser holds for it (its own cookie)
                await conn.call("Page.navigate", {"url": other.url("/")}, session)
                await wait_for(conn, session, "document.title === 'another local server'")
            held = (await conn.call("Storage.getCookies", {}))["cookies"]
        assert seen[-1] == "theirs=1", seen  # what it can read: its own cookie, nothing of the view's
        assert not any(served.token in c or "webfetch_view" in c for c in seen)
        [ours] = [c for c in held if c["name"] == f"webfetch_view_{served.view_port}"]
        assert ours["domain"] == view_host() and ours["httpOnly"] and ours["sameSite"] == "Strict"
        assert ours["value"] != served.token
        # the cookie, had it been taken, does not open /mcp: neither as a cookie nor as a bearer
        mcp = (f"POST /mcp HTTP/1.1\nHost: 127.0.0.1:{served.view_port}\nContent-Type: application/json\n"
               "Content-Length: 2\nConnection: close\n")
        for header in (f"Authorization: Bearer {ours['value']}\n", f"Cookie: {ours['name']}={ours['value']}\n"):
            assert raw_request(served.view_port, mcp + header, b"{}")[0] in (401, 403)
    finally:
        browser.stop()
        other.stop()


def test_a_url_or_cookie_from_before_a_restart_opens_nothing_and_the_bearer_still_does(short_tmp):
    # what a process squatting a fixed view.port while the daemon is down collects from a bookmark
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = f"[view]\nenabled = true\nport = {port}\n"
    first = ServedDaemon(short_tmp, config)
    try:
        first.wait_ready(60)
        bookmark = view_url(first.sock)
        cookie = sign_in(port, view_url(first.sock))
        host = f"127.0.0.1:{port}"
        assert raw_request(port, f"GET / HTTP/1.1\nHost: {host}\nCookie: {cookie}\nConnection: close\n")[0] == 200
    finally:
        first.stop()
    (short_tmp / "daemon.log").unlink()
    second = ServedDaemon(short_tmp, config)
    try:
        second.wait_ready(60)
        deadline = time.monotonic() + 30
        while second.status()["view"] is None and time.monotonic() < deadline:
            time.sleep(0.1)
        path = bookmark.split(str(port), 1)[1]
        status, _, body = raw_request(port, f"GET {path} HTTP/1.1\nHost: {host}\nConnection: close\n")
        assert status == 403 and b"webfetch view" in body
        assert raw_request(port, f"GET / HTTP/1.1\nHost: {host}\nCookie: {cookie}\nConnection: close\n")[0] == 403
        token = (short_tmp / "view-token").read_text().strip()  # an MCP client's config keeps working
        mcp = (f"POST /mcp HTTP/1.1\nHost: {host}\nContent-Type: application/json\nContent-Length: 2\n"
               f"Authorization: Bearer {token}\nConnection: close\n")
        assert raw_request(port, mcp, b"{}")[0] not in (401, 403)
    finally:
        second.stop()


def websocket_close_code(port: int, head: str, message: bytes) -> int | None:
    """Open a websocket by hand, send `message` as one text frame, read frames until the server's close:
    its code (None: the connection ended without one)."""
    with socket.create_connection((view_host(), port), timeout=30) as s:
        s.sendall(head.replace("\n", "\r\n").encode() + b"\r\n")
        data = b""
        while b"\r\n\r\n" not in data:
            data += s.recv(65536)
        assert data.startswith(b"HTTP/1.1 101"), data[:200]
        data = data.partition(b"\r\n\r\n")[2]
        # a client's frame is masked; an all-zero mask leaves the payload as it is
        s.sendall(b"\x81\xff" + len(message).to_bytes(8, "big") + b"\0\0\0\0" + message)
        while True:
            while len(data) < 2 or len(data) < _frame_end(data):
                chunk = s.recv(65536)
                if not chunk:
                    return None
                data += chunk
            end = _frame_end(data)
            if data[0] & 0x0F == 0x8:  # close: its code is the payload's first two bytes
                return int.from_bytes(data[end - (data[1] & 0x7F):][:2], "big")
            data = data[end:]


def _frame_end(data: bytes) -> int:
    """Where the (unmasked, server's) frame at the start of `data` ends (past its end: its head is not in)."""
    length = data[1] & 0x7F
    if len(data) < {126: 4, 127: 10}.get(length, 2):
        return len(data) + 1
    if length == 126:
        return 4 + int.from_bytes(data[2:4], "big")
    if length == 127:
        return 10 + int.from_bytes(data[2:10], "big")
    return 2 + length


def test_a_websocket_message_past_the_bound_closes_the_socket_before_a_page_reads_it(served):
    port = served.view_port
    cookie = sign_in(port, served.view_url())
    head = (f"GET /live HTTP/1.1\nHost: 127.0.0.1:{port}\nCookie: {cookie}\nOrigin: http://127.0.0.1:{port}\n"
            + WS_UPGRADE)
    assert websocket_close_code(port, head, b"x" * 100_000) == 1009  # message too big


def test_an_mcp_body_past_the_bound_is_413_and_not_read_whole(served):
    port, token = served.view_port, served.token
    head = (f"POST /mcp HTTP/1.1\nHost: 127.0.0.1:{port}\nAuthorization: Bearer {token}\n"
            "Content-Type: application/json\nAccept: application/json, text/event-stream\nConnection: close\n")
    # declared too long: answered before a byte of it is read
    status, _, body = raw_request(port, head + "Content-Length: 2000000\n")
    assert status == 413 and b"server.max_line_bytes" in body
    # sent too long, with no length declared (chunked): 17 chunks of 64 KiB, past 1 MiB
    chunk = b"%x\r\n" % 65536 + b" " * 65536 + b"\r\n"
    status, _, body = raw_request(port, head + "Transfer-Encoding: chunked\n", chunk * 17 + b"0\r\n\r\n")
    assert status == 413 and b"1048576 bytes" in body
    # within the bound, the SDK answers as before
    assert raw_request(port, head + "Content-Length: 2\n", b"{}")[0] not in (401, 403, 413)


def test_where_its_own_address_is_not_there_the_view_listens_on_127_0_0_1():
    # as on macOS, where 127.0.0.1 is the only loopback address: an address this machine does not have
    sockets = bind_loopback(0, "192.0.2.1")
    try:
        hosts = {s.getsockname()[0] for s in sockets}
        assert "127.0.0.1" in hosts and hosts <= {"127.0.0.1", "::1"}, hosts
        assert len({s.getsockname()[1] for s in sockets}) == 1  # one port
    finally:
        for s in sockets:
            s.close()
    with pytest.raises(OSError):  # its own address with the port taken is an error, not a fallback
        with socket.socket() as taken:
            taken.bind((view_host(), 0))
            taken.listen()
            bind_loopback(taken.getsockname()[1], view_host())


def test_mcp_over_http_opens_no_file_under_the_daemons_own_directory_to_uploads(tmp_path):
    """Over /mcp the browser tool runs in the daemon: its working directory (the home, under systemd) is no
    client's project, so it is no upload root; only browse.upload_roots are (an attacker review read
    ~/Documents through a route's body_file)."""
    home = tmp_path / "home"
    (home / "Documents").mkdir(parents=True)
    (home / "Documents" / "bank.txt").write_text("IBAN-SECRET-123")
    d = ServedDaemon(tmp_path, "[view]\nenabled = true\n[fetch]\nallow_private = true\n",
                     env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}, tree=home)
    try:
        d.wait_ready(60)
        deadline = time.monotonic() + 30
        while (status := d.status())["view"] is None and time.monotonic() < deadline:
            time.sleep(0.1)
        token = (d.tmp / "view-token").read_text().strip()
        endpoint = f"http://{status['view'].split('//')[1].split('/')[0]}/mcp"
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})

        async def route() -> str:
            async with Client(streamable_http_client(endpoint, http_client=http), mode="legacy") as client:
                r = await client.call_tool("agent_browser", {"action": "route", "url": "*/leak*",
                                                             "body_file": str(home / "Documents" / "bank.txt")})
                assert r.is_error
                return r.content[0].text

        said = trio.run(route)
        assert said.startswith("upload_refused: no directory is open to uploads: the client sent no working "
                               "directory, and browse.upload_roots is empty"), said
    finally:
        d.proc.terminate()
        d.proc.wait(20)
        d.log.close()


def test_the_doors_redirect_stays_on_the_page_whatever_the_path(served):
    """The key is traded by a redirect to the same path without it: a path of `//site` or `/\\site` must not
    send the browser to that site."""
    for path in ("//evil.example", "/\\evil.example"):
        key = served.view_url().split("token=", 1)[1]
        status, headers, _ = raw_request(served.view_port, f"GET {path}?token={key} HTTP/1.1\n"
                                                           f"Host: 127.0.0.1:{served.view_port}\nConnection: close\n")
        assert status == 303 and headers["location"] == "/evil.example", (status, headers)
