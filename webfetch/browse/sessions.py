"""The browse actor: sessions of browser automation on the daemon's Chrome (PROTOCOL.md, browse).

A session is one browser context (cookies, storage and cache of its own, behind the address-policy
proxy) with its tabs. One action at a time per session (a lock; others queue); a session ends on
`close`, after `browse.idle_s` without an action, or when the daemon stops, and its context goes with it.
The sessions' tasks (each tab's event pump) run in this actor's nursery, so a cancelled request ends only
its action: the session and its tabs stay usable.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple

import trio

from ..cdp import CDPClosed, CDPError
from ..chrome import BrowserContext, Chrome, PageTarget
from ..config import Config
from ..errors import (
    BadRequest,
    BlockedUrl,
    BrowseDisabled,
    BrowserCrashed,
    BrowserUnavailable,
    NoSuchTab,
    WebfetchError,
)
from ..extractor import Extractor
from ..paging import paginate
from ..protocol import BrowseRequest, BrowseResult, BrowseSessionStatus, PageInfo, ReportProgress, TabInfo
from ..urls import AddressPolicy, prepare_url
from . import actions
from .snapshot import diff, page
from .tab import BrowseTab, Marks, now_ms

log = logging.getLogger("webfetch.browse")

CLOSE_TIMEOUT_S = 2.0
REFUSED_SCHEMES = ("file", "chrome", "javascript", "data", "about", "view-source", "blob", "filesystem",
                   "chrome-extension", "devtools")
# What the page shows, as HTML for the extractor: hidden elements (a closed menu, a collapsed list) left
# out, open shadow roots' content put in their hosts.
SHOWN_HTML = """(function shown(root) {
  const clone = root.cloneNode(true);
  const walk = (a, b) => {
    for (let i = a.children.length - 1; i >= 0; i--) {
      const el = a.children[i], copy = b.children[i];
      if (!copy || el.localName === "head") continue;
      if (el.checkVisibility && !el.checkVisibility() && el.localName !== "script") copy.remove();
      else {
        walk(el, copy);
        if (el.shadowRoot) copy.insertAdjacentHTML("beforeend", el.shadowRoot.innerHTML);
      }
    }
  };
  walk(root, clone);
  return clone.outerHTML;
})"""


class Session:
    def __init__(self, name: str, context: BrowserContext) -> None:
        self.name = name
        self.context = context
        self.tabs: dict[str, BrowseTab] = {}
        self.active: str | None = None
        self.lock = trio.Lock()
        self.last_used = trio.current_time()
        self.numbers = itertools.count(1)
        self.hosts: dict[str, str | None] = {}
        self.scope = trio.CancelScope()
        self.done = trio.Event()
        self.nursery: trio.Nursery | None = None
        self.opened: list[BrowseTab] = []    # tabs the page opened (popups), since the last action's start
        self.adopting = 0
        self.adopted = trio.Event()

    def tab(self, name: str | None) -> BrowseTab:
        if name is None and (self.active not in self.tabs or self.tabs[self.active or ""].closed):
            # the active tab closed itself (window.close()): the newest one left takes its place
            open_tabs = [t for t in self.tabs.values() if not t.closed]
            self.active = open_tabs[-1].name if open_tabs else self.active
        key = name or self.active
        tab = self.tabs.get(key or "")
        if tab is None or tab.closed:
            raise NoSuchTab(f"session {self.name!r} has no tab {key!r}; its tabs are "
                            f"{', '.join(self.tabs) or 'none'} (tabs action, do: list)")
        return tab


class Browse:
    """Owns the browse sessions; `handle` runs one action in the request's own task."""

    def __init__(self, config: Config, chrome: Chrome, extractor: Extractor, policy: AddressPolicy) -> None:
        self.config = config.browse
        self.fetch_config = config.fetch
        self.chrome = chrome
        self.extractor = extractor
        self.policy = policy
        self.sessions: dict[str, Session] = {}
        self._nursery: trio.Nursery | None = None
        self._wake = trio.Event()
        self._opening = trio.Lock()

    def statistics(self) -> list[BrowseSessionStatus]:
        now = trio.current_time()
        return [BrowseSessionStatus(session=s.name, tabs=len(s.tabs),
                                    url=s.tabs[s.active].url if s.active in s.tabs else "",
                                    idle_s=round(now - s.last_used, 1)) for s in self.sessions.values()]

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._reaper)
                task_status.started()
                await trio.sleep_forever()
        finally:
            # daemon stop: every session's context goes, so no tab outlives the daemon's browser either
            with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_TIMEOUT_S * 2):
                for session in list(self.sessions.values()):
                    await self._dispose(session)
            self.sessions.clear()

    # --- sessions ---------------------------------------------------------------------------------

    async def _reaper(self) -> None:
        """Close sessions idle for browse.idle_s; sleeps until the next one is due (or a change)."""
        while True:
            self._wake = trio.Event()
            idle = [s.last_used for s in self.sessions.values() if not s.lock.locked()]
            with trio.move_on_at(min(idle) + self.config.idle_s if idle else float("inf")):
                await self._wake.wait()
            now = trio.current_time()
            for s in list(self.sessions.values()):
                if not s.lock.locked() and now - s.last_used >= self.config.idle_s:
                    log.info("browse session %r idle for %g s; closing it", s.name, self.config.idle_s)
                    await self._close(s)

    async def _open_session(self, name: str) -> Session:
        if len(self.sessions) >= self.config.max_sessions:
            raise BadRequest(f"{len(self.sessions)} browse sessions are open (browse.max_sessions); close one "
                             f"(action close) or wait for an idle one to expire")
        assert self._nursery is not None
        context = await self.chrome.open_context()
        session = Session(name, context)
        try:
            await self._nursery.start(self._session_main, session)
        except BaseException:  # cancelled before the session owned its context: nothing else would dispose of it
            await context.aclose()
            raise
        self.sessions[name] = session
        return session

    async def _session_main(self, session: Session, *, task_status: trio.TaskStatus[None]) -> None:
        try:
            with session.scope:
                async with trio.open_nursery() as nursery:
                    session.nursery = nursery
                    # tabs a page opens (target=_blank, window.open) join the session
                    await nursery.start(session.context.watch_popups, partial(self._popup, session))
                    task_status.started()
                    await trio.sleep_forever()
        finally:
            session.done.set()

    async def _dispose(self, session: Session) -> None:
        session.scope.cancel()
        await session.context.aclose()
        # the tabs' pumps end at once now; waited for, bounded, even in a cancelled scope
        with trio.move_on_after(CLOSE_TIMEOUT_S, shield=True):
            await session.done.wait()

    async def _close(self, session: Session) -> None:
        if self.sessions.get(session.name) is session:
            del self.sessions[session.name]
        for tab in session.tabs.values():
            tab.mark_closed()
        await self._dispose(session)
        self._wake.set()

    async def _new_tab(self, session: Session, page: PageTarget) -> BrowseTab:
        tab = BrowseTab(f"t{next(session.numbers)}", page, self.policy, session.hosts)
        assert session.nursery is not None
        await session.nursery.start(tab.run)
        await tab.setup()
        session.tabs[tab.name] = tab
        return tab

    def _popup(self, session: Session, target_id: str) -> None:
        assert session.nursery is not None
        session.adopting += 1
        session.nursery.start_soon(self._adopt, session, target_id)

    async def _adopt(self, session: Session, target_id: str) -> None:
        try:
            tab = await self._new_tab(session, await session.context.adopt(target_id))
            session.opened.append(tab)
            session.active = tab.name
        except (CDPError, CDPClosed) as e:
            log.info("browse: could not follow a new tab: %s", e)
        finally:
            session.adopting -= 1
            session.adopted.set()
            session.adopted = trio.Event()

    # --- requests ---------------------------------------------------------------------------------

    async def handle(self, req: BrowseRequest, rid: Any, progress: ReportProgress) -> BrowseResult:
        if not self.config.enabled:
            raise BrowseDisabled("browser automation is switched off (browse.enabled = false in the config); "
                                 "use fetch to read pages")
        started = time.monotonic()
        session = self.sessions.get(req.session)
        if req.action == "close":
            if session is not None:
                await self._close(session)
            return BrowseResult(id=rid, op="browse", action="close", session=req.session, page=None, change="none",
                                refs_reset=False, snapshot="", snapshot_kind="none", elapsed_ms=now_ms(started))
        if session is None:
            async with self._opening:
                session = self.sessions.get(req.session)
                if session is None:
                    progress("browse", f"starting browse session {req.session!r}")
                    try:
                        session = await self._open_session(req.session)
                    except BrowserCrashed as e:
                        raise BrowserUnavailable(f"the browser went away: {e}") from None
        if session.lock.locked():
            progress("queued", f"waiting for the previous action of session {req.session!r}")
        async with session.lock:
            session.last_used = trio.current_time()
            self._wake.set()
            try:
                return await self._act(session, req, rid, progress, started)
            except (CDPClosed, BrowserCrashed) as e:
                await self._close(session)
                raise BrowserUnavailable(f"the browser went away during the action ({e}); the session is closed: "
                                         f"open the page again") from None
            finally:
                session.last_used = trio.current_time()
                self._wake.set()

    async def _act(self, session: Session, req: BrowseRequest, rid: Any, progress: ReportProgress,
                   started: float) -> BrowseResult:
        a = req.action
        if a == "tabs":
            return await self._tabs(session, req, rid, started)
        if a == "open":
            return await self._open(session, req, rid, progress, started)
        tab = session.tab(req.tab)
        if tab.dialog is not None and a not in ("dialog", "screenshot"):
            raise tab.dialog_open()
        session.opened = []
        marks = tab.start_action()
        progress("browse", f"{a} on {tab.name}")
        if a == "snapshot":
            return await self._snapshot(session, tab, req, rid, started)
        if a == "read":
            return await self._read(session, tab, req, rid, started)
        if a == "screenshot":
            image, width, height = await actions.screenshot(tab, req.ref, req.full_page)
            return await self._result(session, tab, req, rid, started, marks, snapshot=False,
                                      image=image, width=width, height=height)
        step = _STEPS.get(a)
        acted = await step(self, tab, req) if step is not None else _Acted()
        return await self._settled(session, tab, req, rid, started, marks, acted)

    async def _settled(self, session: Session, tab: BrowseTab, req: BrowseRequest, rid: Any, started: float,
                       marks: Marks, acted: _Acted) -> BrowseResult:
        """After an action's step: wait for what it set off to settle, then tell what it changed."""
        step_done = time.monotonic()
        notes: list[str] = []
        if acted.settle:
            notes = await tab.settle(marks, self.config.nav_timeout_s, self.config.settle_s)
        log.debug("browse %s: acted in %d ms, settled in %d ms", req.action, (step_done - started) * 1000,
                  (time.monotonic() - step_done) * 1000)
        if tab.blocked is not None:
            raise BlockedUrl(f"the page tried to go where the address policy refuses: {tab.blocked}; the tab "
                             f"shows an error page now (nav back returns to the page before)")
        return await self._result(session, tab, req, rid, started, marks, full=acted.full, notes=notes or None,
                                  **acted.fields)

    # --- one step per action: what it does to the tab (the result and settling are _settled's) ---

    async def _nav(self, tab: BrowseTab, req: BrowseRequest) -> _Acted:
        if req.to is None:
            raise BadRequest("nav needs `to`: back, forward or reload")
        await self._history(tab, req.to)
        return _Acted(full=True)

    async def _click(self, tab: BrowseTab, req: BrowseRequest) -> _Acted:
        await actions.click(tab, _need(req.ref, "click", "ref"), req.button, req.double)
        return _Acted()

    async def _fill(self, tab: BrowseTab, req: BrowseRequest) -> _Acted:
        value = await actions.fill(tab, _need(req.ref, "fill", "ref"), _need(req.text, "fill", "text"))
        if req.submit:
            await actions.press(tab, "Enter")
        return _Acted(fields={"value": value})

    async def _type(self, tab: BrowseTab, req: BrowseRequest) -> _Acted:
        if req.ref is not None:
            await actions.focus(tab, req.ref)
        await actions.type_text(tab, _need(req.text, "type", "text"))
        return _Acted()

    async def _press(self, tab: BrowseTab, req: BrowseRequest) -> _Acted:
        if req.ref is not None:
            await actions.focus(tab, req.ref)
        await actions.press(tab, _need(req.key, "press", "key"))
        return _Acted()

    async def _select(self, tab: BrowseTab, req: BrowseRequest) -> _Acted:
        value = await actions.select(tab, _need(req.ref, "select", "ref"), _need(req.values, "select", "values"))
        return _Acted(fields={"value": value})

    async def _check(self, tab: BrowseTab, req: BrowseRequest) -> _Acted:
        value = await actions.check(tab, _need(req.ref, "check", "ref"), _need(req.checked, "check", "checked"))
        return _Acted(fields={"value": value})

    async def _hover(self, tab: BrowseTab, req: BrowseRequest) -> _Acted:
        await actions.hover(tab, _need(req.ref, "hover", "ref"))
        return _Acted()

    async def _scroll(self, tab: BrowseTab, req: BrowseRequest) -> _Acted:
        await actions.scroll(tab, req.ref, req.direction, req.px)
        return _Acted()

    async def _wait(self, tab: BrowseTab, req: BrowseRequest) -> _Acted:
        waited_for = await actions.wait(tab, req.text, req.text_gone, req.url, req.ms, req.timeout_s or 10.0)
        return _Acted(fields={"waited_for": waited_for}, settle=False)

    async def _dialog(self, tab: BrowseTab, req: BrowseRequest) -> _Acted:
        if tab.dialog is None:
            raise BadRequest(f"no dialog is open on {tab.name}")
        params: dict[str, Any] = {"accept": _need(req.accept, "dialog", "accept")}
        if req.prompt_text is not None:
            params["promptText"] = req.prompt_text
        await tab.call("Page.handleJavaScriptDialog", params)
        await tab.wait_for(lambda: tab.dialog is None)
        return _Acted()

    async def _open(self, session: Session, req: BrowseRequest, rid: Any, progress: ReportProgress,
                    started: float) -> BrowseResult:
        url = await _checked_url(_need(req.url, "open", "url"), self.policy)
        if req.new_tab or not session.tabs:
            tab = await self._new_tab(session, await session.context.new_tab())
            session.active = tab.name
        else:
            tab = session.tab(req.tab)
            if tab.dialog is not None:
                raise tab.dialog_open()
        session.opened = []
        marks = tab.marks()
        progress("browse", f"loading {url} in {tab.name}")
        await actions.navigate(tab, url)
        notes = await tab.settle(marks, self.config.nav_timeout_s, self.config.settle_s)
        if tab.status is not None and tab.status >= 400:
            notes.append(f"the page answered HTTP {tab.status}; the tab shows the server's error page")
        return await self._result(session, tab, req, rid, started, marks, full=True, notes=notes or None,
                                  status=tab.status)

    async def _history(self, tab: BrowseTab, to: str) -> None:
        if to == "reload":
            await tab.call("Page.reload")
            await tab.wait_for(lambda: tab.main_loading or tab.dialog is not None)
            return
        history = await tab.call("Page.getNavigationHistory")
        index = history["currentIndex"] + (-1 if to == "back" else 1)
        entries = history["entries"]
        if not 0 <= index < len(entries):
            raise BadRequest(f"there is no page to go {to} to in {tab.name}'s history")
        await tab.call("Page.navigateToHistoryEntry", {"entryId": entries[index]["id"]})

    async def _snapshot(self, session: Session, tab: BrowseTab, req: BrowseRequest, rid: Any,
                        started: float) -> BrowseResult:
        whole = req.ref is None and req.find is None
        snap = await tab.snapshot(req.mode, req.ref, req.find, both=whole)
        if whole and snap.full is not None:
            tab.remember_lines(snap.full)
        title = snap.title
        text = _header(tab, title) + "\n" + snap.text
        if snap.truncated:
            text += "\n- … (the page is larger than the snapshot's node budget: use find or ref to reach the rest)"
        chunk, next_offset = page(text, req.offset, req.max_chars or self.config.snapshot_chars)
        return BrowseResult(id=rid, op="browse", action="snapshot", session=session.name,
                            page=PageInfo(tab=tab.name, url=tab.url, title=title), change="none", refs_reset=False,
                            snapshot=chunk, snapshot_kind="full", elapsed_ms=now_ms(started),
                            ref_count=sum(1 for line in snap.lines if "ref=e" in line), next_offset=next_offset)

    async def _read(self, session: Session, tab: BrowseTab, req: BrowseRequest, rid: Any,
                    started: float) -> BrowseResult:
        child = await tab.child_frame(tab.ref_frame(req.ref), req.ref) if req.ref is not None else None
        if child is not None and tab.has_frame(child):  # an iframe's ref: the frame's own document
            html = await tab.evaluate(child, f"({SHOWN_HTML})(document.documentElement)")
        elif req.ref is not None:
            html = await tab.on_ref(req.ref, f"return '<html><body>' + ({SHOWN_HTML})(this) + '</body></html>';")
        else:
            html = await tab.evaluate(tab.target_id, f"({SHOWN_HTML})(document.documentElement)")
        extracted = await self.extractor.html(html or "", tab.url)
        content, next_offset = paginate(extracted.markdown, req.offset, req.max_chars or self.fetch_config.page_chars,
                                        self.fetch_config.page_lines)
        title = await tab.title()
        return BrowseResult(id=rid, op="browse", action="read", session=session.name,
                            page=PageInfo(tab=tab.name, url=tab.url, title=title), change="none", refs_reset=False,
                            snapshot="", snapshot_kind="none", elapsed_ms=now_ms(started), content=content,
                            next_offset=next_offset)

    async def _tabs(self, session: Session, req: BrowseRequest, rid: Any, started: float) -> BrowseResult:
        if req.do == "select":
            tab = session.tab(_need(req.tab, "tabs select", "tab"))
            session.active = tab.name
            await tab.call("Page.bringToFront")
        elif req.do == "close":
            tab = session.tab(_need(req.tab, "tabs close", "tab"))
            if len([t for t in session.tabs.values() if not t.closed]) == 1:
                raise BadRequest(f"{tab.name} is the session's last tab; close the session instead (action close)")
            await session.context.close_tab(tab.target_id)
            tab.mark_closed()
            del session.tabs[tab.name]
            if session.active == tab.name:
                session.active = list(session.tabs)[-1]
        infos = []
        for t in list(session.tabs.values()):
            if t.closed:
                continue
            infos.append(TabInfo(tab=t.name, url=t.url, title=await t.title(), active=t.name == session.active))
        active = session.tabs.get(session.active or "")
        shown = PageInfo(tab=active.name, url=active.url, title=await active.title()) if active else None
        return BrowseResult(id=rid, op="browse", action="tabs", session=session.name, page=shown,
                            change="none", refs_reset=False, snapshot="", snapshot_kind="none",
                            elapsed_ms=now_ms(started), tabs=infos)

    async def _result(self, session: Session, tab: BrowseTab, req: BrowseRequest, rid: Any, started: float,
                      marks: Marks, *, full: bool = False, snapshot: bool = True, **fields: Any) -> BrowseResult:
        """The common fields: the page, what changed, and the snapshot (whole, or what changed)."""
        await _adoptions_settled(session)
        if session.opened:
            fields["new_tabs"] = [{"tab": t.name, "url": t.url} for t in session.opened]
            tab = session.opened[-1]  # the newest tab is the active one now: show it
            full = True
        navigated = tab.doc_gen != marks.doc_gen or bool(session.opened)
        change = "navigation" if navigated else "same_document" if tab.same_doc != marks.same_doc else "none"
        fields.update(_events_since(tab, marks))
        if snapshot and tab.dialog is None:
            shown = await self._shown(tab, whole=full or navigated)
        else:
            shown = _Shown(title=await tab.title())
        if shown.dom_changed and change == "none":
            change = "dom"
        text = _header(tab, shown.title) + "\n" + shown.body if shown.kind != "none" else ""
        chunk, next_offset = page(text, 0, self.config.snapshot_chars)
        if next_offset is not None:
            fields["next_offset"] = next_offset
        return BrowseResult(id=rid, op="browse", action=req.action, session=session.name,
                            page=PageInfo(tab=tab.name, url=tab.url, title=shown.title), change=change,  # type: ignore[arg-type]
                            refs_reset=navigated, snapshot=chunk, snapshot_kind=shown.kind,  # type: ignore[arg-type]
                            elapsed_ms=now_ms(started), **fields)

    async def _shown(self, tab: BrowseTab, *, whole: bool) -> _Shown:
        """The tab's interactive snapshot: whole, or only what changed since the last one of the same document."""
        snap = await tab.snapshot("interactive", None, None, both=True)
        old = tab.previous_lines()
        assert snap.full is not None
        tab.remember_lines(snap.full)
        if whole or old is None:
            return _Shown(snap.title, "full", snap.text)
        # what changed is told from every line, text included ("Profile saved"), not only controls
        added, removed = diff(old, snap.full)
        added = [line.lstrip() for line in added]
        if not added and not removed:
            return _Shown(snap.title)
        body = "\n".join(added + ([f"- (removed: {', '.join(removed)})"] if removed else []))
        if len(body) > len(snap.text):
            return _Shown(snap.title, "full", snap.text, dom_changed=True)
        return _Shown(snap.title, "diff", body, dom_changed=True)


@dataclass
class _Acted:
    """What an action's step leaves for its result: fields to report, whether the snapshot is shown whole
    (a navigation), and whether to wait for the page to settle (a wait has waited already)."""

    fields: dict[str, Any] = field(default_factory=dict)
    full: bool = False
    settle: bool = True


class _Shown(NamedTuple):
    """The snapshot a result shows: its kind (full, diff or none), and whether the document's lines changed."""

    title: str
    kind: str = "none"
    body: str = ""
    dom_changed: bool = False


# Each action's step by name; snapshot, read, screenshot, tabs and open answer in _act on their own.
_Step = Callable[[Browse, BrowseTab, BrowseRequest], Awaitable[_Acted]]
_STEPS: dict[str, _Step] = {
    "nav": Browse._nav, "click": Browse._click, "fill": Browse._fill, "type": Browse._type,
    "press": Browse._press, "select": Browse._select, "check": Browse._check, "hover": Browse._hover,
    "scroll": Browse._scroll, "wait": Browse._wait, "dialog": Browse._dialog,
}


async def _adoptions_settled(session: Session) -> None:
    """Tabs the action opened are being adopted: wait for them (briefly) so the result can show them."""
    if session.adopting:
        with trio.move_on_after(2):
            while session.adopting:
                await session.adopted.wait()


def _events_since(tab: BrowseTab, marks: Marks) -> dict[str, Any]:
    """The dialog (the latest) and downloads the page raised since the action began."""
    events: dict[str, Any] = {}
    dialogs = tab.dialogs[marks.dialogs:]
    if dialogs:
        events["dialog"] = dialogs[-1]
    if len(tab.downloads) > marks.downloads:
        events["downloads"] = list(tab.downloads[marks.downloads:])
    return events

def _header(tab: BrowseTab, title: str) -> str:
    return f"[{tab.name}] {title or '(no title)'} — {tab.url}"


def _need(value: Any, action: str, name: str) -> Any:
    if value is None:
        raise BadRequest(f"{action} needs `{name}`")
    return value


async def _checked_url(url: str, policy: AddressPolicy) -> str:
    """http(s) only, through the address policy; the fragment is kept (single-page apps route by it)."""
    scheme = url.split(":", 1)[0].strip().lower() if ":" in url else ""
    if scheme in REFUSED_SCHEMES:
        raise BlockedUrl(f"{scheme}: URLs are not opened by browse; it opens http(s) pages only")
    base, _, fragment = url.partition("#")
    try:
        checked = await prepare_url(base, policy)
    except WebfetchError:
        raise
    return checked + (f"#{fragment}" if fragment else "")
