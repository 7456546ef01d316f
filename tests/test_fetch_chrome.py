"""Layer 3: the real daemon with real Chromium against the local test site."""

from __future__ import annotations

import json
import os
import signal

import pytest
import trio

from webfetch.config import BrowserConfig, Config, FetchConfig

from .support.chromium import Chromium
from .support.daemon import make_config
from .support.procs import pid_alive, renderers
from .support.site import ARTICLE_TEXT, CYRILLIC, free_port, simple_page


async def test_noisy_article_becomes_clean_markdown(daemon, site):
    progress: list = []
    r = await daemon.request({"id": 1, "op": "fetch", "url": site.url("/article")}, progress)
    assert r["type"] == "result" and r["kind"] == "page", r
    assert r["title"] == "Otters return to the valley"
    assert r["extractor"] == "trafilatura"
    md = r["content"]
    for sentence in ARTICLE_TEXT:
        assert sentence in md
    assert "A long road back" in md
    assert "[full survey report](" in md  # links kept
    for noise in ("BUY CHEAP WATCHES", "Celebrity gossip", "Copyright 2026", "Weather"):
        assert noise not in md
    assert r["cached"] is False and r["status"] == 200 and r["content_type"] == "text/html"
    assert r["url"] == r["final_url"] == site.url("/article")
    assert r["next_offset"] is None and r["total_chars"] == len(md) and r["offset"] == 0
    assert [p["stage"] for p in progress][:2] == ["cache", "render"]
    assert site.hits.get("/pixel.png", 0) == 0  # images are never downloaded


async def test_javascript_rendered_content_is_captured(daemon, site):
    r = await daemon.fetch(site.url("/js"))
    assert r["type"] == "result", r
    assert "only exists after the page's JavaScript ran" in r["content"]
    assert r["title"] == "Rendered by script"
    assert "Loading" not in r["content"]


# A page that writes its text in an animation frame, as frameworks do: a hidden page gets none.
FRAME_PAGE = """<!doctype html><html><head><title>Frames</title></head><body><main id="m"></main><script>
requestAnimationFrame(function () {
  document.getElementById("m").innerHTML = "<p>%s</p><p>The page was " + document.visibilityState + ".</p>";
});
</script></body></html>"""


async def test_a_page_renders_in_a_visible_window(daemon, site):
    # fetch tabs wait minimized (Chrome then repaints nothing while a navigation runs); before a page is
    # rendered in one its window is restored, so the page sees what a person's browser shows it
    site.html("/frames", FRAME_PAGE % ARTICLE_TEXT[0])
    await daemon.fetch(site.url("/article"))  # a pooled tab, used and recycled without rendering
    r = await daemon.fetch(site.url("/frames"))
    assert r["type"] == "result", r
    assert ARTICLE_TEXT[0] in r["content"] and "The page was visible." in r["content"], r["content"]


# Content that arrives in three parts 300 ms apart, then a timer that polls for ever and changes nothing
# (as analytics and carousels do).
POLLING_PAGE = """<!doctype html><html><head><title>Polling</title></head><body><main id="m"></main><script>
const parts = %s;
let n = 0;
function more() {
  if (n < parts.length) { const p = document.createElement("p"); p.textContent = parts[n++];
                          document.getElementById("m").appendChild(p); setTimeout(more, 300); }
  else { setTimeout(function poll() { setTimeout(poll, 100); }, 100); }
}
setTimeout(more, 300);
</script></body></html>"""


async def test_a_page_that_polls_for_ever_is_read_once_its_content_is_quiet(start_daemon, site):
    site.html("/polling", POLLING_PAGE % json.dumps(ARTICLE_TEXT[:3]))
    d = await start_daemon(make_config(browser=BrowserConfig(settle_s=8.0),
                                       fetch=FetchConfig(allow_private=True, render="always")))
    r = await d.fetch(site.url("/polling"))
    assert r["type"] == "result", r
    for part in ARTICLE_TEXT[:3]:  # each part came while a short timer was pending: all were waited for
        assert part in r["content"]
    # the poller's timer alone did not hold the page until settle_s
    assert not any("still running scripts" in n for n in r["notes"]), r["notes"]


@pytest.mark.parametrize("code", [301, 302, 307, 308])
async def test_same_host_redirect_chains_are_followed(daemon, site, code):
    r = await daemon.fetch(site.url(f"/r{code}"))
    assert r["kind"] == "page", r
    assert r["final_url"] == site.url("/landed")
    assert r["url"] == site.url(f"/r{code}")
    assert "arrived at the landing page" in r["content"]


async def test_same_host_meta_refresh_is_followed(daemon, site):
    r = await daemon.fetch(site.url("/same-meta"))
    assert r["kind"] == "page", r
    assert r["final_url"] == site.url("/landed")
    assert "arrived at the landing page" in r["content"]


@pytest.mark.parametrize("path", ["/cross-http", "/cross-meta", "/cross-script"])
async def test_cross_host_redirects_are_reported_not_followed(daemon, site, path):
    r = await daemon.fetch(site.url(path))
    assert r["type"] == "result", r
    assert r["kind"] == "redirect"
    assert r["redirect_url"] == site.url("/elsewhere", host="localhost")
    assert site.url("/elsewhere", host="localhost") in r["content"]
    assert "different host" in r["content"]
    assert site.hits.get("/elsewhere", 0) == 0  # stopped before the target was loaded


@pytest.mark.parametrize("path", ["/loop", "/meta-loop"])
async def test_redirect_loops_end_in_an_error(daemon, site, path):
    r = await daemon.fetch(site.url(path))
    assert r["type"] == "error", r
    assert r["code"] == "network_error"
    assert "ERR_TOO_MANY_REDIRECTS" in r["message"]


# Navigations a page starts once it has committed that bring no document. Chrome shows its own error page
# (or, for a 204 or 205, stays where it was), so no page of the site ever commits: the fetch waited for one
# until its timeout (a corpus page that sends http visitors to https did so on bin/bench's http server).
DEAD_ENDS = {
    "tls-on-http": ("<script>location.href = location.href.replace('http:', 'https:');</script>",
                    "failed to load"),
    "closed-port": ("<script>location.href = 'http://127.0.0.1:{closed}/x';</script>",
                    "failed to load (net::ERR_CONNECTION_REFUSED)"),
    "meta-refresh": ('<meta http-equiv="refresh" content="0; url=http://127.0.0.1:{closed}/x">',
                     "failed to load (net::ERR_CONNECTION_REFUSED)"),
    "no-content": ("<script>location.href = '/no-content';</script>", None),
    "no-content-later": ("<script>setTimeout(() => { location.href = '/no-content'; }, 300);</script>", None),
}


@pytest.mark.parametrize("case", list(DEAD_ENDS))
async def test_a_navigation_that_brings_no_document_leaves_the_page_as_it_was(start_daemon, site, case):
    leap, failure = DEAD_ENDS[case]
    closed = free_port()
    site.route("/no-content", lambda h: (h.send_response(204), h.end_headers()))
    leap = leap.replace("{closed}", str(closed))
    site.html("/leap", simple_page("Leap", *ARTICLE_TEXT).replace("<p>", leap + "<p>", 1))
    d = await start_daemon(make_config(fetch=FetchConfig(render="always", allow_private=True, timeout_s=10)))
    r = await d.fetch(site.url("/leap"))
    assert r["type"] == "result", r  # before: a timeout error, 10 s later
    assert r["title"] == "Leap" and all(sentence in r["content"] for sentence in ARTICLE_TEXT), r
    assert r["final_url"] == site.url("/leap")
    target = (site.url("/leap").replace("http:", "https:") if case == "tls-on-http"
              else f"http://127.0.0.1:{closed}/x")
    expected = [] if failure is None else [
        f"the page navigated to {target}, which {failure}; the content is the page as it was before"]
    # first, why Chrome loaded it: fetch.render = "always" (fetch.transport = "chrome" on that suite)
    assert r["notes"][0].startswith("loaded in Chrome: fetch.") and r["notes"][1:] == expected, r["notes"]
    if failure is None:
        assert site.hits.get("/no-content", 0) == 1


# A first navigation answered without a body: 204 and 205 bring no document at all (Chrome aborts the
# navigation, which was reported as a network_error), a 200 with an empty body an empty one. Either way
# there is nothing to read, and the error says so, on a plain tab and a rendered one.
NO_CONTENT_ROUTES = {
    "/no-content": (lambda h: (h.send_response(204), h.end_headers()), "HTTP 204 No Content"),
    "/reset-content": (lambda h: (h.send_response(205), h.send_header("Content-Length", "0"), h.end_headers()),
                       "HTTP 205 Reset Content"),
    "/empty-page": (lambda h: h.reply(200, "text/html; charset=utf-8", b""), "HTTP 200 with an empty body"),
    "/empty-text": (lambda h: h.reply(200, "text/plain", b""), "HTTP 200 with an empty body"),
    "/to-no-content": (lambda h: h.redirect(302, "/no-content"), "HTTP 204 No Content"),
}


@pytest.mark.parametrize("render", ["auto", "always"])
async def test_a_response_without_a_body_is_no_content(start_daemon, site, render):
    for path, (route, _) in NO_CONTENT_ROUTES.items():
        site.route(path, route)
    d = await start_daemon(make_config(fetch=FetchConfig(render=render, allow_private=True)))
    for path, (_, said) in NO_CONTENT_ROUTES.items():
        r = await d.fetch(site.url(path))
        assert r["type"] == "error" and r["code"] == "no_content", (path, r)
        final = site.url("/no-content" if path == "/to-no-content" else path)
        assert r["message"].startswith(f"{final} answered {said}: there is nothing to read"), r
        assert r["status"] == int(said.split()[1])
    # the daemon and its tabs serve on: the next page is read as ever
    r = await d.fetch(site.url("/article"))
    assert r["type"] == "result" and ARTICLE_TEXT[0] in r["content"], r


@pytest.mark.parametrize("path,ctype", [("/image.png", "image/png")])  # PDFs: tests/test_pdf.py
async def test_binary_bodies_are_unsupported(daemon, site, path, ctype):
    r = await daemon.fetch(site.url(path))
    assert r["type"] == "error", r
    assert r["code"] == "unsupported_content_type"
    assert r["content_type"] == ctype
    assert ctype in r["message"]


async def test_an_image_is_unsupported_on_a_reused_tab_too(daemon, site):
    # Tabs whose fetch ended before Chrome committed anything are reused; Chrome's error page for the
    # request webfetch failed can commit after that, in the next fetch's time. Taken for that page's own
    # document, it made the next image a "download the page started", and Chrome's error page
    # (ERR_BLOCKED_BY_CLIENT) its result: 1 image in 9 under this mix before the fix.
    paths = ["/image.png", "/js", "/image.png", "/missing-page"] * 12
    answers: list[tuple[str, dict]] = []

    async def one(n: int, path: str, limit: trio.CapacityLimiter) -> None:
        async with limit:
            answers.append((path, await daemon.request({"id": n, "op": "fetch", "url": site.url(f"{path}?n={n}")})))

    limit = trio.CapacityLimiter(6)
    async with trio.open_nursery() as nursery:
        for n, path in enumerate(paths):
            nursery.start_soon(one, n, path, limit)
    images = [r for path, r in answers if path == "/image.png"]
    assert len(images) == 24
    assert [r.get("code") for r in images] == ["unsupported_content_type"] * 24, [
        r.get("content", "")[:200] for r in images if r["type"] == "result"]


async def test_json_body_is_returned_pretty_printed(daemon, site):
    r = await daemon.fetch(site.url("/data.json"))
    assert r["kind"] == "page", r
    assert r["extractor"] == "raw" and r["content_type"] == "application/json"
    assert r["content"] == '{\n  "name": "webfetch",\n  "tags": [\n    "a",\n    "b"\n  ]\n}'


async def test_plain_text_body_is_returned_as_is(daemon, site):
    r = await daemon.fetch(site.url("/notes.txt"))
    assert r["kind"] == "page", r
    assert r["extractor"] == "raw"
    assert r["content"] == "line one\nline two\n"


@pytest.mark.parametrize("path,status,text", [("/missing-page", 404, "Page not found"),
                                              ("/broken", 500, "The database is down.")])
async def test_error_statuses_are_http_errors(daemon, site, path, status, text):
    r = await daemon.fetch(site.url(path))
    assert r["type"] == "error", r
    assert r["code"] == "http_error"
    assert r["status"] == status
    assert f"HTTP {status}" in r["message"] and text in r["message"]
    await _wait_no_new_tabs(daemon, set())


async def test_server_that_never_answers_times_out(daemon, site):
    with trio.fail_after(20):
        r = await daemon.fetch(site.url("/hang"), timeout_s=1.5)
    assert r["type"] == "error", r
    assert r["code"] == "timeout"
    assert "1.5 s" in r["message"]
    await _wait_no_new_tabs(daemon, set())  # the tab of the timed-out load is gone


async def test_connection_refused_is_a_network_error(daemon, site):
    from .support.site import free_port
    r = await daemon.fetch(f"http://127.0.0.1:{free_port()}/")
    assert r["type"] == "error", r
    assert r["code"] == "network_error"
    assert "net::ERR_CONNECTION_REFUSED" in r["message"]


async def test_large_page_is_paged(daemon, site):
    first = await daemon.fetch(site.url("/large"))
    assert first["kind"] == "page", first
    assert first["total_chars"] > 100_000
    assert len(first["content"]) <= 50_000
    assert first["content"].endswith("\n")  # cut at a line boundary
    assert first["next_offset"] == len(first["content"])
    second = await daemon.fetch(site.url("/large"), offset=first["next_offset"], max_chars=1000)
    assert second["cached"] is True and second["offset"] == first["next_offset"]
    assert len(second["content"]) <= 1000
    assert second["next_offset"] == first["next_offset"] + len(second["content"])


async def test_body_over_max_bytes_is_cut_and_flagged(start_daemon, site):
    d = await start_daemon(make_config(fetch=FetchConfig(allow_private=True, max_bytes=20_000)))
    r = await d.fetch(site.url("/large"))
    assert r["kind"] == "page", r
    assert r["truncated"] is True
    assert "Paragraph 0:" in r["content"] and "Paragraph 1400" not in r["content"]
    assert any("20000 bytes" in n for n in r["notes"])


async def test_non_utf8_charset_is_decoded(daemon, site):
    r = await daemon.fetch(site.url("/cp1251"))
    assert r["kind"] == "page", r
    assert r["title"] == "Кириллица"
    assert CYRILLIC in r["content"]


async def test_cache_hit_does_not_touch_chrome(daemon, site):
    first = await daemon.fetch(site.url("/article"))
    loads = daemon.daemon.pipeline.loads
    hits = site.hits["/article"]
    second = await daemon.fetch(site.url("/article#section"))  # fragment is not part of the key
    assert second["cached"] is True and second["age_s"] >= 0
    assert second["content"] == first["content"]
    assert daemon.daemon.pipeline.loads == loads and site.hits["/article"] == hits
    fresh = await daemon.fetch(site.url("/article"), fresh=True)
    assert fresh["cached"] is False and site.hits["/article"] == hits + 1


async def test_cache_hit_of_a_local_page_is_answered_without_a_progress_frame(daemon, site):
    # A local host keeps http in its cache key; its hit is the result frame alone, as a public page's is
    # (a progress frame first would wake the client once more on the quickest answer the daemon gives).
    await daemon.fetch(site.url("/article"))
    progress: list = []
    hit = await daemon.request({"id": "t", "op": "fetch", "url": site.url("/article")}, progress)
    assert hit["cached"] is True and hit["kind"] == "page", hit
    assert progress == []
    cold: list = []
    await daemon.request({"id": "t", "op": "fetch", "url": site.url("/article"), "fresh": True}, cold)
    assert [f["stage"] for f in cold][:1] == ["cache"]  # a load still says what it does


async def test_concurrent_requests_for_one_url_load_once(daemon, site):
    results = []

    async def one(i: int) -> None:
        results.append(await daemon.request({"id": i, "op": "fetch", "url": site.url("/article")}))

    async with trio.open_nursery() as n:
        for i in range(10):
            n.start_soon(one, i)
    assert [r["type"] for r in results] == ["result"] * 10
    assert daemon.daemon.pipeline.loads == 1 and site.hits["/article"] == 1
    assert sum(not r["cached"] for r in results) == 1


async def test_cancel_ends_the_request_and_closes_its_tab(daemon, site):
    before = {t["targetId"] for t in await daemon.page_targets()}
    c = await daemon.client()
    await c.send({"id": "slow", "op": "fetch", "url": site.url("/slow-article")})
    with trio.fail_after(10):
        while site.hits.get("/slow-article", 0) == 0:
            await trio.sleep(0.02)
    await c.send({"id": "c", "op": "cancel", "target": "slow"})
    frames = {}
    with trio.fail_after(5):
        while len(frames) < 2:
            f = await c.receive()
            if f["type"] != "progress":
                frames[f["id"]] = f
    assert frames["c"] == {"type": "result", "id": "c", "op": "cancel", "target": "slow", "found": True}
    assert frames["slow"]["type"] == "error" and frames["slow"]["code"] == "cancelled"
    await c.aclose()
    await _wait_no_new_tabs(daemon, before)


async def test_disconnect_cancels_within_a_second_and_closes_the_tab(daemon, site):
    before = {t["targetId"] for t in await daemon.page_targets()}
    c = await daemon.client()
    await c.send({"id": 1, "op": "fetch", "url": site.url("/slow-article")})
    with trio.fail_after(10):
        while site.hits.get("/slow-article", 0) == 0 or daemon.daemon.server.in_flight == 0:
            await trio.sleep(0.02)
    await c.aclose()
    with trio.fail_after(1.0):
        while daemon.daemon.server.in_flight:
            await trio.sleep(0.02)
    await _wait_no_new_tabs(daemon, before)


# A short page (so it is rendered) whose script counts for as long as it runs.
# an app: its script draws the text (a page whose server HTML holds its text is not rendered at all)
TICKING_PAGE = """<!doctype html><html><head><title>Ticking</title></head><body><article id="app"></article>
<script>document.getElementById("app").innerHTML = "<p>%s</p>";
window.ticks = 0; setInterval(function () { window.ticks++; }, 10);</script></body></html>"""


async def _ticks(daemon, target_id: str) -> int:
    """The ticking page's counter, read through a session of the test's own."""
    conn = (await daemon.daemon.chrome.wait_browser()).conn
    session = (await conn.call("Target.attachToTarget", {"targetId": target_id, "flatten": True}))["sessionId"]
    try:
        with trio.fail_after(5):
            reply = await conn.call("Runtime.evaluate", {"expression": "window.ticks", "returnByValue": True},
                                    session)
        return reply["result"]["value"]
    finally:
        await conn.call("Target.detachFromTarget", {"sessionId": session})


async def test_a_rendered_page_stops_at_its_answer_and_its_context_goes_once_no_fetch_loads(start_daemon, site,
                                                                                             monkeypatch):
    monkeypatch.setattr("webfetch.chrome.browser.BACKGROUND_DEFER_S", 30.0)  # only "no fetch loads" disposes of it
    # A fetch loading in Chrome is what holds the disposal back: over the http transport the slow article's
    # GET would hold no tab while it waits, so both pages load in Chrome here whatever the suite's transport.
    daemon = await start_daemon(make_config(transport="chrome"))
    site.html("/ticking", TICKING_PAGE % ARTICLE_TEXT[0])
    c = await daemon.client()
    await c.send({"id": "slow", "op": "fetch", "url": site.url("/slow-article")})  # keeps a fetch loading
    with trio.fail_after(10):
        while site.hits.get("/slow-article", 0) == 0:
            await trio.sleep(0.02)
    r = await daemon.fetch(site.url("/ticking"))
    assert r["type"] == "result" and ARTICLE_TEXT[0] in r["content"], r
    assert daemon.daemon.pipeline.renders == 2
    # while a fetch loads, the answered page waits for its disposal frozen: its timers no longer run
    target = next(t["targetId"] for t in await daemon.page_targets() if "/ticking" in t["url"])
    first = await _ticks(daemon, target)
    await trio.sleep(0.3)
    assert first > 0 and await _ticks(daemon, target) == first
    site.stall.set()
    assert (await c.terminal("slow"))["type"] == "result"
    with trio.fail_after(10):  # nothing loads now: its context is disposed of
        while any("/ticking" in t["url"] for t in await daemon.page_targets()):
            await trio.sleep(0.05)


async def test_a_fetch_tab_costs_chrome_one_renderer_process(start_daemon, site):
    # no tabs made ahead; the page loads in Chrome whatever the suite's transport (a tab is what is counted)
    d = await start_daemon(make_config(browser=BrowserConfig(context_pool=0), transport="chrome"))
    chrome = (await d.daemon.chrome.wait_browser()).pid
    with trio.fail_after(10):  # the browser's own first page gets its renderer a moment after start
        while not renderers(chrome):
            await trio.sleep(0.05)
    await trio.sleep(0.5)
    before = renderers(chrome)
    c = await d.client()
    await c.send({"id": "slow", "op": "fetch", "url": site.url("/slow-article")})  # its tab stays open
    with trio.fail_after(10):
        while site.hits.get("/slow-article", 0) == 0:
            await trio.sleep(0.02)
    await trio.sleep(0.5)  # a second renderer (the address bar's popup, which Chrome preloads) would be up
    assert len(set(renderers(chrome)) - set(before)) == 1
    site.stall.set()
    assert (await c.terminal("slow"))["type"] == "result"


async def _wait_no_new_tabs(daemon, before: set[str]) -> None:
    # Pool tabs are created in the background; a used tab is one that was in `before` or got a URL.
    with trio.fail_after(3):
        while True:
            pages = await daemon.page_targets()
            loaded = [t for t in pages if t["url"] not in ("about:blank", "")]
            if not loaded:
                return
            await trio.sleep(0.05)


@pytest.mark.parametrize("transport", ["chrome", "http"])
async def test_chrome_killed_mid_request_is_retried_on_a_new_browser(start_daemon, site, transport):
    # Over the http transport Chrome has no part in this page (its server HTML holds the content): the kill
    # costs the request nothing and the server sees one GET; through Chrome the load is retried (two).
    daemon = await start_daemon(make_config(transport=transport))
    browser = await daemon.daemon.chrome.wait_browser()
    c = await daemon.client()
    await c.send({"id": 1, "op": "fetch", "url": site.url("/slow-article")})
    with trio.fail_after(10):
        while site.hits.get("/slow-article", 0) == 0:
            await trio.sleep(0.02)
    os.killpg(browser.pid, signal.SIGKILL)
    site.stall.set()  # the retry gets its answer at once
    with trio.fail_after(30):
        r = await c.terminal(1)
    await c.aclose()
    assert r["type"] == "result", r
    assert ARTICLE_TEXT[0] in r["content"]
    assert site.hits["/slow-article"] == (2 if transport == "chrome" else 1)
    # Over http the answer can come before the kernel has finished tearing the killed tree down.
    with trio.fail_after(10):
        while pid_alive(browser.pid):
            await trio.sleep(0.02)
    # Over http nothing of this request noticed the kill: the browser actor does, in its own time.
    with trio.fail_after(30):
        while (await daemon.daemon.chrome.wait_browser()).pid == browser.pid:
            await trio.sleep(0.05)
    assert daemon.daemon.chrome.restarts >= 1


async def test_private_addresses_are_blocked_by_default(start_daemon, site):
    d = await start_daemon(Config())
    r = await d.fetch(site.url("/article"))
    assert r["type"] == "error" and r["code"] == "blocked_url", r
    assert "fetch.allow_private" in r["message"]
    assert site.hits.get("/article", 0) == 0


async def test_redirect_to_metadata_address_is_blocked(start_daemon, site):
    d = await start_daemon(Config(fetch=FetchConfig(allow_hosts=["127.0.0.1"])))
    ok = await d.fetch(site.url("/article"))
    assert ok["kind"] == "page", ok  # the allowed host itself works, over plain http
    r = await d.fetch(site.url("/metadata"))
    assert r["type"] == "error" and r["code"] == "blocked_url", r
    assert "169.254.169.254" in r["message"]


async def test_missing_chrome_is_reported(start_daemon, site):
    d = await start_daemon(make_config(browser=BrowserConfig(executable="/nonexistent/chrome")))
    status = await d.request({"id": 1, "op": "status"})
    assert any("no Chrome found" in p for p in status["problems"]), status
    r = await d.fetch(site.url("/js"))  # a page that needs rendering (a static one is read over http)
    assert r["type"] == "error" and r["code"] == "browser_unavailable", r
    assert "apt-get install chromium" in r["message"]


async def test_status_reports_browser_and_cache(daemon, site):
    await daemon.fetch(site.url("/article"))
    # The article came over HTTP: Chrome may still be starting (status says so); this test reads a ready one.
    await daemon.daemon.chrome.wait_browser()
    s = await daemon.request({"id": "s", "op": "status"})
    assert s["type"] == "result" and s["op"] == "status" and s["protocol"] == 1
    assert s["browser"]["state"] == "ready" and s["browser"]["version"].startswith(("Chrome/", "HeadlessChrome/"))
    assert s["cache"]["entries"] == 1 and s["cache"]["misses"] == 1
    assert s["requests"]["served"] >= 1 and s["problems"] == []


async def test_stopping_the_daemon_kills_chrome(start_daemon, site, nursery):
    d = await start_daemon()
    browser = await d.daemon.chrome.wait_browser()
    assert pid_alive(browser.pid)
    nursery.cancel_scope.cancel()
    with trio.fail_after(10):
        while pid_alive(browser.pid):
            await trio.sleep(0.05)


@pytest.mark.parametrize("path,text", [
    ("/stalled-async", "This sentence was there before the stall began."),
    ("/stalled-sync", "This paragraph was written before the script that never arrives."),
])
async def test_a_stalled_resource_does_not_hold_the_answer_hostage(start_daemon, site, path, text):
    # rendered whatever the server's HTML holds: the stall is the render's to survive
    d = await start_daemon(make_config(fetch=FetchConfig(allow_private=True, render="always"),
                                       browser=BrowserConfig(settle_s=1.0)))
    with trio.fail_after(25):  # far below the 30 s page deadline: a hang fails here
        r = await d.fetch(site.url(path))
    assert r["type"] == "result", r
    assert text in r["content"]
    assert any("stopped loading" in n for n in r["notes"]), r["notes"]


async def test_extra_chrome_args_and_allowed_hosts(start_daemon, site):
    site.route("/agent", lambda h: h.reply(200, "text/html", simple_page(
        "Agent", f"The browser introduced itself as {h.headers['User-Agent']} to this server.", *ARTICLE_TEXT)))
    config = Config(browser=BrowserConfig(args=["--user-agent=webfetch-test-agent/1.0"]),
                    fetch=FetchConfig(allow_hosts=["localhost"], render="always"))
    d = await start_daemon(config)
    url = f"http://localhost:{site.port}/agent"
    r = await d.fetch(url)
    assert r["type"] == "result", r
    assert r["url"] == url  # an allowed local host keeps plain http
    assert "introduced itself as webfetch-test-agent/1.0 to" in r["content"]
    blocked = await d.fetch(site.url("/agent"))  # the same server by address: not in allow_hosts
    assert blocked["code"] == "blocked_url", blocked


async def test_attaching_to_an_existing_browser(start_daemon, site, tmp_path):
    browser = Chromium(tmp_path / "existing")  # a browser someone else runs, with a DevTools port
    try:
        d = await start_daemon(make_config(browser=BrowserConfig(endpoint=browser.ws_url)))
        r = await d.fetch(site.url("/article"))
        assert r["type"] == "result", r and ARTICLE_TEXT[0] in r["content"]
        s = await d.request({"id": "s", "op": "status"})
        assert s["browser"]["endpoint"] == browser.ws_url and s["browser"]["executable"] is None
        assert s["browser"]["state"] == "ready"
        assert browser.proc.poll() is None
    finally:
        browser.stop()


async def test_a_browser_that_keeps_failing_is_a_crash_loop(start_daemon, site, short_tmp):
    fake = short_tmp / "broken-chrome"
    fake.write_text("#!/bin/sh\necho 'error while loading shared libraries: libnss3.so' >&2\nexit 127\n")
    fake.chmod(0o755)
    d = await start_daemon(make_config(browser=BrowserConfig(executable=str(fake))))
    with trio.fail_after(20):
        while d.daemon.chrome.state != "crash_loop":
            await trio.sleep(0.1)
    s = await d.request({"id": "s", "op": "status"})
    assert s["browser"]["state"] == "crash_loop"
    assert any("keeps failing" in p and "libnss3.so" in p for p in s["problems"]), s["problems"]
    r = await d.fetch(site.url("/js"))  # a page that needs rendering (a static one is read over http)
    assert r["type"] == "error" and r["code"] == "browser_unavailable", r
    assert "libnss3.so" in r["message"] and "webfetch doctor" not in r["message"]


async def test_server_html_that_holds_the_content_is_not_rendered(daemon, site):
    r = await daemon.fetch(site.url("/server-rendered"))
    assert r["type"] == "result", r
    assert ARTICLE_TEXT[3] in r["content"] and r["title"] == "Server rendered"
    assert "added by the page script" not in r["content"]  # the page's scripts never ran


async def test_render_always_runs_the_scripts(start_daemon, site):
    d = await start_daemon(make_config(fetch=FetchConfig(allow_private=True, render="always")))
    r = await d.fetch(site.url("/server-rendered"))
    assert r["type"] == "result", r
    assert ARTICLE_TEXT[3] in r["content"]
    assert "added by the page script after the server sent the HTML" in r["content"]


async def test_renders_beyond_the_cap_wait_in_a_queue(start_daemon, site):
    d = await start_daemon(make_config(browser=BrowserConfig(max_renders=1)))
    c1, c2 = await d.client(), await d.client()
    await c1.send({"id": "a", "op": "fetch", "url": site.url("/slow-article")})
    with trio.fail_after(10):
        while site.hits.get("/slow-article", 0) == 0:
            await trio.sleep(0.02)
    progress: list = []
    await c2.send({"id": "b", "op": "fetch", "url": site.url("/article")})
    with trio.fail_after(10):
        while not progress:
            f = await c2.receive()
            if f["stage"] == "queued":
                progress.append(f)
    assert site.hits.get("/article", 0) == 0  # it waits for the slot
    site.stall.set()
    with trio.fail_after(30):
        assert (await c1.terminal("a"))["type"] == "result"
        assert (await c2.terminal("b"))["type"] == "result"
    await c1.aclose()
    await c2.aclose()


async def test_a_recycled_tab_carries_no_cookies_and_bypasses_the_http_cache(start_daemon, site):
    # Chrome's recycled tab is the subject, whatever the suite's transport (tests/test_http_fetch.py holds
    # the same promise for the http transport's pooled sessions)
    d = await start_daemon(make_config(browser=BrowserConfig(context_pool=1), transport="chrome"))
    with trio.fail_after(10):
        while not d.daemon.chrome.idle_tabs:
            await trio.sleep(0.02)
    first = await d.fetch(site.url("/set-cookie"))
    assert first["type"] == "result" and ARTICLE_TEXT[0] in first["content"], first
    with trio.fail_after(5):  # the closer puts the tab back in the pool
        while not d.daemon.chrome.idle_tabs or d.daemon.chrome.idle_tabs[-1].uses != 1:
            await trio.sleep(0.02)
    seen = await d.fetch(site.url("/echo-headers"))
    assert seen["type"] == "result", seen
    assert "cache-control: no-cache" in seen["content"]  # proof that the same context served it
    assert "s3cr3t" not in seen["content"]
    again = await d.fetch(site.url("/set-cookie"), fresh=True)
    assert again["cached"] is False and site.hits["/set-cookie"] == 2  # Chrome's cache did not answer


async def test_dialogs_are_dismissed(start_daemon, site):
    # rendered whatever the server's HTML holds: the dialogs are its scripts'
    daemon = await start_daemon(make_config(fetch=FetchConfig(allow_private=True, render="always")))
    with trio.fail_after(20):
        r = await daemon.fetch(site.url("/dialogs"))
    assert r["type"] == "result", r
    assert "The text behind the dialog boxes." in r["content"]
    assert r["title"] == "Dialogs"  # confirm() was answered "no"
