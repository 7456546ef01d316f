"""A browse session as a person sees it and takes it over (browse/watch.py, browse/control.py), with real
Chromium against the local login site: the screencast runs only while someone watches; a person who took
the browser over signs in with their own keys while the agent's action waits and then fails with
user_has_control; after the hand back the agent's snapshot shows the signed-in page."""

from __future__ import annotations

import base64
from typing import Any

import pytest
import trio

from webfetch.config import BrowseConfig
from webfetch.errors import UserHasControl

from .support.daemon import make_config
from .support.login_app import LoginApp
from .test_browse import Browser

# a page that changes every frame: Chrome's screencast sends a frame whenever the page paints
ANIMATED = """<!doctype html><html><head><title>Spinner</title></head><body>
<div id="n" style="font-size:80px">0</div>
<script>let n = 0; (function tick() { document.getElementById('n').textContent = ++n; requestAnimationFrame(tick); })();
</script></body></html>"""


@pytest.fixture
def app():
    a = LoginApp().start()
    yield a
    a.stop()


def spy_on_cdp(h, sent: list[str], monkeypatch) -> None:
    """Every CDP method the daemon sends its browser, in order (the real calls are made)."""
    async def setup() -> None:
        conn = (await h.daemon.chrome.wait_browser()).conn
        real = conn.call

        async def call(method: str, params: dict[str, Any] | None = None, session_id: str | None = None) -> Any:
            sent.append(method)
            return await real(method, params, session_id)
        monkeypatch.setattr(conn, "call", call)
    return setup()


async def test_the_screencast_runs_only_while_someone_watches(daemon, site, monkeypatch):
    site.html("/spin", ANIMATED)
    sent: list[str] = []
    await spy_on_cdp(daemon, sent, monkeypatch)
    b = Browser(await daemon.client())
    await b.ok("open", url=site.url("/spin"))
    await b.ok("snapshot")
    await trio.sleep(0.5)  # the page paints all along
    assert "Page.startScreencast" not in sent
    browse = daemon.daemon.browse
    session = browse.sessions["s1"]
    assert session.watch.screen.frame is None

    with trio.fail_after(30):
        async with browse.watching("s1") as watcher:
            frames = []
            while len(frames) < 3:
                update = await watcher.next()
                if "frame" in update:
                    frames.append(update["frame"])
    assert sent.count("Page.startScreencast") == 1
    assert sent.count("Page.stopScreencast") == 1
    assert [f["seq"] for f in frames] == sorted({f["seq"] for f in frames})
    jpeg = base64.b64decode(frames[-1]["data"])
    assert jpeg[:3] == b"\xff\xd8\xff" and frames[-1]["width"] == 1280 and frames[-1]["tab"] == "t1"
    # the timeline has the agent's actions, with their outcome
    steps = [(s.action, s.ok) for s in session.watch.timeline.steps]
    assert steps == [("open", True), ("snapshot", True)]

    # nobody watches: no frame comes any more, and no new screencast starts with the next action
    seen = session.watch.screen.frame.seq
    await b.ok("snapshot")
    await trio.sleep(0.5)
    assert session.watch.screen.frame.seq <= seen + 1  # one sent before the stop reached Chrome, at most
    assert sent.count("Page.startScreencast") == 1


async def element_box(tab, selector: str) -> tuple[float, float]:
    """The middle of `selector`'s element, as fractions of the viewport (what the view's page sends)."""
    r = await tab.call("Runtime.evaluate", {
        "expression": f"(() => {{ const b = document.querySelector({selector!r}).getBoundingClientRect(); "
                      f"return [(b.left + b.width / 2) / innerWidth, (b.top + b.height / 2) / innerHeight]; }})()",
        "returnByValue": True})
    x, y = r["result"]["value"]
    return x, y


async def click_at(browse, who: str, x: float, y: float) -> None:
    for kind in ("move", "down", "up"):
        await browse.user_input("s1", who, {"type": kind, "x": x, "y": y, "button": "left", "clicks": 1})


async def type_keys(browse, who: str, text: str) -> None:
    for ch in text:
        await browse.user_input("s1", who, {"type": "keydown", "key": ch})
        await browse.user_input("s1", who, {"type": "keyup", "key": ch})


async def test_a_person_takes_over_signs_in_and_hands_back(start_daemon, app):
    h = await start_daemon(make_config(browse=BrowseConfig(user_wait_s=1.5)))
    b = Browser(await h.client())
    await b.ok("open", url=app.url("/login"))
    browse = h.daemon.browse
    session = browse.sessions["s1"]
    tab = session.tabs["t1"]

    async with browse.watching("s1") as watcher:
        with trio.fail_after(30):
            while "frame" not in await watcher.next():
                pass
        browse.take_over("s1", "ann's view")
        with pytest.raises(UserHasControl, match="ann's view"):
            browse.take_over("s1", "bob's view")

        # the agent's action waits, told so, then fails past its deadline
        progress: list[dict[str, Any]] = []
        c = await h.client()
        with trio.fail_after(30):
            r = await c.request({"id": 1, "op": "browse", "session": "s1", "action": "snapshot"}, progress)
        assert r["type"] == "error" and r["code"] == "user_has_control", r
        assert "ann's view" in r["message"]
        assert any("the user has the browser" in p["message"] for p in progress), progress

        # the person's own clicks and keys sign in on the site
        await click_at(browse, "ann's view", *await element_box(tab, "#user"))
        await type_keys(browse, "ann's view", "ann")
        await click_at(browse, "ann's view", *await element_box(tab, "#password"))
        await type_keys(browse, "ann's view", "hunter2")
        await browse.user_input("s1", "ann's view", {"type": "keydown", "key": "Enter"})
        await browse.user_input("s1", "ann's view", {"type": "keyup", "key": "Enter"})
        with trio.fail_after(20):
            while "ann" not in app.sessions.values():
                await trio.sleep(0.05)
        # someone else's input is refused, a bad event too
        with pytest.raises(Exception, match="take the browser over first"):
            await browse.user_input("s1", "bob's view", {"type": "keydown", "key": "x"})
        with pytest.raises(Exception, match="fractions"):
            await browse.user_input("s1", "ann's view", {"type": "move", "x": 7, "y": 0.5})
        assert browse.hand_back("s1", "ann's view")

    snap = await b.ok("snapshot", mode="full")
    assert "Signed in as ann." in snap["snapshot"], snap["snapshot"]
    steps = [(s.by, s.action, s.error) for s in session.watch.timeline.steps]
    assert steps[-3:] == [("ann's view", "take over", None), ("ann's view", "hand back", None),
                          ("agent", "snapshot", None)], steps
