"""Name lookups for the address policy (webfetch/dns.py): a cache, one lookup per name at a time and at
most six at once, as Chrome made them before the proxy took resolving over. The DNS server is the one
thing faked here (none can be run behind the system resolver in a test); the proxy, Chrome and the
pages are real."""

import ipaddress

import pytest
import trio
import trio.testing

from webfetch.config import BrowserConfig, FetchConfig
from webfetch.dns import ANSWER_TTL_S, FAILURE_TTL_S, MAX_CONCURRENT_LOOKUPS, HostCache, resolve

from .support.daemon import make_config
from .test_hostile import CHROME_LNA_OFF
from .test_proxy import socks_connect, start_proxy

LOOPBACK = ipaddress.ip_address("127.0.0.1")


@pytest.fixture
def clock():
    return trio.testing.MockClock(autojump_threshold=0)


class Server:
    """A DNS server as the system resolver reaches it: every `.test` name is 127.0.0.1 (`missing.test`
    does not exist), each answer takes `delay`; with `capacity`, a query beyond that many pending is
    lost, and glibc gives up on it only after its 5 s timeout, as with the routers and container DNS
    forwarders Chrome caps its lookups for."""

    def __init__(self, delay: float = 0.01, capacity: int | None = None) -> None:
        self.delay = delay
        self.capacity = capacity
        self.asked: list[str] = []
        self.pending = 0
        self.most_pending = 0
        self.lost = 0

    async def __call__(self, host: str) -> list:
        if not host.endswith(".test"):
            return await resolve(host)
        self.asked.append(host)
        self.pending += 1
        self.most_pending = max(self.most_pending, self.pending)
        try:
            if self.capacity is not None and self.pending > self.capacity:
                self.lost += 1
                await trio.sleep(5.0)
                return []
            await trio.sleep(self.delay)
            return [] if host == "missing.test" else [LOOPBACK]
        finally:
            self.pending -= 1


async def test_callers_asking_for_one_name_at_once_share_one_lookup():
    server = Server(delay=0.2)
    cache = HostCache(server)
    answers = []

    async def ask():
        answers.append(await cache("shared.test"))

    async with trio.open_nursery() as nursery:
        for _ in range(10):
            nursery.start_soon(ask)
    assert answers == [[LOOPBACK]] * 10
    assert server.asked == ["shared.test"]


async def test_at_most_six_lookups_run_at_once_and_every_name_is_answered():
    server = Server(delay=0.05)
    cache = HostCache(server)
    answers = {}

    async def ask(name):
        answers[name] = await cache(name)

    names = [f"host{i}.test" for i in range(20)]
    async with trio.open_nursery() as nursery:
        for name in names:
            nursery.start_soon(ask, name)
    assert MAX_CONCURRENT_LOOKUPS == 6
    assert server.most_pending == 6
    assert answers == {name: [LOOPBACK] for name in names}


async def test_an_answer_is_kept_a_minute_and_a_failure_two_seconds(clock):
    server = Server()
    cache = HostCache(server)
    assert await cache("kept.test") == [LOOPBACK]
    assert await cache("missing.test") == []
    await trio.sleep(FAILURE_TTL_S - 0.1)
    assert await cache("kept.test") == [LOOPBACK] and await cache("missing.test") == []
    assert server.asked == ["kept.test", "missing.test"]
    await trio.sleep(0.2)  # the failure has expired, the answer not
    assert await cache("missing.test") == [] and await cache("kept.test") == [LOOPBACK]
    assert server.asked == ["kept.test", "missing.test", "missing.test"]
    await trio.sleep(ANSWER_TTL_S)
    assert await cache("kept.test") == [LOOPBACK]
    assert server.asked[-1] == "kept.test" and len(server.asked) == 4


async def test_an_address_is_not_looked_up():
    server = Server()
    cache = HostCache(server)
    assert await cache("127.0.0.2") == [ipaddress.ip_address("127.0.0.2")]
    assert await cache("::1") == [ipaddress.ip_address("::1")]
    assert server.asked == []


async def test_a_cancelled_lookup_hands_the_name_to_the_next_caller():
    server = Server(delay=0.3)
    cache = HostCache(server)
    answers = []

    async def ask():
        answers.append(await cache("handed.test"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask)  # runs once this task has started its lookup: it waits on that one
        with trio.move_on_after(0.1):  # this caller gives up mid-lookup
            await cache("handed.test")
    assert answers == [[LOOPBACK]]
    assert server.asked == ["handed.test", "handed.test"]  # the waiter looked it up itself


async def test_connections_to_one_name_through_the_proxy_cost_one_lookup(nursery, site):
    server = Server(delay=0.1)
    proxy = await start_proxy(nursery, resolver=HostCache(server))
    codes = []

    async def connect():
        stream, code = await socks_connect(proxy, "six.test", site.port)
        codes.append(code)
        await stream.aclose()

    async with trio.open_nursery() as inner:  # Chrome opens up to six connections to a host at once
        for _ in range(6):
            inner.start_soon(connect)
    assert codes == [0] * 6
    assert server.asked == ["six.test"]


SCRIPT_HOSTS = 20


def many_hosts_page(port: int) -> str:
    """A page whose text is written by parser-blocking scripts from twenty hosts, as an article page with
    its CDNs, analytics and ad hosts names them."""
    scripts = "".join(f'<script src="http://s{i}.test:{port}/part.js?n={i}"></script>' for i in range(SCRIPT_HOSTS))
    return (f"<html><head><title>Many hosts</title>{scripts}</head><body><article><h1>Many hosts</h1>"
            f"<div id='parts'></div></article></body></html>")


PART_JS = """
(() => {
  const n = new URL(document.currentScript.src).searchParams.get("n");
  document.addEventListener("DOMContentLoaded", () => {
    const p = document.createElement("p");
    p.textContent = `Part ${n} of the story was written by a script from its own host, which had to be looked up.`;
    document.getElementById("parts").append(p);
  });
})();
"""


async def fetch_many_hosts(start_daemon, site, resolver):
    site.html("/many-hosts", many_hosts_page(site.port))
    site.route("/part.js", lambda h: h.reply(200, "application/javascript", PART_JS))
    d = await start_daemon(make_config(fetch=FetchConfig(render="always", allow_hosts=["127.0.0.1"]),
                                       browser=BrowserConfig(args=CHROME_LNA_OFF, settle_s=3)), resolver=resolver)
    return await d.fetch(site.url("/many-hosts"))


async def test_a_page_naming_twenty_hosts_renders_without_losing_lookups(start_daemon, site):
    """On a resolver that loses queries beyond six pending, a page's twenty script hosts are each looked
    up once (the render's check and Chrome's connections share the answer) and none is lost: every
    script ran and the page never waited out settle_s."""
    server = Server(capacity=MAX_CONCURRENT_LOOKUPS)
    r = await fetch_many_hosts(start_daemon, site, HostCache(server))
    assert r["type"] == "result", r
    for i in range(SCRIPT_HOSTS):
        assert f"Part {i} of the story" in r["content"], r["content"]
    assert not any("stopped loading" in note for note in r.get("notes") or []), r.get("notes")
    assert server.lost == 0
    assert sorted(server.asked) == sorted(f"s{i}.test" for i in range(SCRIPT_HOSTS))
