"""The address boundary on every path that checks an address, through a real daemon (real Chromium): fetch
on both transports, a redirect, a page's subresources, browse (open, a page's requests, a click), and
crawl's robots.txt and sitemaps. Each path takes a sample of tests/support/addresses.py's table (the whole
table is judged by tests/test_urls.py and the proxy's by tests/test_proxy.py): every non-public address
is refused with what it is, and a public one is let through.

Names resolve through a scripted DNS server (the daemon's resolver hook), so `at-100-100-100-200.test`
is Alibaba Cloud's metadata address as far as the daemon knows. Nothing here reaches off the machine:
every connection the daemon makes goes through its policy proxy, whose connects the `no_packet_leaves`
guard fails (and records) unless they are to loopback. A refused address is never in that record, which
is how a test tells "refused before connecting" from "tried, and the network failed"; the public
addresses are, which shows the record sees what gets through."""

from __future__ import annotations

import ipaddress

import pytest
import trio

from webfetch.config import BrowserConfig, CrawlConfig, FetchConfig

from .support.addresses import EXPECTED, METADATA, PUBLIC, SAMPLE, name_of, resolver
from .support.daemon import make_config
from .support.site import ARTICLE_TEXT, simple_page
from .test_browse import Browser, ref
from .test_hostile import CHROME_LNA_OFF


@pytest.fixture(autouse=True)
def no_outbound_proxy(monkeypatch):
    """A proxy set in the machine's environment would switch webfetch's address-policy proxy off."""
    from webfetch.chrome.browser import PROXY_ENV
    for name in PROXY_ENV:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


def config(transport: str | None = None, **sections):
    # the test site's address is allowed, nothing else that is not public
    return make_config(transport, fetch=FetchConfig(allow_hosts=["127.0.0.1"], **sections.pop("fetch", {})),
                       browser=BrowserConfig(args=CHROME_LNA_OFF), **sections)


def assert_refused(address: str, message: str, host: str | None = None) -> None:
    """The refusal names the host, the address it resolved to and what that address is."""
    assert f"{host or name_of(address)} ({ipaddress.ip_address(address)}) is " in message, message
    assert EXPECTED[address] in message, message
    assert ("fetch.allow_private" in message) is not EXPECTED[address].startswith(METADATA), message


def attempted(guard) -> set[str]:
    """The addresses the daemon tried to connect to off this machine."""
    return {host for host, _ in guard.attempts}


def public_ips() -> set[str]:
    return {str(ipaddress.ip_address(a)) for a in PUBLIC}


async def until_attempted(guard, addresses: set[str]) -> None:
    with trio.fail_after(20):
        while not addresses <= attempted(guard):
            await trio.sleep(0.05)


@pytest.mark.parametrize("transport", ["http", "chrome"])
async def test_fetch_and_its_redirects_refuse_each_address_before_connecting(start_daemon, site, no_packet_leaves,
                                                                          transport):
    d = await start_daemon(config(transport), resolver=resolver)
    for i, address in enumerate(SAMPLE):
        r = await d.fetch(f"http://{name_of(address)}:{site.port}/page")
        assert r["type"] == "error" and r["code"] == "blocked_url", (address, r)
        assert_refused(address, r["message"])
        target = f"http://{name_of(address)}:{site.port}/secret"
        site.route(f"/go/{i}", lambda h, to=target: h.redirect(302, to))
        r = await d.fetch(site.url(f"/go/{i}"))
        assert r["type"] == "error" and r["code"] == "blocked_url", (address, r)
        assert_refused(address, r["message"])
        assert site.hits[f"/go/{i}"] >= 1
    assert no_packet_leaves.attempts == []
    for address in PUBLIC:  # let through: the connection the policy allowed is the one the guard fails
        r = await d.fetch(f"http://{name_of(address)}:{site.port}/page")
        assert r["type"] == "error" and r["code"] != "blocked_url", (address, r)
    assert attempted(no_packet_leaves) == public_ips()


def reaching_page(port: int) -> str:
    """A page that reaches every sample address (and the public ones) by script, fetch and a link."""
    hosts = [f"http://{name_of(a)}:{port}" for a in SAMPLE + PUBLIC]
    tags = "".join(f'<script src="{h}/script.js"></script>' for h in hosts)
    fetches = "".join(f'fetch("{h}/fetch").catch(() => 0);' for h in hosts)
    links = "".join(f'<a href="http://{name_of(a)}:{port}/link">Go to {a}</a> ' for a in SAMPLE)
    return simple_page("Reaching page", *ARTICLE_TEXT).replace(
        "</body>", f"{tags}<p>{links}</p><script>{fetches} setTimeout(() => 0, 1000);</script></body>")


async def test_a_pages_subresources_reach_no_address_that_is_not_public(start_daemon, site, no_packet_leaves):
    site.html("/reach", reaching_page(site.port))
    d = await start_daemon(config(fetch={"render": "always"}), resolver=resolver)
    r = await d.fetch(site.url("/reach"))
    assert r["type"] == "result" and "Reaching page" in r["content"], r
    await until_attempted(no_packet_leaves, public_ips())  # the page's requests were made...
    await trio.sleep(1.0)  # (anything else that got out has certainly arrived by now)
    assert attempted(no_packet_leaves) == public_ips()   # ...and none to an address that is not public


async def test_browse_refuses_each_address_on_open_in_a_pages_requests_and_on_a_click(start_daemon, site,
                                                                                    no_packet_leaves):
    site.html("/reach", reaching_page(site.port))
    h = await start_daemon(config(), resolver=resolver)
    b = Browser(await h.client())
    for address in SAMPLE:
        refused = await b("open", url=f"http://{name_of(address)}:{site.port}/")
        assert refused["code"] == "blocked_url", (address, refused)
        assert_refused(address, refused["message"])
    await b.ok("open", url=site.url("/reach"))
    await until_attempted(no_packet_leaves, public_ips())
    requests = (await b.ok("network", resource_type="fetch"))["requests"]
    for address in SAMPLE:
        [request] = [r for r in requests if r["url"] == f"http://{name_of(address)}:{site.port}/fetch"]
        assert_refused(address, request["blocked"])
    for address in SAMPLE[:3] + SAMPLE[4:5]:  # the three holes, and a private one, followed as links
        found = (await b.ok("snapshot", find=f"Go to {address}"))["snapshot"]
        link = await b("click", ref=ref(found, f'- link "Go to {address}"'))
        assert link["code"] == "blocked_url", (address, link)
        assert link["message"].startswith("the page tried to go where the address policy refuses: "), link
        assert_refused(address, link["message"])
        await b.ok("nav", to="back")
    assert attempted(no_packet_leaves) == public_ips()


# --- crawl: robots.txt and the sitemaps it names, on a site whose www. name is another address ----------

SITE = "site.test"     # the crawl's host: the test site (127.0.0.1, allowed)
ALIAS = "www.site.test"  # the same host to the crawl (a leading www. is dropped), but on an address of its own


class CrawlDNS:
    """The tests' names, and site.test at the test site; www.site.test at `alias_of`."""

    def __init__(self) -> None:
        self.alias_of = SAMPLE[0]

    async def __call__(self, host: str) -> list:
        if host == SITE:
            return [ipaddress.ip_address("127.0.0.1")]
        if host == ALIAS:
            return [ipaddress.ip_address(self.alias_of)]
        return await resolver(host)


async def test_crawl_refuses_each_address_for_its_start_its_robots_txt_and_its_sitemaps(start_daemon, site,
                                                                                      no_packet_leaves):
    dns = CrawlDNS()
    site.html("/docs/", simple_page("Docs", *ARTICLE_TEXT))
    d = await start_daemon(config(crawl=CrawlConfig(max_errors=3)), resolver=dns)
    start = f"http://{SITE}:{site.port}/docs/"
    alias = f"http://{ALIAS}:{site.port}"

    async def crawl(url: str) -> dict:
        return await d.request({"id": 1, "op": "crawl", "url": url, "limit": 3})

    for address in SAMPLE:
        dns.alias_of = address
        r = await crawl(f"http://{name_of(address)}:{site.port}/docs/")  # the start URL
        assert r["type"] == "error" and r["code"] == "blocked_url", (address, r)
        assert_refused(address, r["message"])
        # robots.txt names a sitemap on the www. name: not read, and the note says why
        robots = f"User-agent: *\nSitemap: {alias}/sitemap.xml\n"
        site.route("/robots.txt", lambda h, robots=robots: h.reply(200, "text/plain", robots))
        r = await crawl(start)
        assert r["type"] == "result" and [p["title"] for p in r["pages"]] == ["Docs"], (address, r)
        [note] = [n for n in r["notes"] if n.startswith(f"sitemap {alias}/sitemap.xml skipped: ")]
        assert_refused(address, note.split(" skipped: ", 1)[1], ALIAS)
        # robots.txt redirects to the www. name: the crawl stops there, saying why
        site.route("/robots.txt", lambda h: h.redirect(301, f"{alias}/robots.txt"))
        r = await crawl(start)
        assert r["type"] == "error" and r["code"] == "blocked_url", (address, r)
        assert_refused(address, r["message"], ALIAS)
    assert no_packet_leaves.attempts == []
