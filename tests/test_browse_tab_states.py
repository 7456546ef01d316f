"""Layer 1: the browse tab's state machine (browse/tab.py, its worlds and its settle) against a scripted
page, on the mock clock.

Each test is one thing a page does to a tab and what the tab then reports, answers the page over CDP, or
how long an action's settle waits: frames attached, navigated and detached (and the refs of a replaced
document going stale), requests in flight holding the settle, the host gate answering paused requests,
dialogs, downloads, a navigation's load and its time limit, a crash and a closed target. Real Chromium runs
the same paths end to end in test_browse.py."""

from __future__ import annotations

import ipaddress
import itertools
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import pytest
import trio
import trio.testing

from webfetch.browse.downloads import SESSION_CAPS, Downloads
from webfetch.browse.settle import NAVIGATION_NEWS_S, Marks, settle
from webfetch.browse.tab import BrowseTab
from webfetch.chrome.cdp import CDPClosed
from webfetch.dns import IPAddress
from webfetch.errors import DialogOpen, StaleRef, UnknownRef
from webfetch.page_scripts import load
from webfetch.urls import AddressPolicy, HostGate

from .support.scripted_browser import TARGET, Frame, ScriptedPage

ALLOWED = "http://127.0.0.1:8000"
REFUSED = "http://127.0.0.2:8000"
NAV_TIMEOUT_S = 5.0
SETTLE_S = 2.0
QUIET_S = 0.025  # the scripted page's DOM is quiet this long after it is asked


async def literal_address(host: str) -> list[IPAddress]:
    return [ipaddress.ip_address(host)]  # the tests' hosts are addresses: no DNS


# 127.0.0.1 allowed by fetch.allow_hosts, 127.0.0.2 a loopback address the default policy refuses
POLICY = AddressPolicy(allow_networks=(ipaddress.ip_network("127.0.0.1/32"),), resolver=literal_address)
CLICK = load("describe")  # any page script: the scripted page answers a ref's action with what it hit


def page_with(**children: Frame) -> ScriptedPage:
    frames = {TARGET: Frame(f"{ALLOWED}/", buttons=["Go", "Stop"]), **children}
    return ScriptedPage(frames)


class Context:
    """The browser context's one call a session's downloads make: cancelling one (past the cap)."""

    def __init__(self) -> None:
        self.cancelled: list[str] = []

    async def cancel_download(self, guid: str) -> None:
        self.cancelled.append(guid)


DOWNLOAD_CAP = 1000


def saver() -> Downloads:
    return Downloads(Path(tempfile.mkdtemp(prefix="wf-dl-")), DOWNLOAD_CAP, Context())  # type: ignore[arg-type]


@asynccontextmanager
async def open_tab(page: ScriptedPage, downloads: Downloads | None = None) -> AsyncIterator[BrowseTab]:
    """A tab on `page`, its event pump running and set up, as a browse session opens one."""
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            tab = BrowseTab("t1", page, HostGate(POLICY), downloads=downloads or saver())
            await nursery.start(tab.run)
            await tab.intercept()
            await tab.setup()
            yield tab
            nursery.cancel_scope.cancel()


async def handled() -> None:
    """Until the tab has taken in every event the page sent, and answered what they asked."""
    await trio.testing.wait_all_tasks_blocked()


async def timed_settle(tab: BrowseTab, marks: Marks) -> tuple[list[str], float]:
    start = trio.current_time()
    notes = await settle(tab, marks, NAV_TIMEOUT_S, SETTLE_S)
    return notes, trio.current_time() - start


async def later(delay: float, fn: Callable[[], object]) -> None:
    await trio.sleep(delay)
    fn()


# --- frames and refs ------------------------------------------------------------------------------------

async def test_setup_learns_the_frame_tree_and_has_every_request_paused(autojump_clock):
    page = page_with(F2=Frame(f"{ALLOWED}/inner", parent=TARGET))
    async with open_tab(page) as tab:
        assert tab.url == f"{ALLOWED}/" and tab.target_id == TARGET
        assert tab.has_frame(TARGET) and tab.has_frame("F2") and not tab.has_frame("F3")
        [fetch] = page.answers("Fetch.enable")
        assert {"urlPattern": "*", "requestStage": "Request"} in fetch["patterns"]
        assert {"urlPattern": "*", "resourceType": "Document", "requestStage": "Response"} in fetch["patterns"]
        assert await tab.title() == "Scripted"


async def test_a_snapshot_inlines_child_frames_and_gives_refs_to_act_on(autojump_clock):
    page = page_with(F2=Frame(f"{ALLOWED}/inner", parent=TARGET, buttons=["Inner"]))
    async with open_tab(page) as tab:
        snap = await tab.worlds.snapshot("interactive", None, None)
        assert snap.lines == ['- button "Go" [ref=e1]', '- button "Stop" [ref=e2]', "- iframe [ref=e3]",
                              '  - button "Inner" [ref=e4]']
        assert tab.worlds.ref_frame("e4") == "F2" and tab.worlds.ref_frame("e1") == TARGET
        assert await tab.worlds.on_ref("e4", CLICK) == "clicked Inner"
        with pytest.raises(UnknownRef, match="e9 was never given out on tab t1"):
            tab.worlds.ref_frame("e9")
        # a second snapshot of the same documents keeps the refs
        assert (await tab.worlds.snapshot("interactive", None, None)).lines == snap.lines


async def test_a_child_frame_that_navigates_makes_its_refs_stale_and_leaves_the_others(autojump_clock):
    page = page_with(F2=Frame(f"{ALLOWED}/inner", parent=TARGET, buttons=["Inner"]))
    async with open_tab(page) as tab:
        await tab.worlds.snapshot("interactive", None, None)
        page.navigate("F2", f"{ALLOWED}/other")
        await handled()
        with pytest.raises(StaleRef, match="e4 belongs to a document that is gone"):
            await tab.worlds.on_ref("e4", CLICK)
        assert await tab.worlds.on_ref("e1", CLICK) == "clicked Go"
        assert tab.doc_gen == 0, "a child frame's document is not a new page"
        # the next snapshot gives the new document's button a new ref
        assert (await tab.worlds.snapshot("interactive", None, None)).lines[-1] == '  - button "Inner" [ref=e5]'


async def test_frames_attached_and_detached_are_tracked_and_a_detached_frames_refs_are_stale(autojump_clock):
    page = page_with()
    async with open_tab(page) as tab:
        page.attach("F9", TARGET, f"{ALLOWED}/ad")
        page.frames["F9"].buttons.append("Close ad")
        await handled()
        assert tab.has_frame("F9") and not tab.loading
        snap = await tab.worlds.snapshot("interactive", None, None)
        assert snap.lines[-1] == '  - button "Close ad" [ref=e4]'
        page.detach("F9")
        await handled()
        assert not tab.has_frame("F9")
        with pytest.raises(StaleRef):
            tab.worlds.ref_frame("e4")
        with pytest.raises(StaleRef, match="that frame is gone"):
            await tab.worlds.evaluate("F9", "1")


async def test_a_new_main_document_counts_and_stales_every_ref_but_a_fragment_change_does_not(autojump_clock):
    page = page_with()
    async with open_tab(page) as tab:
        snap = await tab.worlds.snapshot("interactive", None, None)
        tab.worlds.remember_lines(snap.lines)
        page.emit("Page.navigatedWithinDocument", frameId=TARGET, url=f"{ALLOWED}/#part2")
        await handled()
        assert (tab.url, tab.doc_gen, tab.same_doc) == (f"{ALLOWED}/#part2", 0, 1)
        assert tab.worlds.previous_lines() == snap.lines and tab.worlds.ref_frame("e1") == TARGET

        page.navigate(TARGET, f"{ALLOWED}/next")
        await handled()
        assert (tab.url, tab.doc_gen, tab.same_doc) == (f"{ALLOWED}/next", 1, 1)
        assert tab.worlds.previous_lines() is None
        with pytest.raises(StaleRef, match="the page navigated"):
            await tab.worlds.on_ref("e1", CLICK)


# --- requests in flight and the settle ------------------------------------------------------------------

async def test_the_actions_request_holds_the_settle_until_it_finishes(autojump_clock):
    page = page_with()
    async with open_tab(page) as tab:
        page.emit("Network.requestWillBeSent", requestId="before")  # the page's own, started before the action
        await handled()
        marks = tab.start_action()
        page.emit("Network.requestWillBeSent", requestId="xhr")
        await handled()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(later, 1.5, partial(page.emit, "Network.loadingFinished", requestId="xhr"))
            notes, waited = await timed_settle(tab, marks)
        assert notes == [] and waited == pytest.approx(1.5 + QUIET_S)


async def test_a_response_that_arrived_ends_the_wait_though_its_body_never_finishes_loading(autojump_clock):
    # a page's fetch whose no-store body it never reads: Chrome reports the response, never the load's end
    page = page_with()
    async with open_tab(page) as tab:
        marks = tab.start_action()
        page.emit("Network.requestWillBeSent", requestId="unread")
        await handled()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(later, 0.1, partial(page.emit, "Network.responseReceived", requestId="unread",
                                                   response={"status": 200}))
            notes, waited = await timed_settle(tab, marks)
        assert notes == [] and waited == pytest.approx(0.1 + QUIET_S)


async def test_a_failed_request_ends_the_wait_as_a_finished_one_does(autojump_clock):
    page = page_with()
    async with open_tab(page) as tab:
        marks = tab.start_action()
        page.emit("Network.requestWillBeSent", requestId="img")
        page.emit("Network.loadingFailed", requestId="img", errorText="net::ERR_FAILED")
        await handled()
        notes, waited = await timed_settle(tab, marks)
        assert notes == [] and waited == pytest.approx(QUIET_S)


async def test_a_request_that_never_ends_is_waited_for_settle_s_and_noted(autojump_clock):
    page = page_with()
    async with open_tab(page) as tab:
        marks = tab.start_action()
        page.emit("Network.requestWillBeSent", requestId="long-poll")
        await handled()
        notes, waited = await timed_settle(tab, marks)
        assert waited == pytest.approx(SETTLE_S)
        assert notes == ["the page was still busy 2 s after the action; the snapshot is what it showed then "
                         "(use wait for what you expect)"]


async def test_a_new_document_forgets_the_old_documents_requests(autojump_clock):
    page = page_with()
    async with open_tab(page) as tab:
        marks = tab.start_action()
        page.emit("Network.requestWillBeSent", requestId="old-doc")  # its end is never reported
        page.navigate(TARGET, f"{ALLOWED}/next")
        await handled()
        notes, waited = await timed_settle(tab, marks)
        assert notes == [] and waited == pytest.approx(QUIET_S)


# --- the host gate on paused requests ---------------------------------------------------------------------

def pause(page: ScriptedPage, rid: str, url: str, kind: str = "Document", frame: str = TARGET) -> None:
    page.emit("Fetch.requestPaused", requestId=rid, request={"url": url, "headers": {}},
              resourceType=kind, frameId=frame)


async def test_the_gate_lets_an_allowed_host_through_and_fails_a_refused_one(autojump_clock):
    page = page_with()
    async with open_tab(page) as tab:
        pause(page, "ok", f"{ALLOWED}/app.js", "Script")
        pause(page, "no", f"{REFUSED}/admin.js", "Script")
        await handled()
        assert page.answers("Fetch.continueRequest") == [{"requestId": "ok"}]
        assert page.answers("Fetch.failRequest") == [{"requestId": "no", "errorReason": "BlockedByClient"}]
        assert tab.blocked is None, "a subresource refused is not the page refused"


async def test_a_refused_main_document_is_reported_until_the_next_action(autojump_clock):
    page = page_with(F2=Frame(f"{ALLOWED}/inner", parent=TARGET))
    async with open_tab(page) as tab:
        pause(page, "frame", f"{REFUSED}/", frame="F2")
        await handled()
        assert tab.blocked is None, "a child frame's document is not the page's"
        pause(page, "main", f"{REFUSED}/secret")
        await handled()
        assert page.answers("Fetch.failRequest")[-1] == {"requestId": "main", "errorReason": "BlockedByClient"}
        assert tab.blocked is not None
        assert tab.blocked.startswith("127.0.0.2 is not a public address (127.0.0.0/8: loopback)")
        tab.start_action()
        assert tab.blocked is None


async def test_a_main_documents_response_is_let_through_and_its_status_kept(autojump_clock):
    page = page_with()
    async with open_tab(page) as tab:
        page.emit("Fetch.requestPaused", requestId="r1", request={"url": f"{ALLOWED}/missing", "headers": {}},
                  resourceType="Document", frameId=TARGET, responseStatusCode=404,
                  responseHeaders=[{"name": "Content-Type", "value": "text/html"}])
        await handled()
        assert page.answers("Fetch.continueRequest") == [{"requestId": "r1"}] and tab.status == 404
        tab.start_navigation()
        assert tab.status is None


# --- downloads ----------------------------------------------------------------------------------------

def respond(page: ScriptedPage, rid: str, url: str, headers: dict[str, str], status: int = 200) -> None:
    page.emit("Fetch.requestPaused", requestId=rid, request={"url": url, "headers": {}},
              resourceType="Document", frameId=TARGET, responseStatusCode=status,
              responseHeaders=[{"name": k, "value": v} for k, v in headers.items()])


async def test_a_download_goes_to_the_download_manager_and_is_saved_or_stopped(autojump_clock):
    page = page_with()
    downloads = saver()
    async with open_tab(page, downloads) as tab:
        marks = tab.start_action()
        respond(page, "d1", f"{ALLOWED}/export?id=3",
                {"Content-Type": "text/csv", "Content-Disposition": 'attachment; filename="report.csv"'})
        respond(page, "d2", f"{ALLOWED}/files/archive.zip", {"Content-Type": "application/zip"})
        await handled()
        # an attachment goes on as it is; a type Chrome might show is made an attachment
        assert page.answers("Fetch.continueRequest") == [{"requestId": "d1"}]
        forced = [{"name": "Content-Type", "value": "application/zip"},
                  {"name": "Content-Disposition", "value": "attachment"}]
        assert page.answers("Fetch.continueResponse") == [{"requestId": "d2", "responseCode": 200,
                                                           "responseHeaders": forced}]
        assert tab.downloads.responses - marks.download_responses == 2
        # Chrome saves each under its guid and tells the page how it goes
        (downloads.directory / "g1").write_bytes(b"a,b\n")
        page.emit("Page.downloadWillBegin", frameId=TARGET, guid="g1", url=f"{ALLOWED}/export?id=3",
                  suggestedFilename="report.csv")
        page.emit("Page.downloadWillBegin", frameId=TARGET, guid="g2", url=f"{ALLOWED}/files/archive.zip",
                  suggestedFilename="archive.zip")
        page.emit("Page.downloadProgress", guid="g1", totalBytes=4, receivedBytes=4, state="completed")
        (downloads.directory / "g2").write_bytes(b"x" * 600)
        page.emit("Page.downloadProgress", guid="g2", totalBytes=0, receivedBytes=DOWNLOAD_CAP + 1, state="inProgress")
        await handled()
        assert downloads._context.cancelled == ["g2"]  # type: ignore[attr-defined]
        page.emit("Page.downloadProgress", guid="g2", totalBytes=0, receivedBytes=DOWNLOAD_CAP + 1, state="canceled")
        # one that finished before its first progress report said it was too large: removed all the same
        page.emit("Page.downloadWillBegin", frameId=TARGET, guid="g3", url=f"{ALLOWED}/fast.bin",
                  suggestedFilename="fast.bin")
        (downloads.directory / "g3").write_bytes(b"y" * (DOWNLOAD_CAP + 5))
        page.emit("Page.downloadProgress", guid="g3", totalBytes=0, receivedBytes=DOWNLOAD_CAP + 5, state="completed")
        await handled()
        saved, stopped, fast = tab.downloads.take()
        assert (fast.state, fast.size, fast.path) == ("too_large", DOWNLOAD_CAP + 5, None)
        assert (saved.state, saved.filename, saved.size, saved.mime) == ("saved", "report.csv", 4, "text/csv")
        assert saved.path == str(downloads.directory / "report.csv")
        assert (stopped.state, stopped.size, stopped.mime) == ("too_large", DOWNLOAD_CAP + 1, "application/zip")
        assert sorted(p.name for p in downloads.directory.iterdir()) == ["report.csv"], "no partial file is left"
        assert tab.downloads.take() == [], "each is told once"
        assert tab.status is None and tab.url == f"{ALLOWED}/", "the tab stays on its page"


async def test_a_sessions_downloads_together_stay_under_their_bound(autojump_clock):
    """Each under the cap, but a page can start one from every frame it makes: past SESSION_CAPS caps in
    all, the next is stopped as too large and its partial file removed."""
    page = page_with()
    downloads = saver()
    async with open_tab(page, downloads) as tab:
        for n in range(SESSION_CAPS + 1):
            guid = f"g{n}"
            page.emit("Page.downloadWillBegin", frameId=TARGET, guid=guid, url=f"{ALLOWED}/f{n}.bin",
                      suggestedFilename=f"f{n}.bin")
            (downloads.directory / guid).write_bytes(b"z" * DOWNLOAD_CAP)
            page.emit("Page.downloadProgress", guid=guid, totalBytes=DOWNLOAD_CAP, receivedBytes=DOWNLOAD_CAP,
                      state="completed")
            await handled()
        results = tab.downloads.take()
        assert [d.state for d in results] == ["saved"] * SESSION_CAPS + ["too_large"]
        assert "the session's downloads would pass their bound" in results[-1].message
        assert len(list(downloads.directory.iterdir())) == SESSION_CAPS, "the last one's file is removed"


# --- dialogs ------------------------------------------------------------------------------------------

async def test_an_alert_is_accepted_at_once_and_recorded(autojump_clock):
    page = page_with()
    async with open_tab(page) as tab:
        page.open_dialog("alert", "Saved")
        await handled()
        assert page.answers("Page.handleJavaScriptDialog") == [{"accept": True}]
        assert list(tab.dialogs) == [{"type": "alert", "message": "Saved"}]
        assert tab.dialog is None and not tab.dialog_pending()
        assert await tab.worlds.evaluate(TARGET, "__wf.quiet(25, 2000, 2000)") == "settled", "script runs again"


async def test_a_confirm_stays_open_ends_the_settle_at_once_and_blocks_script(autojump_clock):
    page = page_with()
    async with open_tab(page) as tab:
        marks = tab.start_action()
        page.emit("Network.requestWillBeSent", requestId="xhr")  # would hold the settle for settle_s
        page.open_dialog("confirm", "Delete everything?")
        await handled()
        assert tab.dialog == {"type": "confirm", "message": "Delete everything?"} and tab.dialog_pending()
        notes, waited = await timed_settle(tab, marks)
        assert notes == [] and waited == 0
        assert page.answers("Page.handleJavaScriptDialog") == [], "a confirm is the agent's to answer"
        with pytest.raises(DialogOpen, match="a confirm dialog is open on t1"):
            await tab.worlds.evaluate(TARGET, "1")


async def test_a_prompt_opening_under_a_script_call_ends_the_call_with_dialog_open(autojump_clock):
    page = page_with()
    async with open_tab(page) as tab:
        await tab.worlds.snapshot("interactive", None, None)  # the world exists: the call goes straight to the page
        async with trio.open_nursery() as nursery:
            nursery.start_soon(later, 0.5, partial(page.open_dialog, "prompt", "Your name?", "anon"))
            page.quiet_s = 10  # the page's script is busy when the prompt opens
            start = trio.current_time()
            with pytest.raises(DialogOpen):
                await tab.worlds.evaluate(TARGET, "__wf.quiet(25, 2000)")
            assert trio.current_time() - start == pytest.approx(0.5)
        assert tab.dialog == {"type": "prompt", "message": "Your name?", "default_prompt": "anon"}
        await tab.call("Page.handleJavaScriptDialog", {"accept": False})
        await handled()
        assert tab.dialog is None and [d["type"] for d in tab.dialogs] == ["prompt"]


# --- navigation: the load, its time limit ------------------------------------------------------------

async def test_a_navigation_the_action_started_is_waited_for_until_it_loads(autojump_clock):
    page = page_with()
    async with open_tab(page) as tab:
        marks = tab.start_action()
        page.navigate(TARGET, f"{ALLOWED}/slow", load=False)
        await handled()
        assert tab.navigating() and tab.loading
        async with trio.open_nursery() as nursery:
            nursery.start_soon(later, 3.0, partial(page.finish_load, TARGET))
            notes, waited = await timed_settle(tab, marks)
        assert notes == [] and waited == pytest.approx(3.0 + QUIET_S)
        assert not tab.navigating() and tab.url == f"{ALLOWED}/slow" and tab.doc_gen == marks.doc_gen + 1


async def test_a_navigation_the_page_began_is_waited_for_though_chrome_tells_of_it_after_the_turn(autojump_clock):
    # the page's own world saw it leave (the navigate event) before Chrome's report reached the daemon
    page = page_with()
    async with open_tab(page) as tab:
        marks = tab.start_action()
        page.quiet_answers = ["leaving"]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(later, 0.2, partial(page.navigate, TARGET, f"{ALLOWED}/next", load=False))
            nursery.start_soon(later, 1.0, partial(page.finish_load, TARGET))
            notes, waited = await timed_settle(tab, marks)
        assert notes == [] and waited == pytest.approx(1.0 + QUIET_S)
        assert tab.url == f"{ALLOWED}/next" and tab.doc_gen == marks.doc_gen + 1


async def test_a_navigation_the_page_began_that_chrome_never_tells_of_is_waited_for_briefly(autojump_clock):
    page = page_with()  # one cancelled at once (a 204, a download): nothing loads, the page stays
    async with open_tab(page) as tab:
        marks = tab.start_action()
        page.quiet_answers = ["leaving"]
        notes, waited = await timed_settle(tab, marks)
        assert notes == [] and waited == pytest.approx(QUIET_S + NAVIGATION_NEWS_S + QUIET_S)
        assert tab.doc_gen == marks.doc_gen


async def test_a_navigation_that_never_loads_is_stopped_after_nav_timeout(autojump_clock):
    page = page_with()
    async with open_tab(page) as tab:
        marks = tab.start_action()
        page.navigate(TARGET, f"{ALLOWED}/forever", load=False)
        await handled()
        notes, waited = await timed_settle(tab, marks)
        assert waited == pytest.approx(NAV_TIMEOUT_S)
        assert notes == ["stopped waiting for the page to load after 5 s"]
        assert ("Page.stopLoading", {}) in page.calls


async def test_a_child_frame_loading_holds_the_settle_but_is_not_a_navigation(autojump_clock):
    page = page_with(F2=Frame(f"{ALLOWED}/inner", parent=TARGET))
    async with open_tab(page) as tab:
        marks = tab.start_action()
        page.navigate("F2", f"{ALLOWED}/posted", load=False)  # a form posted in an iframe
        await handled()
        assert tab.loading and not tab.navigating()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(later, 1.0, partial(page.finish_load, "F2"))
            notes, waited = await timed_settle(tab, marks)
        assert notes == [] and waited == pytest.approx(1.0 + QUIET_S)


# --- the tab going away ---------------------------------------------------------------------------------

@pytest.mark.parametrize("event", ["Inspector.targetCrashed", "Target.targetCrashed"])
async def test_a_crash_ends_a_pending_settle_at_once(autojump_clock, event):
    page = page_with()
    async with open_tab(page) as tab:
        marks = tab.start_action()
        page.emit("Network.requestWillBeSent", requestId="xhr")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(later, 0.5, partial(page.emit, event))
            start = trio.current_time()
            with pytest.raises(CDPClosed, match="the tab is gone"):
                await settle(tab, marks, NAV_TIMEOUT_S, SETTLE_S)
            assert trio.current_time() - start == pytest.approx(0.5)
        with pytest.raises(CDPClosed):
            await tab.wait_for(lambda: False)


async def test_a_target_gone_closes_the_tab_and_ends_its_pump(autojump_clock):
    page = page_with()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            tab = BrowseTab("t1", page, HostGate(POLICY), downloads=saver())
            await nursery.start(tab.run)
            await tab.intercept()
            await tab.setup()
            marks = tab.start_action()
            page.navigate(TARGET, f"{ALLOWED}/slow", load=False)
            nursery.start_soon(later, 1.0, page.close)
            with pytest.raises(CDPClosed):
                await settle(tab, marks, NAV_TIMEOUT_S, SETTLE_S)
        # the nursery exited: the pump ended by itself
        assert tab.closed


async def test_the_inspector_detaching_closes_the_tab(autojump_clock):
    page = page_with()
    async with open_tab(page) as tab:
        page.emit("Inspector.detached", reason="target_closed")
        await handled()
        assert tab.closed
        with pytest.raises(CDPClosed):
            await tab.wait_for(lambda: False)


async def test_a_tab_marked_closed_ends_its_waits(autojump_clock):
    page = page_with()
    async with open_tab(page) as tab:
        marks = tab.start_action()
        page.emit("Network.requestWillBeSent", requestId="xhr")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(later, 0.25, tab.mark_closed)
            with pytest.raises(CDPClosed):
                await settle(tab, marks, NAV_TIMEOUT_S, SETTLE_S)
        assert tab.closed


# --- the console --------------------------------------------------------------------------------------

CONSOLE_TIMES = itertools.count(1)  # each call's own time, as Chrome gives it: the same one is a call sent again


def console_call(page: ScriptedPage, kind: str, *args: dict[str, object]) -> None:
    frame = {"functionName": "f", "url": f"{ALLOWED}/app.js", "lineNumber": 9, "columnNumber": 4}
    page.emit("Runtime.consoleAPICalled", type=kind, args=list(args), executionContextId=1,
              timestamp=float(next(CONSOLE_TIMES)),
              stackTrace={"callFrames": [frame, frame | {"functionName": ""}]})


async def test_console_entries_read_once_newest_last_and_errors_counted_once(autojump_clock):
    page = page_with()
    async with open_tab(page) as tab:
        assert ("Runtime.enable", {}) in page.calls and ("Log.enable", {}) in page.calls
        console_call(page, "log", {"type": "string", "value": "%s has %d items%c"}, {"type": "string", "value": "cart"},
                     {"type": "number", "value": 3.0}, {"type": "string", "value": "color: red"},
                     {"type": "object", "preview": {"type": "object", "properties": [
                         {"name": "id", "type": "number", "value": "7"},
                         {"name": "name", "type": "string", "value": "ann"}], "overflow": True}})
        console_call(page, "error", {"type": "undefined"}, {"type": "object", "subtype": "null", "value": None})
        console_call(page, "startGroup", {"type": "string", "value": "not a message"})
        page.emit("Runtime.exceptionThrown", timestamp=0, exceptionDetails={
            "text": "Uncaught (in promise)", "lineNumber": 0, "columnNumber": 0, "url": "",
            "exception": {"type": "object", "subtype": "error",
                          "description": "Error: nope\n    at g (http://127.0.0.1:8000/a.js:2:3)"}})
        page.emit("Log.entryAdded", entry={"source": "network", "level": "error", "url": f"{ALLOWED}/favicon.ico",
                                           "text": "Failed to load resource"})
        page.emit("Log.entryAdded", entry={"source": "security", "level": "warning", "url": f"{ALLOWED}/",
                                           "lineNumber": 0, "text": "Mixed content"})
        await handled()
        assert tab.console.take_error_count() == 2 and tab.console.take_error_count() == 0
        entries, dropped = tab.console.take_new()
        assert dropped == 0 and [(e.kind, e.level, e.text, e.url, e.line, e.stack) for e in entries] == [
            ("console", "log", 'cart has 3 items {id: 7, name: "ann", …}', f"{ALLOWED}/app.js", 10, None),
            ("console", "error", "undefined null", f"{ALLOWED}/app.js", 10,
             f"    at f ({ALLOWED}/app.js:10:5)\n    at (anonymous) ({ALLOWED}/app.js:10:5)"),
            ("rejection", "error", "Uncaught (in promise) Error: nope", None, None,
             "    at g (http://127.0.0.1:8000/a.js:2:3)"),
            ("security", "warning", "Mixed content", f"{ALLOWED}/", 1, None)]
        assert tab.console.take_new() == ([], 0), "read once"


async def test_the_console_keeps_the_newest_500_and_counts_those_dropped_unread(autojump_clock):
    page = page_with()
    async with open_tab(page) as tab:
        for i in range(503):
            console_call(page, "warning", {"type": "string", "value": f"m{i}"})
        console_call(page, "error", {"type": "string", "value": "last"})
        await handled()
        entries, dropped = tab.console.take_new()
        assert len(entries) == 500 and dropped == 4
        assert (entries[0].text, entries[-1].text) == ("m4", "last")
        assert tab.console.take_error_count() == 0, "the console action reported the error"


async def test_the_pages_console_objects_are_let_go_every_100_events(autojump_clock):
    # a page logging objects in a loop would otherwise keep every one alive in its renderer
    page = page_with()
    async with open_tab(page) as tab:
        for i in range(250):
            console_call(page, "log", {"type": "object", "objectId": f"o{i}", "preview": {"properties": []}})
        await handled()
        assert page.answers("Runtime.releaseObjectGroup") == [{"objectGroup": "console"}] * 2
        assert len(page.answers("Runtime.discardConsoleEntries")) == 2
        assert len(tab.console.take_new()[0]) == 250, "the entries themselves are kept"
