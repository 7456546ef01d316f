"""The browse actor: sessions of browser automation on the daemon's Chrome (PROTOCOL.md, browse).

A session is one browser context (cookies, storage and cache of its own, behind the address-policy
proxy) with its tabs. One action at a time per session (a lock; others queue); a session ends on
`close`, after `browse.idle_s` without an action, or when the daemon stops, and its context goes with it.
A session opened with a profile starts with the profile's cookies and writes what it changed back to the
profile when it ends (each of those ways) and on `save` (profiles/use.py says how two users of one profile
share it).
The sessions' tasks (each tab's event pump) run in this actor's nursery, so a cancelled request ends only
its action: the session and its tabs stay usable.
An action is dispatched here by its entry in verbs.VERBS: on the tab it needs, its step, then the wait for
what it set off (settle.py) and its result (reply.py); or its handler's own answer.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import trio

from .. import redact
from ..children import private_tempdir
from ..chrome.browser import BrowserContext, Chrome, PageTarget
from ..chrome.cdp import CDPClosed, CDPError
from ..chrome.child_targets import hold_children
from ..chrome.user_browser import UserBrowser, UserContext
from ..config import Config
from ..errors import (
    BadRequest,
    BlockedUrl,
    BrowseDisabled,
    BrowserCrashed,
    BrowserUnavailable,
    NoSuchTab,
    UserBrowserGone,
    UserHasControl,
    WebfetchError,
)
from ..parse.extractor import Extractor
from ..profiles.store import Cookie, Profile, ProfileError
from ..profiles.use import ProfileUse
from ..protocol import BrowseRequest, BrowseResult, BrowseSessionStatus, ReportProgress
from ..urls import AddressPolicy, HostGate, PolicyHolder, effective_port, parse_url, user_host_listed
from . import network
from .control import Control, dispatch
from .device import DESKTOP, Device, emulate
from .downloads import Downloads, session_directory
from .emulation import Emulation
from .forced import Forced
from .recording import Recording
from .reply import Reply, after_action
from .settle import Marks, settle
from .tab import BrowseTab
from .uploads import PrivateCopies
from .verbs import VERBS, Acted, Call, SessionUse, Verb, need
from .watch import SessionWatch, Watcher

log = logging.getLogger("webfetch.browse")

CLOSE_TIMEOUT_S = 2.0


def no_page(session: str) -> NoSuchTab:
    """An action that needs a page, in a session with none: before the first `open`, after `close`."""
    return NoSuchTab(f"no page is open in browse session {session!r}: call open with a url first")


def _check_profile_fields(req: BrowseRequest, session: Session | None) -> None:
    """bad_request for a profile, or a `create`, where no open can take it (before any session is made)."""
    if req.create and (req.profile is None or req.action != "open"):
        raise BadRequest("`create: true` starts a new profile on the open that names it: give `profile` with it")
    if session is None and req.profile is not None and req.action != "open":
        raise BadRequest(f"a session's profile is given on the open that starts it; session {req.session!r} "
                         f"is not open")
    if req.browser == "user" and req.profile is not None:
        raise BadRequest("a session in your own browser uses the browser's own logins: give `profile` or "
                         "`browser: \"user\"`, not both")


# How long a closing session in the person's browser gives its pages to leave (their `pagehide` handlers run,
# under the gate) before its tabs close
LEAVE_PAGES_S = 3.0


async def _leave(tab: BrowseTab) -> None:
    with suppress(CDPError, CDPClosed):
        await tab.call("Page.navigate", {"url": "about:blank"})
        await trio.sleep(0.5)   # what the page sent as it went has reached the interception

class Session:
    """One browse session: a browser context, its tabs, and the nursery their event pumps run in (the
    actor's, not a request's: a cancelled action leaves the session intact)."""

    def __init__(self, name: str, context: BrowserContext, gate: HostGate, profiles: ProfileUse,
                 downloads: Downloads, profile: str | None = None, network_log: bool = True,
                 redacting: Callable[[], bool] = lambda: True) -> None:
        self.name = name
        self.network = network.NetworkLog(enabled=network_log)  # every request of its tabs
        # what a person sees of it in the view (watch.py), and whether they hold its browser (control.py)
        self.watch = SessionWatch(name, self.network, redacting, self.shown_tab, lambda: self.control.holder)
        self.control = Control(name, self.watch.timeline)
        self.recording: Recording | None = None
        self.context = context
        self.downloads = downloads           # where its pages' downloads are saved, and how each went
        self.uploads: PrivateCopies | None = None  # copies of the files it uploaded (made at the first upload)
        self.profiles = profiles
        self.profile = profile               # the profile it started with, written back when it ends
        self.given: list[Cookie] = []        # the profile's cookies as last given to or saved from the context
        self.seed: Profile | None = None     # the profile as the session started: its tabs' localStorage
        self.gate = gate    # the address policy for its pages' requests, each host's verdict kept
        self.tabs: dict[str, BrowseTab] = {}
        self.active: str | None = None
        self.lock = trio.Lock()
        self.last_used = trio.current_time()
        self.numbers = itertools.count(1)
        self.opened: list[BrowseTab] = []    # tabs the page opened (popups), since the last action's start
        self._scope = trio.CancelScope()
        self._done = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._adopting = 0
        self._adopted = trio.Event()
        self.device = DESKTOP                # what its tabs emulate (open or viewport with a device)
        self.forced = Forced(self.network)   # what else they are made to meet: routes, offline, emulate
        self.user = isinstance(context, UserContext)  # in the person's own browser ([user_browser])

    def shown_tab(self) -> BrowseTab | None:
        """The tab an action without `tab` acts on (the view shows it), if one is open."""
        try:
            return self.tab(None)
        except NoSuchTab:
            return None

    def tab(self, name: str | None) -> BrowseTab:
        open_tabs = [t for t in self.tabs.values() if not t.closed]
        if name is None and not open_tabs:
            raise no_page(self.name)
        if name is None and (self.active not in self.tabs or self.tabs[self.active or ""].closed):
            # the active tab closed itself (window.close()): the newest one left takes its place
            self.active = open_tabs[-1].name
        key = name or self.active
        tab = self.tabs.get(key or "")
        if tab is None or tab.closed:
            raise NoSuchTab(f"session {self.name!r} has no tab {key!r}; its tabs are "
                            f"{', '.join(t.name for t in open_tabs) or 'none'} (tabs action, do: list)")
        return tab

    async def run(self, *, task_status: trio.TaskStatus[None]) -> None:
        """The session's tasks (tab pumps, adoptions, the popup watch), until `aclose`."""
        try:
            with self._scope:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    # tabs a page opens (target=_blank, window.open) join the session
                    await nursery.start(self.context.watch_popups, self._popup)
                    task_status.started()
                    await trio.sleep_forever()
        finally:
            self._done.set()

    async def new_tab(self) -> BrowseTab:
        """A new blank tab, the active one from now on."""
        tab = await self._add(await self.context.new_tab())
        self.active = tab.name
        return tab

    async def close_tab(self, tab: BrowseTab) -> None:
        await self.context.close_tab(tab.target_id)
        tab.mark_closed()
        del self.tabs[tab.name]
        if self.active == tab.name:
            self.active = list(self.tabs)[-1]

    async def downloads_settled(self, tab: BrowseTab, marks: Marks, timeout_s: float) -> None:
        """The downloads the action started: those its document responses started have begun, and each
        has ended (saved, stopped at the cap, failed), for at most `timeout_s`; one still going is told as
        such, and again once it ends (an older one still going is not waited for again)."""
        if tab.downloads.responses == marks.download_responses and len(tab.downloads.records) == marks.downloads:
            return
        deadline = trio.current_time() + timeout_s
        with trio.move_on_at(deadline):
            await tab.wait_for(lambda: len(tab.downloads.records) - marks.downloads
                               >= tab.downloads.responses - marks.download_responses)
        await self.downloads.wait_final(list(tab.downloads.records[marks.downloads:]),
                                        max(0.0, deadline - trio.current_time()))

    async def adoptions_settled(self) -> None:
        """Tabs the action opened are being adopted: wait for them (briefly) so the result can show them."""
        if self._adopting:
            with trio.move_on_after(2):
                while self._adopting:
                    await self._adopted.wait()

    async def save(self) -> list[str]:
        """Write the cookies the session's pages changed, and the localStorage of the origins its tabs show,
        to its profile (ProfileError: the profile is as it was); the notes on it (cookies refused for
        domains the profile is not bound to)."""
        if self.profile is None:
            return []
        origins = []
        for tab in list(self.tabs.values()):
            if not tab.closed and tab.dialog is None:  # an open dialog blocks every script
                origin = await self.profiles.read_storage(tab)
                if origin is not None and origin.origin.startswith(("http://", "https://")):
                    origins.append(origin)
        done = await self.profiles.write_back(self.profile, self.context, self.given, origins)
        if done is None:
            return []
        self.given = done.cookies
        note = done.note(self.profile)
        return [] if note is None else [note]

    async def aclose(self) -> list[str]:
        """End the session: its profile written back, then its tabs, its tasks and its browser context; the
        write-back's notes."""
        notes: list[str] = []
        try:
            notes = await self.save()
        except ProfileError as e:  # a full disk: the session ends all the same; the profile is as it was
            log.warning("browse session %r: %s", self.name, e)
        if self.recording is not None:
            self.recording.logs(list(self.tabs.values()), self.network)
            self.recording.close()
        if self.user:
            await self._leave_pages()
        for tab in self.tabs.values():
            tab.mark_closed()
        self.watch.end()
        if self.control.holder is not None:
            self.control.hand_back(self.control.holder)
        self._scope.cancel()
        await self.context.aclose()
        self.downloads.aclose()
        if self.uploads is not None:
            self.uploads.remove()
        # the tabs' pumps end at once now; waited for, bounded, even in a cancelled scope
        with trio.move_on_after(CLOSE_TIMEOUT_S, shield=True):
            await self._done.wait()
        return notes

    async def _leave_pages(self) -> None:
        """In the person's browser, each tab's page left for a blank one while the tabs' interception still
        answers: a page's `pagehide` may send a beacon or a keepalive fetch, which must meet the gate too (a
        tab closed with its pump already gone sent them to unlisted hosts). Bounded, shielded."""
        with trio.move_on_after(LEAVE_PAGES_S, shield=True):
            async with trio.open_nursery() as nursery:
                for tab in self.tabs.values():
                    if not tab.closed:
                        nursery.start_soon(_leave, tab)

    def record(self, recording: Recording) -> None:
        """Record the session from now on: its frames (the screencast runs for it), steps, console, requests."""
        self.recording = recording
        self.watch.screen.wanted += 1
        self.watch.screen.listeners.append(recording.frame)
        self.watch.timeline.listeners.append(recording.step)

    def recorded(self) -> str | None:
        """After an action: its console and requests to the recording; a note once the recording is full."""
        if self.recording is None:
            return None
        self.recording.logs([t for t in self.tabs.values() if not t.closed], self.network)
        return self.recording.note()

    def private_copies(self, checked: list[tuple[str, os.stat_result]]) -> list[str]:
        """The files the upload rule let through, each as a private copy of the very file it checked
        (uploads.PrivateCopies): what Chrome is handed. Blocking: run in a thread."""
        if self.uploads is None:
            self.uploads = PrivateCopies(Path(private_tempdir("upload")))
        return [self.uploads.private_copy(path, st) for path, st in checked]

    async def _add(self, page: PageTarget) -> BrowseTab:
        tab = BrowseTab(f"t{next(self.numbers)}", page, self.gate, self.network, self.downloads, self.forced)
        tab.hooks.on_change = self.watch.notify
        assert self._nursery is not None
        await self._nursery.start(tab.run)
        if self.user:  # its other-process frames and workers, held to the gate too
            await self._nursery.start(hold_children, page, self.gate.check)
        await tab.intercept()
        await self.context.release(page)  # a page held at its start runs on: its requests meet the gate
        await tab.setup()
        if self.device != DESKTOP:
            await emulate(tab, self.device, self.context.browser.version)
        if self.forced.emulation.summary():
            await self._emulate(tab)
        if self.seed is not None:
            await self.profiles.seed_page(tab, self.seed)
        self.tabs[tab.name] = tab
        return tab

    async def _refused_page(self, page: PageTarget) -> str | None:
        """Why the gate refuses the page a tab opened, if it is at an address already (one caught paused is
        not, and its first request meets the gate; this holds should one ever come in some other way)."""
        url = await page.url()
        return None if url in ("", "about:blank") else await self.gate.check(url, navigation=True)

    def _popup(self, target_id: str) -> None:
        assert self._nursery is not None
        self._adopting += 1
        self._nursery.start_soon(self._adopt, target_id)

    async def set_device(self, device: Device) -> None:
        """Every tab of the session emulates `device` from now on, those it opens later too."""
        self.device = device
        for tab in list(self.tabs.values()):
            if not tab.closed:
                await emulate(tab, device, self.context.browser.version)
                if self.forced.emulation.summary():  # its user agent and locale over the device's
                    await self._emulate(tab)

    async def set_emulation(self, emulation: Emulation) -> None:
        """Every tab of the session gets `emulation` from now on, those it opens later too."""
        self.forced.emulation = emulation
        await emulation.grant(self.context)
        for tab in list(self.tabs.values()):
            if not tab.closed:
                await self._emulate(tab)

    async def _emulate(self, tab: BrowseTab) -> None:
        e, mobile = self.forced.emulation, self.device.mobile
        # a locale changes the Accept-Language Chrome sends with the user agent's override: its own agent then
        agent = await self.context.default_user_agent() if e.locale and not e.user_agent and not mobile else ""
        await e.apply(tab, mobile, self.context.browser.version, agent)

    async def _adopt(self, target_id: str) -> None:
        try:
            page = await self.context.adopt(target_id)
            if self.user and (why := await self._refused_page(page)) is not None:
                log.info("browse: closed a page a tab opened where the gate refuses: %s", why)
                await self.context.close_tab(target_id)
                return
            tab = await self._add(page)
            self.opened.append(tab)
            self.active = tab.name
        except (CDPError, CDPClosed) as e:
            log.info("browse: could not follow a new tab: %s", e)
            if self.user:  # the person's browser keeps no page of the agent's that it does not hold
                with suppress(CDPError, CDPClosed):
                    await self.context.close_tab(target_id)
        finally:
            self._adopting -= 1
            self._adopted.set()
            self._adopted = trio.Event()


class Browse:
    """Owns the browse sessions; `handle` runs one action in the request's own task."""

    def __init__(self, config: Config, chrome: Chrome, extractor: Extractor,
                 policy: AddressPolicy | PolicyHolder, profiles: ProfileUse | None = None,
                 user_browser: UserBrowser | None = None) -> None:
        self.config = config.browse          # read at use: `reconfigure` replaces both
        self.user_browser = user_browser or UserBrowser(config.user_browser)
        self.profiles = profiles or ProfileUse()
        self.fetch_config = config.fetch
        self.chrome = chrome
        self.extractor = extractor
        self.policy = PolicyHolder.of(policy)  # each session's gate reads it too: a reload reaches open sessions
        self.sessions: dict[str, Session] = {}
        self._nursery: trio.Nursery | None = None
        self._wake = trio.Event()
        self._opening = trio.Lock()
        # the port of the daemon's view, while it is open (the daemon sets this once the view exists)

    def reconfigure(self, config: Config) -> None:
        """A reloaded config: browse.* and the page sizes apply from the next action. Switched off, the
        sessions not in an action close now and the others when their action ends (each then answers
        `browse_disabled`); a changed idle_s wakes the reaper to count by it."""
        self.config = config.browse
        self.fetch_config = config.fetch
        self._wake.set()

    def statistics(self) -> list[BrowseSessionStatus]:
        """The sessions as `status` shows them: their URLs' secrets masked whatever browse.redact_secrets says
        (status is read by anyone who asks the daemon, not by the one reading their own app's traffic)."""
        now = trio.current_time()
        return [BrowseSessionStatus(session=s.name, tabs=len(s.tabs),
                                    url=redact.url(s.tabs[s.active].url) if s.active in s.tabs else "",
                                    idle_s=round(now - s.last_used, 1), profile=s.profile,
                                    browser="user" if s.user else None)
                for s in self.sessions.values()]

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._reaper)
                task_status.started()
                await trio.sleep_forever()
        finally:
            # every session's context goes, so no tab outlives the daemon's browser either
            await self.close_all()

    async def close_all(self) -> None:
        """Close every session, its profile written back. The daemon's stop calls it while the browser is
        still up (once the actors are cancelled, Chrome goes at the same time and its cookies with it)."""
        # all at once, each bounded by its own close: one after another, the last sessions of a busy daemon
        # ran out of the shared time and their logins were lost
        with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_TIMEOUT_S * 2):
            async with trio.open_nursery() as nursery:
                for session in list(self.sessions.values()):
                    nursery.start_soon(session.aclose)
        self.sessions.clear()

    # --- sessions ---------------------------------------------------------------------------------

    async def _reaper(self) -> None:
        """Close sessions idle for browse.idle_s; sleeps until the next one is due (or a change)."""
        while True:
            self._wake = trio.Event()
            # switched off (a reload): every session is due once its action ends
            idle_s = self.config.idle_s if self.config.enabled else 0.0
            idle = [s.last_used for s in self.sessions.values() if not s.lock.locked() and s.control.holder is None]
            with trio.move_on_at(min(idle) + idle_s if idle else float("inf")):
                await self._wake.wait()
            now = trio.current_time()
            for s in list(self.sessions.values()):
                if not s.lock.locked() and s.control.holder is None and now - s.last_used >= idle_s:
                    log.info("browse session %r %s; closing it", s.name, f"idle for {idle_s:g} s" if idle_s
                             else "open when browse was switched off")
                    await self.close_session(s)

    async def _open_session(self, req: BrowseRequest, progress: ReportProgress) -> Session:
        if len(self.sessions) >= self.config.max_sessions:
            raise BadRequest(f"{len(self.sessions)} browse sessions are open (browse.max_sessions); close one "
                             f"(action close) or wait for an idle one to expire")
        assert self._nursery is not None
        profile = None
        if req.profile is not None and req.action == "open":
            host = parse_url(need(req.url, "open", "url"))[1]
            profile, created = await self.profiles.load_or_create(req.profile, host, create=req.create)
            if created:
                progress("browse", f"profile {profile.name!r} created for {profile.hosts[0]}")
        if req.browser == "user":
            return await self._open_user_session(req, progress)
        directory = session_directory(self.config, req.session)
        try:
            context = await self.chrome.open_context(downloads=str(directory))
        except BaseException:
            directory.rmdir()
            raise
        session = Session(req.session, context, HostGate(self.policy), self.profiles,
                          Downloads(directory, self.fetch_config.max_bytes, context),
                          None if profile is None else profile.name, self.config.network_log,
                          lambda: self.config.redact_secrets)
        try:
            if profile is not None:
                session.given = await self.profiles.seed(context, profile)
                session.seed = profile
            await self._nursery.start(session.run)
            await self._record(session, req)
        except BaseException:  # cancelled before the session owned its context: nothing else would dispose of it
            await context.aclose()
            session.downloads.aclose()
            raise
        self.sessions[req.session] = session
        return session

    async def _record(self, session: Session, req: BrowseRequest) -> None:
        """Start the session's recording if the open or browse.record asks for one; one that cannot be made
        (a full disk) is logged, and the session runs without it."""
        mode = self.config.record if req.record is None else "always" if req.record else "never"
        if mode == "never":
            return
        recording = Recording(session.name, mode, self.config.record_max_bytes, self.config.recordings_max_bytes)
        try:
            await recording.open()
        except OSError as e:
            log.warning("browse session %r: no recording: %s", session.name, e)
            return
        assert self._nursery is not None
        self._nursery.start_soon(recording.run)
        session.record(recording)

    async def _open_user_session(self, req: BrowseRequest, progress: ReportProgress) -> Session:
        """A session in the person's own browser: its tabs in their default context (their logins), in a
        window of their own, on the hosts user_browser.hosts lists (the gate holds its tabs to them)."""
        hosts = tuple(self.user_browser.config.hosts)
        scheme, host, port = parse_url(need(req.url, "open", "url"))[:3]
        if hosts and not user_host_listed(host, effective_port(scheme, port), hosts):
            raise BlockedUrl(f"{host} is not in user_browser.hosts ({', '.join(hosts)}): the agent uses your "
                             f"browser only for the sites you listed there")
        context = await self.user_browser.context(lambda message: progress("person", message),
                                                  self.config.nav_timeout_s)
        assert self._nursery is not None
        # downloads go where the person's browser puts them: no directory of ours (browse/downloads.py)
        gate = self.user_browser.gate(self.policy)
        session = Session(req.session, context, gate, self.profiles,
                          Downloads(None, self.fetch_config.max_bytes, context), None, self.config.network_log)
        try:
            await self._nursery.start(session.run)
        except BaseException as e:
            session.downloads.aclose()
            await context.aclose()  # shielded: the browser stops holding new pages for a session never made
            if isinstance(e, CDPClosed):
                raise UserBrowserGone(f"your browser went away as the session started ({e}); ask again "
                                      f"(webfetch reconnects once)") from None
            raise
        self.sessions[req.session] = session
        return session

    async def close_session(self, session: Session) -> list[str]:
        if self.sessions.get(session.name) is session:
            del self.sessions[session.name]
        notes = await session.aclose()
        self._wake.set()
        return notes

    # --- requests ---------------------------------------------------------------------------------

    async def handle(self, req: BrowseRequest, rid: Any, progress: ReportProgress) -> BrowseResult:
        if not self.config.enabled:
            raise BrowseDisabled("browser automation is switched off (browse.enabled = false in the config); "
                                 "read pages with web_fetch (`webfetch fetch` on the command line)")
        verb = VERBS[req.action]
        reply = Reply(rid, req.action, req.session, time.monotonic())
        session = self.sessions.get(req.session)
        if verb.session is SessionUse.ENDS:  # close: at once, not queued behind the action the session runs
            if session is None:
                return reply.result(None)  # closed already
            return await self._act(verb, Call(self, session, req, reply, progress))
        _check_profile_fields(req, session)
        if session is None and verb.session is not SessionUse.STARTS:
            raise no_page(req.session)  # no browser context is made for an action that cannot run in it
        if session is None:
            async with self._opening:
                session = self.sessions.get(req.session)
                if session is None:
                    progress("browse", f"starting browse session {req.session!r}")
                    try:
                        session = await self._open_session(req, progress)
                    except BrowserCrashed as e:
                        raise BrowserUnavailable(f"the browser went away: {e}") from None
        if session.lock.locked():
            progress("queued", f"waiting for the previous action of session {req.session!r}")
        async with session.lock:
            session.last_used = trio.current_time()
            self._wake.set()
            try:
                try:
                    await session.control.agent_turn(progress, self.config.user_wait_s)
                except UserHasControl as e:  # the person sees that the agent gave up waiting for them
                    session.watch.timeline.add("agent", req.action, detail=step_detail(req), ok=False, error=e.code,
                                               message=e.message)
                    raise
                return await self._timed(session, verb, Call(self, session, req, reply, progress))
            except (CDPClosed, BrowserCrashed) as e:
                await self.close_session(session)
                if session.user:
                    raise UserBrowserGone(f"your browser went away during the action ({e}); the session is "
                                          f"closed: open the page again (webfetch reconnects once)") from None
                raise BrowserUnavailable(f"the browser went away during the action ({e}); the session is closed: "
                                         f"open the page again") from None
            finally:
                session.last_used = trio.current_time()
                self._wake.set()

    async def _timed(self, session: Session, verb: Verb, call: Call) -> BrowseResult:
        """The action, put on the session's timeline with its outcome; the screencast follows the tab it
        leaves shown."""
        req = call.req
        shown = session.shown_tab()
        try:
            result = await self._act(verb, call)
        except WebfetchError as e:
            session.watch.timeline.add("agent", req.action, detail=step_detail(req), tab=req.tab or session.active,
                                       url=self._shown_url(session.shown_tab()), ok=False, error=e.code,
                                       message=e.message,
                                       elapsed_ms=int((time.monotonic() - call.reply.started) * 1000))
            raise
        session.watch.timeline.add("agent", req.action, detail=step_detail(req),
                                   tab=result.page.tab if result.page else None,
                                   url=self._shown_url(session.shown_tab()), elapsed_ms=result.elapsed_ms)
        if session.watch.screen.wanted or session.shown_tab() is not shown:
            await session.watch.follow()
        note = session.recorded()
        if note is not None:
            result.notes = [*(result.notes or []), note]
        return result

    def _shown_url(self, tab: BrowseTab | None) -> str:
        return "" if tab is None else network.shown_url(tab.url, self.config.redact_secrets)

    # --- the view (webfetch/view/): watching a session, taking its browser over ------------------------

    def _session(self, name: str) -> Session:
        session = self.sessions.get(name)
        if session is None:
            raise NoSuchTab(f"no browse session {name!r} is open (it may have closed)")
        return session

    @asynccontextmanager
    async def watching(self, name: str) -> AsyncIterator[Watcher]:
        """A person watching session `name`: its screencast runs while the block does (NoSuchTab: no such
        session)."""
        session = self._session(name)
        async with session.watch.wanting_frames():
            yield Watcher(session.watch)

    def take_over(self, name: str, who: str) -> None:
        session = self._session(name)
        session.control.take_over(who)
        session.last_used = trio.current_time()

    def hand_back(self, name: str, who: str) -> bool:
        session = self.sessions.get(name)
        if session is None or not session.control.hand_back(who):
            return False
        session.last_used = trio.current_time()
        self._wake.set()
        return True

    async def finish(self, name: str, who: str) -> list[str]:
        """The person says they are done (a login in the view, `webfetch profile login` without a display): the
        session closes, its profile written back as a close does; the write-back's notes."""
        session = self._session(name)
        if session.control.holder not in (None, who):
            session.control.check_holder(who)
        notes = await self.close_session(session)
        log.info("browse session %r: finished by %s in the view", name, who)
        return notes

    async def user_input(self, name: str, who: str, event: Any) -> None:
        """One pointer, wheel or key event of the person holding session `name`'s browser, to its shown tab."""
        session = self._session(name)
        session.control.check_holder(who)
        tab = session.shown_tab()
        if tab is None:
            raise no_page(name)
        session.last_used = trio.current_time()
        try:
            await dispatch(tab, session.watch.screen.frame, event)
        except (CDPError, CDPClosed) as e:  # the tab closed meanwhile
            raise NoSuchTab(f"the tab went away: {e}") from None

    async def _act(self, verb: Verb, call: Call) -> BrowseResult:
        """The verb, as its entry in verbs.VERBS says: on its tab, then its step settled, or its own answer."""
        if verb.needs_tab:
            session, req = call.session, call.req
            tab = session.tab(req.tab)
            if tab.dialog is not None and not verb.past_dialog:
                raise tab.dialog_open()
            session.opened = []
            call.on = (tab, tab.start_action(req.ref))
            call.progress("browse", f"{req.action} on {tab.name}")
        if verb.answer is not None:
            return await verb.answer(call)
        assert verb.step is not None
        return await self._settled(call, verb, await verb.step(call))

    async def _settled(self, call: Call, verb: Verb, acted: Acted) -> BrowseResult:
        """After an action's step: wait for what it set off to settle, then tell what it changed."""
        tab, reply = call.tab, call.reply
        step_done = time.monotonic()
        notes: list[str] = []
        if verb.settles:
            notes = await settle(tab, call.marks, self.config.nav_timeout_s, self.config.settle_s)
        log.debug("browse %s: acted in %d ms, settled in %d ms", reply.action, (step_done - reply.started) * 1000,
                  (time.monotonic() - step_done) * 1000)
        if tab.blocked is not None:
            raise BlockedUrl(f"the page tried to go where the address policy refuses: {tab.blocked}; the tab "
                             f"shows an error page now (nav back returns to the page before)")
        return await self.answer(call.session, tab, reply, call.marks, full=acted.full, stated=acted.stated,
                                 notes=notes or None, **acted.fields)

    async def answer(self, session: Session, tab: BrowseTab, reply: Reply, marks: Marks,
                     **options: Any) -> BrowseResult:
        """The result of an action on `tab`, once the tabs it opened joined the session."""
        await session.adoptions_settled()
        await session.downloads_settled(tab, marks, self.config.nav_timeout_s)
        return await after_action(reply, tab, marks, session.opened, self.config.snapshot_chars, **options)


def step_detail(req: BrowseRequest) -> str:
    """An action's arguments as the timeline shows them: what it acted on, never what it typed (a password
    is typed like any text), URLs with their secrets masked."""
    parts = []
    if req.url is not None:
        parts.append(redact.url(req.url))
    for name in ("ref", "to", "key", "direction", "do", "tab"):
        value = getattr(req, name)
        if value is not None and not (name == "do" and value == "list"):
            parts.append(f"{name} {value}")
    if req.text is not None:
        parts.append(f"text ({len(req.text)} characters)")
    return ", ".join(parts)[:300]
