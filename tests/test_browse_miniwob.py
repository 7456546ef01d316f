"""MiniWoB++ task pages (PyPI `miniwob`, MIT: the pages only, served from 127.0.0.1) driven through the
browse op as an agent would: start the episode, read the task from the snapshot, act by ref. The task's
own script scores the episode; the score shown on the page must be positive."""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import threading

import miniwob
import pytest

from .support.site import QuietHTTPServer
from .test_browse import Browser, ref


@pytest.fixture(scope="module")
def miniwob_site():
    root = os.path.join(os.path.dirname(miniwob.__file__), "html")

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = QuietHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=root))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield lambda task: f"http://127.0.0.1:{server.server_address[1]}/miniwob/{task}.html"
    server.shutdown()
    server.server_close()


def page_text(snapshot: str) -> str:
    """The page's text lines of a full snapshot, joined: the task's instructions are split over spans."""
    texts = [json.loads(m.group(1)) for m in re.finditer(r'^\s*- (?:text|label) ("(?:[^"\\]|\\.)*")$', snapshot, re.M)]
    return " ".join(texts)


async def start(b: Browser, url: str) -> str:
    page = await b.ok("open", url=url)
    # the episode's cover is over everything until START is clicked
    first = re.search(r"ref=(e\d+)", page["snapshot"]).group(1)
    if '- clickable "START"' not in page["snapshot"].splitlines()[1]:
        assert (await b(action="click", ref=first))["code"] == "covered"
    await b.ok("click", ref=ref(page["snapshot"], '- clickable "START"'))
    return (await b.ok("snapshot", mode="full"))["snapshot"]


async def reward(b: Browser) -> float:
    text = page_text((await b.ok("snapshot", mode="full"))["snapshot"])
    return float(re.search(r"Last reward: (-?[\d.]+)", text).group(1))


async def test_miniwob_login_user(daemon, miniwob_site):
    b = Browser(await daemon.client(), "miniwob-login")
    snap = await start(b, miniwob_site("login-user"))
    task = page_text(snap)
    m = re.search(r'username "([^"]+)" and the password "([^"]+)"', task)
    assert m, task
    # the fields are named by the label text beside them (the labels name no control)
    await b.ok("fill", ref=ref(snap, '- textbox "Username"'), text=m.group(1))
    await b.ok("fill", ref=ref(snap, '- textbox "Password"'), text=m.group(2))
    await b.ok("click", ref=ref(snap, '- button "Login"'))
    assert await reward(b) > 0


async def test_miniwob_click_button(daemon, miniwob_site):
    b = Browser(await daemon.client(), "miniwob-button")
    snap = await start(b, miniwob_site("click-button"))
    wanted = re.search(r'Click on the "([^"]+)" button', page_text(snap)).group(1)
    await b.ok("click", ref=ref(snap, f'- button "{wanted}"'))
    assert await reward(b) > 0


async def test_miniwob_click_checkboxes(daemon, miniwob_site):
    b = Browser(await daemon.client(), "miniwob-checkboxes")
    snap = await start(b, miniwob_site("click-checkboxes"))
    task = page_text(snap)
    m = re.search(r"Select (.*?) and click Submit", task)
    assert m, task
    words = [w.strip() for w in m.group(1).split(",") if w.strip()] if m.group(1) != "nothing" else []
    for line in snap.splitlines():
        box = re.match(r'\s*- checkbox "([^"]*)"', line)
        if box and box.group(1) in words:
            await b.ok("check", ref=re.search(r"ref=(e\d+)", line).group(1), checked=True)
    await b.ok("click", ref=ref(snap, '- button "Submit"'))
    assert await reward(b) > 0
