from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
import trio

from webfetch.config import Config
from webfetch.dns import Resolver

from .support.addresses import NoPacketLeaves
from .support.daemon import Harness
from .support.fake_llm import FakeLLM
from .support.site import Site

# Fixtures that start a real Chromium or the real pi: a test that uses one carries the matching mark, which
# `bin/test --fast` (-m "not chromium and not pi") deselects.
CHROMIUM_FIXTURES = {"start_daemon", "daemon", "mcp_setup"}
PI_FIXTURES = {"pi_home"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        if used & CHROMIUM_FIXTURES:
            item.add_marker(pytest.mark.chromium)
        if used & PI_FIXTURES:
            item.add_marker(pytest.mark.pi)


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


@pytest.fixture(scope="session", autouse=True)
def cache_home_for_session():
    """Pages kept on disk and browse downloads go under $XDG_CACHE_HOME/webfetch: the tests' own directory,
    never the user's (daemons started by module-scoped fixtures get this one)."""
    d = Path(tempfile.mkdtemp(prefix="wf-cache-"))
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(d)
    yield d
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(autouse=True)
def cache_home(cache_home_for_session, monkeypatch):
    """Each test a disk cache of its own, so a test that expects a cold cache gets one whatever ran
    before it; the daemons one test starts (in process, or as processes, which inherit it) share it, as a
    restarted daemon does."""
    d = Path(tempfile.mkdtemp(prefix="test-", dir=cache_home_for_session))
    monkeypatch.setenv("XDG_CACHE_HOME", str(d))
    return d


@pytest.fixture
def site():
    s = Site().start()
    yield s
    s.stop()


@pytest.fixture
def llm():
    """A fake OpenAI-compatible model server on 127.0.0.1 (tests/support/fake_llm.py), for the real pi to call."""
    server = FakeLLM()
    yield server
    server.stop()


@pytest.fixture
def short_tmp():
    # Unix socket paths are limited to 108 bytes; pytest's tmp_path can be longer.
    d = Path(tempfile.mkdtemp(prefix="wf-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def start_daemon(nursery, short_tmp):
    """Start a real daemon (real Chromium) on a socket in a temporary directory."""
    async def start(config: Config | None = None, resolver: Resolver | None = None) -> Harness:
        return await Harness.start(nursery, short_tmp / "wf.sock", config, resolver)
    return start


@pytest.fixture
async def daemon(start_daemon):
    return await start_daemon()


@pytest.fixture
def no_packet_leaves(monkeypatch):
    """The policy proxy's connections (and so every page's, libcurl's and the crawl's, which all go through
    it) reach loopback only: any other is recorded and fails before a socket exists (support/addresses.py)."""
    guard = NoPacketLeaves()
    monkeypatch.setattr(trio, "open_tcp_stream", guard)
    return guard
