"""The person's own browser ([user_browser], chrome/user_browser.py): a Chromium the test starts as "the
person's", with its user-data directory at $HOME/.config/chromium and a DevTools port (so it writes the
DevToolsActivePort that `endpoint = "auto"` finds), signed in to the login app in a tab of its own.

The login app serves 127.0.0.1 and 127.0.0.2 on one port, and `localhost` reaches the first. The daemon
lists 127.0.0.1 with the app's port in user_browser.hosts (a host on this machine is listed with its port; a
listed one passes the address policy, loopback as it is, as fetch.allow_hosts does) and keeps
fetch.allow_private off, so 127.0.0.2 and `localhost` are hosts not listed. Where the app stands for a site
the person is signed in at that the agent may not use their browser for, fetch.allow_hosts admits 127.0.0.1
(`reachable`), as the address policy admits any public site: only user_browser.hosts keeps the tab from it."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import msgspec
import pytest
import trio

from webfetch.chrome.cdp import open_cdp
from webfetch.chrome.user_browser import candidates, find
from webfetch.config import BrowseConfig, FetchConfig, UserBrowserConfig, ViewConfig
from webfetch.errors import UserBrowserUnavailable
from webfetch.urls import AddressPolicy, HostGate

from .support.chromium import Chromium
from .support.daemon import make_config
from .support.login_app import MEMBER_TEXT, LoginApp
from .support.site import Site, free_port
from .test_browse import Browser, ref
from .test_profile_cli import sign_in


@pytest.fixture
def home(short_tmp, monkeypatch) -> Path:
    """$HOME for the test: `auto` looks for the person's browser below it."""
    home = short_tmp / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def app():
    app = LoginApp().start()
    yield app
    app.stop()


class Person:
    """The person at their browser: a Chromium of the test's own, and a tab they signed in with."""

    def __init__(self, home: Path) -> None:
        self.browser = Chromium(home / ".config" / "chromium")
        self.tab = ""

    async def sign_in(self, app: LoginApp) -> None:
        async with open_cdp(self.browser.ws_url) as conn:
            self.tab = (await conn.call("Target.createTarget", {"url": "about:blank"}))["targetId"]
            session = (await conn.call("Target.attachToTarget", {"targetId": self.tab, "flatten": True}))["sessionId"]
            await sign_in(conn, session, app, "127.0.0.1")

    async def pages(self) -> dict[str, tuple[str, str]]:
        """Every page target of the person's browser: id -> (URL, title)."""
        async with open_cdp(self.browser.ws_url) as conn:
            infos = (await conn.call("Target.getTargets"))["targetInfos"]
        return {t["targetId"]: (t["url"], t["title"]) for t in infos if t["type"] == "page"}

    async def history(self) -> list[str]:
        """The URLs of the person's tab's history."""
        async with open_cdp(self.browser.ws_url) as conn:
            session = (await conn.call("Target.attachToTarget", {"targetId": self.tab, "flatten": True}))["sessionId"]
            entries = (await conn.call("Page.getNavigationHistory", {}, session))["entries"]
            await conn.call("Target.detachFromTarget", {"sessionId": session})
        return [e["url"] for e in entries]


@pytest.fixture
async def person(home, app):
    person = Person(home)
    try:
        with trio.fail_after(60):
            await person.sign_in(app)
        yield person
    finally:
        if person.browser.proc.poll() is None:
            person.browser.stop()


def listed(app: LoginApp, *others: str) -> list[str]:
    """user_browser.hosts naming the login app (127.0.0.1, with its port), and `others`."""
    return [f"127.0.0.1:{app.port}", *others]


def user_config(hosts: list[str], endpoint: str = "auto", reachable: list[str] | None = None):
    """The person lists `hosts` (the app's: `listed(app)`); no private address is allowed otherwise, but those
    fetch.allow_hosts lists (`reachable`: the daemon may reach them as it would a public site, which is not
    to say the person's browser may be used there)."""
    return make_config(fetch=FetchConfig(allow_private=False, allow_hosts=reachable or []),
                       user_browser=UserBrowserConfig(endpoint=endpoint, hosts=hosts))


@pytest.mark.chromium
async def test_browse_reads_the_members_page_in_the_persons_browser_and_leaves_their_tab_alone(
        start_daemon, person, app):
    before = await person.pages()
    history = await person.history()
    assert before[person.tab] == (app.url("/members"), "Members")
    daemon = await start_daemon(user_config(listed(app)))
    assert (await daemon.request({"id": 1, "op": "status"}))["user_browser"]["state"] == "idle"
    b = Browser(await daemon.client())
    page = await b.ok("open", url=app.url("/members"), browser="user")
    assert page["snapshot"].startswith(f"[t1] Members — {app.url('/members')}\n"), page["snapshot"]
    assert MEMBER_TEXT in (await b.ok("snapshot", mode="full"))["snapshot"]   # signed in with their login
    status = (await daemon.request({"id": 2, "op": "status"}))["user_browser"]
    assert status["state"] == "connected" and "Chromium" in status["detail"], status
    sessions = (await daemon.request({"id": 3, "op": "status"}))["browse"]
    assert [(s["session"], s.get("browser")) for s in sessions] == [("s1", "user")]
    # the agent's tab is the only one it sees; the person's are not listed
    assert [t["tab"] for t in (await b.ok("tabs"))["tabs"]] == ["t1"]
    assert len(await person.pages()) == len(before) + 1

    # a host not listed: refused before Chrome sends anything; the server never hears of it
    refused = await b("open", url=app.url("/whoami", "localhost"))
    assert refused["type"] == "error" and refused["code"] == "blocked_url", refused
    assert "not in user_browser.hosts" in refused["message"]
    # a private address no one listed, as a page's script: refused, and named in `network`
    await b.ok("open", url=app.url("/embeds?from=127.0.0.2"))
    network = await b.ok("network")
    assert any("127.0.0.2" in r["url"] and r.get("blocked") for r in network["requests"]), network
    assert not [h for h in app.hits if h[0] in ("localhost", "127.0.0.2")]

    assert (await b.ok("close"))["type"] == "result"
    assert await person.pages() == before       # their tabs, as they were: URL and title
    assert await person.history() == history

    # a session left open when the daemon stops: its tab goes, the browser stays
    b2 = Browser(await daemon.client(), "s2")
    await b2.ok("open", url=app.url("/account"), browser="user")
    assert (await daemon.request({"id": "stop", "op": "stop"}))["type"] == "result"
    with trio.fail_after(30):
        while await person.pages() != before:
            await trio.sleep(0.1)
    assert person.browser.proc.poll() is None
    assert await person.history() == history


@pytest.mark.chromium
async def test_fetch_reads_the_members_page_with_the_persons_cookies_for_that_request_only(start_daemon, person, app):
    daemon = await start_daemon(make_config(user_browser=UserBrowserConfig(hosts=listed(app, f"localhost:{app.port}"))))
    before = len(app.hits)
    signed_in = await daemon.fetch(app.url("/members"), browser="user")
    assert signed_in["type"] == "result" and MEMBER_TEXT in signed_in["content"], signed_in
    # the person's session went with the request
    assert [app.sessions.get(h[2] or "") for h in app.hits[before:]] == ["ada"]
    # the same URL without it: read anonymously, not served the signed-in page from the cache
    anonymous = await daemon.fetch(app.url("/members"))
    assert anonymous["type"] == "result" and MEMBER_TEXT not in anonymous["content"], anonymous
    assert anonymous["cached"] is False
    # a host not listed: refused before anything is read from the browser or sent to the site
    hits = len(app.hits)
    refused = await daemon.fetch(app.url("/members", "127.0.0.2"), browser="user")
    assert refused["type"] == "error" and refused["code"] == "blocked_url", refused
    assert "not in user_browser.hosts" in refused["message"] and len(app.hits) == hits
    # a listed host the person is not signed in at: the sign-in page, and a note saying what to do
    wall = await daemon.fetch(app.url("/members", "localhost"), browser="user")
    assert wall["type"] == "result" and "login_wall" in wall["flags"], wall
    assert ("your browser is not signed in at localhost (or its login expired): ask the user to sign in there in "
            "their browser, then fetch again") in wall["notes"]


@pytest.mark.chromium
async def test_fetch_renders_in_the_persons_browser_where_a_login_the_page_keeps_applies(start_daemon, person, app):
    """A single-page app keeps its login in localStorage, not in a cookie: only the person's own browser has
    it, so the page is read (and rendered) in a tab of that browser, which is closed after."""
    async with open_cdp(person.browser.ws_url) as conn:   # the person signs in to the app, which keeps it
        session = (await conn.call("Target.attachToTarget", {"targetId": person.tab, "flatten": True}))["sessionId"]
        await conn.call("Runtime.evaluate", {"expression": "localStorage.setItem('token', 'ada')"}, session)
        await conn.call("Target.detachFromTarget", {"sessionId": session})
    before = await person.pages()
    other = Site()   # another port of this machine, not listed: a site the daemon may reach, as a public one
    other.routes["/beacon"] = lambda h: h.reply(200, "text/plain", "seen")
    other.start()
    daemon = await start_daemon(user_config(listed(app), reachable=["127.0.0.1"]))
    page = await daemon.fetch(app.url("/app"), browser="user")
    assert page["type"] == "result", page
    assert "Signed in as ada." in page["content"] and MEMBER_TEXT in page["content"], page
    assert "loaded in Chrome: it is read in a tab of your own browser" in page["notes"], page["notes"]
    with trio.fail_after(10):   # the fetch's tab is gone; the person's are as they were
        while await person.pages() != before:
            await trio.sleep(0.1)
    # the tab's every request is held to the listed hosts: what the rendered page asks of another is not sent
    shell = await daemon.fetch(app.url(f"/app?beacon=127.0.0.1:{other.port}"), browser="user")
    other.stop()
    assert shell["type"] == "result" and MEMBER_TEXT in shell["content"], shell
    assert other.hits.get("/beacon", 0) == 0
    # webfetch's own browser, anonymous, has no such login
    anonymous = await daemon.fetch(app.url("/app"))
    assert anonymous["type"] == "result" and MEMBER_TEXT not in anonymous["content"], anonymous


@pytest.mark.chromium
async def test_a_page_the_agents_tab_opens_joins_the_session_and_one_the_persons_tab_opens_does_not(
        start_daemon, person, app):
    site = Site()
    site.routes["/links"] = lambda h: h.reply(200, "text/html", '<title>Links</title><a id="new" target="_blank" '
                                                                 'href="/opened">Open a new tab</a>')
    site.routes["/opened"] = lambda h: h.reply(200, "text/html", "<title>Opened</title><p>opened</p>")
    site.start()
    try:
        initial = await person.pages()
        daemon = await start_daemon(user_config(listed(app) + [f"127.0.0.1:{site.port}"]))
        b = Browser(await daemon.client())
        page = await b.ok("open", url=f"http://127.0.0.1:{site.port}/links", browser="user")
        async with open_cdp(person.browser.ws_url) as conn:  # the person opens a tab from theirs
            session = (await conn.call("Target.attachToTarget", {"targetId": person.tab, "flatten": True}))["sessionId"]
            await conn.call("Runtime.evaluate", {"expression": f"window.open({app.url('/whoami')!r})",
                                                 "userGesture": True}, session)
        # the agent's tab and the person's new one, once it has loaded: Chrome makes the target a moment after
        # window.open and names its URL later still (CI under load saw it empty, then the page's)
        with trio.fail_after(15):
            while not (len(theirs := await person.pages()) == len(initial) + 2
                       and any(url == app.url("/whoami") and title for url, title in theirs.values())):
                await trio.sleep(0.1)
        # the agent's page opens one: it joins the session; the person's (created before it) did not
        await b.ok("click", ref=ref(page["snapshot"], '- link "Open a new tab"'))
        assert [t["tab"] for t in (await b.ok("tabs"))["tabs"]] == ["t1", "t2"]
        await b.ok("close")
        # the person's pages are theirs still (the one they opened may have finished loading meanwhile)
        assert set(await person.pages()) == {k for k, v in theirs.items() if v[0] != f"http://127.0.0.1:{site.port}/links"}
    finally:
        site.stop()


def hostile_site(target: str) -> Site:
    """A page on a listed host that sends the agent's tab to `target` every way a page can open another."""
    site = Site()
    site.routes["/opens"] = lambda h: h.reply(200, "text/html", f"""<title>Opens</title>
        <a target="_blank" href="{target}?blank">Blank</a>
        <a target="_blank" rel="noopener" href="{target}?noopener">Noopener</a>
        <button onclick="window.open('{target}?open')">Open</button>""")
    return site.start()


@pytest.mark.chromium
async def test_a_page_the_agents_tab_opens_on_an_unlisted_host_sends_nothing_and_goes_with_the_session(
        start_daemon, person, app):
    site = hostile_site(app.url("/members"))   # the app (127.0.0.1) is not listed; the person is signed in there
    try:
        before = await person.pages()
        daemon = await start_daemon(user_config([f"localhost:{site.port}"], reachable=["127.0.0.1"]))
        b = Browser(await daemon.client())
        page = await b.ok("open", url=f"http://localhost:{site.port}/opens", browser="user")
        hits = len(app.hits)
        for name in ('- link "Blank"', '- link "Noopener"', '- button "Open"'):
            await b("click", ref=ref(page["snapshot"], name), tab="t1")
        # each opened page joined the session, and its first request met the gate: refused (Chrome's error
        # page), and the app heard nothing
        with trio.fail_after(20):
            while len(tabs := (await b.ok("tabs"))["tabs"]) < 4 or \
                    not all(t["url"].startswith("chrome-error:") for t in tabs[1:]):
                await trio.sleep(0.1)
        assert len(tabs) == 4 and app.hits[hits:] == [], (tabs, app.hits[hits:])
        for tab in tabs:
            assert MEMBER_TEXT not in (await b.ok("snapshot", mode="full", tab=tab["tab"]))["snapshot"]
        await b.ok("close")
        with trio.fail_after(10):   # every page the agent's tabs opened went with the session
            while await person.pages() != before:
                await trio.sleep(0.1)
        assert app.hits[hits:] == []
    finally:
        site.stop()


@pytest.mark.chromium
async def test_a_redirect_a_script_or_a_refresh_in_the_agents_tab_to_an_unlisted_host_is_refused(
        start_daemon, person, app):
    target = app.url("/members")   # not listed; the person is signed in there
    site = Site()
    site.routes["/redirect"] = lambda h: h.redirect(302, target)
    script = f"<title>Script</title><script>setTimeout(() => location = {target!r}, 50)</script>"
    refresh = f'<title>Refresh</title><meta http-equiv="refresh" content="0;url={target}">'
    site.routes["/script"] = lambda h: h.reply(200, "text/html", script)
    site.routes["/refresh"] = lambda h: h.reply(200, "text/html", refresh)
    site.start()
    try:
        daemon = await start_daemon(user_config([f"localhost:{site.port}"], reachable=["127.0.0.1"]))
        b = Browser(await daemon.client())
        hits = len(app.hits)
        went = await b("open", url=f"http://localhost:{site.port}/redirect", browser="user")
        assert went["type"] == "error" and went["code"] == "blocked_url", went
        assert went["message"].startswith(f"127.0.0.1:{app.port} is not in user_browser.hosts (localhost:{site.port})")
        for path in ("/script", "/refresh"):   # the page loads, then sends the tab on: Chrome's error page
            await b.ok("open", url=f"http://localhost:{site.port}{path}")
            with trio.fail_after(20):
                while not (await b.ok("snapshot"))["snapshot"].startswith(
                        "[t1] 127.0.0.1 — chrome-error://chromewebdata/"):
                    await trio.sleep(0.1)
        assert app.hits[hits:] == []
    finally:
        site.stop()


# A script that tries `url` with the person's cookies and says how it went, on the page and to its own server
# (a request for /fetched or /refused).
TRY_FETCH = """<p id="said">trying</p><script>const say = (what) => { said.textContent = what; fetch("/" + what) };
    fetch(%r, {credentials: "include", mode: "no-cors"}).then(() => say("fetched"), () => say("refused"))</script>"""


async def snapshot_saying(b: Browser, *words: str) -> str:
    """The tab's full snapshot once it shows one of `words` (bounded)."""
    with trio.fail_after(20):
        while True:
            snap = (await b.ok("snapshot", mode="full"))["snapshot"]
            if any(w in snap for w in words):
                return snap
            await trio.sleep(0.1)


@pytest.mark.chromium
async def test_a_listed_pages_frame_image_and_fetch_to_an_unlisted_host_are_not_sent(start_daemon, person, app):
    site = Site()   # listed (localhost); the app (127.0.0.1) is not, and the person is signed in there
    site.routes["/embeds"] = lambda h: h.reply(200, "text/html", f"""<title>Embeds</title>
        <iframe src="{app.url('/members')}"></iframe><img src="{app.url('/login')}">
        {TRY_FETCH % app.url('/whoami')}""")
    site.start()
    try:
        daemon = await start_daemon(user_config([f"localhost:{site.port}"], reachable=["127.0.0.1"]))
        b = Browser(await daemon.client())
        hits = len(app.hits)
        await b.ok("open", url=f"http://localhost:{site.port}/embeds", browser="user")
        snap = await snapshot_saying(b, "fetched", "refused")
        assert "refused" in snap and MEMBER_TEXT not in snap, snap
        network = (await b.ok("network"))["requests"]
        refused = {r["url"] for r in network if r.get("blocked")}
        assert {app.url("/login"), app.url("/whoami")} <= refused, network
        assert app.hits[hits:] == []
    finally:
        site.stop()


@pytest.mark.chromium
async def test_a_workers_fetch_to_an_unlisted_host_is_not_sent(start_daemon, person, app):
    site = Site()
    site.routes["/page"] = lambda h: h.reply(200, "text/html", """<title>Worker</title><p id="said">trying</p>
        <script>new Worker("/worker.js").onmessage = (e) => { said.textContent = e.data; fetch("/" + e.data) }
        </script>""")
    worker = f"""fetch({app.url('/whoami')!r}, {{credentials: "include", mode: "no-cors"}})
        .then(() => postMessage("fetched"), () => postMessage("refused"))"""
    site.routes["/worker.js"] = lambda h: h.reply(200, "text/javascript", worker)
    site.start()
    try:
        daemon = await start_daemon(user_config([f"localhost:{site.port}"], reachable=["127.0.0.1"]))
        b = Browser(await daemon.client())
        hits = len(app.hits)
        await b.ok("open", url=f"http://localhost:{site.port}/page", browser="user")
        with trio.fail_after(20):   # the worker says how its fetch went
            while not {"/fetched", "/refused"} & set(site.hits):
                await trio.sleep(0.1)
        assert "/refused" in site.hits and "/fetched" not in site.hits, site.hits
        assert app.hits[hits:] == []
    finally:
        site.stop()


@pytest.mark.chromium
async def test_a_frame_in_a_process_of_its_own_is_held_to_the_listed_hosts_too(start_daemon, person, app):
    # localhost and 127.0.0.1 are two sites: the frame runs in a process of its own, whose requests the
    # tab's own interception never sees
    outer, inner = Site(), Site()
    outer.routes["/outer"] = lambda h: h.reply(200, "text/html", f'<title>Outer</title><iframe '
                                                                 f'src="http://127.0.0.1:{inner.port}/inner"></iframe>')
    inner.routes["/inner"] = lambda h: h.reply(200, "text/html", TRY_FETCH % app.url("/whoami"))
    outer.start()
    inner.start()
    try:
        daemon = await start_daemon(user_config([f"localhost:{outer.port}", f"127.0.0.1:{inner.port}"],
                                                reachable=["127.0.0.1"]))
        b = Browser(await daemon.client())
        hits = len(app.hits)
        await b.ok("open", url=f"http://localhost:{outer.port}/outer", browser="user")
        with trio.fail_after(20):   # the frame's script says how its fetch went
            while not {"/fetched", "/refused"} & set(inner.hits):
                await trio.sleep(0.1)
        assert "/refused" in inner.hits and "/fetched" not in inner.hits, inner.hits
        assert app.hits[hits:] == []
    finally:
        outer.stop()
        inner.stop()


@pytest.mark.chromium
async def test_an_unlisted_host_opens_nothing_in_the_persons_browser(start_daemon, person, app):
    before = await person.pages()
    daemon = await start_daemon(user_config(listed(app)))
    b = Browser(await daemon.client())
    refused = await b("open", url=app.url("/members", "127.0.0.2"), browser="user")
    assert refused["type"] == "error" and refused["code"] == "blocked_url", refused
    assert refused["message"].startswith(f"127.0.0.2 is not in user_browser.hosts (127.0.0.1:{app.port})")
    assert await person.pages() == before
    assert not [h for h in app.hits if h[0] == "127.0.0.2"]


@pytest.mark.chromium
async def test_a_browser_that_goes_away_mid_session_gives_user_browser_gone(start_daemon, person, app, home):
    daemon = await start_daemon(user_config(listed(app)))
    b = Browser(await daemon.client())
    await b.ok("open", url=app.url("/members"), browser="user")
    person.browser.stop()
    gone = await b("snapshot")
    assert gone["type"] == "error" and gone["code"] == "user_browser_gone", gone
    # reconnected once, and not found: gone, saying why
    again = await b("open", url=app.url("/members"), browser="user")
    assert again["type"] == "error" and again["code"] == "user_browser_gone", again
    assert "nothing listens" in again["message"]
    # the person starts their browser again: the next open connects to it (their session cookie died with
    # the browser that was killed, so the site asks them to sign in)
    data_dir = home / ".config" / "chromium"
    (data_dir / "DevToolsActivePort").unlink()
    person.browser = Chromium(data_dir)
    back = await b("open", url=app.url("/members"), browser="user")
    assert back["type"] == "result" and back["snapshot"].startswith("[t1] Sign in"), back
    assert (await daemon.request({"id": 9, "op": "status"}))["user_browser"]["state"] == "connected"


@pytest.mark.chromium
async def test_the_persons_devtools_endpoint_and_the_view_are_refused_even_when_listed(start_daemon, person, app):
    devtools = person.browser.port
    config = user_config(listed(app, f"127.0.0.1:{devtools}", f"localhost:{devtools}"))
    config = msgspec.structs.replace(config, view=ViewConfig(port=free_port()))
    config = msgspec.structs.replace(config, user_browser=UserBrowserConfig(
        hosts=[*config.user_browser.hosts, f"127.0.0.1:{config.view.port}"]))
    daemon = await start_daemon(config)
    view = await daemon.request({"id": "v", "op": "view"})
    assert view["type"] == "result" and view["port"] == config.view.port, view
    b = Browser(await daemon.client())
    await b.ok("open", url=app.url("/members"), browser="user")
    for host in ("127.0.0.1", "localhost"):
        # /json/list names every tab the person has and the websocket that drives it
        refused = await b("open", url=f"http://{host}:{devtools}/json/list")
        assert refused["type"] == "error" and refused["code"] == "blocked_url", refused
        assert (f"{host}:{devtools} is your browser's DevTools endpoint: a page in your browser never reaches it, "
                f"whatever user_browser.hosts lists") in refused["message"], refused
    refused = await b("open", url=f"http://127.0.0.1:{config.view.port}/")
    assert refused["type"] == "error" and refused["code"] == "blocked_url", refused
    assert f"127.0.0.1:{config.view.port} is webfetch's view: a page in your browser never reaches it" in \
        refused["message"], refused


async def test_with_no_hosts_it_is_off_and_says_why(start_daemon):
    daemon = await start_daemon(user_config(hosts=[]))
    status = (await daemon.request({"id": 1, "op": "status"}))["user_browser"]
    assert status["state"] == "off"
    assert status["detail"].startswith("off: user_browser.hosts is empty")
    b = Browser(await daemon.client())
    off = await b("open", url="http://127.0.0.1:9/", browser="user")
    assert off["type"] == "error" and off["code"] == "user_browser_off", off


async def test_while_the_person_has_not_approved_requests_say_so_then_fail_at_their_deadline(
        start_daemon, nursery):
    # a browser that asks the person: the websocket handshake waits (here: a port that accepts and says nothing)
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    held = []

    async def hold(stream):
        held.append(stream)
        await trio.sleep_forever()
    nursery.start_soon(trio.serve_listeners, hold, listeners)
    port = listeners[0].socket.getsockname()[1]
    config = user_config(["127.0.0.1:9"], endpoint=f"ws://127.0.0.1:{port}/devtools/browser/waiting")
    config = msgspec.structs.replace(config, browse=BrowseConfig(nav_timeout_s=2))
    daemon = await start_daemon(config)
    progress: list = []
    refused = await daemon.request({"id": 1, "op": "browse", "session": "s", "action": "open",
                                    "url": "http://127.0.0.1:9/members", "browser": "user"}, progress)
    assert refused["type"] == "error" and refused["code"] == "user_browser_unapproved", refused
    assert refused["message"].startswith("your browser has not allowed webfetch's connection within 2 s")
    assert any(p["stage"] == "person" and "allow the connection in your browser" in p["message"]
               for p in progress), progress
    status = (await daemon.request({"id": 2, "op": "status"}))["user_browser"]
    assert status["state"] == "waiting for approval", status
    # one connection, still waiting for the person: a second request does not make another
    await daemon.request({"id": 3, "op": "browse", "session": "s", "action": "open",
                          "url": "http://127.0.0.1:9/members", "browser": "user"})
    assert len(held) == 1


# --- finding the browser: bad input ----------------------------------------------------------------


def write_port_file(directory: Path, port: int) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "DevToolsActivePort"
    path.write_text(f"{port}\n/devtools/browser/0b6c1c0e-1111-2222-3333-444455556666")
    return path


async def test_auto_with_no_browser_says_how_to_turn_remote_debugging_on(home):
    with pytest.raises(UserBrowserUnavailable) as e:
        await find("auto")
    assert "no running browser has remote debugging on" in e.value.message
    assert "chrome://inspect/#remote-debugging" in e.value.message and "--remote-debugging-port" in e.value.message
    # a headless browser, or one started with a port, writes no file auto finds: the endpoint is the way
    assert 'set user_browser.endpoint = "http://127.0.0.1:N" and run `webfetch restart`' in e.value.message


async def test_an_endpoint_where_nothing_listens_asks_whether_the_browser_runs_with_that_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    with pytest.raises(UserBrowserUnavailable) as e:
        await find(f"http://127.0.0.1:{dead}")
    assert e.value.message.startswith(f"cannot reach user_browser.endpoint http://127.0.0.1:{dead} (")
    assert e.value.message.endswith("is the browser running, with --remote-debugging-port set to that port? (after a "
                                    "change to user_browser.endpoint, `webfetch restart` applies it)")


async def test_a_port_file_naming_a_dead_port_is_named(home):
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    dead = listener.getsockname()[1]
    listener.close()  # nothing listens there now
    path = write_port_file(home / ".config" / "google-chrome", dead)
    with pytest.raises(UserBrowserUnavailable) as e:
        await find("auto")
    assert f"Google Chrome: {path} names port {dead}, where nothing listens" in e.value.message


async def test_of_two_browsers_the_newest_is_chosen_and_the_note_says_how_to_choose(home):
    listeners = [await trio.open_tcp_listeners(0, host="127.0.0.1") for _ in range(2)]
    try:
        ports = [ls[0].socket.getsockname()[1] for ls in listeners]
        older = write_port_file(home / ".config" / "google-chrome", ports[0])
        newer = write_port_file(home / ".config" / "BraveSoftware" / "Brave-Browser", ports[1])
        os.utime(older, (1_700_000_000, 1_700_000_000))
        found = await find("auto")
    finally:
        for ls in listeners:
            await ls[0].aclose()
    assert found.ws_url.startswith(f"ws://127.0.0.1:{ports[1]}/devtools/browser/")
    assert found.how == (f"Brave ({newer}) (the newest of 2 with remote debugging on; also Google Chrome ({older}): "
                         f"set user_browser.endpoint to that browser's user-data directory to choose)")


async def test_an_endpoint_that_is_not_devtools_is_refused(home):
    site = Site().start()
    try:
        site.routes["/json/version"] = lambda h: h.reply(200, "text/html", "<p>a blog</p>")
        with pytest.raises(UserBrowserUnavailable) as e:
            await find(f"http://127.0.0.1:{site.port}")
    finally:
        site.stop()
    assert "is not a DevTools endpoint" in e.value.message


async def test_an_endpoint_on_another_machine_is_refused_before_anything_is_sent():
    with pytest.raises(UserBrowserUnavailable) as e:
        await find("http://192.0.2.7:9222")
    assert "not on this machine" in e.value.message
    with pytest.raises(UserBrowserUnavailable) as e:
        await find("wss://browser.example/devtools")
    assert "is not a browser's DevTools endpoint" in e.value.message


def test_auto_looks_in_the_usual_directories_on_linux_and_macos():
    home = Path("/home/ann")
    linux = [str(p) for _, p in candidates(home, "linux")]
    assert "/home/ann/.config/google-chrome/DevToolsActivePort" in linux
    assert "/home/ann/.config/BraveSoftware/Brave-Browser/DevToolsActivePort" in linux
    mac = [str(p) for _, p in candidates(home, "darwin")]
    assert "/home/ann/Library/Application Support/Google/Chrome Canary/DevToolsActivePort" in mac
    assert "/home/ann/Library/Application Support/Microsoft Edge/DevToolsActivePort" in mac


def test_doctor_says_off_and_why_or_whether_the_browser_is_found(home):
    from webfetch.config import Config
    from webfetch.frontends.doctor import check_user_browser

    off = check_user_browser(Config())
    assert (off.level, off.detail) == ("info", "off: user_browser.hosts is empty, so the agent never uses your "
                                                "own browser")
    on = Config(user_browser=UserBrowserConfig(hosts=["github.com"]))
    missing = check_user_browser(on)
    assert missing.level == "warn" and missing.detail.startswith("for github.com, but not found: no running browser")
    with socket.socket() as listener:  # a browser's DevTools port, as far as finding it goes
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        path = write_port_file(home / ".config" / "microsoft-edge", listener.getsockname()[1])
        found = check_user_browser(on)
    assert found.level == "ok" and found.detail.startswith(f"found: Microsoft Edge ({path}); for github.com"), found


async def test_the_gate_in_the_persons_browser_holds_every_request_to_the_listed_hosts():
    gate = HostGate(AddressPolicy(), listed=("example.com", "127.0.0.1:8000", "localhost:9222"),
                    closed=lambda: {9222: "your browser's DevTools endpoint"})
    with trio.fail_after(10):
        # a listed host and its subdomains, loopback as it is on the port the person named: the person named it
        assert await gate.check("http://127.0.0.1:8000/members", navigation=True) is None
        assert await gate.check("https://docs.example.com/", navigation=True) is None
        # another host as the top-level document: refused, saying which hosts are listed
        assert await gate.check("https://example.org/", navigation=True) == (
            "example.org is not in user_browser.hosts (example.com, 127.0.0.1:8000, localhost:9222): the agent uses "
            "your browser only for the sites you listed")
        assert (await gate.check("https://notexample.com/", navigation=True) or "").startswith("notexample.com is not")
        # a page's other requests (a frame, an image, a script's fetch) alike, public or not: they carry the
        # person's cookies too
        assert (await gate.check("https://example.org/pixel.png") or "").startswith("example.org is not in")
        assert (await gate.check("http://127.0.0.2:8000/whoami") or "").startswith("127.0.0.2:8000 is not in")
        # a loopback host listed on one port is not listed on another
        assert (await gate.check("http://127.0.0.1:8001/") or "").startswith("127.0.0.1:8001 is not in")
        # the person's DevTools port: never, even listed, by any name of this machine
        for url in ("http://localhost:9222/json/list", "http://127.0.0.1:9222/json/list", "http://[::1]:9222/"):
            assert (await gate.check(url, navigation=True) or "").endswith(
                ":9222 is your browser's DevTools endpoint: a page in your browser never reaches it, whatever "
                "user_browser.hosts lists"), url
        assert await gate.check("file:///etc/passwd") == "file: URLs are not followed"


def test_a_host_on_this_machine_is_listed_with_its_port_or_refused_at_load():
    from webfetch.config import parse_config
    from webfetch.errors import ConfigError

    config = parse_config(b'[user_browser]\nhosts = ["github.com", "127.0.0.1:8080", "localhost:3000", "[::1]:5173"]\n')
    assert config.user_browser.hosts == ["github.com", "127.0.0.1:8080", "localhost:3000", "[::1]:5173"]
    for bare in ("127.0.0.1", "localhost", "[::1]", "0.0.0.0", "app.localhost"):
        with pytest.raises(ConfigError) as info:
            parse_config(f'[fetch]\n[user_browser]\nhosts = ["github.com", "{bare}"]\n'.encode(), source="config.toml")
        assert str(info.value).startswith(f"config.toml: line 2: key `user_browser`: user_browser.hosts entry "
                                          f"{bare!r} is on this machine: add the port of the server you mean ("), bare
        assert "your browser's DevTools among them, stays out of the agent's reach" in str(info.value)


@pytest.mark.chromium
@pytest.mark.parametrize("rules", ["prefetch", "prerender"])
async def test_a_page_chrome_preloaded_from_an_unlisted_host_is_left_and_never_read(start_daemon, person, app, rules):
    """Chrome's preloading (speculation rules) fetches a same-site page without a request the tab's
    interception sees; a navigation there then shows it. The committed document is judged again: left at
    once, never read (an attacker review read the members page, and the person's DevTools /json/list)."""
    site = Site()
    site.start()
    members = app.url("/members")   # same site as the listed 127.0.0.1:SITE (a site ignores the port)
    devtools = f"http://127.0.0.1:{person.browser.port}/json/list"
    try:
        daemon = await start_daemon(user_config([f"127.0.0.1:{site.port}"], reachable=["127.0.0.1"]))
        b = Browser(await daemon.client())
        await b.ok("open", url=f"http://127.0.0.1:{site.port}/", browser="user")
        for target in (members, devtools):
            body = (f'<title>x</title><script type="speculationrules">{{"{rules}":[{{"source":"list","urls":'
                    f'["{target}"]}}]}}</script><script>setTimeout(() => location = {target!r}, 1500)</script>')
            await b.ok("route", url="*/injected", status=200, body=body, headers={"content-type": "text/html"})
            await b("open", url=f"http://127.0.0.1:{site.port}/injected")
            await trio.sleep(3)   # the page has gone there, whether its own request was seen or not
            snap = (await b.ok("snapshot", mode="full"))["snapshot"]
            assert MEMBER_TEXT not in snap and "devtoolsFrontendUrl" not in snap, snap
            assert target not in snap, snap
    finally:
        site.stop()


@pytest.mark.chromium
async def test_what_a_page_sends_as_the_session_closes_meets_the_gate(start_daemon, person, app):
    """A page's pagehide handler runs as its tab closes: its beacon and keepalive fetch go to an unlisted host
    of the same site, with the person's cookie, unless the tab's interception still answers then."""
    site = Site()
    beacon, keepalive = app.url("/beacon"), app.url("/keepalive")
    site.routes["/bye"] = lambda h: h.reply(200, "text/html", f"""<title>Bye</title><p>bye</p><script>
        addEventListener("pagehide", () => {{
          navigator.sendBeacon({beacon!r}, "x");
          fetch({keepalive!r}, {{keepalive: true, mode: "no-cors", credentials: "include"}});
        }});</script>""")
    site.start()
    try:
        daemon = await start_daemon(user_config([f"127.0.0.1:{site.port}"], reachable=["127.0.0.1"]))
        b = Browser(await daemon.client())
        hits = len(app.hits)
        await b.ok("open", url=f"http://127.0.0.1:{site.port}/bye", browser="user")
        await b.ok("close")
        await trio.sleep(3)
        assert [h[1] for h in app.hits[hits:]] == [], app.hits[hits:]
    finally:
        site.stop()


@pytest.mark.chromium
async def test_a_fetch_in_the_persons_browser_never_reads_a_page_chrome_preloaded(start_daemon, person, app):
    site = Site()
    members = app.url("/members")   # same site as the listed 127.0.0.1:SITE, not listed
    site.routes["/shell"] = lambda h: h.reply(200, "text/html", (
        f'<title>Loading</title><div id="root"></div><script type="speculationrules">{{"prerender":[{{"source":'
        f'"list","urls":["{members}"]}}]}}</script><script>setTimeout(() => location = {members!r}, 800)</script>'))
    site.start()
    try:
        daemon = await start_daemon(user_config([f"127.0.0.1:{site.port}"], reachable=["127.0.0.1"]))
        r = await daemon.fetch(f"http://127.0.0.1:{site.port}/shell", browser="user")
        assert MEMBER_TEXT not in str(r), r
        assert r["type"] == "error" and r["code"] == "blocked_url", r
        assert "without a request webfetch could check (Chrome preloaded it)" in r["message"], r
        # a plain redirect to the same host's other port is held to the listed port too
        site.routes["/hop"] = lambda h: h.reply(302, "text/html", "", {"Location": members})
        hits = len(app.hits)
        hop = await daemon.fetch(f"http://127.0.0.1:{site.port}/hop", browser="user")
        assert hop["type"] == "error" and hop["code"] == "blocked_url", hop
        assert hop["message"].startswith(f"127.0.0.1:{app.port} is not in user_browser.hosts"), hop
        assert app.hits[hits:] == []
    finally:
        site.stop()
