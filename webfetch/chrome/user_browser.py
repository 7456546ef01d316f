"""The person's own running browser (`[user_browser]`): finding it, the one DevTools connection the daemon
holds to it, and the handle browse sessions open their tabs through (`UserContext`).

Finding: `endpoint = "auto"` reads the DevToolsActivePort file a Chromium-based browser writes in its
user-data directory while remote debugging is on (Chrome 144+'s chrome://inspect#remote-debugging toggle,
or `--remote-debugging-port`), in the usual directories (`CANDIDATES`). Only a port on which something
listens counts; of several, the newest file wins and the note says which and how to choose. An explicit
endpoint is an `http://127.0.0.1:PORT` (its /json/version names the websocket), a `ws://` URL, or a
user-data directory. Loopback only: DevTools has no authentication, and nothing is sent off the machine.

One approval: Chrome 144+ asks the person to allow each new DevTools connection, so the daemon makes one
and holds it for its life, in this actor's nursery (a request only waits for it), and makes another only
when that one is gone. While the handshake or the first command waits, the state is "waiting for
approval" and requests say so in a progress frame; a request that reaches its deadline gets
`user_browser_unapproved`, and the attempt goes on for the next one. A connection that was up and went is
tried again once; failing that, `user_browser_gone`.

The person's browser is theirs: the daemon never closes it (no Browser.close), never disposes of its
default context, and acts only in the tabs it opened and the pages those opened (`UserContext`); their
other tabs are never listed nor acted on. While a session is open, each new page is held at its start
(`Openings`) so that one the agent's tab opened meets the gate before its first request; the person's own
is let run on at once."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx
import msgspec
import trio

from .._trio import single_error
from ..config import UserBrowserConfig
from ..errors import UserBrowserGone, UserBrowserOff, UserBrowserUnapproved, UserBrowserUnavailable
from ..urls import AddressPolicy, HostGate, PolicyHolder, host_of
from .browser import TAB_CLOSE_TIMEOUT_S, Browser, BrowserContext, PageTarget, Tab, TabSetup, set_up
from .cdp import CDPClosed, CDPError, open_cdp
from .child_targets import hold_children

log = logging.getLogger("webfetch.user_browser")

# The user-data directories, relative to $HOME, of the browsers `auto` looks for (label, directory).
LINUX_CANDIDATES = (
    ("Google Chrome", ".config/google-chrome"), ("Google Chrome Beta", ".config/google-chrome-beta"),
    ("Google Chrome Dev", ".config/google-chrome-unstable"), ("Google Chrome Canary", ".config/google-chrome-canary"),
    ("Chromium", ".config/chromium"), ("Microsoft Edge", ".config/microsoft-edge"),
    ("Microsoft Edge Beta", ".config/microsoft-edge-beta"), ("Microsoft Edge Dev", ".config/microsoft-edge-dev"),
    ("Brave", ".config/BraveSoftware/Brave-Browser"),
)
MAC_CANDIDATES = tuple((label, "Library/Application Support/" + d) for label, d in (
    ("Google Chrome", "Google/Chrome"), ("Google Chrome Beta", "Google/Chrome Beta"),
    ("Google Chrome Dev", "Google/Chrome Dev"), ("Google Chrome Canary", "Google/Chrome Canary"),
    ("Chromium", "Chromium"), ("Microsoft Edge", "Microsoft Edge"), ("Microsoft Edge Beta", "Microsoft Edge Beta"),
    ("Brave", "BraveSoftware/Brave-Browser"),
))
PORT_FILE = "DevToolsActivePort"
PORT_FILE_MAX = 4096             # a DevToolsActivePort is a port and a path: anything longer is not one
VERSION_MAX = 64 * 1024          # /json/version's answer, at most
PROBE_S = 2.0                    # a loopback port that does not accept within this long is dead
APPROVAL_HINT_S = 1.0            # a connection still pending after this long is waiting for the person
APPROVAL_WAIT_S = 600.0          # how long one connection attempt waits for the person's approval
SETUP = ("turn on remote debugging in your browser (Chrome 144+: open chrome://inspect/#remote-debugging and "
         "allow it; or start it with --remote-debugging-port=9222), or set user_browser.endpoint")
# "auto" reads a file a headless browser never writes: a new user who started one with a port was told to do
# what they had done
AUTO_SETUP = ("turn on remote debugging in your browser (Chrome 144+: open chrome://inspect/#remote-debugging and "
              "allow it); a browser started with --remote-debugging-port=N (a headless one always) writes no file "
              "\"auto\" finds: set user_browser.endpoint = \"http://127.0.0.1:N\" and run `webfetch restart`")
ENDPOINT_SETUP = ("is the browser running, with --remote-debugging-port set to that port? (after a change to "
                  "user_browser.endpoint, `webfetch restart` applies it)")

State = Literal["off", "idle", "connecting", "waiting for approval", "connected", "gone", "failed"]


def candidates(home: Path | None = None, platform: str = sys.platform) -> list[tuple[str, Path]]:
    """(label, DevToolsActivePort path) for each browser `auto` looks for on this platform."""
    home = home or Path(os.path.expanduser("~"))
    table = MAC_CANDIDATES if platform == "darwin" else LINUX_CANDIDATES
    return [(label, home / d / PORT_FILE) for label, d in table]


@dataclass(frozen=True)
class Found:
    """The browser to connect to: its DevTools websocket URL, and how it was found (a note for status)."""

    ws_url: str
    how: str


def read_port_file(path: Path) -> tuple[int, str]:
    """(port, browser websocket path) from a DevToolsActivePort file; ValueError saying what is wrong."""
    with open(path, "rb") as f:
        data = f.read(PORT_FILE_MAX + 1)
    lines = data.decode("utf-8", "replace").splitlines()
    if len(data) > PORT_FILE_MAX or len(lines) < 2 or not lines[0].strip().isdigit() \
            or not lines[1].startswith("/devtools/browser/"):
        raise ValueError(f"{path} is not a DevToolsActivePort file (a port, then /devtools/browser/…)")
    port = int(lines[0])
    if not 1 <= port <= 65535:
        raise ValueError(f"{path} names port {port}, which is no port")
    return port, lines[1].strip()


async def listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:`port` (a browser that exited leaves its file)."""
    with trio.move_on_after(PROBE_S):
        try:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
        except OSError:
            return False
        await stream.aclose()
        return True
    return False


async def find(endpoint: str, home: Path | None = None) -> Found:
    """The browser `endpoint` names ("auto", an http or ws URL on loopback, a user-data directory);
    UserBrowserUnavailable saying why none and what to do."""
    if endpoint == "auto":
        return await _find_auto(home)
    if "://" in endpoint and not endpoint.startswith(("http://", "ws://")):
        raise UserBrowserUnavailable(f"user_browser.endpoint {endpoint!r} is not a browser's DevTools endpoint: give "
                                     f"\"auto\", http://127.0.0.1:PORT, ws://127.0.0.1:PORT/devtools/browser/…, or "
                                     f"the browser's user-data directory")
    if endpoint.startswith(("http://", "ws://")):
        if host_of(endpoint) not in ("127.0.0.1", "localhost", "::1"):
            raise UserBrowserUnavailable(f"user_browser.endpoint {endpoint!r} is not on this machine: DevTools has "
                                         f"no authentication, so only a loopback endpoint is used")
        return Found(endpoint, f"user_browser.endpoint {endpoint}") if endpoint.startswith("ws://") \
            else await _from_http(endpoint)
    directory = Path(os.path.expanduser(endpoint))  # noqa: ASYNC240 (no I/O: it reads $HOME)
    found = await _from_port_file(directory / PORT_FILE, f"the browser of {directory}")
    if isinstance(found, str):
        raise UserBrowserUnavailable(f"{found}; {SETUP}")
    return found


async def _find_auto(home: Path | None) -> Found:
    live: list[tuple[float, Found]] = []
    notes = []
    for label, path in candidates(home):
        if not path.exists():
            continue
        found = await _from_port_file(path, label)
        if isinstance(found, str):
            notes.append(found)
            continue
        with suppress(OSError):
            live.append((path.stat().st_mtime, found))
    if not live:
        said = "; ".join(notes) if notes else (
            "no running browser has remote debugging on (user_browser.endpoint \"auto\" found no DevToolsActivePort "
            "file in the usual user-data directories)")
        raise UserBrowserUnavailable(f"{said}: {AUTO_SETUP}")
    live.sort(key=lambda item: item[0], reverse=True)
    chosen = live[0][1]
    if len(live) > 1:
        others = ", ".join(f.how for _, f in live[1:])
        chosen = Found(chosen.ws_url, f"{chosen.how} (the newest of {len(live)} with remote debugging on; also "
                                      f"{others}: set user_browser.endpoint to that browser's user-data directory "
                                      f"to choose)")
    return chosen


async def _from_port_file(path: Path, label: str) -> Found | str:
    """The browser a DevToolsActivePort names, or why not (a note)."""
    try:
        port, ws_path = await trio.to_thread.run_sync(read_port_file, path)
    except FileNotFoundError:
        return f"{label}: no {path} (remote debugging is off, or the browser is not running)"
    except (OSError, ValueError) as e:
        return f"{label}: {e}"
    if not await listening(port):
        return (f"{label}: {path} names port {port}, where nothing listens (the browser exited or turned remote "
                f"debugging off)")
    return Found(f"ws://127.0.0.1:{port}{ws_path}", f"{label} ({path})")


async def _from_http(endpoint: str) -> Found:
    """The websocket /json/version names at an http endpoint (a browser started with --remote-debugging-port)."""
    url = endpoint.rstrip("/") + "/json/version"
    not_devtools = (f"user_browser.endpoint {endpoint} is not a DevTools endpoint (its /json/version names no "
                    f"webSocketDebuggerUrl); give the ws:// URL or the user-data directory, or \"auto\"")
    try:
        async with httpx.AsyncClient(trust_env=False, timeout=PROBE_S) as client:
            async with client.stream("GET", url) as response:
                body = b""
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > VERSION_MAX:
                        raise UserBrowserUnavailable(not_devtools)
    except httpx.HTTPError as e:
        raise UserBrowserUnavailable(f"cannot reach user_browser.endpoint {endpoint} ({e or type(e).__name__}): "
                                     f"{ENDPOINT_SETUP}") from None
    try:
        ws_url = msgspec.json.decode(body).get("webSocketDebuggerUrl")
    except (msgspec.DecodeError, AttributeError):
        ws_url = None
    if response.status_code != 200 or not isinstance(ws_url, str) or not ws_url.startswith("ws://"):
        raise UserBrowserUnavailable(not_devtools)
    return Found(ws_url, f"user_browser.endpoint {endpoint}")


# The person's browser reports each new page to us paused before its first request (browser-level
# auto-attach), pages alone: their frames and workers are the tabs' own affair (browse/subtargets.py).
AUTO_ATTACH = {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True, "filter": [{"type": "page"}]}


class Openings:
    """The pages the agent's tabs open, caught before their first request. A page that opens another
    (target=_blank, window.open, rel=noopener too) lets it send its first request at once, before any
    `Target.targetCreated` could be acted on: that request would go out with the person's cookies to a host
    nobody listed. So, while a session in the person's browser is open, the browser holds every new page
    paused at its start (`AUTO_ATTACH`); one opened by a session's own tab is handed to that session
    (`UserContext.popup`), which sets its Fetch interception up and only then lets it run
    (`UserContext.release`); any other (the person's own new tabs, pages they had) runs on at once and
    is let go. One per connection: its settings are the connection's."""

    def __init__(self, browser: Browser) -> None:
        self.browser = browser
        self._contexts: dict[UserContext, Callable[[str], None]] = {}
        self._watching = trio.Lock()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hand out the paused pages until the connection closes (in the UserBrowser actor's nursery)."""
        with suppress(CDPClosed), single_error(), self.browser.conn.subscribe(None, buffer=4096) as sub:
            async with trio.open_nursery() as nursery:
                task_status.started()
                while True:
                    event = await sub.receive()
                    if event.get("method") == "Target.attachedToTarget":
                        nursery.start_soon(self._attached, event["params"])

    async def join(self, context: UserContext, opened: Callable[[str], None]) -> None:
        """`context`'s tabs' new pages go to `opened` from now on (the auto-attach is on once this returns)."""
        async with self._watching:
            if not self._contexts:
                await self.browser.conn.call("Target.setAutoAttach", AUTO_ATTACH)
            self._contexts[context] = opened

    async def leave(self, context: UserContext) -> None:
        """`context` is closing: the person's browser stops holding new pages when no session is left."""
        async with self._watching:
            if self._contexts.pop(context, None) is not None and not self._contexts:
                with suppress(CDPClosed, CDPError):
                    await self.browser.conn.call("Target.setAutoAttach", {**AUTO_ATTACH, "autoAttach": False})

    async def _attached(self, p: dict[str, Any]) -> None:
        """A new page held at its start (`waitingForDebugger`): a session's when one of its tabs opened it,
        else it runs on and is let go (the person's new tab, or the auto-attached twin of a tab a session
        made, which that session attaches to by itself). A page attached without waiting is one the
        auto-attach found open (the person's: let go) or a session's own attaching to its tab (kept)."""
        info, session = p.get("targetInfo") or {}, str(p.get("sessionId", ""))
        target, opener = str(info.get("targetId", "")), info.get("openerId")
        waiting = bool(p.get("waitingForDebugger"))
        for context, opened in list(self._contexts.items()):
            if waiting and opener is not None and opener in context.own:
                context.popup(target, session)
                opened(target)
                return
            if not waiting and target in context.own:
                return
        with suppress(CDPClosed, CDPError):
            if waiting:
                await self.browser.conn.call("Runtime.runIfWaitingForDebugger", None, session)
            await self.browser.conn.call("Target.detachFromTarget", {"sessionId": session})


class UserContext(BrowserContext):
    """The person's default browser context, as one browse session sees it: its logins apply, its tabs
    open in a window of their own, and only the tabs it opened (and the pages those opened, caught paused by
    `Openings`) are its own; closing it closes those and nothing else. The context itself is the person's
    and is never disposed of."""

    def __init__(self, browser: Browser, openings: Openings | None = None) -> None:
        super().__init__(browser, "")
        self.openings = openings or Openings(browser)
        self.own: set[str] = set()
        self._paused: dict[str, str] = {}   # a page its tabs opened -> the session holding it at its start

    async def new_tab(self) -> PageTarget:
        created = await self.browser.conn.call("Target.createTarget", {"url": "about:blank", "newWindow": True})
        self.own.add(created["targetId"])
        return await self.adopt(created["targetId"])

    def popup(self, target_id: str, session_id: str) -> None:
        """A page one of its tabs opened, held at its start by `session_id`: its own from now on."""
        self.own.add(target_id)
        self._paused[target_id] = session_id

    async def adopt(self, target_id: str) -> PageTarget:
        if target_id not in self.own:
            raise CDPError("Target.attachToTarget", 0, "not a tab of this session")  # never a person's tab
        session = self._paused.get(target_id)
        if session is not None:  # the session that holds it paused: set up on it, then `release`
            return PageTarget(self.browser, target_id, session)
        return await super().adopt(target_id)

    async def release(self, page: PageTarget) -> None:
        """A page adopted paused runs on: its interception is in place now."""
        if self._paused.pop(page.target_id, None) is not None:
            await page.call("Runtime.runIfWaitingForDebugger")

    async def close_tab(self, target_id: str) -> None:
        await super().close_tab(target_id)
        self.own.discard(target_id)
        self._paused.pop(target_id, None)

    async def watch_popups(self, opened: Callable[[str], None], *,
                           task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Call `opened` for each page one of the session's own tabs opened (they become its own, paused
        until adopted); what the person's tabs open is not the session's."""
        await self.openings.join(self, opened)  # until `aclose`: a page its tabs open while closing is its own
        task_status.started()
        await trio.sleep_forever()

    async def cancel_download(self, guid: str) -> None:
        await self.browser.conn.call("Browser.cancelDownload", {"guid": guid})

    async def set_cookies(self, cookies: list[dict[str, object]]) -> None:
        raise CDPError("Storage.setCookies", 0, "the person's browser keeps its own cookies")

    async def get_cookies(self) -> list[dict[str, object]]:
        return []  # never read wholesale: a fetch reads those of one URL (`UserBrowser.cookies_for`)

    async def aclose(self) -> None:
        """Close the session's own tabs and every page they opened, those they open while closing too
        (`Openings` still hands them here, held), shielded and bounded; the browser and the person's tabs
        stay."""
        with trio.CancelScope(shield=True), trio.move_on_after(TAB_CLOSE_TIMEOUT_S * 2):
            with trio.move_on_after(TAB_CLOSE_TIMEOUT_S):
                while self.own:
                    with suppress(CDPClosed, CDPError):
                        await self.browser.conn.call("Target.closeTarget", {"targetId": self.own.pop()})
            await self.openings.leave(self)


class UserBrowser:
    """The actor holding the one connection to the person's browser (see the module's docstring)."""

    def __init__(self, config: UserBrowserConfig, home: Path | None = None) -> None:
        self.config = config
        self.home = home
        self.state: State = "idle" if config.enabled else "off"
        self.how: str | None = None          # how the browser was found
        self.devtools_port: int | None = None  # the port of its DevTools endpoint (no page of ours reaches it)
        self.view_port: Callable[[], int | None] = lambda: None  # the daemon's view's (the daemon sets it)
        self.last_error: str | None = None
        self._browser: Browser | None = None
        self._openings: Openings | None = None  # the connection's (one per connection)
        self._connected_once = False
        self._attempt = trio.Event()         # set when the current attempt connected or failed
        self._attempt.set()
        self._lock = trio.Lock()
        self._nursery: trio.Nursery | None = None

    @property
    def problems(self) -> list[str]:
        if self.state == "off" and self.config.hosts == [] and self.config.endpoint != "auto":
            return ["user_browser.endpoint is set but user_browser.hosts is empty: the person's browser stays "
                    "unused until hosts lists the sites the agent may use it for"]
        if self.state in ("failed", "gone") and self.last_error:
            return [f"your browser ({self.state}): {self.last_error}"]
        return []

    def describe(self) -> str:
        """One line for status and doctor: off and why, or found, connected, waiting for approval."""
        if self.state == "off":
            return ("off: user_browser.hosts is empty (list the sites the agent may use your browser for to turn "
                    "it on)")
        where = f" to {self.how}" if self.how else ""
        if self.state == "idle":
            return f"on for {', '.join(self.config.hosts)}; not connected yet (it connects at the first request)"
        if self.state in ("connecting", "waiting for approval"):
            return f"{self.state}{where}" + (": allow the connection in your browser"
                                             if self.state == "waiting for approval" else "")
        if self.state == "connected":
            return f"connected{where} ({self._browser.version if self._browser else ''}), for " \
                   f"{', '.join(self.config.hosts)}"
        return f"{self.state}: {self.last_error}"

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the connection (once a request asks for it) until cancelled; the browser stays as it is."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    async def browser(self, notify: Callable[[str], None], wait_s: float) -> Browser:
        """The connected browser, connecting (once, for everyone waiting) when there is none; progress while
        the person is asked to allow it. UserBrowserOff, UserBrowserUnavailable, UserBrowserUnapproved
        (after `wait_s`), UserBrowserGone."""
        if not self.config.enabled:
            raise UserBrowserOff("your own browser is off: list the sites the agent may use it for in "
                                 "user_browser.hosts in the config (docs/CONFIG.md)")
        b = self._browser
        if b is not None and not b.conn.is_closed:
            return b
        async with self._lock:  # one attempt at a time; requests that come meanwhile wait for that one
            b = self._browser
            if b is not None and not b.conn.is_closed:
                return b
            if self._attempt.is_set():
                await self._start_attempt()
        await self._await_attempt(notify, wait_s)
        b = self._browser
        assert b is not None
        return b

    async def context(self, notify: Callable[[str], None], wait_s: float) -> UserContext:
        """A browse session's handle on the person's browser (connecting as `browser` does)."""
        browser = await self.browser(notify, wait_s)
        assert self._openings is not None and self._openings.browser is browser
        return UserContext(browser, self._openings)

    def gate(self, policy: AddressPolicy | PolicyHolder) -> HostGate:
        """The one rule for every request of the agent's pages in the person's browser (browse's tabs and
        fetch's renders alike): only to the hosts user_browser.hosts lists, and never to the ports of this
        machine that `closed_ports` names, whatever it lists."""
        return HostGate(policy, listed=tuple(self.config.hosts), closed=self.closed_ports)

    def closed_ports(self) -> dict[int, str]:
        """The ports of this machine a page in the person's browser never reaches: the browser's DevTools
        endpoint (anyone reading its /json/list may drive every tab they have) and webfetch's own view (a
        person who opened it there has its cookie). Read at each check: both may move."""
        closed = {}
        if self.devtools_port is not None:
            closed[self.devtools_port] = "your browser's DevTools endpoint"
        view = self.view_port()
        if view is not None:
            closed[view] = "webfetch's view"
        return closed

    @asynccontextmanager
    async def render_tab(self, setup: TabSetup, gate: HostGate, notify: Callable[[str], None],
                         wait_s: float) -> AsyncIterator[Tab]:
        """A tab of one fetch's own in the person's browser (a window of its own: their logins apply, in
        every form a site keeps them, not its cookies alone), made as `setup` says, its other-process frames
        and workers held to `gate` as its own requests are (by the caller's Fetch handling); a page it opens
        is closed held at its start (a fetch reads one page). Closed, with all it opened, however the block
        ends; the person's tabs are never touched."""
        context = await self.context(notify, wait_s)
        try:
            # the block's own error as itself (a BlockedUrl stays one), not in the nursery's group
            with single_error():
                async with trio.open_nursery() as nursery:
                    async def close(target_id: str) -> None:
                        with suppress(CDPClosed, CDPError):  # gone already
                            await context.close_tab(target_id)
                    await nursery.start(context.watch_popups, lambda target_id: nursery.start_soon(close, target_id))
                    page = await context.new_tab()
                    await nursery.start(hold_children, page, gate.check)
                    tab = Tab(context, page)
                    tab.uses = 1
                    await set_up(tab, setup)
                    yield tab
                    nursery.cancel_scope.cancel()
        finally:
            await context.aclose()  # shielded and bounded; the browser stops holding pages for it

    async def _start_attempt(self) -> None:
        reconnecting = self._connected_once
        try:
            found = await find(self.config.endpoint, self.home)
        except UserBrowserUnavailable as e:
            self.state, self.last_error = ("gone" if reconnecting else "failed"), e.message
            if reconnecting:
                raise UserBrowserGone(f"your browser went away and was not found again ({e.message})") from None
            raise
        self.how = found.how
        self.devtools_port = urlsplit(found.ws_url).port
        self._attempt = trio.Event()
        assert self._nursery is not None
        self._nursery.start_soon(self._hold, found, reconnecting)

    async def _await_attempt(self, notify: Callable[[str], None], wait_s: float) -> None:
        with trio.move_on_after(wait_s):
            with trio.move_on_after(APPROVAL_HINT_S):
                await self._attempt.wait()
            if not self._attempt.is_set():
                notify("allow the connection in your browser (it asks once; webfetch keeps the connection)")
            await self._attempt.wait()
        b = self._browser
        if b is not None and not b.conn.is_closed:
            return
        if not self._attempt.is_set():
            raise UserBrowserUnapproved(f"your browser has not allowed webfetch's connection within {wait_s:g} s: "
                                        f"allow it in the browser's prompt, then ask again")
        if self._connected_once:
            raise UserBrowserGone(f"your browser went away and could not be reached again ({self.last_error})")
        raise UserBrowserUnavailable(f"cannot connect to your browser ({self.last_error}); {SETUP}")

    async def _hold(self, found: Found, reconnecting: bool) -> None:
        self.state = "connecting"
        waiting = trio.CancelScope()
        assert self._nursery is not None
        self._nursery.start_soon(self._mark_waiting, waiting)
        try:
            async with open_cdp(found.ws_url, connect_timeout=APPROVAL_WAIT_S) as conn:
                browser = await Browser.over(conn)
                waiting.cancel()
                openings = Openings(browser)
                async with trio.open_nursery() as nursery:
                    await nursery.start(openings.run)
                    self._browser, self._openings = browser, openings
                    self.state, self._connected_once = "connected", True
                    self._attempt.set()
                    log.info("connected to your browser: %s (%s)", browser.version, found.how)
                    await conn.closed.wait()
                    nursery.cancel_scope.cancel()
            error = "the browser closed the connection"
        except CDPClosed as e:
            error = str(e)
        except CDPError as e:
            error = f"it answered as no DevTools endpoint does ({e})"
        finally:
            waiting.cancel()
        self._browser = None
        self.last_error = error
        self.state = "gone" if self.state == "connected" or reconnecting else "failed"
        log.warning("your browser's connection ended: %s", error)
        self._attempt.set()

    async def _mark_waiting(self, scope: trio.CancelScope) -> None:
        with scope:
            await trio.sleep(APPROVAL_HINT_S)
            if self.state == "connecting":
                self.state = "waiting for approval"
