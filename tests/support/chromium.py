"""A Chromium of the test's own with a DevTools port (`--remote-debugging-port=0`): a user's browser that
webfetch attaches to (`browser.endpoint`, `profile import --from-browser`), or a test's view into a browser
webfetch drives over its pipe, whose command line the test extended with a port."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from webfetch.chrome.launch import find_chrome


class Chromium:
    """A second real Chromium, headless, with remote debugging on a port of its own: the user's browser."""

    def __init__(self, data_dir: Path) -> None:
        executable = find_chrome()
        assert executable is not None, "no Chromium found: bin/test installs it (or set WEBFETCH_CHROME)"
        # Local Network Access off: the tests' sites all live on loopback, standing for public ones, and with it
        # on this browser itself refuses a page's request to another loopback port (the tests of what webfetch
        # refuses in the person's browser would then pass with webfetch doing nothing)
        args = [executable, "--headless", "--remote-debugging-port=0", f"--user-data-dir={data_dir}",
                "--no-first-run", "--password-store=basic", "--disable-features=LocalNetworkAccessChecks",
                "about:blank"]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        self.port, self.ws_url = devtools_port(data_dir)

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


def devtools_port(data_dir: Path, timeout: float = 30) -> tuple[int, str]:
    """Chrome's DevToolsActivePort: its port and the browser's websocket URL."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            port, path = (data_dir / "DevToolsActivePort").read_text().split("\n")[:2]
            if port and path:
                return int(port), f"ws://127.0.0.1:{port}{path}"
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"no DevToolsActivePort in {data_dir}")
