"""crawl and map through a real daemon (real Chromium) on the local docs site (tests/support/docs_site.py),
judged by the site's own log: what was requested, how many at once, and when."""

from __future__ import annotations

import functools
import json
from collections import Counter

import pytest
import trio

from webfetch.config import CrawlConfig, FetchConfig

from .support.client import run_cli
from .support.daemon import make_config
from .support.docs_site import API, GUIDE, DocsSite
from .support.site import simple_page

pytestmark = pytest.mark.chromium

ROBOTS_AND_SITEMAPS = ("/robots.txt", "/sitemap-index.xml", "/sitemaps/guide.xml", "/sitemaps/api.xml")


@pytest.fixture
def docs():
    site = DocsSite().start()
    yield site
    site.stop()


@pytest.fixture
async def crawler(start_daemon):
    return await start_daemon(make_config(crawl=CrawlConfig(max_errors=3)))


def pages_requested(site: DocsSite, host: str = "127.0.0.1") -> list[str]:
    return [p for p in site.paths(host) if p.startswith("/docs/")]


async def test_the_limit_is_exact_and_progress_counts_pages(crawler, docs):
    progress: list[dict] = []
    r = await crawler.request({"id": 1, "op": "crawl", "url": docs.url("/docs/"), "limit": 7}, progress)
    assert r["type"] == "result", r
    assert r["stopped"] == "limit"
    assert len(r["pages"]) == 7 and r["queued"] > 0
    assert len(set(pages_requested(docs))) == 7          # not one page more was asked of the server
    assert r["pages"][0]["title"] and "The crawler reads this page" in r["pages"][0]["content"]
    messages = [f["message"] for f in progress if f["stage"] == "crawl"]
    assert any(m.startswith("7 pages done, ") and " queued, 0 failed" in m for m in messages), messages


async def test_a_whole_crawl_obeys_robots_bounds_loops_and_calendars_and_the_per_host_bound(crawler, docs):
    r = await crawler.request({"id": 1, "op": "crawl", "url": docs.url("/docs/"), "limit": 500, "depth": 3})
    assert r["stopped"] == "scope_exhausted" and r["queued"] == 0 and r["failed"] == []
    assert r["robots"] == "obeyed"
    assert r["sitemaps"] == [docs.url(p) for p in ROBOTS_AND_SITEMAPS[1:]]
    urls = [p["url"] for p in r["pages"]]
    assert len(urls) == len(set(urls))
    requested = pages_requested(docs)
    assert not [p for p in requested if p.startswith("/docs/private/")]   # robots.txt: never requested
    assert any("robots.txt disallows them" in n for n in r["notes"])
    counts = Counter(requested)
    assert counts["/docs/guide/7"] == 2                                    # 429, then once more
    assert all(n == 1 for p, n in counts.items() if p != "/docs/guide/7"), counts
    assert {p for p in requested if p.startswith("/docs/cal")} == {f"/docs/cal?month={m}" for m in (1, 2, 3)}
    assert {"/docs/loop/a", "/docs/loop/b"} <= set(requested)
    assert {f"/docs/guide/{i}" for i in range(1, GUIDE + 1)} | {f"/docs/api/{i}" for i in range(1, API + 1)} \
        <= set(requested)
    assert docs.max_in_flight["127.0.0.1"] <= 4
    hits = [h for h in docs.log if h.path == "/docs/guide/7"]
    assert hits[0].status == 429 and hits[1].status == 200
    assert hits[1].at - hits[0].at >= 0.9                                  # its Retry-After: 1 was waited out


async def test_the_per_host_bound_is_the_config_key_and_holds_across_crawls(start_daemon):
    daemon = await start_daemon(make_config(crawl=CrawlConfig(per_host=2)))
    docs = DocsSite(delay_s=0.3).start()   # slow pages: the two runs' requests certainly overlap
    results = {}

    async def run(op: str, **fields) -> None:
        results[op] = await daemon.request({"id": op, "op": op, "url": docs.url("/docs/"), **fields})

    async with trio.open_nursery() as nursery:   # a crawl and a map of one host at once share its bound
        # apart: a page both asked for at once would be one load (the cache shares it)
        nursery.start_soon(functools.partial(run, "crawl", limit=16, depth=1, include=["/docs/api/*"]))
        nursery.start_soon(functools.partial(run, "map", limit=1000, depth=2, include=["/docs/guide/*"]))
    assert results["crawl"]["stopped"] == "limit" and len(results["crawl"]["pages"]) == 16
    assert results["map"]["stopped"] == "scope_exhausted"
    docs.stop()
    assert docs.max_in_flight["127.0.0.1"] <= 2


async def test_a_crawl_stops_at_its_deadline_and_says_so(crawler):
    slow = DocsSite(delay_s=1.0).start()
    try:
        r = await crawler.request({"id": 1, "op": "crawl", "url": slow.url("/docs/"), "limit": 100,
                                   "timeout_s": 3})
    finally:
        slow.stop()
    assert r["stopped"] == "deadline"
    assert len(r["pages"]) < 100
    assert any("deadline (3 s) passed" in n for n in r["notes"])


async def test_a_crawl_whose_pages_fail_stops_with_errors(crawler, docs):
    r = await crawler.request({"id": 1, "op": "crawl", "url": docs.url("/docs/broken/"), "limit": 50})
    assert r["stopped"] == "errors"
    assert len(r["failed"]) >= 3
    assert {f["code"] for f in r["failed"]} == {"http_error"}
    assert all("answered HTTP 500" in f["message"] for f in r["failed"])
    assert [p["url"] for p in r["pages"]] == [docs.url("/docs/broken/")]


async def test_cancel_stops_the_crawl_at_once(crawler):
    slow = DocsSite(delay_s=0.5).start()
    try:
        c = await crawler.client()
        await c.send({"id": "c", "op": "crawl", "url": slow.url("/docs/"), "limit": 100})
        with trio.fail_after(60):
            while True:
                frame = await c.receive()
                if frame["type"] == "progress" and " pages done" in frame["message"] \
                        and not frame["message"].startswith("0 "):
                    break
        await c.send({"id": "x", "op": "cancel", "target": "c"})
        with trio.fail_after(10):
            ended = await c.terminal("c")
        assert ended["code"] == "cancelled"
        before = len(slow.log)
        await trio.sleep(2)
        assert len(slow.log) == before, [h.path for h in slow.log[before:]]
        await c.aclose()
    finally:
        slow.stop()


async def test_crawled_pages_are_served_from_the_cache_to_fetch_and_find(crawler, docs):
    r = await crawler.request({"id": 1, "op": "crawl", "url": docs.url("/docs/"), "limit": 5, "depth": 1})
    page = next(p for p in r["pages"] if p["url"] != docs.url("/docs/"))
    path = page["url"].removeprefix(docs.url(""))
    before = docs.paths().count(path)
    found = await crawler.request({"id": 2, "op": "fetch", "url": page["url"], "find": "widget toolkit"})
    assert found["kind"] == "find" and found["cached"] is True and found["matches"] >= 1
    assert docs.paths().count(path) == before == 1


async def test_a_start_url_robots_disallows_is_a_clear_error(crawler, docs):
    r = await crawler.request({"id": 1, "op": "crawl", "url": docs.url("/docs/private/1")})
    assert r["code"] == "robots_disallowed"
    assert "robots.txt disallows /docs/private/1" in r["message"] and "crawl.ignore_robots" in r["message"]
    m = await crawler.request({"id": 2, "op": "map", "url": docs.url("/docs/private/")})
    assert m["code"] == "robots_disallowed"
    assert not pages_requested(docs)


async def test_ignoring_robots_is_a_config_switch(start_daemon, docs):
    daemon = await start_daemon(make_config(crawl=CrawlConfig(ignore_robots=True)))
    r = await daemon.request({"id": 1, "op": "map", "url": docs.url("/docs/private/1"), "limit": 3})
    assert r["robots"] == "ignored" and r["stopped"] == "limit"
    assert r["urls"] == [docs.url(f"/docs/private/{i}") for i in (1, 2, 3)]
    assert "/robots.txt" not in docs.paths()


async def test_a_blocked_start_url_is_refused_before_any_request(start_daemon, docs):
    daemon = await start_daemon(make_config(fetch=FetchConfig(allow_private=False)))
    r = await daemon.request({"id": 1, "op": "crawl", "url": docs.url("/docs/")})
    assert r["code"] == "blocked_url" and "fetch.allow_private" in r["message"]
    bad = await daemon.request({"id": 2, "op": "crawl", "url": docs.url("/docs/"), "include": ["/(x/"]})
    assert bad["code"] == "bad_request" and "not a valid regular expression" in bad["message"]
    assert docs.log == []


async def test_map_lists_the_sitemaps_urls_then_links_exactly_up_to_the_limit(crawler, docs):
    r = await crawler.request({"id": 1, "op": "map", "url": docs.url("/docs/"), "limit": 10})
    assert r["stopped"] == "limit" and len(r["urls"]) == 10
    assert r["urls"][0] == docs.url("/docs/")
    assert pages_requested(docs) == []            # ten URLs came from the sitemaps: no page had to be loaded
    full = await crawler.request({"id": 2, "op": "map", "url": docs.url("/docs/"), "limit": 1000, "depth": 2})
    assert full["stopped"] == "scope_exhausted"
    urls = set(full["urls"])
    assert len(urls) == len(full["urls"])
    assert {docs.url(f"/docs/api/{i}") for i in range(1, API + 1)} <= urls
    assert docs.url("/docs/extra/2") in urls and docs.url("/docs/extra/3") not in urls   # depth 2
    assert not [u for u in urls if "/private/" in u]


async def test_map_survives_looping_indexes_and_malformed_and_hostile_sitemaps(crawler, docs):
    r = await crawler.request({"id": 1, "op": "map", "url": docs.url("/docs/", "localhost"), "limit": 1000,
                               "depth": 1})
    assert r["type"] == "result" and r["stopped"] == "scope_exhausted"
    log = docs.paths("localhost")
    assert log.count("/idx-a.xml") == 1 and log.count("/idx-b.xml") == 1
    assert docs.url("/docs/guide/3", "localhost") in r["urls"]     # from the gzip'd sitemap
    assert docs.url("/docs/api/20", "localhost") in r["urls"]      # from the index's urlset
    notes = " ".join(r["notes"])
    assert "bad.xml skipped: it is not well-formed XML" in notes
    assert "laughs.xml skipped: it has a document type declaration" in notes
    assert f"sitemap http://127.0.0.2:{docs.port}/sitemaps/guide.xml skipped: on another host" in notes
    assert docs.paths("127.0.0.2") == []


async def test_the_cli_writes_the_crawl_and_prints_the_map(crawler, docs, tmp_path):
    out = tmp_path / "site"
    cli = await trio.to_thread.run_sync(lambda: run_cli(
        "crawl", "--socket", str(crawler.path), docs.url("/docs/"), "--limit", "6", "--depth", "1", "--out",
        str(out)))
    assert cli.returncode == 0, cli.stderr
    assert "crawl: " in cli.stderr and "pages done" in cli.stderr              # progress on stderr
    assert "6 pages written" in cli.stderr and "stopped: limit" in cli.stderr
    index = json.loads((out / "_index.json").read_text())
    assert index["stopped"] == "limit" and len(index["pages"]) == 6
    for entry in index["pages"]:
        text = (out / entry["file"]).read_text()
        assert text.startswith(f"<!-- {entry['url']} -->\n") and entry["title"] in text
    assert (out / "docs/index.md").exists()
    assert "| file | title | URL | chars | flags |" in (out / "_index.md").read_text()
    mapped = await trio.to_thread.run_sync(lambda: run_cli(
        "map", "--socket", str(crawler.path), docs.url("/docs/"), "--limit", "5"))
    assert mapped.returncode == 0, mapped.stderr
    assert mapped.stdout.splitlines() == [docs.url("/docs/"), *(docs.url(f"/docs/guide/{i}") for i in range(1, 5))]


async def test_maps_progress_is_in_maps_words(crawler, docs):
    mapped = await trio.to_thread.run_sync(lambda: run_cli(
        "map", "--socket", str(crawler.path), docs.url("/docs/"), "--limit", "1"))
    assert (mapped.returncode, mapped.stdout) == (0, docs.url("/docs/") + "\n"), mapped.stderr
    lines = mapped.stderr.splitlines()
    assert lines[0] == f"map: reading {docs.url('/robots.txt')}"
    assert "map: 1 URL done, 1 queued, 0 failed: stopped: limit" in lines
    assert not [line for line in lines if line.startswith("crawl:") or "1 URLs" in line], lines
    assert "webfetch: 1 URL, stopped: limit, 1 queued, 0 failed, robots.txt obeyed" in lines


async def test_a_directory_and_its_index_html_are_one_page(crawler, site):
    """A site that links a section both as /guide/ and as /guide/index.html (or index.htm) serves one page
    twice: the crawl visits and counts the first URL it met, and never asks for the other."""
    words = "The guide explains the widget toolkit in plain words, with examples and the reasons behind them."
    for path in ("/guide/", "/guide/index.html", "/guide/index.htm"):  # a server's default document: the same page
        site.html(path, simple_page("Guide", words, '<a href="index.html">home</a> <a href="a.html">A</a>'))
    site.html("/guide/a.html", simple_page("A", words, '<a href="/guide/index.htm">up</a> <a href="./">up</a>'))
    r = await crawler.request({"id": 1, "op": "crawl", "url": site.url("/guide/"), "limit": 10})
    assert r["stopped"] == "scope_exhausted" and r["failed"] == [], r
    assert [p["url"] for p in r["pages"]] == [site.url("/guide/"), site.url("/guide/a.html")]
    assert "/guide/index.html" not in site.hits and "/guide/index.htm" not in site.hits
    m = await crawler.request({"id": 2, "op": "map", "url": site.url("/guide/index.html"), "limit": 10})
    assert m["urls"] == [site.url("/guide/index.html"), site.url("/guide/a.html")], m
