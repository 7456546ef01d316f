"""The Chrome actor: finds or launches Chrome, keeps one CDP connection to it, restarts it with backoff
when it dies, and hands out fresh isolated tabs (each in its own browser context) from a small pool."""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections import deque
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator

import trio

from ._trio import single_error
from .cdp import CDPClosed, CDPConnection, CDPError, open_cdp
from .config import BrowserConfig
from .errors import BrowserCrashed, BrowserUnavailable
from .procs import ChildProcess, private_tempdir
from .proxy import PolicyProxy
from .urls import AddressPolicy, host_of

log = logging.getLogger("webfetch.chrome")

CHROME_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL_HINT = ("install Chromium (Debian/Ubuntu: `sudo apt-get install chromium`), or point "
                "browser.executable in the config or WEBFETCH_CHROME at a Chrome binary")
# Flags that keep a headless Chrome from phoning home: on a closed network every one of those
# connections fails, many at a time, and they only cost time anyway.
BASE_FLAGS = [
    "--headless", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--disable-breakpad", "--disable-domain-reliability",
    "--disable-client-side-phishing-detection", "--disable-features=Translate,MediaRouter,OptimizationHints",
    "--disable-quic", "--mute-audio", "--hide-scrollbars", "--metrics-recording-only",
    "--password-store=basic", "--use-mock-keychain", "--disable-dev-shm-usage",
    # A pooled tab waits in the background; Chrome would lower its renderer's priority and throttle its
    # timers, and the first navigation in it would then crawl.
    "--disable-background-timer-throttling", "--disable-backgrounding-occluded-windows",
    "--disable-renderer-backgrounding", "--disable-ipc-flooding-protection",
    # Every cross-site frame would get a renderer process of its own; frames are never extracted
    # (see render.py) and each request already has a browser context to itself.
    "--disable-site-isolation-trials", "--disable-features=IsolateOrigins,site-per-process",
]
# WebRTC sends UDP (STUN, TURN) from Chrome itself, past the address-policy proxy: this policy allows it
# only through the proxy, which carries no UDP, so there is none (a page gets TCP through the proxy).
PREFERENCES = {"webrtc": {"ip_handling_policy": "disable_non_proxied_udp"}}
LAUNCH_TIMEOUT_S = 30.0
CRASH_WINDOW_S = 60.0
CRASH_LOOP_COUNT = 3
HEALTHY_S = 2.0  # a browser that was up this long and then died is restarted at once, not backed off
MAX_BACKOFF_S = 30.0
TAB_CLOSE_TIMEOUT_S = 2.0
MAX_TAB_USES = 100  # a recycled tab is retired after this many requests all the same


def find_chrome(configured: str | None = None) -> str | None:
    """browser.executable, then WEBFETCH_CHROME, then the usual names on PATH."""
    for candidate in (configured, os.environ.get("WEBFETCH_CHROME")):
        if candidate:
            found = shutil.which(os.path.expanduser(candidate))
            return found
    for name in CHROME_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


class BrowserLaunchError(Exception):
    pass


@dataclass
class Browser:
    conn: CDPConnection
    version: str
    generation: int
    pid: int | None = None
    proxy: PolicyProxy | None = None  # the address-policy proxy its page contexts connect through


@dataclass
class Tab:
    """One page target in its own browser context, attached as a flat session, domains already enabled."""

    browser: Browser
    context_id: str
    target_id: str
    session_id: str
    uses: int = 0            # requests served so far
    reusable: bool = False   # set by the renderer: no document was ever committed in it

    async def call(self, method: str, params: dict | None = None) -> dict:
        return await self.browser.conn.call(method, params, self.session_id)


# Runs in every document before the page's own scripts: counts what may still change the DOM (short
# timers, fetch/XHR in flight) and when the DOM last changed, so the renderer can tell a settled page
# from one whose JavaScript is still working without a fixed sleep on every fetch.
SETTLE_SCRIPT = r"""
(() => {
  if (window.__webfetchSettle) return;
  const st = {timers: new Set(), inflight: 0, lastMutation: performance.now()};
  const oSet = window.setTimeout, oClear = window.clearTimeout;
  window.setTimeout = function (fn, ms, ...args) {
    const delay = Number(ms) || 0;
    if (delay > 3000) return oSet.call(this, fn, ms, ...args);
    let id;
    const wrapped = function () {
      st.timers.delete(id);
      return typeof fn === "function" ? fn.apply(this, arguments) : (0, eval)(String(fn));
    };
    id = oSet.call(this, wrapped, ms, ...args);
    st.timers.add(id);
    return id;
  };
  window.clearTimeout = function (id) { st.timers.delete(id); return oClear.call(this, id); };
  const oFetch = window.fetch;
  if (oFetch) window.fetch = function () {
    st.inflight++;
    const done = () => { st.inflight--; };
    try { const p = oFetch.apply(this, arguments); p.then(done, done); return p; }
    catch (e) { done(); throw e; }
  };
  const oSend = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.send = function () {
    st.inflight++;
    this.addEventListener("loadend", () => { st.inflight--; }, {once: true});
    return oSend.apply(this, arguments);
  };
  // WebSocket handshakes never reach the Fetch domain, and reading a page needs none. (The address
  // policy still holds for a worker's own WebSocket: its connection goes through the proxy.)
  const NoSocket = function WebSocket() {
    throw new DOMException("WebSocket connections are disabled while webfetch reads the page", "SecurityError");
  };
  try { Object.defineProperty(window, "WebSocket", {value: NoSocket, writable: false, configurable: false}); }
  catch (e) {}
  // A service worker's requests are not the page's: the Fetch domain never sees them either.
  if (window.ServiceWorkerContainer) {
    try {
      Object.defineProperty(ServiceWorkerContainer.prototype, "register", {writable: false, configurable: false,
        value: () => Promise.reject(new DOMException("service workers are disabled while webfetch reads the page",
                                                     "SecurityError"))});
    } catch (e) {}
  }
  const watch = () => new MutationObserver(() => { st.lastMutation = performance.now(); })
      .observe(document, {subtree: true, childList: true, characterData: true});
  watch();
  Object.defineProperty(window, "__webfetchSettle", {enumerable: false, value: (capMs, quietMs) =>
    new Promise((resolve) => {
      const start = performance.now();
      const check = () => {
        const now = performance.now();
        const busy = st.timers.size > 0 || st.inflight > 0 || document.readyState === "loading";
        if (!busy && now - st.lastMutation >= quietMs) return resolve("settled");
        if (now - start >= capMs) return resolve(busy ? "busy" : "changing");
        oSet(check, 25);
      };
      check();
    })});
})();
"""


class Chrome:
    """Owns the browser: launch or attach, supervise, restart with backoff, and a pool of fresh tabs."""

    def __init__(self, config: BrowserConfig, policy: AddressPolicy) -> None:
        self.config = config
        # Pages connect through the address-policy proxy (proxy.py), unless a browser on another machine
        # could not reach it, or Chrome is to use an outbound proxy of its own: then the policy is applied
        # to each request (render.py), but cannot pin the addresses that are connected to.
        self.proxy_off = proxy_off_reason(config)
        self.proxy = PolicyProxy(policy) if self.proxy_off is None else None
        self.executable = None if config.endpoint else find_chrome(config.executable)
        self.state = "starting"
        self.version: str | None = None
        self.last_error: str | None = None
        self.restarts = 0
        self._browser: Browser | None = None
        self._ready = trio.Event()
        self._crashes: deque[float] = deque()
        self._generation = 0
        self._pool: list[Tab] = []
        self._pool_wanted = trio.Event()
        self._to_close, _ = trio.open_memory_channel[Tab](0)
        self._to_close.close()

    # --- what the rest of the daemon sees ----------------------------------------------------------

    @property
    def problems(self) -> list[str]:
        out = []
        if not self.config.endpoint and self.executable is None:
            out.append(f"no Chrome found: {INSTALL_HINT}")
        elif self.state == "crash_loop":
            out.append(f"Chrome keeps failing ({len(self._crashes)} times in {CRASH_WINDOW_S:.0f} s), "
                       f"restarting with backoff: {self.last_error}")
        elif self.state == "restarting" and self.last_error:
            out.append(f"Chrome is restarting: {self.last_error}")
        return out

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
    async def open_tab(self) -> AsyncIterator[Tab]:
        """A tab in a browser context of its own: new, or recycled from a request in which no document was
        ever committed. It is closed (context disposed) or recycled however the block ends."""
        browser = await self.wait_browser()
        tab = None
        while self._pool and tab is None:
            tab = self._pool.pop()
            if tab.browser is not browser or tab.browser.conn.is_closed:
                tab = None
        if tab is None:
            tab = await self._new_tab(browser)
        tab.uses += 1
        try:
            yield tab
        finally:
            # Disposing of a context takes Chrome tens to hundreds of milliseconds: the answer need not
            # wait for it. The closer task does it at once, and only then refills the pool.
            try:
                self._to_close.send_nowait(tab)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                pass  # that browser is gone, and its tabs with it

    async def open_context(self) -> tuple[Browser, str]:
        """A new browser context for a browse session (browse.py), connecting through the address-policy
        proxy as the fetch tabs' contexts do. The caller makes its tabs and disposes of the context."""
        browser = await self.wait_browser()
        params: dict[str, object] = {"disposeOnDetach": True}
        if self.proxy is not None:
            params |= {"proxyServer": self.proxy.url, "proxyBypassList": "<-loopback>"}
        try:
            ctx = (await browser.conn.call("Target.createBrowserContext", params))["browserContextId"]
        except CDPClosed as e:
            raise BrowserCrashed(str(e)) from None
        return browser, ctx

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
        backoff = 0.5
        while True:
            launched_at = time.monotonic()
            ready_at: float | None = None
            try:
                async with self._open_browser() as browser:
                    self._install(browser)
                    ready_at = time.monotonic()
                    if not started:
                        task_status.started()
                        started = True
                    await self._serve(browser)
                error = "the browser connection closed"
            except BrowserLaunchError as e:
                error = str(e)
            except CDPClosed as e:
                error = str(e)
            except CDPError as e:
                error = f"browser refused setup: {e}"
            self._browser = None
            self._pool = []
            self._ready = trio.Event()
            self.last_error = error
            now = time.monotonic()
            if now - launched_at > CRASH_WINDOW_S:
                backoff = 0.5
            if ready_at is not None and now - ready_at >= HEALTHY_S:
                # It started, served, and then died (killed, crashed, the connection dropped): not a
                # browser that cannot start. Back at once, and no step towards a crash loop.
                self.state = "restarting"
                log.warning("browser down after %.0f s up (%s); restarting now", now - ready_at, error)
                self.restarts += 1
                continue
            self._crashes.append(now)
            while self._crashes and now - self._crashes[0] > CRASH_WINDOW_S:
                self._crashes.popleft()
            self.state = "crash_loop" if len(self._crashes) >= CRASH_LOOP_COUNT else "restarting"
            log.warning("browser down (%s); restarting in %.1f s", error, backoff)
            if not started:
                task_status.started()
                started = True
            await trio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)
            self.restarts += 1
            self.executable = None if self.config.endpoint else find_chrome(self.config.executable)

    def _install(self, browser: Browser) -> None:
        self._browser = browser
        self.version = browser.version
        self.state = "ready"
        self._ready.set()
        log.info("browser ready: %s (generation %d)", browser.version, browser.generation)

    async def _serve(self, browser: Browser) -> None:
        # Unbounded, but never larger than the number of requests that ran: each gives back one tab.
        self._to_close, to_close = trio.open_memory_channel[Tab](float("inf"))
        with single_error():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._closer, to_close)
                if self.config.context_pool > 0:
                    nursery.start_soon(self._fill_pool, browser)
                await browser.conn.closed.wait()
                nursery.cancel_scope.cancel()
        self._to_close.close()

    async def _closer(self, to_close: trio.MemoryReceiveChannel[Tab]) -> None:
        async for tab in to_close:
            if await self._recycle(tab):
                continue
            await close_tab(tab)
            # Refill after a request, not when its tab was taken: creating a context and a renderer
            # while the request's page loads would compete with it for the CPU.
            self._pool_wanted.set()

    async def _recycle(self, tab: Tab) -> bool:
        """Put a tab whose request ended before any document was committed (the server's HTML sufficed, an
        error status, a redirect, a text body) back in the pool. No page ever ran in its context, so the
        only state it can hold is cookies from response headers, which are cleared here, and the HTTP
        cache, which the renderer bypasses for a reused tab. Disposing of the context and making a new one
        would cost Chrome a renderer process each time."""
        if (not tab.reusable or tab.uses >= MAX_TAB_USES or tab.browser is not self._browser
                or tab.browser.conn.is_closed or len(self._pool) >= self.config.context_pool):
            return False
        try:
            with trio.move_on_after(TAB_CLOSE_TIMEOUT_S) as timeout:
                await tab.browser.conn.call("Storage.clearCookies", {"browserContextId": tab.context_id})
        except (CDPClosed, CDPError):
            return False
        if timeout.cancelled_caught:
            return False
        tab.reusable = False
        self._pool.append(tab)
        return True

    async def _fill_pool(self, browser: Browser) -> None:
        # Creating a context and a target costs a few hundred ms: do it before anyone asks.
        while True:
            while len(self._pool) < self.config.context_pool:
                try:
                    tab = await self._new_tab(browser)
                except (BrowserCrashed, CDPError) as e:
                    log.debug("pool fill failed: %s", e)
                    return
                self._pool.append(tab)
            self._pool_wanted = trio.Event()
            await self._pool_wanted.wait()

    async def _new_tab(self, browser: Browser) -> Tab:
        conn = browser.conn
        try:
            params: dict = {"disposeOnDetach": True}
            if self.proxy is not None:
                # everything, loopback included (Chrome would otherwise connect to loopback directly)
                params |= {"proxyServer": self.proxy.url, "proxyBypassList": "<-loopback>"}
            ctx = (await conn.call("Target.createBrowserContext", params))["browserContextId"]
            try:
                target = (await conn.call("Target.createTarget",
                                          {"url": "about:blank", "browserContextId": ctx}))["targetId"]
                session = (await conn.call("Target.attachToTarget",
                                           {"targetId": target, "flatten": True}))["sessionId"]
                tab = Tab(browser, ctx, target, session)
                await self._setup_tab(tab)
            except BaseException:
                with trio.CancelScope(shield=True), trio.move_on_after(TAB_CLOSE_TIMEOUT_S):
                    try:
                        await conn.call("Target.disposeBrowserContext", {"browserContextId": ctx})
                    except (CDPClosed, CDPError):
                        pass
                raise
        except CDPClosed as e:
            raise BrowserCrashed(str(e)) from None
        return tab

    async def _setup_tab(self, tab: Tab) -> None:
        # Every request the page makes is paused once, at the request stage, for the address policy
        # (render.py); the main document also at the response stage. A paused request costs one CDP round
        # trip, and only rendered pages make subresource requests at all (server HTML first).
        patterns = [{"urlPattern": "*", "requestStage": "Request"},
                    {"urlPattern": "*", "resourceType": "Document", "requestStage": "Response"}]
        await tab.call("Page.enable")
        await tab.call("Page.addScriptToEvaluateOnNewDocument", {"source": SETTLE_SCRIPT})
        await tab.call("Fetch.enable", {"patterns": patterns})
        try:
            await tab.browser.conn.call("Browser.setDownloadBehavior",
                                        {"behavior": "deny", "browserContextId": tab.context_id})
        except CDPError:
            pass

    # --- launching --------------------------------------------------------------------------------

    @asynccontextmanager
    async def _open_browser(self) -> AsyncIterator[Browser]:
        self._generation += 1
        if self.config.endpoint:
            async with open_cdp(self.config.endpoint) as conn:
                yield Browser(conn, (await conn.call("Browser.getVersion"))["product"], self._generation,
                              proxy=self.proxy)
            return
        if self.executable is None:
            raise BrowserLaunchError(f"no Chrome found; {INSTALL_HINT}")
        async with launch_chrome(self.executable, self.config.args) as (ws_url, proc):
            with single_error():
                async with trio.open_nursery() as nursery:
                    async with open_cdp(ws_url) as conn:
                        nursery.start_soon(_close_when_exits, proc, conn)
                        version = (await conn.call("Browser.getVersion"))["product"]
                        yield Browser(conn, version, self._generation, proc.pid, self.proxy)
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
    conn._close(CDPClosed(f"Chrome exited with code {proc.returncode}"))


def chrome_command(executable: str, user_data_dir: str, extra: list[str]) -> list[str]:
    args = [*BASE_FLAGS, f"--user-data-dir={user_data_dir}", "--remote-debugging-port=0"]
    if os.geteuid() == 0:
        args.append("--no-sandbox")  # Chrome refuses to run as root with its sandbox
    return [executable, *_merge_feature_flags([*args, *extra]), "about:blank"]


def _merge_feature_flags(args: list[str]) -> list[str]:
    """Chrome honours only the last --disable-features (and --enable-features): merge them into one, so
    browser.args can add features without undoing ours."""
    out: list[str] = []
    merged: dict[str, list[str]] = {}
    for arg in args:
        name, sep, value = arg.partition("=")
        if sep and name in ("--disable-features", "--enable-features"):
            if name not in merged:
                merged[name] = []
                out.append(name)  # placeholder, keeps the flag's first position
            merged[name] += [v for v in value.split(",") if v and v not in merged[name]]
        else:
            out.append(arg)
    return [f"{a}={','.join(merged[a])}" if a in merged else a for a in out]


@asynccontextmanager
async def launch_chrome(executable: str, extra: list[str]) -> AsyncIterator[tuple[str, ChildProcess]]:
    """Start Chrome in its own process group with a throwaway profile; yield its websocket URL.
    On exit the whole group is killed and reaped, and the profile removed."""
    tmp = private_tempdir("chrome")
    profile = Path(tmp) / "profile"
    stderr_path = Path(tmp) / "stderr.log"
    try:
        (profile / "Default").mkdir(parents=True)
        (profile / "Default" / "Preferences").write_text(json.dumps(PREFERENCES))
        with open(stderr_path, "wb") as stderr:
            proc = ChildProcess(chrome_command(executable, str(profile), extra), stderr=stderr)
        try:
            port_file = profile / "DevToolsActivePort"
            with trio.move_on_after(LAUNCH_TIMEOUT_S):
                while proc.poll() is None:
                    try:
                        port, path = port_file.read_text().split("\n")[:2]
                        if port and path:
                            break
                    except (FileNotFoundError, ValueError):
                        pass
                    await trio.sleep(0.02)
            if proc.poll() is not None or not port_file.exists():
                tail = _tail(stderr_path)
                what = (f"exited with code {proc.returncode}" if proc.poll() is not None
                        else f"did not open its DevTools port within {LAUNCH_TIMEOUT_S:.0f} s")
                raise BrowserLaunchError(f"{executable} {what}" + (f": {tail}" if tail else ""))
            yield f"ws://127.0.0.1:{port.strip()}{path.strip()}", proc
        finally:
            await proc.aclose()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])


async def close_tab(tab: Tab) -> None:
    """Dispose of the tab's browser context (which closes the tab), shielded and bounded in time."""
    with trio.CancelScope(shield=True), trio.move_on_after(TAB_CLOSE_TIMEOUT_S):
        try:
            await tab.browser.conn.call("Target.disposeBrowserContext", {"browserContextId": tab.context_id})
        except (CDPClosed, CDPError):
            pass
