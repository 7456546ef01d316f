"""Layer 1, on the mock clock: the daemon gives its C heap's free pages back once requests stop."""

from types import SimpleNamespace

import pytest
import trio
import trio.testing

from webfetch import daemon
from webfetch.server import Server


@pytest.fixture
def clock():
    return trio.testing.MockClock(autojump_threshold=0)


async def test_trims_once_after_each_busy_spell_never_while_busy(clock, nursery, monkeypatch):
    trims: list[float] = []
    monkeypatch.setattr(daemon, "trim_malloc", lambda: trims.append(trio.current_time()) or 0)
    server = Server(None, 4096)  # type: ignore[arg-type]
    nursery.start_soon(daemon.Daemon._trim_when_idle, SimpleNamespace(server=server))
    await trio.sleep(60)
    assert trims == []  # idle from the start: nothing was freed
    server.request_started()
    await trio.sleep(30)
    server.request_started()
    server.request_ended()
    await trio.sleep(30)
    assert trims == []  # one still in flight
    server.request_ended()
    await trio.sleep(daemon.TRIM_IDLE_S - 0.5)
    server.request_started()  # a new request within the quiet time postpones the trim
    await trio.sleep(1)
    server.request_ended()
    ended = trio.current_time()
    await trio.sleep(600)
    assert trims == [pytest.approx(ended + daemon.TRIM_IDLE_S)]


def test_trim_malloc_reports_what_it_gave_back():
    assert daemon.trim_malloc() >= 0
