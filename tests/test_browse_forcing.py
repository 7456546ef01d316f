"""Forcing one's own app's states in browse, with real Chromium on a local app (tests/support/states_app.py):
the network off (`offline`), each checked by what the page shows and by what its server got."""

from __future__ import annotations

import pytest
import trio

from .support.states_app import StatesApp
from .test_browse import Browser, ref


@pytest.fixture
def peer():
    with StatesApp("localhost") as p:  # a second origin: `localhost` is not 127.0.0.1 to a browser
        yield p


@pytest.fixture
def app(peer):
    with StatesApp("127.0.0.1", peer=f"http://localhost:{peer.port}") as a:
        yield a


async def opened(daemon, app: StatesApp) -> tuple[Browser, dict]:
    b = Browser(await daemon.client())
    await b.ok("open", url=app.url("/"))
    await b.ok("wait", text="3 items")
    return b, await b.ok("snapshot", mode="full")


async def test_offline_shows_the_apps_offline_banner_and_its_requests_never_leave(daemon, app):
    b, page = await opened(daemon, app)
    assert "You are offline" not in page["snapshot"]
    off = await b.ok("offline")
    assert off["value"] == "offline"
    assert "You are offline" in off["snapshot"], off  # the page's own `offline` event showed its banner
    before = len(app.hits("/api/items"))
    await b.ok("click", ref=ref(page["snapshot"], '- button "Reload items"'))
    shown = await b.ok("wait", text="no answer")
    assert "You are offline" in (await b.ok("snapshot", mode="full"))["snapshot"], shown
    assert len(app.hits("/api/items")) == before, "no request reached the server while offline"
    on = await b.ok("offline", enabled=False)
    assert on["value"] == "online"
    await b.ok("click", ref=ref(page["snapshot"], '- button "Reload items"'))
    await b.ok("wait", text="3 items")
    with trio.fail_after(5):
        while len(app.hits("/api/items")) == before:
            await trio.sleep(0.05)
