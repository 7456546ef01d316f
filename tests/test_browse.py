"""The browse op with real Chromium against a local multi-page app (tests/support/browse_app.py): a whole task
driven by refs, with the end state checked on the app's server; then the errors, isolation, cancel,
the address policy and cleanup."""

from __future__ import annotations

import functools
import re
from typing import Any

import pytest
import trio

from webfetch.config import BrowseConfig, BrowserConfig, FetchConfig

from .support.browse_app import App
from .support.daemon import make_config
from .test_hostile import CHROME_LNA_OFF, Blocked


@pytest.fixture
def app():
    a = App()
    yield a
    a.stop()


class Browser:
    """One connection to the daemon, driving one session."""

    def __init__(self, client: Any, session: str = "s1") -> None:
        self.client = client
        self.session = session
        self.n = 0

    async def __call__(self, action: str, **fields: Any) -> dict[str, Any]:
        self.n += 1
        with trio.fail_after(60):
            return await self.client.request({"id": self.n, "op": "browse", "session": self.session,
                                              "action": action, **fields})

    async def ok(self, action: str, **fields: Any) -> dict[str, Any]:
        r = await self(action, **fields)
        assert r["type"] == "result", r
        return r


def ref(snapshot: str, line_start: str) -> str:
    """The ref on the first snapshot line that starts (after its indent) with `line_start`."""
    for line in snapshot.splitlines():
        if line.lstrip().startswith(line_start):
            m = re.search(r"ref=(e\d+)", line)
            assert m, line
            return m.group(1)
    raise AssertionError(f"no line starting with {line_start!r} in:\n{snapshot}")


async def login(b: Browser, app: App) -> dict[str, Any]:
    page = await b.ok("open", url=app.url("/login"))
    snap = page["snapshot"]
    await b.ok("click", ref=ref(snap, '- button "Accept cookies"'))
    await b.ok("fill", ref=ref(snap, '- textbox "Username"'), text="ann")
    return await b.ok("fill", ref=ref(snap, '- textbox "Password"'), text="hunter2", submit=True)


async def test_a_whole_task_through_refs_ends_on_the_server(daemon, app):
    b = Browser(await daemon.client())
    page = await b.ok("open", url=app.url("/login"))
    assert page["change"] == "navigation" and page["refs_reset"] and page["snapshot_kind"] == "full"
    assert page["page"] == {"tab": "t1", "url": app.url("/login"), "title": "Sign in"}
    snap = page["snapshot"]
    assert snap.splitlines()[0] == f"[t1] Sign in — {app.url('/login')}"
    # the password field has only a placeholder: that is its name
    assert '- textbox "Password" [ref=' in snap and '- textbox "Username" [required, ref=' in snap
    user, password = ref(snap, '- textbox "Username"'), ref(snap, '- textbox "Password"')
    sign_in = ref(snap, '- button "Sign in"')

    # the consent overlay covers the button: named, never clicked through
    covered = await b("click", ref=sign_in)
    assert covered["type"] == "error" and covered["code"] == "covered", covered
    assert "#consent" in covered["message"] and "We use cookies" in covered["covered_by"]
    assert "login" not in app.state
    accepted = await b.ok("click", ref=ref(snap, '- button "Accept cookies"'))
    assert accepted["change"] == "dom" and accepted["snapshot_kind"] == "diff"
    assert "removed:" in accepted["snapshot"]

    assert (await b.ok("fill", ref=user, text="ann"))["value"] == "ann"
    assert (await b.ok("fill", ref=password, text="hunter2"))["value"] == "•••"
    dashboard = await b.ok("click", ref=sign_in)
    assert app.state["login"] == {"user": "ann", "password": "hunter2"}
    assert dashboard["change"] == "navigation" and dashboard["refs_reset"] is True
    assert dashboard["page"]["url"] == app.url("/app") and dashboard["page"]["title"] == "Dashboard"
    snap = dashboard["snapshot"]

    # refs of the login page are stale now, never guessed at
    stale = await b("click", ref=sign_in)
    assert stale["code"] == "stale_ref", stale

    assert (await b.ok("select", ref=ref(snap, '- combobox "Country"'), values=["Japan"]))["value"] == "Japan"
    size = ref(snap, '- combobox "Size"')
    custom = await b("select", ref=size, values=["Large"])
    assert custom["code"] == "not_native_select" and "click it" in custom["message"]
    opened = await b.ok("click", ref=size)
    assert '- option "Large"' in opened["snapshot"]
    await b.ok("click", ref=ref(opened["snapshot"], '- option "Large"'))
    assert (await b.ok("check", ref=ref(snap, '- checkbox "Newsletter"'), checked=True))["value"] == "checked"
    # a controlled input (React style): it keeps only what its input events told it
    assert (await b.ok("fill", ref=ref(snap, '- textbox "Nickname"'), text="annie"))["value"] == "annie"
    saved = await b.ok("click", ref=ref(snap, '- button "Save profile"'))
    assert '- paragraph "Profile saved"' in saved["snapshot"], saved["snapshot"]
    assert app.state["profile"] == {"country": "jp", "newsletter": True, "nick": "annie", "size": "Large"}

    # a button in a shadow root
    basket = await b.ok("click", ref=ref(snap, '- button "Add to basket"'))
    assert "In basket" in basket["snapshot"] and app.state["basket"] == {}

    # a form in a cross-origin iframe (localhost), inlined under its iframe line
    assert re.search(r'- iframe "payment" \[ref=e\d+\]\n  - textbox "Card number"', snap), snap
    await b.ok("fill", ref=ref(snap, '- textbox "Card number"'), text="4242 4242")
    paid = await b.ok("click", ref=ref(snap, '- button "Pay"'))
    assert app.state["card"] == {"card": "4242 4242"}
    assert '- heading "Payment received"' in paid["snapshot"]

    # a single-page route with content that arrives later
    routed = await b.ok("click", ref=ref(snap, '- link "Orders"'))
    assert routed["change"] == "same_document" and routed["page"]["url"] == app.url("/app#/orders")
    waited = await b.ok("wait", text="Order 1042 shipped")
    assert waited["waited_for"] == "text 'Order 1042 shipped' shown"
    assert "Order 1042 shipped" in waited["snapshot"]

    # alert: accepted and reported; confirm and prompt: the tab waits for a dialog action
    alert = await b.ok("click", ref=ref(snap, '- button "Show drafts"'))
    assert alert["dialog"] == {"type": "alert", "message": "Saved drafts: 3"}
    confirm = await b.ok("click", ref=ref(snap, '- button "Delete all"'))
    assert confirm["dialog"] == {"type": "confirm", "message": "Delete everything?"}
    assert confirm["snapshot_kind"] == "none"
    blocked = await b("snapshot")
    assert blocked["code"] == "dialog_open" and "the `dialog` action (`accept` true or false)" in blocked["message"]
    answered = await b.ok("dialog", accept=False)
    assert "kept" in answered["snapshot"]
    prompt = await b.ok("click", ref=ref(snap, '- button "Rename"'))
    assert prompt["dialog"] == {"type": "prompt", "message": "Your name?", "default_prompt": "anon"}
    renamed = await b.ok("dialog", accept=True, prompt_text="Bob")
    assert "name=Bob" in renamed["snapshot"]

    # a download is saved and reported; the tab stays on its page (tests/test_browse_files.py has the rest)
    download = await b.ok("click", ref=ref(snap, '- link "Download report"'))
    [saved] = download["downloads"]
    assert saved["filename"] == "report.csv" and saved["state"] == "saved" and saved["size"] == 8
    assert download["page"]["url"] == app.url("/app#/orders")

    # new tabs: target=_blank and window.open are followed, the newest becomes active
    help_tab = await b.ok("click", ref=ref(snap, '- link "Help (new tab)"'))
    assert help_tab["new_tabs"] == [{"tab": "t2", "url": app.url("/popup")}]
    assert help_tab["page"]["tab"] == "t2" and '- heading "Help"' in help_tab["snapshot"]
    await b.ok("tabs", do="select", tab="t1")
    opened = await b.ok("click", ref=ref(snap, '- button "Open window"'))
    assert opened["new_tabs"] == [{"tab": "t3", "url": app.url("/popup?via=open")}]
    tabs = await b.ok("tabs")
    assert [(t["tab"], t["active"]) for t in tabs["tabs"]] == [("t1", False), ("t2", False), ("t3", True)]
    await b.ok("tabs", do="close", tab="t3")
    assert [t["tab"] for t in (await b.ok("tabs"))["tabs"]] == ["t1", "t2"]
    missing = await b("tabs", do="select", tab="t3")
    assert missing["code"] == "no_such_tab"
    await b.ok("tabs", do="select", tab="t1")

    # read: the live DOM's main content through the extractor
    read = await b.ok("read")
    assert "Signed in as **ann**" in read["content"] and "Profile saved" in read["content"]
    assert "In basket" in read["content"]  # a shadow root's text is part of what the page shows
    assert "Small" not in read["content"]  # the custom combobox's closed list is not
    frame_text = await b.ok("read", ref=ref(snap, '- iframe "payment"'))
    assert frame_text["content"].startswith("# Payment received")
    shot = await b.ok("screenshot")
    assert shot["width"] == 1280 and shot["height"] == 800 and shot["image"].startswith("iVBORw0KGgo")

    # the 3 000-row table: bounded, similar rows collapsed, `find` reaches any of them
    table = await b.ok("click", ref=ref(snap, '- link "Big table"'))
    assert table["change"] == "navigation"
    assert "- … 2997 more row like these" in table["snapshot"]
    assert len(table["snapshot"]) < 2000
    found = await b.ok("snapshot", find="Buy 2999")
    buy = ref(found["snapshot"], '- button "Buy 2999"')
    assert found["ref_count"] == 1
    back = await b.ok("nav", to="back")
    assert back["page"]["url"] == app.url("/app#/orders") and back["refs_reset"] is True
    assert (await b("click", ref=buy))["code"] == "stale_ref"
    await b.ok("close")


async def test_an_action_that_changed_only_the_title_says_the_new_title_among_its_changed_lines(daemon, app):
    # the reply of changed lines leaves the page line out (issue 40, context cost): the title is one of the
    # lines an action can change, so a script that changes only it is still read
    b = Browser(await daemon.client())
    page = await b.ok("open", url=app.url("/inbox"))
    fetched = await b.ok("click", ref=ref(page["snapshot"], '- button "Fetch mail"'))
    assert fetched["change"] == "dom" and fetched["snapshot_kind"] == "diff", fetched
    assert fetched["snapshot"].split("\n")[1:] == ['- title "Inbox (1)"']
    assert fetched["page"]["title"] == "Inbox (1)"
    again = await b.ok("click", ref=ref(page["snapshot"], '- button "Fetch mail"'))
    assert again["change"] == "none" and again["snapshot_kind"] == "none"


async def test_a_fields_new_value_is_said_once_not_again_as_its_changed_line(daemon, app):
    # issue 40, context cost: the result's `value` says what the field holds now; its line among the changed
    # lines said it again (with the focus the action moved there)
    b = Browser(await daemon.client())
    page = await b.ok("open", url=app.url("/login"))
    await b.ok("click", ref=ref(page["snapshot"], '- button "Accept cookies"'))
    filled = await b.ok("fill", ref=ref(page["snapshot"], '- textbox "Username"'), text="ann")
    assert filled["value"] == "ann" and filled["change"] == "dom", filled
    assert filled["snapshot_kind"] == "none" and filled["snapshot"] == ""
    # and a snapshot shows the value as ever
    assert '- textbox "Username" [required, focused, ref=e1]: ann' in (await b.ok("snapshot"))["snapshot"]


async def test_wait_for_a_url_matches_its_pattern_and_a_hostile_one_never_holds_the_daemon(daemon, app):
    """`wait url` is the whole URL with `*` for any characters (as routes'), matched by its pieces: a model's
    pattern once went to fnmatch, whose regular expression of classes took 43 s to compile in the event loop."""
    b = Browser(await daemon.client())
    await b.ok("open", url=app.url("/inbox"))
    assert (await b.ok("wait", url="http://127.0.0.1:*/inbox"))["waited_for"] == f"url {app.url('/inbox')}"
    hostile = "[a-\U0010ffff]" * 20_000
    waited: dict[str, Any] = {}

    async def wait() -> None:
        waited.update(await b("wait", url=hostile, timeout_s=3))

    # the daemon runs in this process: a loop held by the pattern would hold this deadline past its end too
    with trio.fail_after(15):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait)
            await trio.sleep(0.5)
            other = await daemon.client()
            with trio.fail_after(1):
                assert (await other.request({"id": "s", "op": "status"}))["type"] == "result"
    assert waited["type"] == "error" and waited["code"] == "timeout", waited


async def test_errors_name_the_way_forward(daemon, app):
    b = Browser(await daemon.client())
    dashboard = await login(b, app)
    snap = dashboard["snapshot"]
    assert (await b("click", ref="e999"))["code"] == "unknown_ref"
    not_editable = await b("fill", ref=ref(snap, '- button "Save profile"'), text="x")
    assert not_editable["code"] == "not_editable"
    assert (await b("fill", text="x"))["code"] == "bad_request"
    assert (await b("nav", to="forward"))["code"] == "bad_request"
    for url in ("file:///etc/passwd", "javascript:alert(1)", "data:text/html,<h1>hi</h1>", "chrome://version"):
        refused = await b("open", url=url)
        assert refused["code"] == "blocked_url", (url, refused)
    bad = await b("open", url="ftp://example.com/")
    assert bad["code"] == "invalid_url"
    await b.ok("hover", ref=ref(snap, '- button "Save profile"'))
    await b.ok("scroll", direction="down", px=300)
    nick = ref(snap, '- textbox "Nickname"')
    await b.ok("fill", ref=nick, text="abc")
    await b.ok("press", key="Control+a", ref=nick)
    assert (await b.ok("press", key="Backspace"))["snapshot"].endswith(f'- textbox "Nickname" [focused, ref={nick}]')
    assert (await b("press", key="Hyper+x"))["code"] == "bad_request"
    missing = await b.ok("open", url=app.url("/nowhere"))
    assert missing["status"] == 404 and "HTTP 404" in missing["notes"][0]
    assert '- heading "Not found"' in missing["snapshot"]


async def test_opening_a_url_answered_without_a_body_says_no_content_and_keeps_the_tab(daemon, site):
    # Chrome aborts a navigation answered 204 or 205 (net::ERR_ABORTED, which was a network_error): nothing
    # was loaded, the tab shows what it showed, and the session goes on.
    site.route("/no-content", lambda h: (h.send_response(204), h.end_headers()))
    site.route("/reset-content", lambda h: (h.send_response(205), h.send_header("Content-Length", "0"),
                                            h.end_headers()))
    b = Browser(await daemon.client())
    first = await b("open", url=site.url("/no-content"))
    assert first["type"] == "error" and first["code"] == "no_content" and first["status"] == 204, first
    assert first["message"].startswith(f"{site.url('/no-content')} answered HTTP 204 No Content: there is nothing "
                                       f"to read at this URL (the request succeeded, and the server sent no page); "
                                       f"the tab still shows about:blank"), first
    page = await b.ok("open", url=site.url("/article"))
    assert page["page"]["url"] == site.url("/article")
    again = await b("open", url=site.url("/reset-content"))
    assert again["code"] == "no_content" and again["status"] == 205, again
    assert f"the tab still shows {site.url('/article')}" in again["message"]
    shown = await b.ok("snapshot")
    assert shown["page"]["url"] == site.url("/article")
    assert '- heading "Otters return to the valley"' in shown["snapshot"]


async def test_press_and_type_reach_the_focused_field(daemon, app):
    b = Browser(await daemon.client())
    page = await b.ok("open", url=app.url("/login"))
    snap = page["snapshot"]
    await b.ok("click", ref=ref(snap, '- button "Accept cookies"'))
    await b.ok("type", ref=ref(snap, '- textbox "Username"'), text="bo")
    await b.ok("press", key="Tab")
    await b.ok("type", text="wrong")
    result = await b.ok("press", key="Enter")
    assert app.state["login"] == {"user": "bo", "password": "wrong"}
    assert result["change"] == "navigation" and "Wrong password" in (await b.ok("read"))["content"]


async def test_sessions_are_isolated_from_each_other_and_from_fetch(daemon, app):
    a = Browser(await daemon.client(), "alice")
    await login(a, app)
    who = await a.ok("open", url=app.url("/whoami"))
    assert "user=ann" in (await a.ok("read"))["content"], who
    b = Browser(await daemon.client(), "bob")
    await b.ok("open", url=app.url("/whoami"))
    assert "user=None" in (await b.ok("read"))["content"]
    fetched = await daemon.fetch(app.url("/whoami"))
    assert "user=None" in fetched["content"]
    status = await daemon.request({"id": "st", "op": "status"})
    assert sorted(s["session"] for s in status["browse"]) == ["alice", "bob"]


async def test_cancel_ends_an_action_at_once_and_the_session_stays_usable(daemon, app):
    c = await daemon.client()
    b = Browser(c)
    await b.ok("open", url=app.url("/login"))
    await c.send({"id": "w", "op": "browse", "session": "s1", "action": "wait", "text": "never there",
                  "timeout_s": 30})
    with trio.fail_after(10):
        while (f := await c.receive())["id"] != "w" or f.get("stage") != "browse":
            pass
        await c.send({"id": "q", "op": "browse", "session": "s1", "action": "snapshot"})  # queued behind it
        while (f := await c.receive())["id"] != "q" or f.get("stage") != "queued":
            pass
    with trio.fail_after(5):  # not the 30 s the wait asked for
        await c.send({"id": "c", "op": "cancel", "target": "w"})
        frames = {}
        while len(frames) < 3:
            f = await c.receive()
            if f["type"] != "progress":
                frames[f["id"]] = f
    assert frames["w"]["code"] == "cancelled"
    assert frames["q"]["type"] == "result" and '- textbox "Username"' in frames["q"]["snapshot"]
    assert (await b.ok("snapshot"))["snapshot_kind"] == "full"


async def test_close_and_idle_timeout_dispose_of_the_context(start_daemon, app):
    h = await start_daemon(make_config(browse=BrowseConfig(idle_s=1.5)))
    b = Browser(await h.client(), "short")
    await b.ok("open", url=app.url("/login"))
    assert any(t["url"] == app.url("/login") for t in await h.page_targets())
    with trio.fail_after(10):
        while h.daemon.browse.sessions:  # noqa: ASYNC110 (the test watches the daemon from outside)
            await trio.sleep(0.1)
    assert not any(t["url"] == app.url("/login") for t in await h.page_targets())
    c = Browser(await h.client(), "closed")
    await c.ok("open", url=app.url("/popup"))
    assert (await c.ok("close"))["snapshot_kind"] == "none"
    assert not any(t["url"] == app.url("/popup") for t in await h.page_targets())
    assert "closed" not in h.daemon.browse.sessions


async def test_a_session_opens_in_the_context_made_ahead_which_is_never_handed_out_twice(daemon, app):
    """The first open of a session takes the browse context (and blank page) the Chrome actor made while
    nothing was asked; a new one is made for the next session, never the one a session used, and a closed
    session's context is disposed of."""
    chrome = daemon.daemon.chrome

    async def spare() -> str:
        with trio.fail_after(20):
            while chrome.spare is None:  # noqa: ASYNC110 (the test watches the daemon from outside)
                await trio.sleep(0.05)
        return chrome.spare.id

    async def contexts() -> list[str]:
        browser = await chrome.wait_browser()
        return (await browser.conn.call("Target.getBrowserContexts"))["browserContextIds"]

    made = await spare()
    page = chrome.spare.made_ahead
    await Browser(await daemon.client(), "first").ok("open", url=app.url("/login"))
    session = daemon.daemon.browse.sessions["first"]
    assert session.context.id == made and session.tabs["t1"].target_id == page.target_id
    second = await spare()
    assert second != made and chrome.spare.made_ahead is not None
    await Browser(await daemon.client(), "first").ok("close")
    assert made not in await contexts() and second in await contexts()
    await Browser(await daemon.client(), "other").ok("open", url=app.url("/login"))
    assert daemon.daemon.browse.sessions["other"].context.id == second
    assert await spare() not in (made, second)


@pytest.mark.chromium
async def test_the_context_made_ahead_is_disposed_of_when_the_daemon_stops(short_tmp, tmp_path):
    from webfetch.chrome.cdp import open_cdp
    from webfetch.daemon import Daemon, bind_socket

    from .support.chromium import Chromium

    # a browser the daemon attaches to: it outlives the daemon, so what the daemon left in it can be seen
    browser = Chromium(tmp_path / "existing")
    try:
        async with open_cdp(browser.ws_url) as conn:
            async def contexts() -> list[str]:
                return (await conn.call("Target.getBrowserContexts"))["browserContextIds"]

            d = Daemon(make_config(browser=BrowserConfig(endpoint=browser.ws_url)))
            async with trio.open_nursery() as nursery:
                await nursery.start(functools.partial(d.run, bind_socket(short_tmp / "s.sock")))
                with trio.fail_after(20):
                    while d.chrome.spare is None:  # noqa: ASYNC110 (the test watches the daemon from outside)
                        await trio.sleep(0.05)
                made = d.chrome.spare.id
                assert made in await contexts()
                nursery.cancel_scope.cancel()
            with trio.fail_after(10):
                while made in await contexts():
                    await trio.sleep(0.05)
    finally:
        browser.stop()


async def test_browse_can_be_switched_off(start_daemon, app):
    h = await start_daemon(make_config(browse=BrowseConfig(enabled=False)))
    r = await Browser(await h.client())("open", url=app.url("/login"))
    assert r["code"] == "browse_disabled"


@pytest.fixture
def no_outbound_proxy(monkeypatch):
    for name in ("https_proxy", "http_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


async def test_the_address_policy_holds_for_navigations_and_subresources(start_daemon, app, no_outbound_proxy):
    blocked = Blocked()
    try:
        h = await start_daemon(make_config(fetch=FetchConfig(allow_hosts=["127.0.0.1"]),
                                           browser=BrowserConfig(args=CHROME_LNA_OFF)))
        b = Browser(await h.client())
        refused = await b("open", url=blocked.base + "/secret")
        assert refused["code"] == "blocked_url" and "127.0.0.2" in refused["message"], refused
        # an allowed page whose script, image, frame, fetch and beacon reach for the blocked host
        page = await b.ok("open", url=app.url("/reach?to=" + blocked.base))
        assert page["page"]["title"] == "Reach"
        link = await b("click", ref=ref(page["snapshot"], '- link "Go there"'))
        assert link["code"] == "blocked_url" and "127.0.0.2" in link["message"], link
        assert blocked.hits == []
    finally:
        blocked.stop()


async def test_a_vanished_client_ends_its_action_and_the_session_stays(daemon, app):
    c = await daemon.client()
    b = Browser(c)
    await b.ok("open", url=app.url("/login"))
    await c.send({"id": "w", "op": "browse", "session": "s1", "action": "wait", "text": "never there",
                  "timeout_s": 30})
    await trio.sleep(0.3)
    await c.aclose()
    again = Browser(await daemon.client())
    with trio.fail_after(5):  # not the 30 s the abandoned wait asked for
        snap = await again.ok("snapshot")
    assert '- textbox "Username"' in snap["snapshot"]


@pytest.mark.chromium
async def test_daemon_stop_closes_every_session(short_tmp, app):
    import functools

    from webfetch.daemon import Daemon, bind_socket

    from .support.client import LineClient
    from .support.procs import gone

    d = Daemon(make_config())
    path = short_tmp / "stop.sock"
    async with trio.open_nursery() as nursery:
        await nursery.start(functools.partial(d.run, bind_socket(path)))
        b = Browser(await LineClient.connect(path))
        await b.ok("open", url=app.url("/login"))
        await Browser(b.client, "second").ok("open", url=app.url("/popup"))
        browser = await d.chrome.wait_browser()
        assert browser.pid is not None and len(d.browse.sessions) == 2
        nursery.cancel_scope.cancel()
    assert d.browse.sessions == {}
    assert gone([browser.pid])
