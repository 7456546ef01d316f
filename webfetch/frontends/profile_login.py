"""`webfetch profile login`: a visible Chromium window for the person to log in, whose state becomes a
profile when they close it.

The browser gets a temporary --user-data-dir of its own (never the user's main profile, whose cookies are
not ours to copy and which Chrome 136+ will not debug anyway), removed afterwards. Its state can only be
read while it runs, so a CDP connection stays open: the state is read every POLL_S, and again once its
last tab has closed. `--keep-alive-for-test` keeps Chromium running after its last window closes, which
gives that last read time; should a browser ignore the switch and exit, the last periodic read stands.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import trio

from ..cdp import CDPClosed, CDPConnection, CDPError, open_cdp
from ..launch import INSTALL_HINT, find_chrome
from ..procs import ChildProcess, private_tempdir
from ..profiles import ProfileError, StorageState
from .profile_browser import read_state

POLL_S = 1.0
START_TIMEOUT_S = 30.0
FLAGS = ["--no-first-run", "--no-default-browser-check", "--password-store=basic", "--use-mock-keychain",
         "--disable-sync", "--disable-default-apps", "--remote-debugging-port=0", "--keep-alive-for-test"]


def no_display_error(name: str) -> ProfileError | None:
    """The error for a machine without a display to open the window on (None when there is one)."""
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return None
    return ProfileError(
        f"profile login opens a browser window, and there is no display here ($DISPLAY and "
        f"$WAYLAND_DISPLAY are unset). The other two ways in: log in with a browser where you have one and "
        f"save its state (a Playwright storage state, or a cookies.txt from a cookies export extension), then "
        f"`webfetch profile import {name} FILE`; or start Chrome with `--remote-debugging-port=9222 "
        f"--user-data-dir=DIR`, log in there, and `webfetch profile import {name} --from-browser "
        f"http://127.0.0.1:9222 --hosts HOST`")


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
        proc = ChildProcess(args)
        try:
            ws_url = await _devtools_url(data_dir, proc, exe)
            print("webfetch: a Chromium window is open: log in there, then close the window (the login is "
                  "saved when it closes)", file=sys.stderr, flush=True)
            async with open_cdp(ws_url) as conn:
                return await _watch(conn)
        finally:
            await proc.aclose()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


async def _devtools_url(data_dir: Path, proc: ChildProcess, exe: str) -> str:
    """Chrome writes its DevTools port and browser path to DevToolsActivePort in its user-data-dir."""
    port_file = data_dir / "DevToolsActivePort"
    with trio.move_on_after(START_TIMEOUT_S):
        while proc.poll() is None:
            try:
                port, path = port_file.read_text().split("\n")[:2]
                if port.strip() and path.strip():
                    return f"ws://127.0.0.1:{port.strip()}{path.strip()}"
            except (OSError, ValueError):
                pass
            await trio.sleep(0.1)
        raise ProfileError(f"{exe} exited with code {proc.poll()} before it opened its window; is the display "
                           f"{os.environ.get('DISPLAY') or os.environ.get('WAYLAND_DISPLAY')} usable?")
    raise ProfileError(f"{exe} did not open its DevTools port within {START_TIMEOUT_S:.0f} s")


async def _watch(conn: CDPConnection) -> StorageState:
    """Read the state until the last tab closes (or the browser goes); then once more, and close it."""
    latest = StorageState()
    with conn.subscribe(None) as events:
        try:
            await conn.call("Target.setDiscoverTargets", {"discover": True})
            pages = await _pages(conn)
            while pages:
                latest = await read_state(conn, lambda host: True)
                with trio.move_on_after(POLL_S):
                    while pages:
                        event = await events.receive()
                        info = event.get("params", {}).get("targetInfo", {})
                        if event.get("method") == "Target.targetCreated" and info.get("type") == "page":
                            pages.add(info["targetId"])
                        elif event.get("method") == "Target.targetDestroyed":
                            pages.discard(event.get("params", {}).get("targetId"))
            final = await read_state(conn, lambda host: True)
            # the tabs are gone, and their localStorage could only be read while they were open
            latest = StorageState(cookies=final.cookies, origins=latest.origins)
            await conn.call("Browser.close")
        except (CDPClosed, CDPError):
            pass  # the browser exited on its own: its last periodic read stands
    return latest


async def _pages(conn: CDPConnection) -> set[str]:
    targets = (await conn.call("Target.getTargets")).get("targetInfos", [])
    return {str(t["targetId"]) for t in targets if t.get("type") == "page"}
