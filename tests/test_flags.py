"""No silent success: every interstitial of tests/support/flag_pages.py gets its flag and a note saying what to do,
every ordinary page gets none; the detection functions on the whole set, the real daemon (Chromium, the
socket) on a representative part of it, and the CLI's stderr."""

from __future__ import annotations

import pytest
import trio

from webfetch.config import FetchConfig
from webfetch.errors import ExtractionFailed
from webfetch.parse.extractor import extract_html
from webfetch.parse.flags import FLAG_NAMES, detect, detect_on_text, judge

from .support.client import run_cli
from .support.daemon import TRANSPORT_NOTES, make_config
from .support.flag_pages import CASES, PARAS, Case, article

WHAT_TO_DO = ("another source", "search", "ask the user", "public source", "api")


def _detect(case: Case) -> list[str]:
    try:
        extracted = extract_html(case.dom, None)
        markdown, title = extracted.markdown, extracted.title
    except ExtractionFailed:
        markdown, title = "", None
    base = "http://127.0.0.1:8000"
    flags = detect(status=case.status, title=title, html=case.dom, markdown=markdown, url=base + case.url_path,
                   final_url=base + (case.final_path or case.url_path))
    for f in flags:
        assert f.note.startswith(f.name + ": ") and any(w in f.note.lower() for w in WHAT_TO_DO), f.note
    return [f.name for f in flags]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_detection_on_the_whole_set(case):
    assert _detect(case) == ([case.flag] if case.flag else [])


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_flags_are_judged_from_the_extractions_own_parse_as_from_a_parse_of_their_own(case):
    # issue 40's one parse: a page whose flags need its HTML gets their evidence gathered on the tree its
    # extraction read (Extracted.evidence), judged with no parse, to the same flags as detect's own parse
    base = "http://127.0.0.1:8000"
    final = base + (case.final_path or case.url_path)
    try:
        extracted = extract_html(case.dom, final)
    except ExtractionFailed:
        return  # nothing extracted: the daemon judges such a page with detect, as ever
    assert extracted.evidence is not None or case.flag is None
    if extracted.evidence is not None:
        flags = judge(extracted.evidence, status=case.status, title=extracted.title, markdown=extracted.markdown,
                      url=base + case.url_path, final_url=final)
        assert [f.name for f in flags] == _detect(case)


def test_the_set_covers_every_flag_and_ordinary_near_misses():
    assert {c.flag for c in CASES} >= set(FLAG_NAMES) - {"truncated"}
    assert sum(c.flag is None for c in CASES) >= 15


def test_a_consent_wall_in_any_language_is_told_by_its_structure():
    # The German "pay or OK" wall says none of the consent phrases webfetch knows: the dialog over an empty
    # page, its buttons and one word about data are the evidence, and the note says so.
    case = next(c for c in CASES if c.name == "pay-or-ok-de")
    extracted = extract_html(case.html, None)
    [flag] = detect(status=200, title=extracted.title, html=case.html, markdown=extracted.markdown,
                    url="http://a/", final_url="http://a/")
    assert flag.name == "cookie_wall"
    assert flag.note.startswith('cookie_wall: a cookie consent wall hides the content (a dialog over the page with '
                                '4 buttons and links, about "')
    # the same dialog beside the article's text is no wall
    with_text = case.html.replace('<div id="page-root" class="app-shell"></div>',
                                  f'<div id="page-root"><main><article><h1>Otters</h1>{PARAS}</article></main></div>')
    assert _names(with_text) == []


def test_paywall_markup_on_a_part_is_not_the_article_marked_paid():
    # schema.org: isAccessibleForFree false on the work is a paywall's mark; on a hasPart (the comments) it
    # says only that part is paid.
    short = "".join(f"<p>{t}</p>" for t in ("A short complete note about the mill race.",) * 3)
    on_part = '{"@type":"NewsArticle","isAccessibleForFree":true,"hasPart":{"isAccessibleForFree":false}}'
    on_work = '{"@type":"NewsArticle","isAccessibleForFree":false,"hasPart":{"isAccessibleForFree":false}}'
    in_graph = '{"@graph":[{"@type":"WebPage"},{"@type":"NewsArticle","isAccessibleForFree":"False"}]}'
    for data, flags in ((on_part, []), (on_work, ["paywall"]), (in_graph, ["paywall"])):
        page = article("Mill race", extra_head=f'<script type="application/ld+json">{data}</script>', body=short)
        assert _names(page) == flags, data


def test_a_paywall_phrase_in_a_comment_section_or_aside_is_not_the_article_cut():
    short = "".join(f"<p>{t}</p>" for t in ("A short complete note about the mill race.",) * 3)
    prompt = "<p>Dieser Artikel ist nur für Abonnenten. Jetzt abonnieren und weiterlesen.</p>"
    assert _names(article("Mill race", body=short + prompt)) == ["paywall"]
    assert _names(article("Mill race", body=short, after=f'<div id="comments">{prompt}</div>')) == []
    assert _names(article("Mill race", body=short, after=f"<aside>{prompt}</aside>")) == []
    # the name in any case, in the id or the class, among other names; only on a section, div, footer, form or
    # list; and a name that merely shares letters is no comment section
    for wrapper in ('<section id="Comments-Area">{}</section>',
                    '<footer class="x" id="user-Kommentare">{}</footer>'):
        assert _names(article("Mill race", body=short, after=wrapper.format(prompt))) == [], wrapper
    for wrapper in ('<span class="comment">{}</span>', '<div id="com ment">{}</div>', '<div class="commit">{}</div>'):
        assert _names(article("Mill race", body=short, after=wrapper.format(prompt))) == ["paywall"], wrapper


def _names(html: str) -> list[str]:
    extracted = extract_html(html, None)
    return [f.name for f in detect(status=200, title=extracted.title, html=html, markdown=extracted.markdown,
                                   url="http://a/", final_url="http://a/")]


def test_truncated_is_a_flag_with_its_note():
    flags = detect(status=200, title="t", html=article("Long"), markdown="text " * 1000, url="http://a/",
                   final_url="http://a/", truncated=True, truncated_note="cut at 10 bytes")
    assert [(f.name, f.note) for f in flags] == [("truncated", "cut at 10 bytes")]


# --- through the daemon ------------------------------------------------------------------------------

# Pages that load nothing from other hosts (the test machine has no internet), one or more per flag.
THROUGH_DAEMON = ["cloudflare-js", "cloudflare-checking", "perimeterx", "akamai-denied", "aws-waf",
                  "js-shell-react", "js-shell-next", "js-shell-angular", "login-page", "login-required", "consent-wall",
                  "paywall-ldjson", "soft-404", "soft-404-spa",
                  "article", "article-consent-banner", "article-header-login", "spa-rendered", "short-static",
                  "short-with-analytics", "docs-auth", "film-not-found",
                  # beyond English: walls judged by their structure, and a comment box for subscribers
                  "pay-or-ok-de", "consent-overlay-fr", "consent-overlay-es", "paywall-de",
                  "de-article-comments-for-subscribers", "de-article-consent-dialog"]


def _serve(site, case: Case) -> None:
    site.html(case.final_path.split("?")[0] if case.final_path else case.url_path, case.html, status=case.status)
    if case.final_path:
        site.route(case.url_path, lambda h, to=case.final_path: h.redirect(302, to))


async def test_flags_through_the_daemon(daemon, site):
    cases = [c for c in CASES if c.name in THROUGH_DAEMON]
    assert len(cases) == len(THROUGH_DAEMON)
    for case in cases:
        _serve(site, case)
    results: dict[str, dict] = {}

    async def one(case: Case) -> None:
        results[case.name] = await daemon.fetch(site.url(case.url_path))

    async with trio.open_nursery() as nursery:
        for case in cases:
            nursery.start_soon(one, case)
    wrong = {}
    for case in cases:
        r = results[case.name]
        assert r["type"] == "result", (case.name, r)
        expected = [case.flag] if case.flag else []
        if r["flags"] != expected:
            wrong[case.name] = (expected, r["flags"], r["notes"])
        for flag in r["flags"]:  # each flag is also a note with what to do
            assert any(n.startswith(flag + ": ") for n in r["notes"]), r["notes"]
    assert not wrong
    # a cached result keeps its flags
    again = await daemon.fetch(site.url("/flags/cloudflare-js"))
    assert again["cached"] and again["flags"] == ["challenge"]
    # the login redirect was followed to the sign-in page, and said so
    login = results["login-page"]
    assert login["final_url"].endswith("/login?return_to=%2Faccount%2Forders")
    assert "redirected to /login" in next(n for n in login["notes"] if n.startswith("login_wall"))


async def test_a_long_article_is_judged_on_its_text_alone_with_the_same_flags(daemon, site):
    # The daemon judges a long text without parsing its page (in its own process, no worker): a
    # subscription prompt at the end is still a paywall, an ordinary long article still no flag.
    prompt = ("<p>Subscribe to continue reading. You have reached your limit of free articles.</p>"
              "<a href='/subscribe'>Subscribe now</a>")
    site.html("/long-paywalled", article("The long read", body=PARAS * 3 + prompt))
    site.html("/long-free", article("The long read, free", body=PARAS * 3))
    for path, flags in (("/long-paywalled", ["paywall"]), ("/long-free", [])):
        r = await daemon.fetch(site.url(path))
        assert detect_on_text(status=200, title=r["title"], html="<p>", markdown=r["content"], url=r["url"],
                              final_url=r["final_url"]) is not None, "the text alone decides"
        assert r["type"] == "result" and r["flags"] == flags, (path, r["flags"], r["notes"])


async def test_a_page_without_text_is_a_flagged_result_only_when_a_flag_explains_it(daemon, site):
    # the Next.js shell has no text at all: its flag is the answer, with empty content
    _serve(site, next(c for c in CASES if c.name == "js-shell-next"))
    r = await daemon.fetch(site.url("/flags/js-shell-next"))
    assert r["type"] == "result", r
    assert (r["content"], r["total_chars"], r["extractor"], r["flags"]) == ("", 0, None, ["js_shell"])
    # an empty page that is none of the walls stays an error
    site.html("/empty", "<!doctype html><html><head><title>x</title></head><body><div></div></body></html>")
    r = await daemon.fetch(site.url("/empty"))
    assert r["type"] == "error" and r["code"] == "extraction_failed", r


async def test_a_challenge_served_with_403_is_an_http_error_that_says_so(daemon, site):
    site.html("/blocked", next(c.html for c in CASES if c.name == "cloudflare-verify"), status=403)
    site.html("/forbidden", "<html><head><title>403 Forbidden</title></head><body><h1>403 Forbidden</h1>"
                            "<hr><center>nginx</center></body></html>", status=403)
    r = await daemon.fetch(site.url("/blocked"))
    assert (r["type"], r["code"], r["status"]) == ("error", "http_error", 403), r
    assert r["message"].startswith(site.url("/blocked") + " answered HTTP 403: ")
    assert "; the page is an anti-bot check page (" in r["message"] and "another source" in r["message"]
    plain = await daemon.fetch(site.url("/forbidden"))
    assert plain["code"] == "http_error" and "anti-bot" not in plain["message"]


async def test_truncated_is_a_flag_through_the_daemon(start_daemon, site):
    daemon = await start_daemon(make_config(fetch=FetchConfig(allow_private=True, max_bytes=20_000)))
    r = await daemon.fetch(site.url("/large"))
    assert r["type"] == "result" and r["truncated"] is True
    assert r["flags"] == ["truncated"]
    assert sum("20000 bytes" in n for n in r["notes"]) == 1  # the size cut's note, once


async def test_an_ordinary_page_has_an_empty_flags_list(daemon, site):
    r = await daemon.fetch(site.url("/article"))
    assert r["flags"] == [] and r["notes"] == TRANSPORT_NOTES


@pytest.mark.chromium
def test_cli_shows_flags_on_stderr(short_tmp, site):
    case = next(c for c in CASES if c.name == "cloudflare-js")
    _serve(site, case)
    cfg = short_tmp / "c.toml"
    cfg.write_text("[fetch]\nallow_private = true\n[server]\nidle_exit_s = 1\n")
    r = run_cli("fetch", "--config", str(cfg), site.url(case.url_path), env={"WEBFETCH_SOCKET": str(short_tmp / "s")})
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert "webfetch: flags: challenge (read the notes before using this content)" in lines
    assert any(line.startswith("webfetch: note: challenge: this is an anti-bot check page") for line in lines)
