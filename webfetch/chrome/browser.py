"""The Chrome actor: keeps one browser up (launched by chrome/launch.py and driven over its DevTools pipe, or
attached to by websocket URL) with one CDP connection, restarts it when it dies (at once after a healthy
run, with backoff while it keeps failing), and hands out tabs, each in a browser context of its own, from
a small pool, and browser contexts (`BrowserContext`) for browse sessions. It is the one module that
speaks CDP's Target and Browser domains: the others get handles (`Browser`, `BrowserContext`, `PageTarget`,
`Tab`) that do it for them, the profile tools' browsers (frontends/profile_*.py) included."""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Literal

import trio

from .._trio import single_error
from ..children import ChildProcess
from ..config import BrowserConfig, default_max_renders
from ..errors import BrowserCrashed, BrowserUnavailable
from ..proxy import Failure, PolicyProxy
from ..urls import AddressPolicy, PolicyHolder, host_of
from .cdp import CDPClosed, CDPConnection, CDPError, Subscription, open_cdp
from .launch import INSTALL_HINT, BrowserLaunchError, find_chrome, launch_chrome

log = logging.getLogger("webfetch.chrome")

CRASH_WINDOW_S = 60.0
CRASH_LOOP_COUNT = 3
HEALTHY_S = 2.0  # a browser that was up this long and then died is restarted at once, not backed off
FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 30.0
TAB_CLOSE_TIMEOUT_S = 2.0
CONTEXT_CREATE_TIMEOUT_S = 10.0  # a browser that takes longer is treated as gone
MAX_TAB_USES = 100  # a recycled tab is retired after this many requests all the same
# Background work (disposing of a context a page ran in, making pool tabs) costs Chrome hundreds of ms of
# CPU, which a page loading meanwhile waits behind on a small machine: it waits up to this long for a
# moment when no fetch is loading (bin/bench's row 2c, a fetch right after a rendered page).
BACKGROUND_DEFER_S = 1.0
MAX_FROZEN = 4  # used contexts frozen and waiting for disposal; beyond this they are disposed of at once
# Recycled tabs beyond context_pool (one per page that may load at once) are kept while fetches come; after
# this long without one they are disposed of, giving their renderer processes' memory back.
POOL_SHRINK_S = 30.0

BrowserState = Literal["starting", "ready", "restarting", "crash_loop"]


@dataclass
class Browser:
    """A browser at the other end of one CDP connection: the Chrome actor's (which owns its process), or
    one a profile tool reached (`Browser.over`: the login window, a user's running Chrome)."""

    conn: CDPConnection
    version: str
    generation: int = 0  # the Chrome actor's count of starts; 0 for a browser it does not own
    pid: int | None = None
    proxy: PolicyProxy | None = None  # the address-policy proxy its page contexts connect through
    _discovering: bool = field(default=False, init=False)

    @classmethod
    async def over(cls, conn: CDPConnection) -> Browser:
        """The browser at the other end of `conn`, once it answers (CDPClosed if it went instead)."""
        return cls(conn, await browser_version(conn))

    async def discover_targets(self) -> None:
        """Have the browser report every target's creation (browser-level events), once per browser."""
        if not self._discovering:
            self._discovering = True
            await self.conn.call("Target.setDiscoverTargets", {"discover": True})

    async def pages(self) -> list[PageInfo]:
        """The browser's page targets (its tabs, in every context) as they stand."""
        targets = (await self.conn.call("Target.getTargets")).get("targetInfos", [])
        return [PageInfo(str(t["targetId"]), str(t.get("url", ""))) for t in targets if t.get("type") == "page"]

    @asynccontextmanager
    async def watch_pages(self) -> AsyncIterator[PageWatch]:
        """The browser's page targets opening, changing and closing while the block runs. It watches
        before the block starts, so `pages()` read in it misses nothing that happens after."""
        with self.conn.subscribe(None) as sub:
            await self.discover_targets()
            yield PageWatch(sub)

    @asynccontextmanager
    async def attach(self, target_id: str) -> AsyncIterator[PageTarget]:
        """A session on a page target that already exists (one of `pages()`), detached when the block
        ends; CDPError when the target is gone."""
        session = (await self.conn.call("Target.attachToTarget",
                                        {"targetId": target_id, "flatten": True}))["sessionId"]
        try:
            yield PageTarget(self, target_id, session)
        finally:
            with suppress(CDPError):  # the target went meanwhile: nothing left to detach from
                await self.conn.call("Target.detachFromTarget", {"sessionId": session})

    async def cookies(self) -> list[dict[str, Any]]:
        """Every cookie of the browser's default context (CDP's Cookie), session cookies included."""
        return list((await self.conn.call("Storage.getCookies")).get("cookies") or [])

    async def close(self) -> None:
        """Ask the browser to close every window and exit."""
        await self.conn.call("Browser.close")


@dataclass(frozen=True)
class PageInfo:
    """A page target: its id and the URL it shows."""

    target_id: str
    url: str


@dataclass(frozen=True)
class PageChange:
    """A page target `created`, `changed` (its URL or title) or `destroyed`, with the URL it shows. Chrome
    does not say which kind of target was destroyed: `destroyed` comes for every target (a worker's, an
    extension's too), with no URL; an id the watcher never saw as a page is not one."""

    kind: Literal["created", "changed", "destroyed"]
    target_id: str
    url: str = ""


class PageWatch:
    """The page changes of a browser, in order (`Browser.watch_pages`): an async iterator, or `receive()`;
    both raise CDPClosed once the connection is gone."""

    def __init__(self, sub: Subscription) -> None:
        self._sub = sub

    def __aiter__(self) -> PageWatch:
        return self

    async def __anext__(self) -> PageChange:
        return await self.receive()

    async def receive(self) -> PageChange:
        while True:
            change = _page_change(await self._sub.receive())
            if change is not None:
                return change


_PAGE_EVENTS: dict[str, Literal["created", "changed"]] = {
    "Target.targetCreated": "created", "Target.targetInfoChanged": "changed"}


def _page_change(event: dict[str, Any]) -> PageChange | None:
    params = event.get("params", {})
    if event.get("method") == "Target.targetDestroyed":
        return PageChange("destroyed", str(params.get("targetId")))
    info = params.get("targetInfo", {})
    kind = _PAGE_EVENTS.get(str(event.get("method")))
    if kind is None or info.get("type") != "page":
        return None
    return PageChange(kind, str(info["targetId"]), str(info.get("url", "")))


@dataclass(frozen=True)
class TabSetup:
    """What every tab of a kind gets before it is handed out: scripts that run in each of its documents
    before the page's own, and the requests the Fetch domain pauses (fetch/in_chrome.py's FETCH_TAB)."""

    scripts: tuple[str, ...] = ()
    fetch_patterns: tuple[dict[str, str], ...] = ()


# The events a page target's session reports when its renderer crashed (fetch/in_chrome.py and browse/tab.py end
# on them).
CRASH_EVENTS = frozenset({"Inspector.targetCrashed", "Target.targetCrashed"})


class PageTarget:
    """One page target attached as a flat session on the browser's one connection: its CDP calls and
    events. Fetch tabs (`Tab`) and browse tabs (browse/tab.py) are built on it."""

    def __init__(self, browser: Browser, target_id: str, session_id: str) -> None:
        self.browser = browser
        self.target_id = target_id
        self.session_id = session_id

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.browser.conn.call(method, params, self.session_id)

    async def call_in_order(self, commands: Sequence[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
        """The commands sent back to back, their replies awaited together (CDPConnection.call_in_order)."""
        return await self.browser.conn.call_in_order(commands, self.session_id)

    @contextmanager
    def subscribe(self, buffer: int = 1024) -> Iterator[Subscription]:
        """This target's CDP events while the block runs."""
        with self.browser.conn.subscribe(self.session_id, buffer) as sub:
            yield sub

    def connect_failure(self, url: str) -> Failure | None:
        """Why the address-policy proxy failed the latest connection for `url` (its host and port), if it
        did lately: Chrome reports all of those as one generic SOCKS error."""
        return self.browser.proxy.failure(url) if self.browser.proxy is not None else None

    async def url(self) -> str:
        """The URL the browser shows for the page ("" for a page held before its first navigation)."""
        info = (await self.browser.conn.call("Target.getTargetInfo", {"targetId": self.target_id}))["targetInfo"]
        return str(info.get("url") or "")

    async def title(self) -> str:
        """The page's title as the browser knows it (no script in the page, so an open dialog cannot block it)."""
        info = (await self.browser.conn.call("Target.getTargetInfo", {"targetId": self.target_id}))["targetInfo"]
        return str(info.get("title") or "")


class BrowserContext:
    """A browser context (cookies, storage and cache of its own) made by the Chrome actor: downloads denied
    (or saved in a directory of the caller's) and pages connecting through the address-policy proxy from
    the start. A handle: its owner makes, adopts and closes page targets in it, and disposes of it with
    `aclose()`."""

    def __init__(self, browser: Browser, context_id: str) -> None:
        self.browser = browser
        self.id = context_id
        # a blank page made with the context ahead of need (`Chrome.open_context`), the first `new_tab`'s
        self.made_ahead: PageTarget | None = None

    async def new_tab(self) -> PageTarget:
        """A new blank page in this context, attached."""
        if self.made_ahead is not None:
            page, self.made_ahead = self.made_ahead, None
            return page
        created = await self.browser.conn.call("Target.createTarget",
                                               {"url": "about:blank", "browserContextId": self.id})
        return await self.adopt(created["targetId"])

    async def adopt(self, target_id: str) -> PageTarget:
        """Attach to a page target that already exists in this context (one a page opened)."""
        session = (await self.browser.conn.call("Target.attachToTarget",
                                                {"targetId": target_id, "flatten": True}))["sessionId"]
        return PageTarget(self.browser, target_id, session)

    async def release(self, page: PageTarget) -> None:
        """An adopted page is set up: let it run on, if it was held at its start (the person's browser,
        chrome/user_browser.py; a context of ours adopts pages already running)."""

    async def close_tab(self, target_id: str) -> None:
        await self.browser.conn.call("Target.closeTarget", {"targetId": target_id})

    async def watch_popups(self, opened: Callable[[str], None], *,
                           task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Call `opened(target_id)` for each page a page of this context opens (target=_blank,
        window.open), until the browser connection closes. Started once the browser reports them."""
        started = False
        try:
            with self.browser.conn.subscribe(None) as sub:
                await self.browser.discover_targets()
                task_status.started()
                started = True
                while True:
                    event = await sub.receive()
                    if event.get("method") != "Target.targetCreated":
                        continue
                    info = event["params"]["targetInfo"]
                    if (info.get("type") == "page" and info.get("openerId")
                            and info.get("browserContextId") == self.id):
                        opened(info["targetId"])
        except CDPClosed as e:
            if not started:
                raise BrowserCrashed(str(e)) from None

    async def cancel_download(self, guid: str) -> None:
        """Stop one of this context's downloads (Chrome removes its partial file)."""
        await self.browser.conn.call("Browser.cancelDownload", {"guid": guid, "browserContextId": self.id})

    async def grant_permissions(self, permissions: list[str]) -> None:
        """Grant this context's pages `permissions` (CDP's PermissionType names: geolocation…), every origin."""
        await self.browser.conn.call("Browser.grantPermissions", {"permissions": permissions,
                                                                  "browserContextId": self.id})

    async def reset_permissions(self) -> None:
        """Every permission of this context's pages back to what Chrome decides by itself."""
        await self.browser.conn.call("Browser.resetPermissions", {"browserContextId": self.id})

    async def default_user_agent(self) -> str:
        """The user agent Chrome sends when no page overrides it."""
        return str((await self.browser.conn.call("Browser.getVersion"))["userAgent"])

    async def set_cookies(self, cookies: list[dict[str, Any]]) -> None:
        """Put cookies (CDP's CookieParam) in this context's jar; the browser then sends them by its own rules."""
        await self.browser.conn.call("Storage.setCookies", {"cookies": cookies, "browserContextId": self.id})

    async def get_cookies(self) -> list[dict[str, Any]]:
        """Every cookie in this context's jar (CDP's Cookie), session cookies included."""
        reply = await self.browser.conn.call("Storage.getCookies", {"browserContextId": self.id})
        return list(reply.get("cookies") or [])

    async def aclose(self) -> None:
        """Dispose of the context and every page in it (shielded, bounded: see `dispose_context`)."""
        await dispose_context(self.browser.conn, self.id)


async def set_up(tab: PageTarget, setup: TabSetup) -> None:
    """`tab` made as its kind's TabSetup says, before it is handed out."""
    await tab.call("Page.enable")
    for script in setup.scripts:
        await tab.call("Page.addScriptToEvaluateOnNewDocument", {"source": script})
    if setup.fetch_patterns:
        await tab.call("Fetch.enable", {"patterns": list(setup.fetch_patterns)})


class Tab(PageTarget):
    """A fetch tab: one page target in a browser context of its own, set up as its TabSetup says. A
    handle: its owner calls it, subscribes to its events and says whether it may be reused; the Chrome
    actor closes or recycles it."""

    def __init__(self, context: BrowserContext, page: PageTarget) -> None:
        super().__init__(page.browser, page.target_id, page.session_id)
        self.context = context
        self.uses = 0                 # requests served so far
        self._reuse_allowed = False
        self.private = False          # it held a profile's cookies: never recycled (`Chrome.open_tab`)
        self.minimized_window: int | None = None  # the tab's window, while it is minimized

    async def minimize(self) -> None:
        """Minimize the tab's window while no page runs in it: Chrome then stops repainting the window's
        toolbar and tab during each navigation, ~18 ms of its CPU per fetch that is never rendered."""
        try:
            window = (await self.browser.conn.call("Browser.getWindowForTarget",
                                                   {"targetId": self.target_id}))["windowId"]
            await self.browser.conn.call("Browser.setWindowBounds",
                                         {"windowId": window, "bounds": {"windowState": "minimized"}})
        except CDPError as e:
            log.debug("could not minimize a tab's window: %s", e)
        else:
            self.minimized_window = window

    async def show(self) -> None:
        """Restore the tab's window before a page renders in it: in a minimized window the page is hidden
        (no animation frames, no intersection observers), as it would be for a person."""
        window, self.minimized_window = self.minimized_window, None
        if window is not None:
            try:
                await self.browser.conn.call("Browser.setWindowBounds",
                                             {"windowId": window, "bounds": {"windowState": "normal"}})
            except CDPError as e:  # the page then renders hidden: worse than shown, better than not at all
                log.warning("could not restore a tab's window before rendering: %s", e)

    def allow_reuse(self) -> None:
        """Called by the tab's user when no document was ever committed in it (the request ended at the
        server's answer): no page ran, so the tab may serve another request once its cookies are cleared."""
        self._reuse_allowed = True

    @property
    def reuse_allowed(self) -> bool:
        return self._reuse_allowed

    def reused(self) -> None:
        self._reuse_allowed = False


@dataclass
class RestartPolicy:
    """When to start the browser again after it went down. A browser that was up for HEALTHY_S and then
    died (killed, crashed, connection dropped) comes back at once; one that fails to start or dies at
    once is retried with exponential backoff, and CRASH_LOOP_COUNT such failures within CRASH_WINDOW_S
    are a crash loop (requests then fail at once instead of waiting)."""

    backoff: float = FIRST_BACKOFF_S
    failures: deque[float] = field(default_factory=deque)

    def after_down(self, launched_at: float, ready_at: float | None, now: float) -> tuple[BrowserState, float]:
        """(the state to report, seconds to wait before the next start)."""
        if now - launched_at > CRASH_WINDOW_S:
            self.backoff = FIRST_BACKOFF_S
        if ready_at is not None and now - ready_at >= HEALTHY_S:
            return "restarting", 0.0
        self.failures.append(now)
        while self.failures and now - self.failures[0] > CRASH_WINDOW_S:
            self.failures.popleft()
        delay, self.backoff = self.backoff, min(self.backoff * 2, MAX_BACKOFF_S)
        return ("crash_loop" if len(self.failures) >= CRASH_LOOP_COUNT else "restarting"), delay


BrowserOpener = Callable[[int], AbstractAsyncContextManager[Browser]]


class Chrome:
    """Owns the browser: launch or attach, supervise, restart, and a pool of ready tabs."""

    def __init__(self, config: BrowserConfig, policy: AddressPolicy | PolicyHolder, tab_setup: TabSetup = TabSetup(),
                 opener: BrowserOpener | None = None,
                 browse_policy: AddressPolicy | PolicyHolder | None = None, browse_spare: bool = False) -> None:
        """`opener` makes a browser (tests give a scripted one); by default it is launched or attached to.
        `browse_policy` is what browse sessions' contexts connect under (`policy` when not given);
        `browse_spare` keeps a browse context made ahead of the next session (browse enabled)."""
        self.config = config
        self.tab_setup = tab_setup
        # Pages connect through the address-policy proxy (proxy.py), unless a browser on another machine
        # could not reach it, or Chrome is to use an outbound proxy of its own: then the policy is applied
        # to each request (fetch/in_chrome.py), but cannot pin the addresses that are connected to.
        self.proxy_off = proxy_off_reason(config)
        self.proxy = PolicyProxy(policy, browse_policy) if self.proxy_off is None else None
        self.executable = None if config.endpoint else find_chrome(config.executable)
        self.state: BrowserState = "starting"
        self.version: str | None = None
        self.last_error: str | None = None
        self.restarts = 0
        self._opener = opener or self._launch_or_attach
        self._restart = RestartPolicy()
        self._browser: Browser | None = None
        self._ready = trio.Event()
        self._generation = 0
        self._pool: list[Tab] = []
        # Fresh tabs are made ahead up to context_pool; used tabs that ran no page are kept up to one per
        # page that may load at once: under concurrent load nearly every request then reuses a tab instead
        # of costing Chrome a new context and renderer process (and the closer a disposal).
        self._recycled_limit = (0 if config.context_pool == 0
                                else max(config.context_pool, config.max_renders or default_max_renders()))
        self._pool_wanted = trio.Event()
        # One browse context with a blank page in it, made as soon as the browser is up and again after each
        # use (when no fetch is loading): a session's first `open` then navigates a page whose renderer is
        # already running instead of waiting for Chrome to make both (~0.3-0.7 s on two busy cores, the
        # first one after a start the most). It has never held a page or a cookie, and is handed out once.
        self.browse_spare = browse_spare
        self.spare: BrowserContext | None = None
        self._spare_taken = trio.Event()
        self._spare_making: trio.Event | None = None  # set when the spare being made is made (or failed)
        self._to_close, _ = trio.open_memory_channel[Tab](0)
        self._to_close.close()
        self._tabs_out = 0                # fetch tabs handed out and not yet given back
        self._idle = trio.Event()         # set while no fetch tab is out
        self._idle.set()
        self._busy = trio.Event()         # set while one is

    # --- what the rest of the daemon sees ----------------------------------------------------------

    @property
    def problems(self) -> list[str]:
        out = []
        if not self.config.endpoint and self.executable is None:
            out.append(f"no Chrome found: {INSTALL_HINT}")
        elif self.state == "crash_loop":
            out.append(f"Chrome keeps failing ({len(self._restart.failures)} times in {CRASH_WINDOW_S:.0f} s), "
                       f"restarting with backoff: {self.last_error}")
        elif self.state == "restarting" and self.last_error:
            out.append(f"Chrome is restarting: {self.last_error}")
        return out

    @property
    def idle_tabs(self) -> tuple[Tab, ...]:
        """The pool's ready tabs, the next one to be handed out last."""
        return tuple(self._pool)

    async def wait_browser(self) -> Browser:
        """The live browser, waiting for a (re)start in progress; BrowserUnavailable when there is none."""
        while True:
            b = self._browser
            if b is not None and not b.conn.is_closed:
                return b
            if not self.config.endpoint and self.executable is None:
                raise BrowserUnavailable(f"no Chrome found; {INSTALL_HINT}")
            if self.state == "crash_loop":
                raise BrowserUnavailable(
                    f"Chrome cannot be started or reached ({self.last_error}); check browser.executable / "
                    f"browser.endpoint in the config, or start that browser by hand to see why it fails")
            await self._ready.wait()

    @asynccontextmanager
    async def open_tab(self, *, private: bool = False) -> AsyncIterator[Tab]:
        """A tab in a browser context of its own: new, or recycled from a request in which no document was
        ever committed. It is closed (context disposed) or recycled however the block ends. A `private` tab
        (one its user gives a profile's cookies) is always disposed of, never recycled."""
        browser = await self.wait_browser()
        tab = None
        while self._pool and tab is None:
            tab = self._pool.pop()
            if tab.browser is not browser or tab.browser.conn.is_closed:
                tab = None
        if tab is None:
            tab = await self._new_tab(browser)
        tab.private = private
        tab.uses += 1
        self._tabs_out += 1
        if self._tabs_out == 1:
            self._idle = trio.Event()
            self._busy.set()
        try:
            yield tab
        finally:
            self._tabs_out -= 1
            if self._tabs_out == 0:
                self._busy = trio.Event()
                self._idle.set()
            # Disposing of a context takes Chrome tens to hundreds of milliseconds: the answer need not
            # wait for it. The closer task recycles or freezes the tab at once; disposal and refills wait
            # for a quiet moment.
            try:
                self._to_close.send_nowait(tab)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                pass  # that browser is gone, and its tabs with it

    async def open_context(self, downloads: str | None = None) -> BrowserContext:
        """A new browser context for a browse session (browse/), made as the fetch tabs' contexts are
        (address-policy proxy, downloads denied), except that with `downloads` (a directory) Chrome saves
        the context's downloads there, each under its guid, and reports them to the page that started
        each (Page.downloadWillBegin and Page.downloadProgress). The caller makes its tabs and disposes of it."""
        browser = await self.wait_browser()
        making = self._spare_making
        if self.spare is None and making is not None:
            # the spare is being made (an open right after the browser started): waiting for it costs less
            # than making a second context and renderer beside it on the same cores
            with trio.move_on_after(CONTEXT_CREATE_TIMEOUT_S):
                await making.wait()
        spare, self.spare = self.spare, None
        try:
            if spare is not None and spare.browser is browser:
                self._spare_taken.set()
                try:
                    await self._set_downloads(browser, spare.id, downloads)
                except BaseException:
                    await spare.aclose()
                    raise
                return spare
            return await self._new_context(browser, browse=True, downloads=downloads)
        except CDPClosed as e:
            raise BrowserCrashed(str(e)) from None

    # --- the supervisor ---------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Keep a browser up until cancelled. Reports started after the first attempt, success or not."""
        if self.proxy is None:
            log.warning("pages connect without webfetch's address-policy proxy, because %s: the address "
                        "policy is checked per request, and DNS rebinding is not caught", self.proxy_off)
            await self._supervise(task_status)
            return
        async with trio.open_nursery() as nursery:
            await nursery.start(self.proxy.run)
            await self._supervise(task_status)
            nursery.cancel_scope.cancel()

    async def _supervise(self, task_status: trio.TaskStatus[None]) -> None:
        started = False
        while True:
            launched_at = trio.current_time()
            ready_at, error = await self._run_one_browser(task_status if not started else None)
            started = True
            self._browser = None
            self._pool = []
            self.spare = None
            self.last_error = error
            self.state, delay = self._restart.after_down(launched_at, ready_at, trio.current_time())
            # Requests waiting for this start look again: at a crash loop they fail now, otherwise they
            # wait for the next start (a waiter left on the old Event would wait out its whole deadline).
            woken, self._ready = self._ready, trio.Event()
            woken.set()
            if delay:
                log.warning("browser down (%s); restarting in %.1f s", error, delay)
            else:
                log.warning("browser down after %.0f s up (%s); restarting now",
                            trio.current_time() - (ready_at or launched_at), error)
            await trio.sleep(delay)
            self.restarts += 1
            if not self.config.endpoint:
                self.executable = find_chrome(self.config.executable)

    async def _run_one_browser(self, task_status: trio.TaskStatus[None] | None) -> tuple[float | None, str]:
        """Start a browser, serve tabs from it until it goes away; (when it was ready, or None, and why it
        went). Reports started (once it is ready, or has failed) to `task_status`, when given."""
        ready_at = None
        try:
            self._generation += 1
            async with self._opener(self._generation) as browser:
                self._install(browser)
                ready_at = trio.current_time()
                if task_status is not None:
                    task_status.started()
                    task_status = None
                await self._serve(browser)
            error = "the browser connection closed"
        except (BrowserLaunchError, CDPClosed) as e:
            error = str(e)
        except CDPError as e:
            error = f"browser refused setup: {e}"
        if task_status is not None:
            task_status.started()
        return ready_at, error

    def _install(self, browser: Browser) -> None:
        self._browser = browser
        self.version = browser.version
        self.state = "ready"
        self._ready.set()
        log.info("browser ready: %s (generation %d)", browser.version, browser.generation)

    async def _serve(self, browser: Browser) -> None:
        # Unbounded, but never larger than the number of requests that ran: each gives back one tab.
        self._to_close, to_close = trio.open_memory_channel[Tab](float("inf"))
        to_dispose, disposals = trio.open_memory_channel[tuple[Tab, float]](float("inf"))
        with single_error():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._closer, to_close, to_dispose)
                nursery.start_soon(self._disposer, disposals)
                nursery.start_soon(self._shrink_when_idle)
                nursery.start_soon(self._make_ahead, browser)
                await browser.conn.closed.wait()
                nursery.cancel_scope.cancel()
        self._to_close.close()

    async def _closer(self, to_close: trio.MemoryReceiveChannel[Tab],
                      to_dispose: trio.MemorySendChannel[tuple[Tab, float]]) -> None:
        async for tab in to_close:
            if await self._recycle(tab):
                continue
            # A page that ran may still be working (timers, layout, its own requests): frozen, it costs
            # nothing while its context waits to be disposed of.
            await freeze_tab(tab)
            to_dispose.send_nowait((tab, trio.current_time()))

    async def _disposer(self, disposals: trio.MemoryReceiveChannel[tuple[Tab, float]]) -> None:
        async for tab, frozen_at in disposals:
            if disposals.statistics().current_buffer_used < MAX_FROZEN:
                await self._wait_quiet(frozen_at + BACKGROUND_DEFER_S)
            await tab.context.aclose()
            # Refill after a request, not when its tab was taken: creating a context and a renderer
            # while the request's page loads would compete with it for the CPU.
            self._pool_wanted.set()

    async def _shrink_when_idle(self) -> None:
        while True:
            await self._idle.wait()
            busy = self._busy
            with trio.move_on_after(POOL_SHRINK_S) as quiet:
                await busy.wait()
            if quiet.cancelled_caught:
                keep = self.config.context_pool
                surplus, self._pool = self._pool[:len(self._pool) - keep], self._pool[len(self._pool) - keep:]
                for tab in surplus:
                    await tab.context.aclose()
                await busy.wait()  # until the next fetch

    async def _wait_quiet(self, deadline: float) -> None:
        """Until no fetch tab is out, or the (trio clock) deadline."""
        with trio.move_on_at(deadline):
            await self._idle.wait()

    async def _recycle(self, tab: Tab) -> bool:
        """Put a tab whose request ended before any document was committed (the server's HTML sufficed, an
        error status, a redirect, a text body) back in the pool. No page ever ran in its context, so the
        only state it can hold is cookies from response headers, which are cleared here, and the HTTP
        cache, which the renderer bypasses for a reused tab. Disposing of the context and making a new one
        would cost Chrome a renderer process each time."""
        # SECURITY: a context that held a profile's cookies (a login) is never recycled: clearing its jar
        # is not all it may keep (its HTTP cache holds the member pages), and the next request could be
        # anonymous or another profile's. It is disposed of.
        if (tab.private or not tab.reuse_allowed or tab.uses >= MAX_TAB_USES or tab.browser is not self._browser
                or tab.browser.conn.is_closed or len(self._pool) >= self._recycled_limit):
            return False
        try:
            with trio.move_on_after(TAB_CLOSE_TIMEOUT_S) as timeout:
                await tab.browser.conn.call("Storage.clearCookies", {"browserContextId": tab.context.id})
        except (CDPClosed, CDPError):
            return False
        if timeout.cancelled_caught:
            return False
        tab.reused()
        self._pool.append(tab)
        return True

    async def _make_ahead(self, browser: Browser) -> None:
        """The browse spare first (an agent's first call after a start is often a browse `open`; a fetch
        without a pooled tab makes its own at once), then the fetch tabs' pool, each kept filled."""
        async with trio.open_nursery() as nursery:
            if self.browse_spare:
                await nursery.start(self._keep_spare, browser)
                # an open that takes the spare at once (an agent's first call) navigates without Chrome
                # making the pool's contexts and renderers beside it; a fetch meanwhile makes its own tab
                with trio.move_on_after(BACKGROUND_DEFER_S):
                    await self._spare_taken.wait()
                await trio.sleep(BACKGROUND_DEFER_S if self._spare_taken.is_set() else 0)
            if self.config.context_pool > 0:
                nursery.start_soon(self._fill_pool, browser)

    async def _keep_spare(self, browser: Browser, *,
                          task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Keep one browse context made ahead (`spare`): made at once, then again once the last is taken
        and no fetch is loading; disposed of when the browser's service ends (the daemon stops)."""
        try:
            while True:
                self._spare_making, self._spare_taken = trio.Event(), trio.Event()
                try:
                    self.spare = await self._new_spare(browser)
                except (BrowserCrashed, CDPError, CDPClosed) as e:
                    log.debug("browse spare not made: %s", e)
                    task_status.started()
                    return
                finally:
                    self._spare_making.set()  # an open waiting for it takes it now
                    self._spare_making = None
                task_status.started()
                task_status = trio.TASK_STATUS_IGNORED
                await self._spare_taken.wait()
                await self._wait_quiet(trio.current_time() + BACKGROUND_DEFER_S)
        finally:
            left, self.spare = self.spare, None
            if left is not None:
                await left.aclose()  # shielded and bounded

    async def _new_spare(self, browser: Browser) -> BrowserContext:
        """A browse context with a blank page in it whose renderer has run its first script."""
        spare = await self._new_context(browser, browse=True)
        try:
            spare.made_ahead = await spare.new_tab()
            # the renderer's first script (its JavaScript engine set up) is paid now, not by the first page
            await spare.made_ahead.call("Runtime.evaluate", {"expression": "0"})
        except BaseException:
            await spare.aclose()
            raise
        return spare

    async def _fill_pool(self, browser: Browser) -> None:
        # Creating a context and a target costs a few hundred ms: do it before anyone asks.
        while True:
            while len(self._pool) < self.config.context_pool:
                await self._wait_quiet(trio.current_time() + BACKGROUND_DEFER_S)
                try:
                    tab = await self._new_tab(browser)
                except (BrowserCrashed, CDPError) as e:
                    log.debug("pool fill failed: %s", e)
                    return
                self._pool.append(tab)
            self._pool_wanted = trio.Event()
            await self._pool_wanted.wait()

    async def _new_context(self, browser: Browser, browse: bool = False,
                           downloads: str | None = None) -> BrowserContext:
        params: dict[str, Any] = {"disposeOnDetach": True}
        if self.proxy is not None:
            # everything, loopback included (Chrome would otherwise connect to loopback directly); a browse
            # session's through the proxy's port that applies browse.allow_local
            params |= {"proxyServer": self.proxy.browse_url if browse else self.proxy.url,
                       "proxyBypassList": "<-loopback>"}
        context = BrowserContext(browser, await create_context(browser.conn, params))
        try:
            await self._set_downloads(browser, context.id, downloads)
        except BaseException:  # cancelled before the caller holds the context: nothing else would dispose of it
            await context.aclose()
            raise
        return context

    @staticmethod
    async def _set_downloads(browser: Browser, context_id: str, downloads: str | None) -> None:
        """Downloads denied in the context, or saved in `downloads` (a directory)."""
        if downloads is None:
            with suppress(CDPError):
                await browser.conn.call("Browser.setDownloadBehavior",
                                        {"behavior": "deny", "browserContextId": context_id})
        else:  # named by guid: a name the server chose never reaches the file system (browse/downloads.py)
            await browser.conn.call("Browser.setDownloadBehavior", {
                "behavior": "allowAndName", "downloadPath": downloads, "eventsEnabled": True,
                "browserContextId": context_id})

    async def _new_tab(self, browser: Browser) -> Tab:
        try:
            context = await self._new_context(browser)
            try:
                tab = Tab(context, await context.new_tab())
                await set_up(tab, self.tab_setup)
                await tab.minimize()
            except BaseException:
                await context.aclose()
                raise
        except CDPClosed as e:
            raise BrowserCrashed(str(e)) from None
        return tab

    # --- getting a browser ------------------------------------------------------------------------

    @asynccontextmanager
    async def _launch_or_attach(self, generation: int) -> AsyncIterator[Browser]:
        if self.config.endpoint:
            async with open_cdp(self.config.endpoint) as conn:
                yield Browser(conn, await browser_version(conn), generation, proxy=self.proxy)
            return
        if self.executable is None:
            raise BrowserLaunchError(f"no Chrome found; {INSTALL_HINT}")
        async with launch_chrome(self.executable, self.config.args) as (conn, proc):
            with single_error():
                async with trio.open_nursery() as nursery:
                    # Chrome's end of the pipe closing says it exited too; its pid says so even when a child
                    # of its (one it started and that outlives it) still holds that end
                    nursery.start_soon(_close_when_exits, proc, conn)
                    yield Browser(conn, await browser_version(conn), generation, proc.pid, self.proxy)
                    nursery.cancel_scope.cancel()


PROXY_ENV = ("https_proxy", "http_proxy", "all_proxy")


def proxy_off_reason(config: BrowserConfig) -> str | None:
    """Why pages cannot go through the address-policy proxy, or None when they can."""
    if config.endpoint and host_of(config.endpoint) not in ("localhost", "127.0.0.1", "::1"):
        return "browser.endpoint is on another machine"
    if any(a.startswith(("--proxy-server", "--proxy-pac-url")) for a in config.args):
        return "browser.args gives Chrome a proxy"
    for name in PROXY_ENV:
        if os.environ.get(name) or os.environ.get(name.upper()):
            return f"${name} gives Chrome a proxy"
    return None


async def _close_when_exits(proc: ChildProcess, conn: CDPConnection) -> None:
    await proc.wait()
    log.warning("Chrome (pid %d) exited with code %s", proc.pid, proc.returncode)
    conn.abort(f"Chrome exited with code {proc.returncode}")


async def create_context(conn: CDPConnection, params: dict[str, Any]) -> str:
    """A new browser context's id. Shielded: a request cancelled while Chrome makes the context would
    never learn its id, and the context would stay in Chrome for ever (bin/bench_memory found 9 after 20
    cancels); the caller's cancellation takes effect right after, and its cleanup disposes of it."""
    with trio.CancelScope(shield=True):
        with trio.move_on_after(CONTEXT_CREATE_TIMEOUT_S):
            return str((await conn.call("Target.createBrowserContext", params))["browserContextId"])
    raise BrowserCrashed(f"the browser did not make a browser context within {CONTEXT_CREATE_TIMEOUT_S:g} s")


async def freeze_tab(tab: Tab) -> None:
    """Stop the tab's page from running (its timers, tasks and rendering), bounded in time; a tab that
    cannot be frozen is simply disposed of a little later."""
    with trio.move_on_after(TAB_CLOSE_TIMEOUT_S):
        try:
            await tab.call("Page.setWebLifecycleState", {"state": "frozen"})
        except (CDPClosed, CDPError) as e:
            log.debug("could not freeze a used tab: %s", e)


async def dispose_context(conn: CDPConnection, context_id: str) -> None:
    """Dispose of a browser context (which closes its pages): shielded, since it is cleanup that must
    happen in a cancelled scope too, and bounded in time, since a browser that does not answer is gone."""
    with trio.CancelScope(shield=True), trio.move_on_after(TAB_CLOSE_TIMEOUT_S):
        try:
            await conn.call("Target.disposeBrowserContext", {"browserContextId": context_id})
        except (CDPClosed, CDPError):
            pass


async def browser_version(conn: CDPConnection) -> str:
    """The browser's product and version, e.g. "HeadlessChrome/140.0.7339.185"."""
    return str((await conn.call("Browser.getVersion"))["product"])
