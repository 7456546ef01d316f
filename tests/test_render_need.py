"""Fewer renders, decided by principle (issue 28 item 4, webfetch/parse/render_need.py): a page is rendered when
the server's HTML does not hold what a reader sees (signs of client rendering), never merely because it is
short. The script-built test set (tests/support/script_pages.py) offline, through the decision and the
extraction, and through the daemon with real Chromium: each page's markdown holds its ground truth, and a
page that needs no render never runs its scripts (the server saw no request for them)."""

from __future__ import annotations

import logging

import pytest
import trio

from webfetch.parse.extractor import read_server_html
from webfetch.parse.render_need import Markup, judge

from .support.flag_pages import CLOUDFLARE_JS
from .support.script_pages import SCRIPT_PAGES, scripts_of, serve

PAGES = {p.name: p for p in SCRIPT_PAGES}


def _reading(html: str):
    return read_server_html(html.encode(), "http://127.0.0.1/page", "utf-8")


@pytest.mark.parametrize("name", list(PAGES))
def test_the_decision_on_each_page_of_the_test_set(name):
    page = PAGES[name]
    reading = _reading(page.html)
    assert reading.need.render is page.render, (name, reading.need.reason)
    if not page.render:
        # what is not rendered is served from the server's HTML: it holds what a reader sees
        assert reading.extracted is not None
        for text in page.truth:
            assert text in reading.extracted.markdown, (name, text, reading.extracted.markdown)


@pytest.mark.parametrize("name,reason", [
    ("nav-fetch", 'mount point is empty until its scripts run ("Loading…")'),
    ("react-root", "holds no text to extract"),
    ("next-data", "holds no text to extract"),
    ("state-blob", "its text is only in script data"),
    ("enable-js", 'the page asks for JavaScript ("enable JavaScript")'),
])
def test_each_sign_of_client_rendering_says_what_it_saw(name, reason):
    assert reason in (_reading(PAGES[name].html).need.reason or "")


def _article(body: str, head: str = "") -> str:
    return f"<html><head><title>T</title>{head}</head><body>{body}</body></html>"


NOTE = ("<p>The reading room is closed on Monday for the bank holiday; orders placed over the weekend will be "
        "ready on Tuesday morning.</p>")


def test_a_short_page_is_not_rendered_for_being_short():
    for body in (NOTE, NOTE + "<script>track()</script>", f"<main>{NOTE}</main><script src=/a.js></script>"):
        assert _reading(_article(body)).need.reason is None, body


def test_a_challenge_is_rendered_and_said_so():
    assert "anti-bot challenge" in (_reading(CLOUDFLARE_JS).need.reason or "")


def test_a_meta_refresh_to_another_page_is_rendered_a_self_refresh_is_not():
    moving = _article("<p>Moving to the new address of this page, please wait a moment.</p>",
                      '<meta http-equiv="refresh" content="0; url=/landed">')
    assert _reading(moving).need.reason == "the page moves on with a meta refresh"
    reloads = _article(NOTE, '<meta http-equiv="Refresh" content="300">')
    assert _reading(reloads).need.reason is None


def test_a_page_without_scripts_is_not_rendered_whatever_it_looks_like():
    assert _reading(_article('<div id="root"></div><p>Loading…</p><p>A few words.</p>')).need.reason is None


HEADER = ('<header><a href="/">Site</a> · <a href="/news">News</a> · <a href="/about">About the site and its '
          'people</a></header>')


@pytest.mark.parametrize("mount,said", [("<main></main>", "an empty <main>"), ('<div id="root"></div>', "#root"),
                                        ('<div role="main"><p>Loading...</p></div>', '"Loading..."'),
                                        ('<section aria-busy="true"></section>', "a loading placeholder")])
def test_an_empty_mount_point_with_scripts_is_rendered(mount, said):
    reason = _reading(_article(f"{HEADER}{mount}<script src=/app.js></script>")).need.reason
    assert reason == f"the page's mount point is empty until its scripts run ({said})"


@pytest.mark.parametrize("other", ['<div id="Root"></div>', '<div id="sidebar"></div>', '<nav role="navigation"></nav>',
                                   '<section aria-busy="false"></section>', '<div data-id="app"></div>'])
def test_an_empty_element_of_another_id_role_or_state_is_no_mount_point(other):
    """Only the app roots' ids (as written), a main mark and aria-busy="true" make a mount point: any other id,
    role or aria-busy value on an empty element is a page's ordinary furniture."""
    assert _reading(_article(f"{HEADER}{other}<main>{NOTE}</main><script src=/app.js></script>")).need.reason is None


def test_an_app_root_is_named_before_the_marked_main():
    page = _article(f'{HEADER}<main></main><div id="app"></div><script src=/app.js></script>')
    assert _reading(page).need.reason == "the page's mount point is empty until its scripts run (#app)"


def test_an_empty_main_beside_another_is_no_mount_point():
    """Two marked mains (an ad slot marked main beside the story's): neither is the content's one place."""
    page = _article(f"{HEADER}<main><div id=ad></div></main><main>{NOTE}</main><script src=/app.js></script>")
    assert _reading(page).need.reason is None


def test_a_loading_widget_beside_the_text_is_no_mount_point():
    page = _article(f"{HEADER}<main>{NOTE}<div class=comments><p>Loading…</p></div></main><script>x()</script>")
    assert _reading(page).need.reason is None


def test_prose_the_page_also_shows_is_no_sign():
    """A framework's state beside the markup it drew (the hydrating page) does not count; the same state
    with the markup gone does."""
    state = ('<script>window.__STATE__ = {"text": "' + " ".join(["Herons nest in colonies high in old trees."] * 6)
             + '"};</script>')
    shown = _article(f"<p>{' '.join(['Herons nest in colonies high in old trees.'] * 3)}</p>{state}")
    assert _reading(shown).need.reason is None
    hidden = _article(f"<p>Sky Notes, the newsletter of the society.</p>{state}")
    assert "only in script data" in (_reading(hidden).need.reason or "")


def test_a_hostile_page_is_judged_without_failing():
    deep = "<div>" * 5000 + "text" + "</div>" * 5000
    reading = _reading(_article(deep + "<script>x()</script>"))
    assert reading.need.reason is not None  # 4 characters shown beside a script: an app's shell
    assert _reading("\x00\xff<<<>>>").need.reason is None  # bytes of text and no script: read as they are
    assert _reading("<html><body></body></html>").need.reason == "the server's HTML holds no text to extract"


async def test_each_page_through_the_daemon_gets_its_text_and_only_shells_run_scripts(daemon, site, caplog):
    caplog.set_level(logging.INFO, logger="webfetch.pipeline")
    serve(site)
    for page in SCRIPT_PAGES:
        url = site.url(page.path)
        with trio.fail_after(60):
            r = await daemon.fetch(url)
        assert r["type"] == "result", (page.name, r)
        assert r["flags"] == [], (page.name, r["flags"], r["notes"])
        for text in page.truth:
            assert text in r["content"], (page.name, text, r["content"])
        for text in page.absent:
            assert text not in r["content"], (page.name, text, r["content"])
        said = [rec.getMessage() for rec in caplog.records if rec.name == "webfetch.pipeline"]
        rendered = any(line.startswith(f"rendering {url}: ") for line in said)
        assert rendered is page.render, (page.name, said)
        for path in scripts_of(page):
            # a page served from the server's HTML never ran: its scripts were never asked for
            assert site.hits.get(path, 0) == (1 if page.render else 0), (page.name, path)
        for path in page.routes:
            assert site.hits.get(path, 0) == 1, (page.name, path)  # a rendered shell fetched its text


@pytest.mark.parametrize("hides", ["hidden", 'style="display:none"', 'style="visibility: hidden"'])
def test_text_hidden_until_a_script_shows_it_is_rendered_to_read_it_as_people_see_it(hides):
    """The text is in the HTML but hidden: the extraction leaves it out (webfetch/parse/hidden.py), and the page
    is rendered, where the script shows it to people and to the extraction."""
    page = _article(f"<p>Estuary Birds</p><div id=story {hides}><h1>Herons</h1>{NOTE}</div>"
                    "<script src=/reveal.js></script>")
    reading = _reading(page)
    assert reading.need.reason is not None and reading.need.reason.startswith("its text is hidden until a script")
    assert reading.extracted is None or "The reading room is closed on Monday" not in reading.extracted.markdown


def test_hidden_text_the_extraction_lost_is_rendered():
    shell = Markup(runs_scripts=True, visible_chars=40, hidden_chars=900, script_chars=100, data_prose_chars=0,
                   empty_mount=None, asks_js=None, challenge=None)
    assert judge(shell, text_chars=40) == "its text is hidden until a script shows it (900 characters hidden)"
    assert judge(shell, text_chars=900) is None


def test_a_page_that_sends_the_reader_on_by_script_is_rendered():
    way = "<p>You are being taken to the new home of this newsletter, one moment please.</p>"
    for script in ('window.location.href = "/new";', 'location.replace("/new")', "location.assign('/new')"):
        assert _reading(_article(f"{way}<script>{script}</script>")).need.reason == "the page moves on by script"
    compares = _article(f"{way}<script>if (location.href == '/old') track();</script>")
    assert _reading(compares).need.reason is None
    long_page = _article(f"<main>{NOTE * 12}</main><script>function go() {{ location.href = '/next'; }}</script>")
    assert _reading(long_page).need.reason is None  # a handler on a page that holds its text
