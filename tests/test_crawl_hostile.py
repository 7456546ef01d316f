"""A hostile site against `crawl`, `map` and `fetch`, through a daemon in its own process (`webfetch serve`, its
own Chrome), so that a daemon frozen by a pattern cannot freeze the test, and its memory is its own to read:

- what the site or the model writes never runs unbounded in the event loop: a robots.txt rule of many `*`
  against a long sitemap URL, an `include` regular expression that backtracks against the page's links. The
  crawl finishes or stops at its deadline, and a second client's `status` is answered meanwhile;
- every decoded byte is bounded: a 1 GiB gzip bomb (about 1 MB; gzip'd twice, a few KB) as robots.txt, as a
  sitemap (Content-Encoding, or a .xml.gz file) and as llms.txt leaves the daemon's peak resident size within
  100 MB of where it was, and the crawl says what it did with the file.

The site is on 127.0.0.1; every request's wait is bounded."""

from __future__ import annotations

import os
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from webfetch.frontends.client import Client

from .support import procs
from .support.bombs import bomb, peak_kb, reset_peak
from .support.client import LineClient
from .support.daemon import ServedDaemon
from .support.site import Site, simple_page

pytestmark = pytest.mark.chromium

TIMEOUT_S = 5          # the crawls' own deadline
MEMORY_KB = 100_000    # what a bomb may add to the daemon's peak resident size
ARTICLE = ("The crawler reads this page of the documentation and keeps it as markdown for an agent. "
           "Each section explains one part of the widget toolkit, with examples and the reasons behind them. ")
URLSET = b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    s = Site().start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def served(site: Site) -> Iterator[ServedDaemon]:
    tmp = Path(tempfile.mkdtemp(prefix="wf-"))   # a Unix socket's path must be short
    daemon = ServedDaemon(tmp, "[fetch]\nallow_private = true\n")
    try:
        daemon.wait_ready(90)
        # warmed: the first crawl's imports (httpx) and a page through the parser workers, before any peak is read
        site.html("/warm/", simple_page("Warm", ARTICLE * 3))
        site.route("/robots.txt", lambda h: h.reply(404, "text/plain", "none"))
        daemon.status()
        with Client(daemon.sock, autostart=False) as c:
            list(c.request("crawl", url=site.url("/warm/"), limit=2))
        yield daemon
    finally:
        _stop(daemon)


def _stop(daemon: ServedDaemon) -> None:
    """Stop it; a daemon frozen in a regular expression (as before the fix) cannot handle SIGTERM: killed."""
    everything = [daemon.proc.pid, *procs.descendants(daemon.proc.pid)]
    daemon.proc.terminate()
    try:
        daemon.proc.wait(20)
    except Exception:
        for pid in everything:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        daemon.proc.wait(10)
    daemon.log.close()


async def _request(daemon: ServedDaemon, obj: dict[str, Any], wait_s: float) -> dict[str, Any]:
    client = await LineClient.connect(daemon.sock)
    try:
        with trio.fail_after(wait_s):
            return await client.request(obj)
    finally:
        await client.aclose()


async def _answered_meanwhile(daemon: ServedDaemon, site: Site, request: dict[str, Any], busy_path: str) -> dict:
    """The terminal frame of `request`; once the site has served `busy_path` (the crawl is in the part under
    test), a second client's `status` must be answered within 1 s, and the request must end within its
    deadline (and a margin for a loaded machine)."""
    before = site.hits.get(busy_path, 0)
    result: dict[str, Any] = {}

    async def run() -> None:
        result.update(await _request(daemon, request, TIMEOUT_S + 25))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        with trio.fail_after(30):
            while site.hits.get(busy_path, 0) == before:
                await trio.sleep(0.05)
        await trio.sleep(0.5)   # the daemon is at work on what it got
        status = await _request(daemon, {"id": "s", "op": "status"}, 1)
        assert status["type"] == "result", status
    return result


async def test_a_robots_rule_of_many_wildcards_against_a_long_sitemap_url(served, site):
    """`Disallow: /*a*a…*a*b` (50 `*a`) was `re.match(".*a.*a….*b")` in the event loop: against a sitemap URL of
    100 000 a's it never ended, and the daemon answered nothing, not even SIGTERM."""
    site.route("/robots.txt", lambda h: h.reply(200, "text/plain", "User-agent: *\nDisallow: /" + "*a" * 50
                                                + "b\nSitemap: " + site.url("/sitemap.xml") + "\n"))
    long, matched = "/wild/" + "a" * 100_000, "/wild/" + "a" * 50 + "b"
    locs = "".join(f"<url><loc>{site.url(p)}</loc></url>" for p in (long, matched))
    site.route("/sitemap.xml", lambda h: h.reply(200, "application/xml", URLSET + locs.encode() + b"</urlset>"))
    site.html("/wild/", simple_page("Docs", ARTICLE * 3))
    r = await _answered_meanwhile(served, site, {"id": 1, "op": "map", "url": site.url("/wild/"), "limit": 10,
                                                 "depth": 1, "timeout_s": TIMEOUT_S}, "/sitemap.xml")
    assert r["type"] == "result", r
    assert r["urls"] == [site.url("/wild/"), site.url(long)]   # the rule matches the other: disallowed
    assert r["robots"] == "obeyed" and "1 URL in scope left out: robots.txt disallows them" in r["notes"]


async def test_thousands_of_wildcard_rules_against_long_sitemap_urls_leave_the_daemon_answering(served, site):
    """Each rule is matched in linear time, but 5 000 `Disallow: /*aaa…b…aaa` rules against 2 000 sitemap URLs of
    4 000 characters are seconds of work between two checkpoints (a second review measured `status` answered
    after 21.7 s, when the map's deadline came): the verdicts are asked in a thread, so the loop is free."""
    piece = "a" * 40 + "b" + "a" * 40
    rules = "".join(f"Disallow: /*{piece}{i}\n" for i in range(5000))
    site.route("/robots.txt", lambda h: h.reply(200, "text/plain", "User-agent: *\n" + rules + "Sitemap: "
                                                + site.url("/sitemap.xml") + "\n"))
    locs = "".join(f"<url><loc>{site.url(f'/many/{i}/' + 'a' * 4000)}</loc></url>" for i in range(2000))
    site.route("/sitemap.xml", lambda h: h.reply(200, "application/xml", URLSET + locs.encode() + b"</urlset>"))
    site.html("/many/", simple_page("Docs", ARTICLE * 3))
    r = await _answered_meanwhile(served, site, {"id": 1, "op": "map", "url": site.url("/many/"), "limit": 10,
                                                 "depth": 1, "timeout_s": TIMEOUT_S}, "/sitemap.xml")
    assert r["type"] == "result", r
    assert r["urls"][0] == site.url("/many/") and r["robots"] == "obeyed"


@pytest.mark.parametrize("op", ["crawl", "map"])
async def test_an_include_pattern_that_backtracks_stops_at_the_deadline(served, site, op):
    """`/(a+)+$/` searched in /docs/aaa…a! (40 and more a's) backtracks for 2^40 steps: it ran in the event
    loop, and the daemon answered nothing until it was killed. Now it costs a worker until the deadline."""
    start = f"/{op}-include/"
    links = "".join(f'<li><a href="{start}{"a" * n}!">page {n}</a></li>' for n in (40, 41, 42))
    site.html(start, simple_page("Docs", ARTICLE * 3).replace("</article>", f"<ul>{links}</ul></article>"))
    site.route("/robots.txt", lambda h: h.reply(404, "text/plain", "none"))
    site.route("/sitemap.xml", lambda h: h.reply(404, "text/plain", "none"))
    r = await _answered_meanwhile(served, site, {"id": 1, "op": op, "url": site.url(start), "limit": 5,
                                                 "include": ["/(a+)+$/"], "timeout_s": TIMEOUT_S}, start)
    assert r["type"] == "result", r
    assert r["stopped"] == "deadline"
    assert ("the deadline passed while the include/exclude patterns were matched against 3 URLs: a regular "
            "expression that backtracks (nested repeats such as (a+)+ or (.*)*) can take for ever; simplify "
            "it, or write a glob") in r["notes"]


def _gzipped(head: bytes, layers: int, ctype: str) -> Any:
    body = bomb(head, layers=layers)
    headers = {"Content-Encoding": ", ".join(["gzip"] * layers)}
    return lambda h: h.reply(200, ctype, body, headers)


async def _within_memory(served: ServedDaemon, request: dict[str, Any]) -> dict[str, Any]:
    pid = served.proc.pid
    reset_peak(pid)
    before = peak_kb(pid)
    r = await _request(served, request, 60)
    assert peak_kb(pid) - before < MEMORY_KB, f"the daemon's peak grew by {peak_kb(pid) - before} kB"
    return r


@pytest.mark.parametrize("layers", [1, 2])
async def test_a_robots_txt_bomb_is_read_up_to_its_500_kib(served, site, layers):
    start = f"/robots-{layers}/"
    site.route("/robots.txt", _gzipped(f"User-agent: *\nDisallow: {start}private\n".encode(), layers, "text/plain"))
    site.route("/sitemap.xml", lambda h: h.reply(404, "text/plain", "none"))
    site.html(start, simple_page("Docs", ARTICLE * 3).replace(
        "</article>", f'<a href="{start}private/1">private</a><a href="{start}public">public</a></article>'))
    r = await _within_memory(served, {"id": 1, "op": "map", "url": site.url(start), "depth": 1})
    assert r["type"] == "result", r
    assert r["robots"] == "obeyed" and r["urls"] == [site.url(start), site.url(f"{start}public")]
    assert (f"{site.url('/robots.txt')} is longer than 512000 bytes: its rules past that were ignored, as "
            f"RFC 9309 allows") in r["notes"]


async def test_a_robots_txt_compressed_three_times_is_unreadable_and_the_crawl_says_why(served, site):
    site.route("/robots.txt", _gzipped(b"User-agent: *\nAllow: /\n", 3, "text/plain"))
    r = await _within_memory(served, {"id": 1, "op": "crawl", "url": site.url("/closed/")})
    assert r["type"] == "error" and r["code"] == "robots_disallowed", r
    assert r["message"] == (
        f"{site.url('/closed/')} is closed to crawlers: its robots.txt could not be read ({site.url('/robots.txt')} "
        f"is compressed 3 times over (Content-Encoding: gzip, gzip, gzip); webfetch inflates at most 2 layers, "
        f"as no real server needs more), which RFC 9309 says to take as disallowing everything. Fetch single "
        f"pages with `fetch` (which does not read robots.txt), or, for a site of your own, set "
        f"crawl.ignore_robots = true in the config")


@pytest.mark.parametrize(("path", "layers", "says"), [
    ("/sitemap.xml", 1, "{url} is larger than 10000000 bytes once inflated (fetch.max_bytes)"),
    ("/sitemap.xml", 2, "{url} is larger than 10000000 bytes once inflated (fetch.max_bytes)"),
    ("/sitemap.xml.gz", 0, "it is larger than 10000000 bytes"),      # the file itself gzip'd
    ("/sitemap.xml.gz", 1, "it is larger than 10000000 bytes"),      # and sent with Content-Encoding too
], ids=["xml-gzip", "xml-gzip-gzip", "xml.gz", "xml.gz-gzip"])
async def test_a_sitemap_bomb_is_skipped_with_a_note(served, site, path, layers, says):
    gz = path.endswith(".gz")
    body = bomb(URLSET, layers=layers + gz)   # a .xml.gz is gzip'd once more than it is sent with
    headers = {"Content-Encoding": ", ".join(["gzip"] * layers)} if layers else {}
    site.route(path, lambda h: h.reply(200, "application/gzip" if gz else "application/xml", body, headers))
    site.route("/robots.txt", lambda h: h.reply(200, "text/plain", f"Sitemap: {site.url(path)}\n"))
    r = await _within_memory(served, {"id": 1, "op": "map", "url": site.url("/sitemaps/"), "depth": 0})
    assert r["type"] == "result", r
    assert r["urls"] == [site.url("/sitemaps/")] and r["sitemaps"] == []
    assert f"sitemap {site.url(path)} skipped: {says.format(url=site.url(path))}" in r["notes"]


@pytest.mark.parametrize("layers", [1, 2])
async def test_an_llms_txt_bomb_is_cut_at_the_fetch_cap(served, site, layers):
    """llms.txt is a page like any other, read by the page fetcher (libcurl, its body cut at fetch.max_bytes
    as it is inflated): held to the same bound."""
    path = f"/{layers}/llms.txt"
    site.route(path, _gzipped(b"# Widgets\n\n> The widget toolkit's docs.\n\n", layers, "text/plain"))
    r = await _within_memory(served, {"id": 1, "op": "fetch", "url": site.url(path), "max_chars": 1000})
    assert r["type"] == "result", r
    assert r["content"].startswith("# Widgets")
    assert "the response was larger than 10000000 bytes and was cut there" in " ".join(r["notes"])


async def test_sitemaps_are_read_up_to_one_sitemaps_worth_of_urls_in_all(served, site):
    """Each sitemap is cut at 50 000 URLs, but an index may name 100 of them: five million URLs queued and
    remembered, gigabytes for a crawl that visits a few hundred pages. All the sitemaps of one request give at
    most 50 000, and the files past that are not read."""
    names = [f"/many/s{i}.xml" for i in range(4)]
    index = "".join(f"<sitemap><loc>{site.url(n)}</loc></sitemap>" for n in names)
    site.route("/many/index.xml", lambda h: h.reply(200, "application/xml",
                                                    f"<sitemapindex>{index}</sitemapindex>".encode()))
    bodies = {name: URLSET + "".join(f"<url><loc>{site.url(f'/many/other/{i}/{n}')}</loc></url>"
                                     for n in range(20_000)).encode() + b"</urlset>"
              for i, name in enumerate(names)}   # out of the map's scope (/many/docs/): none ends it at its limit
    for name in names:
        site.route(name, lambda h, name=name: h.reply(200, "application/xml", bodies[name]))
    site.route("/robots.txt", lambda h: h.reply(200, "text/plain", f"Sitemap: {site.url('/many/index.xml')}\n"))
    site.html("/many/docs/", simple_page("Docs", ARTICLE * 3))
    r = await _request(served, {"id": 1, "op": "map", "url": site.url("/many/docs/"), "depth": 1,
                                "timeout_s": 30}, 60)
    assert r["type"] == "result", r
    assert r["sitemaps"] == [site.url("/many/index.xml"), *(site.url(n) for n in names[:3])]
    assert site.hits.get(names[3], 0) == 0
    assert "the sitemaps list more than 50000 URLs: the rest were not read" in r["notes"]


# A class of all of Unicode under (?i): `re` compiles each in ~12 ms, so a pattern of the protocol's 1000
# characters takes seconds to compile, before any matching (an attacker review found them compiled in the
# event loop: status answered after 33.6 s)
ALL_OF_UNICODE = "[\x00-\U0010ffff]"


async def _status_meanwhile(daemon: ServedDaemon, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The terminal frames of `requests`, sent at once; a second client's `status` is answered within 1 s once
    the daemon has had them for a second."""
    results: list[dict[str, Any]] = []

    async def one(request: dict[str, Any]) -> None:
        results.append(await _request(daemon, request, TIMEOUT_S + 25))

    async with trio.open_nursery() as nursery:
        for request in requests:
            nursery.start_soon(one, request)
        await trio.sleep(1)
        status = await _request(daemon, {"id": "s", "op": "status"}, 1)
        assert status["type"] == "result", status
    return results


async def test_include_patterns_slow_to_compile_leave_the_daemon_answering_and_end_at_the_deadline(served, site):
    include = [f"/(?i){'x' * n}{ALL_OF_UNICODE * 190}/" for n in range(20)]   # distinct: re's cache helps not
    [r] = await _status_meanwhile(served, [{"id": 1, "op": "map", "url": site.url("/nothing/"), "include": include,
                                            "timeout_s": TIMEOUT_S}])
    assert r["type"] == "error" and r["code"] == "timeout", r
    assert r["message"].startswith(f"compiling the include/exclude patterns took more than {TIMEOUT_S} s")


async def test_find_and_schema_patterns_slow_to_compile_leave_the_daemon_answering(served, site):
    site.html("/compiled/", simple_page("Docs", ARTICLE * 3))
    finds = [{"id": n, "op": "fetch", "url": site.url("/compiled/"), "find": f"/{'x' * n}{ALL_OF_UNICODE * 198}/i",
              "timeout_s": TIMEOUT_S} for n in range(6)]
    slow = ALL_OF_UNICODE * 60
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string", "pattern": f"(?i){slow}{i}"}
                                               for i in range(20)}}
    schemas = [{"id": "schema", "op": "fetch", "url": site.url("/compiled/"), "schema": schema,
                "timeout_s": TIMEOUT_S}]
    results = await _status_meanwhile(served, finds + schemas)
    for r in results:   # each compiled in a worker: found nothing, or stopped at its deadline
        assert (r["type"], r.get("code")) in {("result", None), ("error", "timeout"), ("error", "subagent_failed")}, r
