"""Layer 1: the Chrome actor's supervisor on the mock clock, with browsers that a script starts, fails
and kills: backoff while a browser cannot start, at once after a healthy run, a crash loop that makes
requests fail fast, and recovery from it; and the tabs it hands out: a request cancelled while Chrome
makes its context leaves no context behind, and recycled tabs beyond the pool go after a quiet while."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio

from webfetch.chrome.browser import CRASH_LOOP_COUNT, HEALTHY_S, Browser, Chrome, RestartPolicy
from webfetch.chrome.launch import BrowserLaunchError
from webfetch.config import BrowserConfig
from webfetch.errors import BrowserUnavailable
from webfetch.urls import AddressPolicy


class FakeConnection:
    """What the supervisor watches of a CDP connection: whether it closed."""

    def __init__(self) -> None:
        self.closed = trio.Event()

    @property
    def is_closed(self) -> bool:
        return self.closed.is_set()


class ScriptedBrowsers:
    """Each start does what the script's next step says: "fail" to start, or run for N seconds."""

    def __init__(self, steps: list[str | float]) -> None:
        self.steps = steps
        self.starts: list[float] = []
        self.current: FakeConnection | None = None

    @asynccontextmanager
    async def open(self, generation: int) -> AsyncIterator[Browser]:
        self.starts.append(trio.current_time())
        step = self.steps.pop(0) if self.steps else float("inf")
        if step == "fail":
            raise BrowserLaunchError("chromium exited with code 127: libnss3.so missing")
        conn = FakeConnection()
        self.current = conn
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_close_after, conn, step)
            yield Browser(conn, "Scripted/1.0", generation)  # type: ignore[arg-type]
            nursery.cancel_scope.cancel()


async def _close_after(conn: FakeConnection, seconds: float) -> None:
    await trio.sleep(seconds)
    conn.closed.set()


def chrome_with(browsers: ScriptedBrowsers) -> Chrome:
    # an endpoint, so no executable is looked for; no pool, so no tabs are made
    config = BrowserConfig(endpoint="ws://127.0.0.1:9/devtools/browser/x", context_pool=0)
    return Chrome(config, AddressPolicy(), opener=browsers.open)


async def test_a_browser_that_cannot_start_is_retried_with_backoff_then_called_a_crash_loop(autojump_clock, nursery):
    browsers = ScriptedBrowsers(["fail"] * 5)
    chrome = chrome_with(browsers)
    await nursery.start(chrome.run)
    assert chrome.state == "restarting"
    await trio.sleep(10)
    gaps = [round(b - a, 3) for a, b in zip(browsers.starts, browsers.starts[1:], strict=False)]
    assert gaps[:4] == [0.5, 1.0, 2.0, 4.0], gaps
    assert chrome.state == "crash_loop"
    with pytest.raises(BrowserUnavailable, match="libnss3.so missing"):
        await chrome.wait_browser()  # at once: a request does not wait on a browser that keeps failing
    assert any("keeps failing" in p for p in chrome.problems)


async def test_a_browser_that_served_and_died_is_restarted_at_once(autojump_clock, nursery):
    browsers = ScriptedBrowsers([30.0, 30.0])
    chrome = chrome_with(browsers)
    await nursery.start(chrome.run)
    first = await chrome.wait_browser()
    await trio.sleep(31)
    second = await chrome.wait_browser()
    assert second is not first and second.generation == first.generation + 1
    assert browsers.starts[1] - browsers.starts[0] == pytest.approx(30.0)  # no backoff
    assert chrome.state == "ready" and chrome.restarts == 1 and chrome.problems == []


async def test_a_crash_loop_recovers_when_the_browser_starts_again(autojump_clock, nursery):
    browsers = ScriptedBrowsers(["fail"] * CRASH_LOOP_COUNT)  # then a browser that stays up
    chrome = chrome_with(browsers)
    await nursery.start(chrome.run)
    await trio.sleep(3)
    assert chrome.state == "crash_loop"
    await trio.sleep(5)
    browser = await chrome.wait_browser()
    assert browser.version == "Scripted/1.0" and chrome.state == "ready" and chrome.problems == []


async def test_requests_wait_for_a_restart_in_progress(autojump_clock, nursery):
    browsers = ScriptedBrowsers([1.0, "fail"])  # down at once after 1 s, one failed start, then up
    chrome = chrome_with(browsers)
    await nursery.start(chrome.run)
    first = await chrome.wait_browser()
    await trio.sleep(1.1)
    with trio.fail_after(5):
        browser = await chrome.wait_browser()
    assert browser is not first and chrome.state == "ready"


def test_the_restart_policy_backs_off_doubles_caps_and_resets():
    policy = RestartPolicy()
    delays = [policy.after_down(launched_at=t, ready_at=None, now=t + 0.1)[1] for t in range(0, 100, 1)][:8]
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    # a healthy run: back at once, and it does not count towards a crash loop
    assert policy.after_down(launched_at=1000.0, ready_at=1000.0, now=1000.0 + HEALTHY_S) == ("restarting", 0.0)
    # a browser that lasted longer than the crash window starts the backoff afresh
    fresh = RestartPolicy()
    fresh.after_down(0.0, None, 0.1)
    fresh.after_down(1.0, None, 1.1)
    assert fresh.after_down(2.0, None, 70.0)[1] == 0.5


class SlowContextConnection(FakeConnection):
    """A browser that takes a second to make a browser context, and keeps account of the contexts."""

    def __init__(self) -> None:
        super().__init__()
        self.contexts: set[str] = set()
        self.made = 0

    async def call(self, method: str, params: dict | None = None, session_id: str | None = None) -> dict:
        await trio.lowlevel.checkpoint()  # as a real call does
        if method == "Target.createBrowserContext":
            await trio.sleep(1.0)
            self.made += 1
            self.contexts.add(f"ctx{self.made}")
            return {"browserContextId": f"ctx{self.made}"}
        if method == "Target.disposeBrowserContext":
            self.contexts.discard(params["browserContextId"])
        return {"targetId": "t", "sessionId": "s", "windowId": 1}


def chrome_over(conn: SlowContextConnection, **config: int) -> Chrome:
    """The Chrome actor on one scripted browser that stays up until `conn` closes."""
    @asynccontextmanager
    async def one_browser(generation: int) -> AsyncIterator[Browser]:
        yield Browser(conn, "Scripted/1.0", generation)  # type: ignore[arg-type]
        await conn.closed.wait()

    return Chrome(BrowserConfig(endpoint="ws://127.0.0.1:9/devtools/browser/x", **config), AddressPolicy(),
                  opener=one_browser)


async def test_a_fetch_cancelled_while_its_context_is_being_made_leaves_no_context(autojump_clock, nursery):
    conn = SlowContextConnection()

    chrome = chrome_over(conn, context_pool=0)
    await nursery.start(chrome.run)
    with trio.move_on_after(0.1) as cancelled:
        async with chrome.open_tab():
            pass
    assert cancelled.cancelled_caught
    await trio.sleep(5)  # the context Chrome made after the cancel, and its disposal
    assert conn.made == 1 and conn.contexts == set()


async def test_recycled_tabs_beyond_the_pool_are_disposed_of_after_a_quiet_while(autojump_clock, nursery):
    conn = SlowContextConnection()

    chrome = chrome_over(conn, context_pool=1, max_renders=4)
    await nursery.start(chrome.run)
    await trio.sleep(2)  # the pool's one tab is made

    async def fetch_without_a_page() -> None:
        async with chrome.open_tab() as tab:
            await trio.sleep(1)
            tab.allow_reuse()  # its request ended at the server's answer: the tab is recycled

    async with trio.open_nursery() as fetches:
        for _ in range(4):
            fetches.start_soon(fetch_without_a_page)
    await trio.sleep(5)
    assert len(chrome.idle_tabs) == 4 and len(conn.contexts) == 4  # kept while fetches come
    await trio.sleep(30)
    assert len(chrome.idle_tabs) == 1 and len(conn.contexts) == 1  # back to context_pool
