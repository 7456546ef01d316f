"""A browse session as a person sees it and takes it over (browse/watch.py, browse/control.py), with real
Chromium against the local login site: the screencast runs only while someone watches; a person who took
the browser over signs in with their own keys while the agent's action waits and then fails with
user_has_control; after the hand back the agent's snapshot shows the signed-in page."""

from __future__ import annotations

import base64
import json
import os
import sys
from typing import Any

import pytest
import trio

from webfetch.config import BrowseConfig
from webfetch.errors import UserHasControl

from .support.daemon import make_config
from .support.login_app import LoginApp
from .test_browse import Browser, ref

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
        assert any(p["stage"] == "person" and "the user has the browser" in p["message"] for p in progress), progress

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
            # the person hands back once they see the members' page, loaded
            await tab.wait_for(lambda: tab.url.endswith("/members") and not tab.loading)
        # someone else's input is refused, a bad event too
        with pytest.raises(Exception, match="take the browser over first"):
            await browse.user_input("s1", "bob's view", {"type": "keydown", "key": "x"})
        with pytest.raises(Exception, match="fractions"):
            await browse.user_input("s1", "ann's view", {"type": "move", "x": 7, "y": 0.5})
        assert browse.hand_back("s1", "ann's view")

    snap = await b.ok("snapshot", mode="full")
    assert "Signed in as ann." in snap["snapshot"], snap["snapshot"]
    steps = [(s.by, s.action, s.error) for s in session.watch.timeline.steps]
    assert steps[-4:] == [("ann's view", "take over", None), ("agent", "snapshot", "user_has_control"),
                          ("ann's view", "hand back", None), ("agent", "snapshot", None)], steps


def recording_lines(path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def wait_for_file_end(path) -> list[dict[str, Any]]:
    """The recording once its writer wrote the end line (it writes in a thread after the session closed)."""
    with trio.fail_after(20):
        while True:
            if path.exists():
                lines = recording_lines(path)
                if lines and lines[-1]["type"] == "end":
                    return lines
            await trio.sleep(0.05)


async def test_a_recorded_session_is_one_private_file_listed_by_the_cli(start_daemon, site, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    site.html("/spin", ANIMATED)
    h = await start_daemon(make_config(browse=BrowseConfig(record="on_error")))
    b = Browser(await h.client())
    await b.ok("open", url=site.url("/spin?token=s3cret"), record=True)
    await trio.sleep(1.2)  # the page paints: frames, at most two a second
    await b.ok("snapshot")
    r = await b("click", ref="e999")
    assert r["type"] == "error"
    await b.ok("close")
    directory = tmp_path / "webfetch" / "recordings"
    files = list(directory.iterdir())
    assert len(files) == 1 and files[0].name.startswith("s1-") and files[0].suffix == ".jsonl"
    assert oct(directory.stat().st_mode & 0o777) == "0o700" and oct(files[0].stat().st_mode & 0o777) == "0o600"
    lines = await wait_for_file_end(files[0])
    kinds = [line["type"] for line in lines]
    assert kinds[0] == "start" and kinds[-1] == "end" and lines[-1]["truncated"] is False
    assert [(line["action"], line["ok"]) for line in lines if line["type"] == "action"] == [
        ("open", True), ("snapshot", True), ("click", False)]
    frames = [line for line in lines if line["type"] == "frame"]
    assert frames and base64.b64decode(frames[0]["data"])[:3] == b"\xff\xd8\xff"
    # at most two a second (a frame skipped is written when its half second ends, with the time it was made)
    assert len(frames) <= 2 * (frames[-1]["at"] - frames[0]["at"]) + 2, [f["at"] for f in frames]
    requests = [line for line in lines if line["type"] == "request"]
    assert any("/spin?token=<redacted>" in r["url"] for r in requests), requests
    assert "s3cret" not in files[0].read_text()

    # the CLI lists it, no daemon asked
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path)}
    with trio.fail_after(60):
        out = await trio.run_process([sys.executable, "-m", "webfetch", "browse", "recordings"], env=env,
                                     capture_stdout=True, capture_stderr=True, check=False)
    assert out.returncode == 0 and out.stdout.decode().startswith(files[0].name), out
    assert "1 recording," in out.stderr.decode()

    # on_error (the config) keeps none of a session whose actions all went well
    b2 = Browser(await h.client(), session="fine")
    await b2.ok("open", url=site.url("/spin"))
    await b2.ok("close")
    with trio.fail_after(20):
        while len(list(directory.iterdir())) != 1:
            await trio.sleep(0.05)


# red until clicked; then green at once and blue a tenth of a second later, and still from then on
TWO_STEPS = """<!doctype html><html><head><title>Two steps</title></head><body style="background:#c00">
<button id="go" style="font-size:40px">Go</button>
<script>document.getElementById('go').onclick = () => { document.body.style.background = '#0c0';
  setTimeout(() => { document.body.style.background = '#00c'; document.title = 'blue'; }, 100); };</script>
</body></html>"""


async def test_a_recordings_last_frame_is_the_pages_final_state(start_daemon, site, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    site.html("/steps", TWO_STEPS)
    h = await start_daemon(make_config(browse=BrowseConfig(record="always")))
    b = Browser(await h.client())
    page = await b.ok("open", url=site.url("/steps"))
    screen = h.daemon.browse.sessions["s1"].watch.screen
    await trio.sleep(1.0)  # the page is still: the frame after the click is more than half a second after any
    before = screen.frame.seq if screen.frame else 0
    await b.ok("click", ref=ref(page["snapshot"], '- button "Go"'))
    with trio.fail_after(30):  # the green frame and the blue one came, and then no more: the page is still
        while screen.frame is None or screen.frame.seq < before + 2:
            await trio.sleep(0.05)
        seq = -1
        while seq != screen.frame.seq:
            seq = screen.frame.seq
            await trio.sleep(0.6)
    final = screen.frame.data
    await b.ok("close")
    files = list((tmp_path / "webfetch" / "recordings").iterdir())
    lines = await wait_for_file_end(files[0])
    frames = [line for line in lines if line["type"] == "frame"]
    assert frames[-1]["data"] == final  # the blue page, not the green one a tenth of a second before


async def test_a_recording_stops_at_its_bound_and_says_so_and_the_oldest_go(start_daemon, site, tmp_path,
                                                                             monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    site.html("/spin", ANIMATED)
    h = await start_daemon(make_config(browse=BrowseConfig(record="always", record_max_bytes=100_000,
                                                           recordings_max_bytes=250_000)))
    directory = tmp_path / "webfetch" / "recordings"
    for n in range(4):
        b = Browser(await h.client(), session=f"r{n}")
        await b.ok("open", url=site.url("/spin"))
        notes: list[str] = []
        with trio.fail_after(30):
            while not any("reached its size bound" in note for note in notes):
                await trio.sleep(0.3)
                notes += (await b.ok("snapshot")).get("notes") or []
        await b.ok("close")
        mine = [f for f in directory.iterdir() if f.name.startswith(f"r{n}-")]
        assert len(mine) == 1
        lines = await wait_for_file_end(mine[0])
        assert any(line["type"] == "truncated" for line in lines) and lines[-1]["truncated"] is True
        assert mine[0].stat().st_size <= 100_000
        assert sum(f.stat().st_size for f in directory.iterdir()) <= 250_000
    names = sorted(f.name[:2] for f in directory.iterdir())
    assert names == ["r2", "r3"], names  # the oldest went first
