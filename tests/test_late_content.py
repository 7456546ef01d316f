"""Content that arrives late is waited for (issue 28 item 5): a rendered page that is still a loading shell
when the settle rule stops (flags.still_a_shell, js_shell's own judgement) is watched until its content
arrives, at most in_chrome.SHELL_WATCH_S; a shell that stays one is flagged js_shell as before; a page that
settled with its content is not watched at all. Real Chromium through the daemon; the server's hits, the
result and the renderer's log are what is asserted, never a duration."""

from __future__ import annotations

import logging

import trio

from .support.daemon import TRANSPORT_NOTES
from .support.flag_pages import LATE_STORY, late_article
from .support.site import ARTICLE_TEXT

STORY = "/late/story.json"


def _serve(site) -> None:
    site.route(STORY, lambda h: h.reply(200, "application/json", LATE_STORY))
    for name, delay in (("800", 800), ("1500", 1500), ("never", None)):
        site.html(f"/late/{name}", late_article(delay))


def _rendered_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "webfetch.render"]


async def test_an_article_built_after_the_page_settled_is_waited_for(daemon, site, caplog):
    caplog.set_level(logging.DEBUG, logger="webfetch.render")
    _serve(site)
    results: dict[str, dict] = {}

    async def one(name: str) -> None:
        results[name] = await daemon.fetch(site.url(f"/late/{name}"))

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for name in ("800", "1500"):
                nursery.start_soon(one, name)
    for name in ("800", "1500"):
        r = results[name]
        assert r["type"] == "result", r
        assert r["flags"] == [], (name, r["flags"], r["notes"])
        assert "# Otters return to the valley" in r["content"] and ARTICLE_TEXT[0] in r["content"], r["content"]
        assert "Loading…" not in r["content"]
    assert site.hits[STORY] == 2  # each page asked for its story, after the settle rule had stopped
    lines = _rendered_lines(caplog)
    for name in ("800", "1500"):
        url = site.url(f"/late/{name}")
        assert f"{url}: its content arrived after the settle rule stopped" in lines, lines


async def test_a_shell_that_never_fills_stays_flagged_js_shell(daemon, site, caplog):
    caplog.set_level(logging.DEBUG, logger="webfetch.render")
    _serve(site)
    with trio.fail_after(60):
        r = await daemon.fetch(site.url("/late/never"))
    assert r["type"] == "result", r
    assert r["flags"] == ["js_shell"], r
    assert any(n.startswith("js_shell: ") for n in r["notes"])
    assert STORY not in site.hits
    assert any(line.startswith(site.url("/late/never") + ": still a loading shell after watching it")
               for line in _rendered_lines(caplog))


async def test_pages_that_settle_with_their_content_are_not_watched(daemon, site, caplog):
    # an article, and a script-built page whose content comes within the settle rule: the same results as
    # before, and the renderer never judged them shells (no "content" step in its log)
    caplog.set_level(logging.DEBUG, logger="webfetch.render")
    article = await daemon.fetch(site.url("/article"))
    scripted = await daemon.fetch(site.url("/js"))
    assert article["flags"] == [] and article["notes"] == TRANSPORT_NOTES
    assert scripted["flags"] == []
    assert "This paragraph only exists after the page's JavaScript ran" in scripted["content"]
    rendered = [line for line in _rendered_lines(caplog) if line.startswith("rendered ")]
    assert any(line.startswith(f"rendered {site.url('/js')} ") for line in rendered), rendered
    assert not any(" content=" in line for line in rendered), rendered
