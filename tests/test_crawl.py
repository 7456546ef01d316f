"""The crawl's pieces without a browser: robots.txt rules, sitemaps (malformed, DTD, gzip, huge, indexes), link
normalization, scope and patterns, Retry-After, the CLI's file names and its refusal of an unwritable --out."""

from __future__ import annotations

import gzip
import os
import re
import stat
import zlib

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from webfetch.crawl.crawler import Scope
from webfetch.crawl.politeness import Politeness, retry_after_s
from webfetch.crawl.robots import MAX_RULES, parse_robots
from webfetch.crawl.sitemap import SitemapError, SitemapParser, parse_sitemap
from webfetch.errors import BadRequest
from webfetch.frontends.crawl_cli import INDEX_JSON, INDEX_MD, page_file, write_crawl
from webfetch.http_body import STEP, BodyRefused, Inflater
from webfetch.parse import crawl_patterns
from webfetch.parse.crawl_patterns import admitted
from webfetch.parse.links import html_links, markdown_links, normalize_link

from .support.client import run_cli
from .support.docs_site import LAUGHS

# --- robots.txt ---------------------------------------------------------------------------------------

ROBOTS = """
# comment
User-agent: *
Disallow: /docs/private/
Allow: /docs/private/public-note
Disallow: /*.pdf$
Disallow: /search?
Disallow:

User-agent: OtherBot
Disallow: /

Sitemap: https://example.com/sitemap-index.xml
"""


def test_robots_longest_rule_wins_and_allow_wins_a_tie():
    r = parse_robots(ROBOTS)
    assert not r.allowed("/docs/private/x")
    assert r.allowed("/docs/private/public-note")       # longer Allow beats the shorter Disallow
    assert r.allowed("/docs/guide/1")
    assert not r.allowed("/files/a.pdf")                # `*` and `$`
    assert r.allowed("/files/a.pdf?download=1")          # `$` anchors at the end
    assert not r.allowed("/search?q=x")
    assert r.allowed("/search")
    assert r.sitemaps == ("https://example.com/sitemap-index.xml",)
    tie = parse_robots("User-agent: *\nDisallow: /a\nAllow: /a\n")
    assert tie.allowed("/a/b")


def test_robots_group_for_webfetch_beats_star_and_other_agents_are_ignored():
    assert parse_robots(ROBOTS, agent="OtherBot").allowed("/anything") is False
    mine = parse_robots("User-agent: *\nDisallow: /\n\nUser-agent: webfetch\nDisallow: /x\n")
    assert mine.allowed("/docs") and not mine.allowed("/x/1")
    assert parse_robots("").allowed("/anything")
    assert parse_robots("garbage without colons\n\0\xff").allowed("/")


def test_robots_percent_encoding_is_compared_decoded():
    r = parse_robots("User-agent: *\nDisallow: /%7Ejoe/\n")
    assert not r.allowed("/~joe/index.html")


def _as_regex(rule: str) -> re.Pattern[str]:
    """What a robots.txt rule means, written the way it was matched before (and backtracked for ever)."""
    body = rule[:-1] if rule.endswith("$") else rule
    return re.compile(".*".join(re.escape(p) for p in body.split("*")) + ("$" if rule.endswith("$") else ""), re.S)


@given(st.text("ab*", max_size=8).map(lambda r: "/" + r) | st.text("ab*", max_size=8).map(lambda r: "/" + r + "$"),
       st.text("ab", max_size=12).map(lambda t: "/" + t))
def test_robots_rules_match_as_the_wildcards_mean(rule, target):
    """The linear matcher agrees with `*` as `.*` and a final `$` as the end, on every small case."""
    robots = parse_robots(f"User-agent: *\nDisallow: {rule}\n")
    assert robots.allowed(target) is (_as_regex(rule).match(target) is None)


def test_a_rule_of_many_wildcards_against_a_long_url_takes_no_time():
    """`*` as `.*` in `re` backtracked for ever here, in the event loop (the daemon froze until SIGKILL);
    the test's own run would hang on that code, so its bound is pytest's timeout."""
    robots = parse_robots("User-agent: *\nDisallow: /" + "*a" * 50 + "b\n")
    assert robots.allowed("/docs/" + "a" * 100_000)
    assert not robots.allowed("/docs/" + "a" * 100_000 + "b")


def test_robots_with_more_rules_than_webfetch_reads_disallows_everything_and_says_why():
    robots = parse_robots("User-agent: *\n" + "".join(f"Disallow: /p{i}\n" for i in range(MAX_RULES + 1)))
    assert not robots.allowed("/anything")
    assert robots.why == f"it has {MAX_RULES + 1} rules for webfetch, more than the {MAX_RULES} it reads"
    assert parse_robots("User-agent: *\n" + "Disallow: /p\n" * MAX_RULES).allowed("/q")


# --- bodies inflated within bounds -------------------------------------------------------------------------

def _inflated(encoding: list[str], body: bytes, chunk: int = 4096) -> list[bytes]:
    inflater = Inflater(encoding)
    return [piece for at in range(0, len(body), chunk) for piece in inflater.feed(body[at:at + chunk])]


def test_a_body_is_inflated_a_step_at_a_time_through_two_layers():
    text = b"<urlset>" + b" " * 3_000_000 + b"</urlset>"
    twice = gzip.compress(gzip.compress(text))
    pieces = _inflated(["gzip", "gzip"], twice)
    assert b"".join(pieces) == text and max(len(p) for p in pieces) <= STEP
    assert b"".join(_inflated(["deflate"], zlib.compress(text))) == text       # zlib-wrapped
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    assert b"".join(_inflated(["Deflate"], raw.compress(text) + raw.flush())) == text  # raw, as some servers
    assert b"".join(_inflated(["identity", " "], text[:100])) == text[:100]


def test_a_bomb_costs_one_step_per_piece_asked_for():
    bomb = gzip.compress(gzip.compress(bytes(200_000_000)))   # 200 MB of zeros in a few hundred bytes
    pieces = Inflater(["gzip", "gzip"]).feed(bomb)
    assert [len(next(pieces)) for _ in range(3)] == [STEP] * 3   # a caller that stops stops the inflating


@pytest.mark.parametrize(("encoding", "says"), [
    (["gzip", "gzip", "gzip"], "is compressed 3 times over (Content-Encoding: gzip, gzip, gzip); webfetch "
                               "inflates at most 2 layers"),
    (["br"], "is sent with Content-Encoding br, which webfetch did not ask for (Accept-Encoding: gzip, deflate)"),
])
def test_more_layers_or_an_encoding_not_asked_for_is_refused(encoding, says):
    with pytest.raises(BodyRefused) as e:
        Inflater(encoding)
    assert str(e.value).startswith(says)


def test_a_damaged_body_is_refused_with_its_reason():
    with pytest.raises(BodyRefused, match="is damaged: its compressed body does not inflate"):
        _inflated(["gzip"], b"\x1f\x8b\x08\x00garbage that is not deflate")


# --- sitemaps -------------------------------------------------------------------------------------------

URLSET = (b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
          b"<url><loc> https://e.com/a </loc></url><url><loc>https://e.com/b</loc><lastmod>2026</lastmod></url>"
          b"</urlset>")


def test_sitemap_urlset_and_index():
    s = parse_sitemap(URLSET)
    assert (s.kind, s.locs) == ("urlset", ["https://e.com/a", "https://e.com/b"])
    index = parse_sitemap(b"<sitemapindex><sitemap><loc>https://e.com/s1.xml</loc></sitemap></sitemapindex>")
    assert (index.kind, index.locs) == ("sitemapindex", ["https://e.com/s1.xml"])


def test_sitemap_fed_in_tiny_chunks_and_gzipped():
    parser = SitemapParser()
    for i in range(len(URLSET)):
        parser.feed(URLSET[i:i + 1])
    assert parser.close().locs == ["https://e.com/a", "https://e.com/b"]
    assert parse_sitemap(gzip.compress(URLSET)).locs == ["https://e.com/a", "https://e.com/b"]


@pytest.mark.parametrize("body, says", [
    (b"<urlset><url><loc>x</loc></url", "not well-formed XML"),
    (b"not xml at all", "not well-formed XML"),
    (b"<html><body>hi</body></html>", "root element is <html>"),
    (b"", "it is empty"),
    (LAUGHS.encode(), "document type declaration"),
    (b'<!DOCTYPE urlset SYSTEM "file:///etc/passwd"><urlset/>', "document type declaration"),
    (b"\x1f\x8bnot really gzip", "gzip'd sitemap is damaged"),
])
def test_malformed_and_hostile_sitemaps_are_refused_with_a_reason(body, says):
    with pytest.raises(SitemapError, match=says):
        parse_sitemap(body)


def test_a_huge_sitemap_stops_at_the_cap_and_a_gzip_bomb_too():
    big = b"<urlset>" + b"<url><loc>https://e.com/x</loc></url>" * 10_000 + b"</urlset>"
    with pytest.raises(SitemapError, match="larger than 100000 bytes"):
        parse_sitemap(big, max_bytes=100_000)
    bomb = gzip.compress(b"<urlset>" + b" " * 5_000_000 + b"</urlset>")
    assert len(bomb) < 10_000
    with pytest.raises(SitemapError, match="larger than 1000000 bytes"):
        parse_sitemap(bomb, max_bytes=1_000_000)


def test_a_sitemap_with_more_urls_than_allowed_is_cut_and_says_so():
    parser = SitemapParser(max_urls=3)
    parser.feed(b"<urlset>" + b"<url><loc>https://e.com/x</loc></url>" * 5 + b"</urlset>")
    s = parser.close()
    assert len(s.locs) == 3 and s.cut


# --- links and scope ----------------------------------------------------------------------------------

def test_links_are_normalized():
    base = "http://Example.com:80/docs/guide/1"
    assert normalize_link("../api/2#section", base) == "http://example.com/docs/api/2"
    assert normalize_link("HTTPS://EXAMPLE.com:443/x?b=1", base) == "https://example.com/x?b=1"
    assert normalize_link("/docs/", base) == "http://example.com/docs/"          # trailing slash kept
    assert normalize_link("/docs", base) == "http://example.com/docs"
    assert normalize_link("http://example.com", base) == "http://example.com/"
    for skipped in ("#top", "mailto:a@b.c", "javascript:void(0)", "tel:123", "ftp://e.com/x", "http://[::1"):
        assert normalize_link(skipped, base) is None


def test_html_and_markdown_links():
    html = ('<html><head><base href="/docs/"></head><body><a href="a">A</a><a href="a#x">A again</a>'
            '<area href="/map"><a>no href</a><a href="mailto:x@y.z">mail</a></body></html>')
    assert html_links(html, "http://e.com/index") == ["http://e.com/docs/a", "http://e.com/map"]
    md = 'See [the guide](/docs/guide/1 "Guide") and [api](https://e.com/docs/api/1#x), not [mail](mailto:a@b).'
    assert markdown_links(md, "https://e.com/docs/") == ["https://e.com/docs/guide/1", "https://e.com/docs/api/1"]
    assert html_links("", "http://e.com/") == []


def test_scope_is_host_and_directory_with_patterns():
    s = Scope.of("http://e.com/docs/intro", [], [])
    assert s.prefix == "/docs/"
    assert s.admits("http://e.com/docs/guide/1")
    assert not s.admits("http://e.com/blog/1")
    assert not s.admits("http://other.com/docs/1")
    assert not s.admits("https://e.com/docs/1")          # another scheme is another origin
    # the patterns (matched in a worker process, crawl_patterns.admitted) over the path and query
    targets = ["/docs/api/3", "/docs/api/13", "/docs/guide/3"]
    assert admitted(("/docs/api/*",), ("/\\d{2}$/",), targets) == [0]
    assert admitted((), ("*cal?month=*",), ["/docs/cal?month=4", "/docs/cal"]) == [1]


def test_a_bad_regular_expression_pattern_is_a_bad_request():
    # compiled in a worker (crawl_patterns.problem through the extractor), never in the daemon's event loop
    assert "not a valid regular expression" in (crawl_patterns.problem(["/(unclosed/"], []) or "")
    assert (crawl_patterns.problem(["/docs/*"], ["/[/"]) or "").startswith(
        "`exclude` pattern '/[/' is not a valid regular expression")


CLASS = "a class is [abc], a literal bracket [[]"
GLOBS_THAT_CANNOT_WORK = [
    # fnmatch takes an unclosed `[` as a literal one: '/docs/[a*' would only match a path with a '['
    ("/docs/[a*", f"has a '[' (character 7) that is never closed: {CLASS}"),
    ("/docs/[!a*", f"has a '[' (character 7) that is never closed: {CLASS}"),
    ("/docs/[]*", f"has a '[' (character 7) that is never closed: {CLASS}"),  # ']' first is a member
    # fnmatch makes a class of reversed ranges match nothing
    ("/docs/[z-a]*", "has a reversed range, z-a in [z-a], which matches nothing: write it low-high"),
    # the target starts with '/': a relative glob never matches
    ("docs/*", "can match no URL: it is matched against the path from its leading '/' (with the query); write "
               "/docs/* or *docs/*"),
]


@pytest.mark.parametrize("pattern,problem", GLOBS_THAT_CANNOT_WORK, ids=[p for p, _ in GLOBS_THAT_CANNOT_WORK])
def test_a_glob_that_cannot_match_as_meant_is_a_bad_request(pattern, problem):
    with pytest.raises(BadRequest) as e:
        crawl_patterns.check_globs(["/docs/*"], [pattern])
    assert e.value.message == f"`exclude` pattern {pattern!r} {problem}"
    assert crawl_patterns.problem(["/docs/*"], [pattern]) == e.value.message


def test_globs_that_work_are_taken_as_they_are():
    good = ["/docs/*", "*?month=*", "/docs/[]]*", "/docs/[!a-c]*", "/a/[[]x", "?docs*", "[/]docs/*", "/(x)/"]
    assert crawl_patterns.problem(good, good) is None
    assert admitted(("/docs/[]]*", "/a/[[]x"), (), ["/docs/]", "/a/[x", "/docs/a"]) == [0, 1]


def test_the_cli_refuses_a_malformed_glob_in_its_own_words_before_any_request(short_tmp):
    # no daemon listens on this socket: the refusal comes before the CLI would start or ask one
    for op, flag, pattern, problem in (("crawl", "--include", "/docs/[a*", GLOBS_THAT_CANNOT_WORK[0][1]),
                                       ("map", "--exclude", "docs/*", GLOBS_THAT_CANNOT_WORK[-1][1])):
        r = run_cli(op, "--socket", str(short_tmp / "none.sock"), "http://127.0.0.1:9/docs/", flag, pattern)
        assert (r.returncode, r.stdout) == (2, "")
        assert r.stderr == f"webfetch: bad_request: {flag} pattern {pattern!r} {problem}\n"
    assert not (short_tmp / "none.sock").exists()


# --- politeness -------------------------------------------------------------------------------------------

def test_retry_after_seconds_and_dates():
    assert retry_after_s("7") == 7.0
    assert retry_after_s(None) == 1.0
    assert retry_after_s("soon", default=2.0) == 2.0
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0   # in the past


async def test_politeness_bounds_a_host_and_waits_out_a_back_off(autojump_clock):
    polite = Politeness(2)
    inside = peak = 0
    started: list[float] = []

    async def visit() -> None:
        nonlocal inside, peak
        async with polite.slot("e.com"):
            started.append(trio.current_time())
            inside += 1
            peak = max(peak, inside)
            await trio.sleep(1)
            inside -= 1

    polite.back_off("e.com", 5)
    async with trio.open_nursery() as nursery:
        for _ in range(6):
            nursery.start_soon(visit)
    assert peak == 2
    assert min(started) >= 5
    assert polite._slots == {}  # noqa: SLF001 - a host no crawl uses is forgotten


async def test_a_retry_after_outlives_the_request_that_was_told_it(autojump_clock):
    """A robots.txt answered 429 is the only request to its host: when its slot ends the host has no user,
    and forgetting the host must not forget the wait it was asked for."""
    polite = Politeness(4)
    async with polite.slot("e.com"):
        polite.back_off("e.com", 5)
    told = trio.current_time()
    async with polite.slot("e.com"):
        assert trio.current_time() - told >= 5


def test_a_scope_moves_with_the_start_pages_redirect():
    """example.com redirecting to https://www.example.com/docs/: the site is crawled where it lives."""
    moved = Scope.of("http://e.com/docs/intro", ["/docs/*"], []).moved_to("https://www.e.com/docs/intro")
    assert moved.include == ("/docs/*",)
    assert moved.admits("https://www.e.com/docs/guide") and not moved.admits("http://e.com/docs/guide")
    assert not moved.admits("https://www.e.com/blog/1") and not moved.admits("https://www.e.com/docsx")


# --- the CLI's files -------------------------------------------------------------------------------------

def test_page_files_mirror_the_url_path_and_are_safe():
    assert str(page_file("http://e.com/")) == "index.md"
    assert str(page_file("http://e.com/docs/")) == "docs/index.md"
    assert str(page_file("http://e.com/docs/guide/1")) == "docs/guide/1.md"
    assert str(page_file("http://e.com/docs/cal?month=2")) == "docs/cal_month=2.md"
    assert str(page_file("http://e.com/a/..%2F..%2Fetc/passwd")) == "a/_2F.._2Fetc/passwd.md"  # one name
    assert str(page_file("http://e.com/../../x")) == "_/_/x.md"      # `..` is never a directory step
    assert str(page_file("http://e.com/_index")) == "_index_.md"
    long = page_file("http://e.com/" + "y" * 500)
    assert len(long.name) <= 103 and ".." not in str(long)
    assert str(page_file("http://e.com/a.md/b")) == "a.md_/b.md"


def test_write_crawl_writes_pages_and_index(tmp_path):
    result = {"url": "http://e.com/docs/", "stopped": "limit", "queued": 3, "robots": "obeyed", "notes": [],
              "failed": [{"url": "http://e.com/docs/x", "code": "http_error", "message": "HTTP 500"}],
              "pages": [{"url": u, "final_url": u, "title": t, "content": c, "chars": len(c), "flags": [], "depth": 1}
                        for u, t, c in [("http://e.com/docs/", "Home", "# Home\n"),
                                        ("http://e.com/docs/a b", "A|B", "# A\n"),
                                        ("http://e.com/docs/a_b", "A_B", "# A_B\n")]]}
    write_crawl(tmp_path, result)
    assert (tmp_path / "docs/index.md").read_text() == "<!-- http://e.com/docs/ -->\n# Home\n"
    assert (tmp_path / "docs/a_b.md").read_text().endswith("# A\n")
    assert (tmp_path / "docs/a_b-2.md").read_text().endswith("# A_B\n")
    index = (tmp_path / INDEX_MD).read_text()
    assert "| [docs/index.md](docs/index.md) | Home | http://e.com/docs/ | 7 |" in index
    assert "A\\|B" in index and "http://e.com/docs/x: http_error: HTTP 500" in index
    assert '"stopped": "limit"' in (tmp_path / INDEX_JSON).read_text()
    assert not [p for p in tmp_path.rglob(".webfetch-*")]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere: the mode cannot refuse it")
def test_crawl_to_an_unwritable_directory_fails_before_any_request(short_tmp):
    out = short_tmp / "ro"
    out.mkdir()
    out.chmod(stat.S_IRUSR | stat.S_IXUSR)
    r = run_cli("crawl", "--socket", str(short_tmp / "none.sock"), "http://127.0.0.1:9/docs/", "--out", str(out))
    assert r.returncode == 2
    assert f"cannot write the crawl to {out}" in r.stderr


def test_crawl_to_a_path_under_a_file_fails_before_any_request(short_tmp):
    blocker = short_tmp / "file"
    blocker.write_text("x")
    # no daemon listens on this socket: the refusal comes before the CLI would start or ask one
    r = run_cli("crawl", "--socket", str(short_tmp / "none.sock"), "http://127.0.0.1:9/docs/", "--out",
                str(blocker / "out"))
    assert r.returncode == 2, r.stderr
    assert f"cannot write the crawl to {blocker / 'out'}: Not a directory" in r.stderr


async def test_bad_start_urls_and_patterns_are_refused_before_anything_is_loaded():
    from webfetch.config import Config
    from webfetch.crawl.crawler import Crawler
    from webfetch.errors import InvalidUrl
    from webfetch.protocol import CrawlRequest
    from webfetch.urls import AddressPolicy, PolicyHolder

    # nothing behind the crawler: a bad request must not reach the pipeline (a bad pattern, which is compiled
    # in a parser worker, is refused before anything loads too: tests/test_crawl_site.py)
    crawler = Crawler(Config(), PolicyHolder(AddressPolicy()), None, None)  # type: ignore[arg-type]
    for url in ("http://[::1", "ftp://e.com/", "not a url"):
        with pytest.raises(InvalidUrl):
            await crawler.crawl(CrawlRequest(url=url), lambda *_: None)


def test_a_sitemap_of_one_huge_token_in_small_pieces_is_parsed_in_few_calls():
    """expat before 2.6 scans an unfinished token again from its start at each call: a 10 MB attribute fed as
    it arrives, 4 KiB a piece, was 20 s of the event loop (an attacker review). Pieces are gathered to 1 MiB."""
    body = b'<urlset><url><loc a="' + b"x" * 3_000_000 + b'">https://e.com/a</loc></url></urlset>'
    parser = SitemapParser(10_000_000)
    for i in range(0, len(body), 4096):
        parser.feed(body[i:i + 4096])
    assert parser.close().locs == ["https://e.com/a"]
    assert parser.parses <= 4, parser.parses   # 3 MB in 1 MiB calls, and the close
