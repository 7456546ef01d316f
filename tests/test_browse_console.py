"""The browse console action and the console-error count on every result, with real Chromium on the local
app (tests/support/browse_app.py); a page back from the back/forward cache, whose errors are not new again; a
click whose fetch leaves a no-store body unread settling at once, and one whose page reads a slow body, or
changes two frames later, waiting for that."""

from __future__ import annotations

import time

import pytest
import trio

from webfetch.frontends.tool_text import browse_text
from webfetch.page_scripts import invoke

from .support.browse_app import App
from .test_browse import Browser, ref

SETTLE_S = 3.0  # browse.settle_s's default: the cap the no-store click used to wait out


@pytest.fixture
def app():
    a = App()
    yield a
    a.stop()


async def test_console_messages_of_each_level_and_uncaught_errors_read_back(daemon, app: App):
    b = Browser(await daemon.client())
    page = await b.ok("open", url=app.url("/console"))
    # console.error and the browser's message about the 404: counted on the result, unasked
    assert page["console_errors"] == 2, page
    snap = page["snapshot"]

    got = await b.ok("console")
    assert got["page"]["tab"] == "t1" and "console_errors" not in got
    script = app.url("/console")
    entries = [(e["kind"], e["level"], e["text"]) for e in got["console"]]
    assert entries[:5] == [("console", "log", 'loaded {user: "ann", items: 3}'), ("console", "info", "info line"),
                           ("console", "warning", "slow render"), ("console", "error", "bad thing 42"),
                           ("console", "debug", "debug line")], entries
    assert all(e["url"] == script and e["line"] == line for e, line in zip(got["console"], range(6, 11), strict=False))
    [network] = got["console"][5:]
    assert network["kind"] == "network" and network["level"] == "error"
    assert "404" in network["text"] and network["url"] == app.url("/api/missing")

    # read once: the next call has only what came after
    again = await b.ok("console")
    assert again["console"] == []

    thrown = await b.ok("click", ref=ref(snap, '- button "Throw"'))
    assert thrown["console_errors"] == 1
    rejected = await b.ok("click", ref=ref(snap, '- button "Reject"'))
    assert rejected["console_errors"] == 1
    logged = await b.ok("click", ref=ref(snap, '- button "Log"'))
    assert "console_errors" not in logged, "a log is not an error"

    fetched = await b.ok("click", ref=ref(snap, '- button "Fetch badly"'))
    assert fetched["console_errors"] == 1

    got = await b.ok("console")
    exc, rej, log, bad = got["console"]
    assert exc["kind"] == "exception" and exc["level"] == "error"
    assert exc["text"] == "Uncaught TypeError: Cannot read properties of null (reading 'id')", exc
    assert exc["url"] == script and exc["line"] == 12
    assert exc["stack"].splitlines()[0] == f"    at save ({script}:12:48)", exc["stack"]
    assert rej["kind"] == "rejection" and rej["text"] == "Uncaught (in promise) Error: quota exceeded", rej
    assert rej["stack"].startswith("    at onclick (")
    assert (log["level"], log["text"]) == ("log", "clicked Log 2 times")
    # the page's fetch passes through webfetch's counter (pending.js): its frames are not the page's
    # (and the rejection nothing handled is still an uncaught one: its promise is not handled by the counter)
    assert bad["kind"] == "rejection" and bad["text"] == ("Uncaught (in promise) TypeError: Failed to execute "
                                                          "'fetch' on 'Window': Failed to parse URL from http://%")
    assert bad["url"] == script and bad["line"] == 4, bad
    assert bad["stack"].startswith(f"    at onclick ({script}:4:") and "\n" not in bad["stack"], bad


async def test_a_click_whose_no_store_body_is_never_read_settles_well_before_the_cap(daemon, app: App):
    b = Browser(await daemon.client())
    page = await b.ok("open", url=app.url("/unread"))
    start = ref(page["snapshot"], '- button "Start"')
    for n in range(2):  # the second click: the first one's unread body is still there
        began = time.monotonic()
        clicked = await b.ok("click", ref=start)
        took = time.monotonic() - began
        assert not clicked.get("notes"), clicked  # not "the page was still busy 3 s after the action"
        assert n or "started" in clicked["snapshot"]
        assert took < SETTLE_S / 2, took


async def test_a_click_waits_for_the_body_its_page_reads_and_for_the_frames_it_asked_for(daemon, app: App):
    # Chrome reports the response at its headers, long before the body the page waits for; and a change two
    # animation frames later comes from no request at all. The page's own world counts both (pending.js).
    b = Browser(await daemon.client())
    page = (await b.ok("open", url=app.url("/later")))["snapshot"]
    loaded = await b.ok("click", ref=ref(page, '- button "Load slowly"'))
    assert loaded["change"] == "dom" and "got the slow body" in loaded["snapshot"], loaded
    assert not loaded.get("notes"), loaded
    drawn = await b.ok("click", ref=ref(page, '- button "Draw"'))
    assert drawn["change"] == "dom" and "drawn after two frames" in drawn["snapshot"], drawn


async def test_the_page_tells_the_settle_what_it_started_the_moment_it_starts_it(daemon, app: App):
    # what pending.js answers, in real Chromium, right after the page starts something: Chrome's own report
    # of it may reach the daemon later (its Network and Page events are not ordered with our calls' answers)
    b = Browser(await daemon.client())
    page = (await b.ok("open", url=app.url("/later")))["snapshot"]
    tab = daemon.daemon.browse.sessions["s1"].tab(None)

    async def quiet_after_click(button: int) -> str:  # the click and the settle's turn in one call
        click = f"document.querySelectorAll('button')[{button}].click()"
        return await tab.worlds.evaluate(tab.target_id, f"({click}, {invoke('__wf.quiet', 3000, 0, 0)})")

    assert await quiet_after_click(0) == "settled"
    assert "got the slow body" in (await b.ok("snapshot", mode="full"))["snapshot"]
    # a navigation Chrome drops (a 204): told once, then no news, though it began after the same time
    assert await quiet_after_click(3) == "leaving"
    assert await tab.worlds.evaluate(tab.target_id, invoke("__wf.quiet", 3000, 0, 0)) == "settled"
    # a form's submission navigates a task later; Chrome holds our next call until the new document is in
    assert await quiet_after_click(2) == "leaving"
    # in the document it led to, times before that document began (negative in its clock) are no news
    await b.ok("wait", text="Arrived")
    arrived = daemon.daemon.browse.sessions["s1"].tab(None)
    assert await arrived.worlds.evaluate(arrived.target_id, invoke("__wf.quiet", 3000, -1000, -1000)) == "settled"
    page = (await b.ok("open", url=app.url("/later")))["snapshot"]
    away = await b.ok("click", ref=ref(page, '- link "Away"'))  # the daemon follows it to its end
    assert away["change"] == "navigation" and "Arrived" in away["snapshot"], away


async def test_a_page_back_from_the_back_forward_cache_reports_no_error_again(daemon, app: App):
    # Chrome sends every message a restored page had logged again, with its first timestamps, before the
    # restore's frameNavigated; and what the page logs as it is shown again (pageshow) comes in between
    b = Browser(await daemon.client())
    a, elsewhere = app.url("/history-a"), app.url("/history-b")
    opened = await b.ok("open", url=a)
    assert opened["console_errors"] == 3, opened
    first = await b.ok("console")
    # in the order Chrome told them: the image's 404 may come before the scripts' errors on a busy machine
    assert sorted((e["kind"], e["text"]) for e in first["console"]) == [
        ("console", "first error"), ("exception", "Uncaught Error: second error"),
        ("network", "Failed to load resource: the server responded with a status of 404 (Not Found)")], first
    assert {e["nav"] for e in first["console"]} == {1} and first["console_navs"] == [{"nav": 1, "url": a}]

    gone = await b.ok("click", ref=ref(opened["snapshot"], '- link "Elsewhere"'))
    assert gone["page"]["url"] == elsewhere and "console_errors" not in gone, gone

    # Chrome restored the page from its cache (the navigation's type, as the tab saw it), so this is not
    # a reload whose errors would be new ones
    tab = daemon.daemon.browse.sessions["s1"].tab(None)
    with tab._page.subscribe() as sub:
        back = await b.ok("nav", to="back")
        with trio.fail_after(10):  # the events came before the reply: they wait in the subscription
            while not ((event := await sub.receive())["method"] == "Page.frameNavigated"
                       and "parentId" not in event["params"]["frame"]):
                pass
    assert event["params"]["type"] == "BackForwardCacheRestore", event
    assert back["page"]["url"] == a and "console_errors" not in back, back  # not "3 new console errors"

    after = await b.ok("console")
    assert [(e["nav"], e["text"]) for e in after["console"]] == [
        (2, "on the other page"), (3, "shown again from the cache")], after
    assert after["console_navs"] == [{"nav": 2, "url": elsewhere}, {"nav": 3, "url": a, "restored": True}]
    assert browse_text(after).splitlines()[1:] == [
        "console: 2 messages since the last console action, newest last",
        f"navigation 2: {elsewhere}", f"[log] on the other page — {elsewhere}:2",
        f"navigation 3: {a} (restored from the back/forward cache)", f"[log] shown again from the cache — {a}:4"]
