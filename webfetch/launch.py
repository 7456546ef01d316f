"""Finding and launching Chrome: the executable, its flags and profile, and the CDP connection over its
DevTools pipe (`--remote-debugging-pipe`: no port, so nothing but the daemon's process can drive it).

The Chrome actor (chrome.py) supervises what this module starts; `webfetch doctor` launches through it too."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import trio

from ._trio import pop_lines, single_error
from .cdp import CDPClosed, CDPConnection, open_cdp_pipe
from .cdp_transport import PipeTransport
from .procs import ChildProcess, private_tempdir

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
    # Every window Target.createTarget opens (one per browser context) preloads the address bar's popup, a
    # WebUI page with a renderer process of its own that headless Chrome never shows: Chromium 156 spent
    # ~200 ms of CPU per context on it, and a rendered page cost ~3x its CPU. Both names are needed.
    "--disable-features=WebUIOmniboxPopup,WebUIOmniboxAimPopup",
]
# WebRTC sends UDP (STUN, TURN) from Chrome itself, past the address-policy proxy: this policy allows it
# only through the proxy, which carries no UDP, so there is none (a page gets TCP through the proxy).
PREFERENCES = {"webrtc": {"ip_handling_policy": "disable_non_proxied_udp"}}
LAUNCH_TIMEOUT_S = 30.0
STDERR_LINES = 20  # kept to explain a Chrome that fails


class BrowserLaunchError(Exception):
    """Chrome did not start, or did not answer on its DevTools pipe; the message carries its last words."""


def find_chrome(configured: str | None = None) -> str | None:
    """browser.executable, then WEBFETCH_CHROME, then the usual names on PATH."""
    for candidate in (configured, os.environ.get("WEBFETCH_CHROME")):
        if candidate:
            return shutil.which(os.path.expanduser(candidate))
    for name in CHROME_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


# A Chrome version as `--version` prints it ("Chromium 156.0.8078.108 built on Debian…", "Google Chrome 156…")
_VERSION = re.compile(rb"\b\d+\.\d+\.\d+\.\d+\b")


async def installed_version(executable: str) -> str | None:
    """The executable's own `--version` ("156.0.8078.108"), without starting a browser; None when it does not
    say (a wrapper that prints something else, a binary that cannot run)."""
    try:
        with trio.move_on_after(10):
            done = await trio.run_process([executable, "--version"], capture_stdout=True, capture_stderr=True,
                                          check=False, stdin=b"")
            found = _VERSION.search(done.stdout) if done.returncode == 0 else None
            return found.group(0).decode() if found else None
    except OSError:
        pass
    return None


def chrome_command(executable: str, user_data_dir: str, extra: list[str]) -> list[str]:
    # SECURITY: the pipe, never --remote-debugging-port: a DevTools port on loopback has no authentication,
    # and any local user (or process sharing the network namespace) could read every cookie in it
    # (Storage.getCookies) and open file:// pages as the daemon's user.
    args = [*BASE_FLAGS, f"--user-data-dir={user_data_dir}", "--remote-debugging-pipe"]
    if os.geteuid() == 0:
        args.append("--no-sandbox")  # Chrome refuses to run as root with its sandbox
    return [executable, *merge_feature_flags([*args, *extra]), "about:blank"]


def merge_feature_flags(args: list[str]) -> list[str]:
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


class _Stderr:
    """Reads Chrome's stderr for as long as it runs (a full pipe would stall it), keeping its last lines,
    which explain a failure."""

    def __init__(self) -> None:
        self.ended = trio.Event()  # Chrome closed its stderr (it exited)
        self.tail: deque[str] = deque(maxlen=STDERR_LINES)

    async def read(self, stream: trio.lowlevel.FdStream) -> None:
        buf = bytearray()
        try:
            while data := await stream.receive_some(65536):
                buf += data
                for line in pop_lines(buf):
                    if line.strip():
                        self.tail.append(line.decode(errors="replace").strip())
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self.ended.set()

    def last_words(self, lines: int = 3) -> str:
        return " | ".join(list(self.tail)[-lines:])


@asynccontextmanager
async def launch_chrome(executable: str, extra: list[str]) -> AsyncIterator[tuple[CDPConnection, ChildProcess]]:
    """Start Chrome in its own process group with a throwaway profile; yield the CDP connection over its
    DevTools pipe, once Chrome answers on it, and its process. On exit the pipe is closed, the whole group
    killed and reaped, and the profile removed."""
    tmp = private_tempdir("chrome")
    try:
        profile = Path(tmp) / "profile"
        (profile / "Default").mkdir(parents=True)
        (profile / "Default" / "Preferences").write_text(json.dumps(PREFERENCES))
        proc = ChildProcess(chrome_command(executable, str(profile), extra), stderr_pipe=True, devtools_pipe=True)
        try:
            assert proc.stderr is not None and proc.devtools_in is not None and proc.devtools_out is not None
            stderr = _Stderr()
            with single_error():
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(stderr.read, proc.stderr)
                    async with open_cdp_pipe(PipeTransport(proc.devtools_in, proc.devtools_out)) as conn:
                        await _answers(conn, proc, stderr, executable)
                        yield conn, proc
                    nursery.cancel_scope.cancel()
        finally:
            await proc.aclose()
    finally:
        remove_singleton_dir(Path(tmp) / "profile")
        shutil.rmtree(tmp, ignore_errors=True)


async def _answers(conn: CDPConnection, proc: ChildProcess, stderr: _Stderr, executable: str) -> None:
    """Return once Chrome answers a first call on its pipe (it reads the pipe once it is up); else raise
    BrowserLaunchError with why: its exit code and last words, or that it did not answer in time."""
    with trio.move_on_after(LAUNCH_TIMEOUT_S):
        try:
            await conn.call("Browser.getVersion")
            return
        except CDPClosed:  # it closed the pipe: it is exiting
            pass
    with trio.move_on_after(2):  # its exit code, and the last lines of its stderr
        await proc.wait()
        await stderr.ended.wait()
    code = proc.poll()
    what = (f"exited with code {code}" if code is not None
            else f"did not answer on its DevTools pipe within {LAUNCH_TIMEOUT_S:.0f} s")
    tail = stderr.last_words()
    raise BrowserLaunchError(f"{executable} {what}" + (f": {tail}" if tail else ""))


def remove_singleton_dir(profile: Path) -> None:
    """Remove the directory Chrome made for its singleton socket, once Chrome is gone. It keeps that socket
    in a directory of its own under $TMPDIR (org.chromium.Chromium.XXXXXX: a Unix socket's path must be
    short, so not in the profile, which only links to it) and left it there at every stop, however it was
    stopped. Chrome's temporary directory is not moved into ours instead: that would make the socket's
    path longer, and past the limit (108 bytes) Chrome aborts at start."""
    try:
        where = Path(os.readlink(profile / "SingletonSocket")).parent
    except OSError:
        return  # none made, or no profile
    if not where.name.startswith(("org.chromium.", ".org.chromium.", ".com.google.Chrome.")):
        return  # not the directory Chrome makes: never remove what we do not know
    with suppress(OSError):
        for entry in where.iterdir():
            if entry.name.startswith("Singleton"):
                entry.unlink()
        where.rmdir()
