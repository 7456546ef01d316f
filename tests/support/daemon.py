"""The daemon harnesses: `Harness`, a `Daemon` run in the test's own trio nursery (the tests' `start_daemon`
fixture), and `ServedDaemon`, a `webfetch serve` process with its config and log in a directory of its own
(the bin/ scripts, which measure it as a user runs it: its own process, its own Chrome)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import trio

from webfetch.config import DEFAULTS, Config, ConfigSource, FetchConfig, SubagentConfig
from webfetch.daemon import Daemon, bind_socket
from webfetch.dns import Resolver
from webfetch.frontends.client import Client

from . import procs
from .client import LineClient

ROOT = Path(__file__).resolve().parents[2]
# webfetch drives its Chrome over the DevTools pipe, with no port: a harness that reads Chrome's own state
# from outside (its targets, for a leak count) gives that Chrome a port as well, in browser.args
DEVTOOLS_PORT_ARG = "--remote-debugging-port=0"


# The main document's transport the tests' daemons use unless a test sets its own: bin/test runs the fetch
# path's test files a second time with WEBFETCH_TEST_TRANSPORT=chrome, so that both transports pass them.
TRANSPORT = os.environ.get("WEBFETCH_TEST_TRANSPORT", "http")
# the notes every page loaded on the suite's transport has: on "chrome", the note saying why Chrome loaded it
TRANSPORT_NOTES = ['loaded in Chrome: fetch.transport is "chrome"'] if TRANSPORT == "chrome" else []


def make_config(transport: str | None = None, **sections: Any) -> Config:
    """Defaults, plus private addresses allowed (the test site is on 127.0.0.1), on the suite's transport
    unless `transport` pins one (a test of one transport's own behaviour)."""
    fetch = sections.setdefault("fetch", FetchConfig(allow_private=True))
    sections["fetch"] = msgspec.structs.replace(fetch, transport=transport or TRANSPORT)

    # never whatever pi the machine has on PATH: the sub-agent tests name theirs
    sections.setdefault("subagent", SubagentConfig(command="/nonexistent/pi-for-tests"))
    return Config(**sections)


class Harness:
    def __init__(self, daemon: Daemon, path: Path) -> None:
        self.daemon = daemon
        self.path = path

    @classmethod
    async def start(cls, nursery: trio.Nursery, path: Path, config: Config | None = None,
                    resolver: Resolver | None = None, source: ConfigSource = DEFAULTS) -> Harness:
        """A real daemon (real Chromium) serving a socket at `path`, until `nursery` is cancelled; `source`
        is the config file it read (what a reload reads again)."""
        daemon = Daemon(config or make_config(), resolver=resolver, source=source)
        sock = bind_socket(path)
        await nursery.start(functools.partial(daemon.run, sock))
        return cls(daemon, path)

    async def client(self) -> LineClient:
        return await LineClient.connect(self.path)

    async def request(self, obj: dict[str, Any], progress: list | None = None) -> dict[str, Any]:
        c = await self.client()
        try:
            with trio.fail_after(60):
                return await c.request(obj, progress)
        finally:
            await c.aclose()

    async def fetch(self, url: str, **fields: Any) -> dict[str, Any]:
        return await self.request({"id": "t", "op": "fetch", "url": url, **fields})

    async def page_targets(self) -> list[dict[str, Any]]:
        browser = await self.daemon.chrome.wait_browser()
        infos = (await browser.conn.call("Target.getTargets"))["targetInfos"]
        return [t for t in infos if t["type"] == "page"]


class ServedDaemon:
    """`webfetch serve` as its own process, with `config` (TOML text) in `tmp`/config.toml, its socket at
    `tmp`/wf.sock and its output (its log, at `log_level`) in `tmp`/daemon.log. `stop()` ends it."""

    def __init__(self, tmp: Path, config: str, env: dict[str, str] | None = None, tree: Path = ROOT,
                 log_level: str = "warning") -> None:
        # `tree`: the source tree whose webfetch runs (`-m` imports from the working directory), so that
        # bin/bench can set another commit's code beside this one
        self.tmp = tmp
        self.sock = tmp / "wf.sock"
        cfg = tmp / "config.toml"
        cfg.write_text(config)
        self.log = open(tmp / "daemon.log", "wb")  # noqa: SIM115 - closed by stop()
        # its pages on disk in `tmp` too (unless `env` names a place): never the user's cache, and a bench
        # run after another starts cold
        if "XDG_CACHE_HOME" not in (env or {}):
            env = {**(os.environ if env is None else env), "XDG_CACHE_HOME": str(tmp / "cache")}
        self.proc = subprocess.Popen([sys.executable, "-m", "webfetch", "serve", "--socket", str(self.sock),
                                      "--config", str(cfg), "--log-level", log_level],
                                     stdout=self.log, stderr=self.log, cwd=tree, env=env)

    def status(self, timeout: float = 30) -> dict:
        with Client(self.sock, autostart=False, timeout=timeout) as c:
            return list(c.request("status"))[-1]

    def wait_ready(self, timeout: float, then_s: float = 0.0) -> None:
        """Wait until its browser is ready, then `then_s` more seconds (the tab pool fills); SystemExit,
        naming the log, if it is not ready within `timeout`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.status()["browser"]["state"] == "ready":
                    time.sleep(then_s)
                    return
            except Exception:
                pass
            time.sleep(0.1)
        raise SystemExit(f"the daemon did not become ready; see {self.tmp / 'daemon.log'}")

    def fetch(self, url: str, **fields: Any) -> tuple[dict, float]:
        """The terminal frame of one fetch on a new connection, and the seconds it took."""
        started = time.perf_counter()
        with Client(self.sock, autostart=False) as c:
            frame = list(c.request("fetch", url=url, **fields))[-1]
        return frame, time.perf_counter() - started

    def chrome_pids(self) -> list[int]:
        return [p for p in procs.descendants(self.proc.pid) if procs.is_chrome(p)]

    def browser_pid(self) -> int | None:
        """The browser process itself: the daemon's direct child that is Chrome."""
        return next((p for p in procs.children(self.proc.pid) if procs.is_chrome(p)), None)

    def devtools_port(self) -> int | None:
        """Its Chrome's DevTools port, when its config gave it one (DEVTOOLS_PORT_ARG)."""
        url = procs.devtools_url(self.proc.pid)
        return None if url is None else int(url.split(":")[2].split("/")[0])

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()
