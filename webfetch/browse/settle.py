"""The settle: after an action, wait as a person would for what it set off, never by a fixed sleep. A
navigation it started loads; then the requests it started end and one turn of the page's event loop passes
in which the DOM did not change and nothing the action set off is pending (js/pending.js counts that in
the page; "since the action" is told in the page's own clock, which `PageClock` maps the daemon's to). An
open confirm or prompt ends every wait. `Marks` are where the tab stood as the action began."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import trio

from ..chrome.cdp import CDPError
from ..errors import WebfetchError
from ..page_scripts import invoke

if TYPE_CHECKING:
    from .tab import BrowseTab

# The settle counts the page's requests begun up to this long before the action: the page's clock, as the
# daemon maps its own to it (PageClock), is coarsened (0.1 ms) and the mapping is never late, so a little
# slack is all the rounding needs.
ACTION_CLOCK_SLACK_MS = 5
# How long the settle waits for Chrome to report a navigation the page said it began, before it carries on
# as if none had (one cancelled at once: a 204, a download); Chrome's report comes in milliseconds.
NAVIGATION_NEWS_S = 1.0


@dataclass
class Marks:
    """Where the tab stood when an action began, to tell what the action changed."""

    doc_gen: int
    same_doc: int
    request_seq: int
    dialogs: int
    downloads: int
    download_responses: int
    frame: str      # the frame the action acts in: the settle asks its document what is still pending
    at: float       # when the action began (time.monotonic()): what the page began after it is the action's

    @classmethod
    def of(cls, tab: BrowseTab, ref: str | None = None) -> Marks:
        """Where `tab` stands now, as an action on `ref` (or the page) begins."""
        frame = tab.worlds.live_frame(ref) or tab.target_id
        return cls(tab.doc_gen, tab.same_doc, tab.request_seq, len(tab.dialogs), len(tab.downloads.records),
                   tab.downloads.responses, frame, time.monotonic())


async def settle(tab: BrowseTab, since: Marks, nav_timeout_s: float, settle_s: float) -> list[str]:
    """Wait as a person would: a navigation the action started loads (at most `nav_timeout_s`), then the
    requests the action started end and the DOM is quiet (at most `settle_s`). Never a fixed sleep.
    An open confirm or prompt ends the wait at once. Returns notes for the result."""
    notes: list[str] = []
    with trio.move_on_after(nav_timeout_s) as nav:
        while True:
            if tab.dialog_pending():
                return notes
            if tab.navigating():
                await tab.wait_for(lambda: not tab.navigating() or tab.dialog_pending())
                continue
            busy = await _until_quiet(tab, since, settle_s)
            if tab.navigating() or tab.dialog_pending():
                continue
            if busy:
                notes.append(f"the page was still busy {settle_s:g} s after the action; the snapshot "
                             f"is what it showed then (use wait for what you expect)")
            return notes
    if nav.cancelled_caught:
        try:
            await tab.call("Page.stopLoading")
        except CDPError:
            pass
        notes.append(f"stopped waiting for the page to load after {nav_timeout_s:g} s")
    return notes


async def _until_quiet(tab: BrowseTab, since: Marks, settle_s: float) -> bool:
    """Wait until the action's requests ended and the DOM is quiet, or a navigation or a dialog begins
    (the caller tells which). True when `settle_s` ran out first: the page was still busy."""
    def idle() -> bool:
        # no frame loading (a form posted in an iframe), none of the action's requests pending
        return not tab.loading and not tab.in_flight_since(since.request_seq)

    deadline = trio.current_time() + settle_s
    with trio.move_on_at(deadline) as quiet:
        while True:
            await tab.wait_for(lambda: tab.dialog_pending() or tab.navigating() or idle())
            if tab.navigating() or tab.dialog_pending():
                break
            # the action's frame, while it lives (a form posted in an iframe replaced its document: the
            # new one counts from its start); else the page
            frame = since.frame if since.frame in tab.frames else tab.target_id
            loader = tab.frames[frame].loader
            try:
                offset = await tab.clock.offset(frame)
                # the page stops on its own when the daemon would: no turn goes on after its wait ended
                cap_ms = max(1, int((deadline - trio.current_time()) * 1000))
                # what the page began since the action is its: requests, and a navigation (told once)
                began = since.at * 1000 + offset - ACTION_CLOCK_SLACK_MS
                state = await tab.worlds.evaluate(frame, invoke("__wf.quiet", cap_ms, began, began))
            except (CDPError, WebfetchError):
                state = None  # the document went away under us: a navigation, handled by the caller
            if state == "leaving":
                # the page began to navigate away; Chrome's report of it may still be on its way
                with trio.move_on_after(NAVIGATION_NEWS_S):
                    await tab.wait_for(partial(_left, tab, frame, loader))
                continue
            if idle():  # else the quiet time let a request or a frame's load begin: wait for it
                break
    return quiet.cancelled_caught


def _left(tab: BrowseTab, frame: str, loader: str) -> bool:
    """Chrome told of the navigation `frame`'s document `loader` began (or of its end already), or a
    dialog opened."""
    now = tab.frames.get(frame)
    return tab.loading or now is None or now.loader != loader or tab.dialog_pending()


class PageClock:
    """A tab's map from the daemon's clock to each of its documents' own."""

    def __init__(self, tab: BrowseTab) -> None:
        self._tab = tab
        # frame -> (loader, time origin, ms to add to time.monotonic() * 1000 for that document's
        # performance.now()), at most: the page's clock as of its latest answer (offset), so a time
        # mapped to it is never late. The origin tells documents apart where the loader may lag behind.
        self._clocks: dict[str, tuple[str, float, float]] = {}

    async def offset(self, frame: str) -> float:
        """What to add to time.monotonic() * 1000 for the frame's document's performance.now(): both are
        the system's monotonic clock, from different origins. Learned from the document's latest answer
        that told its time (every snapshot does), or asked now; since the answer left the page a moment
        before it arrived, the mapping is a little early, never late."""
        loader = self._tab.frames[frame].loader
        known = self._clocks.get(frame)
        if known is None or known[0] != loader:
            self.learn(frame, loader, await self._tab.worlds.evaluate(frame, invoke("__wf.clock")))
        return self._clocks[frame][2]

    def learn(self, frame: str, loader: str, clock: Sequence[float]) -> None:
        """Learn from the page's [performance.now(), performance.timeOrigin], just received."""
        page_now, origin = float(clock[0]), float(clock[1])
        offset = page_now - time.monotonic() * 1000
        known = self._clocks.get(frame)
        if known is not None and known[1] == origin:  # the same document
            offset = max(offset, known[2])  # each answer bounds it from below: the highest is the tightest
        self._clocks[frame] = (loader, origin, offset)

    def forget(self, frame: str) -> None:
        """The frame is gone (detached)."""
        self._clocks.pop(frame, None)
