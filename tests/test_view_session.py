"""A browse session's page in the view, and a recording's replay (webfetch/view/session_page.py), driven in a
second real Chromium through webfetch's own CDP client, as a person uses them: the frames arrive over the
websocket; a take-over types into the local login site's form with the person's own clicks and keys, and the
site's server records the login; the agent's action meanwhile is told the user has the browser and fails with
user_has_control; after the hand back its snapshot shows the signed-in page; a closed session ends the page
cleanly; a recorded session replays with its actions beside its frames."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from webfetch.chrome.cdp import CDPConnection, open_cdp
from webfetch.config import BrowseConfig

from .support.chromium import Chromium
from .support.daemon import make_config
from .support.login_app import LoginApp
from .test_browse import Browser
from .test_browse_watch import ANIMATED, element_box, wait_for_file_end


@pytest.fixture
def app():
    a = LoginApp().start()
    yield a
    a.stop()


@pytest.fixture
def chromium(tmp_path):
    browser = Chromium(tmp_path / "viewer")
    yield browser
    browser.stop()


class Viewer:
    """A tab of the person's own Chromium, on the view."""

    def __init__(self, conn: CDPConnection, session_id: str) -> None:
        self.conn = conn
        self.session_id = session_id

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.conn.call(method, params, self.session_id)

    async def open(self, url: str) -> None:
        with self.conn.subscribe(self.session_id) as sub:
            await self.call("Page.navigate", {"url": url})
            with trio.fail_after(30):
                while (await sub.receive()).get("method") != "Page.loadEventFired":
                    pass

    async def js(self, expression: str) -> Any:
        r = await self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                 "awaitPromise": True})
        assert "exceptionDetails" not in r, r
        return r["result"].get("value")

    async def until(self, expression: str) -> Any:
        """The expression's value once it is truthy (a bounded wait for the page to show something)."""
        with trio.fail_after(30):
            while not (value := await self.js(expression)):
                await trio.sleep(0.05)
        return value

    async def click(self, x: float, y: float) -> None:
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            await self.call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left",
                                                         "clickCount": 1})

    async def keys(self, text: str) -> None:
        for ch in text:
            key = {"\r": "Enter"}.get(ch, ch)
            await self.call("Input.dispatchKeyEvent", {"type": "keyDown", "key": key, "text": ch,
                                                       **({"windowsVirtualKeyCode": 13, "code": "Enter"} if ch == "\r"
                                                          else {})})
            await self.call("Input.dispatchKeyEvent", {"type": "keyUp", "key": key})

    async def frame_point(self, fx: float, fy: float) -> tuple[float, float]:
        """Where, in this page, the point at fractions (fx, fy) of the live frame is."""
        x, y, w, h = await self.js("(() => { const r = document.getElementById('frame').getBoundingClientRect(); "
                                   "return [r.left, r.top, r.width, r.height]; })()")
        return x + fx * w, y + fy * h


@asynccontextmanager
async def viewer(chromium: Chromium, view_url: str) -> AsyncIterator[Viewer]:
    """The person's browser on the view: the URL with the token opened once (the door sets its cookie)."""
    async with open_cdp(chromium.ws_url) as conn:
        target = (await conn.call("Target.createTarget", {"url": "about:blank"}))["targetId"]
        session = (await conn.call("Target.attachToTarget", {"targetId": target, "flatten": True}))["sessionId"]
        v = Viewer(conn, session)
        await v.call("Page.enable")
        await v.call("Emulation.setFocusEmulationEnabled", {"enabled": True})
        await v.call("Emulation.setDeviceMetricsOverride", {"width": 1400, "height": 1000, "deviceScaleFactor": 1,
                                                            "mobile": False})
        await v.open(view_url)
        try:
            yield v
        finally:  # the person closes the page
            await conn.call("Target.closeTarget", {"targetId": target})


async def view_url(h) -> str:
    r = await h.request({"id": "v", "op": "view"})
    assert r["type"] == "result", r
    return r["url"]


async def test_a_person_watches_takes_over_signs_in_and_hands_back(start_daemon, app, chromium):
    h = await start_daemon(make_config(browse=BrowseConfig(user_wait_s=2)))
    b = Browser(await h.client())
    await b.ok("open", url=app.url("/login"))
    url = await view_url(h)
    base = url.split("/?")[0]
    tab = h.daemon.browse.sessions["s1"].tabs["t1"]
    async with viewer(chromium, url) as v:
        await v.open(f"{base}/session/s1")
        # frames arrive over the websocket, one after another
        first = int(await v.until("Number(document.getElementById('frame').dataset.seq || 0)"))
        assert await v.js("document.getElementById('frame').src.startsWith('data:image/jpeg;base64,/9j/')")
        assert await v.until("document.querySelector('#timeline tbody').textContent.includes('open')")

        await v.js("document.getElementById('take-over').click()")
        await v.until("document.getElementById('control').textContent.startsWith('you have the browser')")
        progress: list[dict[str, Any]] = []
        c = await h.client()
        with trio.fail_after(30):
            r = await c.request({"id": 1, "op": "browse", "session": "s1", "action": "snapshot"}, progress)
        assert r["type"] == "error" and r["code"] == "user_has_control", r
        assert any(p["stage"] == "person" and "the user has the browser" in p["message"] for p in progress), progress

        # the person clicks the fields on the frame and types, in their own browser
        await v.click(*await v.frame_point(*await element_box(tab, "#user")))
        await v.keys("ann")
        await v.click(*await v.frame_point(*await element_box(tab, "#password")))
        await v.keys("hunter2\r")
        with trio.fail_after(20):
            while "ann" not in app.sessions.values():
                await trio.sleep(0.05)
            # the person hands back once they see the members' page, loaded
            await tab.wait_for(lambda: tab.url.endswith("/members") and not tab.loading)
        await v.js("document.getElementById('hand-back').click()")
        await v.until("document.getElementById('control').textContent === 'the agent has the browser'")

        snap = await b.ok("snapshot", mode="full")
        assert "Signed in as ann." in snap["snapshot"], snap["snapshot"]
        await v.until("document.querySelector('#timeline tbody').textContent.includes('hand back')")
        assert int(await v.js("Number(document.getElementById('frame').dataset.seq)")) > first

        # the session closes while watched: the page says so, and its websocket closed cleanly
        await b.ok("close")
        await v.until("document.getElementById('live').textContent === 'closed'")
        assert await v.js("document.body.classList.contains('closed')")
        assert await v.js("document.getElementById('take-over').disabled")
    assert h.daemon.browse.sessions == {}


async def test_a_second_person_is_told_who_holds_the_browser(start_daemon, app, chromium):
    h = await start_daemon()
    b = Browser(await h.client())
    await b.ok("open", url=app.url("/login"))
    url = await view_url(h)
    base = url.split("/?")[0]
    async with viewer(chromium, url) as first, viewer(chromium, url) as second:
        for v in (first, second):
            await v.open(f"{base}/session/s1")
            await v.until("document.getElementById('live').className === 'on'")
        await first.js("document.getElementById('take-over').click()")
        await first.until("document.getElementById('control').textContent.startsWith('you have the browser')")
        holder = await second.until("document.getElementById('control').textContent.includes('has the browser') "
                                    "&& document.getElementById('control').textContent")
        me = (await first.js("document.getElementById('live').textContent")).removeprefix("live, you are ")
        assert holder == f"{me} has the browser"
        await second.js("document.getElementById('take-over').disabled = false; "
                        "document.getElementById('take-over').click()")
        message = await second.until("document.getElementById('message').textContent")
        assert me in message and "hand it back" in message
    # the holder's page closed: the browser is the agent's again
    with trio.fail_after(10):
        while h.daemon.browse.sessions["s1"].control.holder is not None:
            await trio.sleep(0.05)
    await b.ok("snapshot")


async def test_a_recording_replays_with_its_actions(start_daemon, site, chromium, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    site.html("/spin", ANIMATED)
    h = await start_daemon()
    b = Browser(await h.client())
    await b.ok("open", url=site.url("/spin"), record=True)
    await trio.sleep(1.5)
    await b.ok("snapshot")
    await trio.sleep(1)
    await b("click", ref="e404")
    await b.ok("close")
    [path] = list((tmp_path / "webfetch" / "recordings").iterdir())
    lines = await wait_for_file_end(path)
    frames = [line for line in lines if line["type"] == "frame"]
    assert len(frames) >= 3

    url = await view_url(h)
    base = url.split("/?")[0]
    async with viewer(chromium, url) as v:
        await v.open(f"{base}/recordings")
        names = await v.until("[...document.querySelectorAll('#recordings a')].map((a) => a.textContent)")
        assert names == [path.name]
        await v.open(f"{base}/recordings/{path.name}")
        await v.until("document.body.dataset.loaded")
        rows = await v.js("[...document.querySelectorAll('#timeline tbody tr')].map((r) => r.textContent)")
        assert [r.split(" ")[0] for r in rows] and len(rows) == 3
        assert "open" in rows[0] and "snapshot" in rows[1] and "click" in rows[2] and "unknown_ref" in rows[2]
        assert await v.js("document.getElementById('scrubber').max") == str(len(frames) - 1)
        # the scrubber at the last frame marks the last action before it; a click on an action shows its frame
        await v.js(f"document.getElementById('scrubber').value = {len(frames) - 1}; "
                   "document.getElementById('scrubber').dispatchEvent(new Event('input'))")
        marked = await v.js("[...document.querySelectorAll('#timeline tbody tr')].findIndex((r) => "
                            "r.classList.contains('now'))")
        last_before = max(i for i, s in enumerate(line for line in lines if line["type"] == "action")
                          if s["at"] <= frames[-1]["at"])
        assert marked == last_before
        await v.js("document.querySelectorAll('#timeline tbody tr')[1].click()")
        shown = int(await v.js("Number(document.getElementById('scrubber').value)"))
        snapshot_at = [line for line in lines if line["type"] == "action"][1]["at"]
        assert frames[shown]["at"] >= snapshot_at and (shown == 0 or frames[shown - 1]["at"] < snapshot_at)
        assert await v.js("document.getElementById('frame').src") == "data:image/jpeg;base64," + frames[shown]["data"]
        json.dumps(rows)  # the rows are plain text


async def click_element(v: Viewer, selector: str) -> None:
    """A person's click (the mouse, through CDP) on the middle of the first element `selector` finds."""
    x, y = await v.until(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null; "
                         "const r = e.getBoundingClientRect(); "
                         "return [r.left + r.width / 2, r.top + r.height / 2]; })()")
    await v.click(x, y)


async def test_the_dashboard_links_a_session_and_a_recording_to_their_pages(start_daemon, site, chromium, tmp_path,
                                                                            monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    site.html("/spin", ANIMATED)
    h = await start_daemon()
    old = Browser(await h.client(), session="old")
    await old.ok("open", url=site.url("/spin"), record=True)
    await trio.sleep(1)
    await old.ok("close")
    [path] = list((tmp_path / "webfetch" / "recordings").iterdir())
    await wait_for_file_end(path)
    b = Browser(await h.client())
    await b.ok("open", url=site.url("/spin"))
    url = await view_url(h)
    base = url.split("/?")[0]
    async with viewer(chromium, url) as v:
        await v.until("document.getElementById('live').textContent === 'live'")
        with v.conn.subscribe(v.session_id) as sub:
            await click_element(v, "#sessions tbody a")
            with trio.fail_after(30):
                while (await sub.receive()).get("method") != "Page.loadEventFired":
                    pass
        assert await v.js("location.pathname") == "/session/s1"
        await v.until("document.getElementById('live').className === 'on'")
        await v.open(f"{base}/")
        assert await v.until("document.querySelector('#recordings tbody a')?.textContent") == path.name
        with v.conn.subscribe(v.session_id) as sub:
            await click_element(v, "#recordings tbody a")
            with trio.fail_after(30):
                while (await sub.receive()).get("method") != "Page.loadEventFired":
                    pass
        assert await v.js("location.pathname") == f"/recordings/{path.name}"
        await v.until("document.body.dataset.loaded")
        # the name as `webfetch browse recordings` shows it, without .jsonl, replays the same
        await v.open(f"{base}/recordings/{path.stem}")
        await v.until("document.body.dataset.loaded")
        state = await v.js("document.getElementById('state').textContent")
        assert state.split(" frames")[0].isdigit() and int(state.split(" frames")[0]) > 0, state


async def test_profile_login_without_a_display_is_done_in_the_view(app, chromium, short_tmp, tmp_path):
    """`webfetch profile login` on a machine with no display: it prints the view's page for the login, the
    person signs in there (their clicks and keys on the frame) and clicks Done, and the profile holds the
    site's session cookie, which the site's server gave for that login."""
    from tests.support.daemon import ServedDaemon

    data = tmp_path / "data"  # the profiles' home, the daemon's and the command's alike
    daemon = ServedDaemon(short_tmp, "[fetch]\nallow_private = true\n", env={**os.environ, "XDG_DATA_HOME": str(data)})
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env |= {"XDG_DATA_HOME": str(data), "WEBFETCH_SOCKET": str(daemon.sock)}
    try:
        await trio.to_thread.run_sync(daemon.wait_ready, 60)
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-m", "webfetch", "profile", "login", "harbour", app.url("/login")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        try:
            out = b""
            with trio.fail_after(60):
                while b"\n" not in out:
                    out += await proc.stdout.receive_some(4096)
            page_url = out.decode().splitlines()[0]
            assert "/session/login-harbour?token=" in page_url, out
            async with viewer(chromium, page_url) as v:
                # where the form's fields are on a page of the same size (the frame shows the daemon's tab)
                layout = await open_page(chromium, app.url("/login"))
                await v.until("Number(document.getElementById('frame').dataset.seq || 0)")
                assert not await v.js("document.getElementById('done').hidden")
                await v.js("document.getElementById('take-over').click()")
                await v.until("document.getElementById('control').textContent.startsWith('you have the browser')")
                await v.click(*await v.frame_point(*layout["#user"]))
                await v.keys("ann")
                await v.click(*await v.frame_point(*layout["#password"]))
                await v.keys("hunter2\r")
                with trio.fail_after(20):
                    while "ann" not in app.sessions.values():
                        await trio.sleep(0.05)
                await v.until("document.getElementById('url').textContent.includes('/members')")
                await v.js("document.getElementById('done').click()")
                await v.until("document.getElementById('state').textContent.includes('saved in profile harbour')")
                with trio.fail_after(30):
                    await proc.wait()
            rest = await proc.stdout.receive_some(65536)
            stderr = await proc.stderr.receive_some(65536)
        finally:
            if proc.returncode is None:
                proc.kill()
        assert proc.returncode == 0, stderr
        assert "saved profile harbour: 1 cookies, for 127.0.0.1" in (out + rest).decode()
        assert b"click 'Take over', sign in on the page" in stderr
        profile = json.loads((data / "webfetch" / "profiles" / "harbour.json").read_text())
        [cookie] = profile["state"]["cookies"]
        assert cookie["name"] == "sid" and app.sessions[cookie["value"]] == "ann"
    finally:
        daemon.stop()


async def open_page(chromium: Chromium, url: str) -> dict[str, tuple[float, float]]:
    """The middles of the login form's fields, as fractions of a 1280x800 viewport (the daemon's tabs')."""
    async with open_cdp(chromium.ws_url) as conn:
        target = (await conn.call("Target.createTarget", {"url": "about:blank"}))["targetId"]
        session = (await conn.call("Target.attachToTarget", {"targetId": target, "flatten": True}))["sessionId"]
        v = Viewer(conn, session)
        await v.call("Page.enable")
        await v.call("Emulation.setDeviceMetricsOverride", {"width": 1280, "height": 800, "deviceScaleFactor": 1,
                                                            "mobile": False})
        await v.open(url)
        boxes = {}
        for selector in ("#user", "#password"):
            boxes[selector] = tuple(await v.js(
                f"(() => {{ const b = document.querySelector({selector!r}).getBoundingClientRect(); "
                f"return [(b.left + b.width / 2) / innerWidth, (b.top + b.height / 2) / innerHeight]; }})()"))
        await conn.call("Target.closeTarget", {"targetId": target})
        return boxes
