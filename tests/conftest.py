from __future__ import annotations

import functools
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
import trio

from webfetch.config import Config, FetchConfig, SubagentConfig
from webfetch.daemon import Daemon, bind_socket
from webfetch.dns import Resolver

from .fake_llm import FakeLLM
from .helpers import LineClient
from .site import Site


@pytest.fixture(scope="session", autouse=True)
def state_home():
    """Daemons the tests start in the background log under $XDG_STATE_HOME: the tests' own directory,
    never the user's (children inherit it)."""
    d = Path(tempfile.mkdtemp(prefix="wf-state-"))
    old = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(d)
    yield d
    if old is None:
        os.environ.pop("XDG_STATE_HOME", None)
    else:
        os.environ["XDG_STATE_HOME"] = old
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def site():
    s = Site().start()
    yield s
    s.stop()


@pytest.fixture
def llm():
    """A fake OpenAI-compatible model server on 127.0.0.1 (tests/fake_llm.py), for the real pi to call."""
    server = FakeLLM()
    yield server
    server.stop()


@pytest.fixture
def short_tmp():
    # Unix socket paths are limited to 108 bytes; pytest's tmp_path can be longer.
    d = Path(tempfile.mkdtemp(prefix="wf-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def make_config(**sections: Any) -> Config:
    """Defaults, plus private addresses allowed (the test site is on 127.0.0.1)."""
    sections.setdefault("fetch", FetchConfig(allow_private=True))
    # never whatever pi the machine has on PATH: the sub-agent tests name theirs
    sections.setdefault("subagent", SubagentConfig(command="/nonexistent/pi-for-tests"))
    return Config(**sections)


class Harness:
    def __init__(self, daemon: Daemon, path: Path) -> None:
        self.daemon = daemon
        self.path = path

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


@pytest.fixture
def start_daemon(nursery, short_tmp):
    """Start a real daemon (real Chromium) on a socket in a temporary directory."""
    async def start(config: Config | None = None, resolver: Resolver | None = None) -> Harness:
        daemon = Daemon(config or make_config(), resolver=resolver)
        path = short_tmp / "wf.sock"
        sock = bind_socket(path)
        await nursery.start(functools.partial(daemon.run, sock))
        return Harness(daemon, path)
    return start


@pytest.fixture
async def daemon(start_daemon):
    return await start_daemon()
