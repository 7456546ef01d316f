"""`webfetch profile login`: a visible Chromium window for the person to log in, whose state becomes a
profile when they close it.

The browser gets a temporary --user-data-dir of its own (never the user's main profile, whose cookies are
not ours to copy and which Chrome 136+ will not debug anyway), removed afterwards. It is driven over its
DevTools pipe (`--remote-debugging-pipe`), never a port: while the person logs in, no other local user or
process can reach the window's cookies. Its state can only be
read while its window is open: once the last one closes, Chromium 156 answers Storage.getCookies with
nothing even when kept alive (--keep-alive-for-test), as the profile's session ends with it. So a CDP
connection stays open and the state is read whenever a tab shows a new URL (the redirect after a login
form comes with the cookies it set) and every POLL_S; what stands when the window closes is the last read.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import trio

from ..children import ChildProcess, private_tempdir
from ..chrome.browser import Browser, PageChange
from ..chrome.cdp import CDPClosed, CDPConnection, CDPError, open_cdp_pipe
from ..chrome.launch import INSTALL_HINT, find_chrome
from ..chrome.transport import PipeTransport
from ..profiles.store import ProfileError, StorageState, headless_login
from ..trust.shell import command
from .profile_browser import read_state

POLL_S = 1.0
START_TIMEOUT_S = 30.0
FLAGS = ["--no-first-run", "--no-default-browser-check", "--password-store=basic", "--use-mock-keychain",
         "--disable-sync", "--disable-default-apps", "--remote-debugging-pipe"]


def no_display_error(name: str, url: str) -> ProfileError | None:
    """The error for a machine without a display to open the window on (None when there is one): it names
    the way that works headless first (a browse session on the daemon's own Chrome), then the imports."""
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return None
    return ProfileError(
        f"profile login opens a browser window, and there is no display here ($DISPLAY and "
        f"$WAYLAND_DISPLAY are unset). Log in headless instead: {headless_login(name, url)}. Or log in with "
        f"a browser where you have one and save its state (a Playwright storage state, or a cookies.txt from a "
        f"cookies export extension), then "
        f"`{command('webfetch', 'profile', 'import', name, 'FILE')}`; or start Chrome with "
        f"`--remote-debugging-port=9222 --user-data-dir=DIR`, log in there, and "
        f"`{command('webfetch', 'profile', 'import', name, '--from-browser', 'http://127.0.0.1:9222')} --hosts HOST`")


async def login_window(url: str, executable: str | None) -> StorageState:
    """Open a visible Chromium on `url`; the state it holds when the person closes it."""
    exe = find_chrome(executable)
    if exe is None:
        raise ProfileError(f"no Chrome or Chromium found: {INSTALL_HINT}")
    tmp = private_tempdir("login")
    try:
        data_dir = Path(tmp) / "profile"
        data_dir.mkdir()
        args = [exe, f"--user-data-dir={data_dir}", *FLAGS, url]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chrome refuses to run as root with its sandbox
        proc = ChildProcess(args, devtools_pipe=True)
        try:
            assert proc.devtools_in is not None and proc.devtools_out is not None
            async with open_cdp_pipe(PipeTransport(proc.devtools_in, proc.devtools_out)) as conn:
                browser = await _started(conn, proc, exe)
                print("webfetch: a Chromium window is open: log in there, then close the window (the login is "
                      "saved when it closes)", file=sys.stderr, flush=True)
                return await _watch(browser)
        finally:
            await proc.aclose()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


async def _started(conn: CDPConnection, proc: ChildProcess, exe: str) -> Browser:
    """The browser, once Chrome answers on its DevTools pipe (it reads it once it is up)."""
    with trio.move_on_after(START_TIMEOUT_S):
        try:
            return await Browser.over(conn)
        except CDPClosed:  # it closed the pipe: it is exiting
            with trio.move_on_after(2):
                await proc.wait()
            raise ProfileError(f"{exe} exited with code {proc.poll()} before it opened its window; is the "
                               f"display {os.environ.get('DISPLAY') or os.environ.get('WAYLAND_DISPLAY')} "
                               f"usable?") from None
    raise ProfileError(f"{exe} did not answer on its DevTools pipe within {START_TIMEOUT_S:.0f} s")


async def _watch(browser: Browser) -> StorageState:
    """Read the state whenever a tab shows a new URL (a login's redirect has set its cookies) and every
    POLL_S, until the last tab closes or the browser goes; then close the browser."""
    latest = StorageState()
    try:
        async with browser.watch_pages() as changes:
            pages = {page.target_id: page.url for page in await browser.pages()}
            while pages:
                latest = await read_state(browser, lambda host: True)
                with trio.move_on_after(POLL_S):
                    async for change in changes:
                        if _changed(pages, change):
                            break
            await browser.close()
    except (CDPClosed, CDPError):
        pass  # the browser exited with its window: the last read stands
    return latest


def _changed(pages: dict[str, str], change: PageChange) -> bool:
    """Keep `pages` (target id → URL) up to date; whether a tab closed or shows another URL."""
    if change.kind == "destroyed":
        return pages.pop(change.target_id, None) is not None
    old = pages.get(change.target_id)
    pages[change.target_id] = change.url
    return old != change.url
