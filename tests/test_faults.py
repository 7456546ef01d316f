"""Faults in the browser (a renderer crash in one tab, the CDP connection, its DevTools pipe, dropped with
Chrome alive) and in the parsers (a worker process crashing under a page, a cancel mid-parse)."""

import contextlib
import os
import signal

import pytest
import trio

from webfetch.cdp import CDPError
from webfetch.config import FetchConfig
from webfetch.daemon import Daemon, bind_socket

from .support.daemon import make_config
from .support.procs import cpu_seconds, parser_workers, reaped
from .support.site import ARTICLE_TEXT, simple_page

CHURN = simple_page("Churning page", *ARTICLE_TEXT).replace("</body>", """<script>
let n = 0;
(function churn() { document.body.setAttribute("data-n", n++); document.title = "Churning page " + (n % 2);
                    setTimeout(churn, 50); })();
</script></body>""")


async def test_a_renderer_crash_fails_only_its_own_request(start_daemon, site):
    site.html("/churn", CHURN)
    d = await start_daemon(make_config(fetch=FetchConfig(allow_private=True, render="always")))
    browser = await d.daemon.chrome.wait_browser()
    results, progress = {}, []

    async def fetch(name, path):
        results[name] = await d.request({"id": name, "op": "fetch", "url": site.url(path)},
                                        progress if name == "crashed" else None)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(fetch, "crashed", "/churn")
        with trio.fail_after(20):  # the page is committed and churning: crash its renderer
            while True:
                targets = [t for t in await d.page_targets() if t["url"].endswith("/churn")]
                if targets:
                    break
                await trio.sleep(0.02)
        nursery.start_soon(fetch, "neighbour", "/article")
        session = (await browser.conn.call("Target.attachToTarget",
                                           {"targetId": targets[0]["targetId"], "flatten": True}))["sessionId"]
        with trio.fail_after(10):
            while True:  # Chrome refuses while the navigation is still pending
                try:
                    with trio.move_on_after(1):  # a crashed renderer never answers
                        await browser.conn.call("Page.crash", session_id=session)
                    break
                except CDPError as e:
                    assert "pending navigations" in str(e), e
                    await trio.sleep(0.05)
    crashed, neighbour = results["crashed"], results["neighbour"]
    assert neighbour["type"] == "result" and ARTICLE_TEXT[0] in neighbour["content"]
    # the crashed page is retried once on a fresh tab (or ends with a clear error): never a hang
    assert "loading again: the page's renderer process crashed" in [p["message"] for p in progress], progress
    assert crashed["type"] == "result" or crashed["code"] in ("browser_unavailable", "timeout"), crashed
    assert (await d.daemon.chrome.wait_browser()) is browser, "the browser itself lived on"
    with trio.fail_after(5):  # used contexts are disposed of after the answers, once nothing loads
        while [t for t in await d.page_targets() if t["url"].endswith("/churn")]:
            await trio.sleep(0.05)


async def test_a_dropped_devtools_connection_is_detected_and_the_browser_replaced(start_daemon, site):
    d = await start_daemon()
    browser = await d.daemon.chrome.wait_browser()
    old_pid = browser.pid
    await browser.conn._transport.aclose()  # the pipe goes; Chrome itself is fine
    with trio.fail_after(30):
        r = await d.fetch(site.url("/article"))
    assert r["type"] == "result" and ARTICLE_TEXT[0] in r["content"]
    new = await d.daemon.chrome.wait_browser()
    assert new is not browser and new.pid != old_pid
    status = await d.request({"id": "s", "op": "status"})
    assert status["browser"]["state"] == "ready" and status["problems"] == []
    from .support.procs import pid_alive
    with trio.fail_after(10):
        while pid_alive(old_pid):  # the orphaned browser was closed, not left running
            await trio.sleep(0.05)


# A page whose extraction takes seconds (about 2 MB of paragraphs): long enough to act while a parser
# worker process is inside it.
LONG_PAGE = simple_page("A long page", *(
    f"Paragraph {i} tells of the river, the mill and the {i % 97} lanterns along the towpath at dusk."
    for i in range(20_000)))


def _kill(pids: list[int], sig: int = signal.SIGSEGV) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


async def _warm(d, site):
    """The daemon once its parser workers are up (a page extracted): the main document comes over HTTP in
    milliseconds, before a worker started with the daemon has finished its imports, and a crash staged
    0.3 s into "extract" would hit the warm-up instead of the parse."""
    r = await d.fetch(site.url("/article"))
    assert r["type"] == "result", r
    return d


async def _fetch_while(d, url: str, act) -> dict:
    """Fetch `url`; once the daemon is extracting it (and a little later: inside the parser), run `act`
    beside the request until the answer is there."""
    progress: list = []
    answer: dict = {}

    async def fetch() -> None:
        answer.update(await d.request({"id": "long", "op": "fetch", "url": url}, progress))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(fetch)
        with trio.fail_after(30):
            while not any(p["stage"] == "extract" for p in progress):
                await trio.sleep(0.01)
        await trio.sleep(0.3)
        nursery.start_soon(act)
        with trio.fail_after(60):
            while not answer:
                await trio.sleep(0.02)
        nursery.cancel_scope.cancel()
    return answer


async def test_a_parser_crash_costs_its_page_a_retry_not_the_daemon(start_daemon, site, caplog):
    site.html("/long", LONG_PAGE)
    d = await _warm(await start_daemon(), site)
    killed: list[int] = []

    async def crash_the_parsers() -> None:
        killed.extend(parser_workers(os.getpid()))
        _kill(killed)

    r = await _fetch_while(d, site.url("/long"), crash_the_parsers)
    assert killed, "the daemon extracts in worker processes"
    assert r["type"] == "result" and "Paragraph 500 tells of the river" in r["content"], r
    assert r["total_chars"] > 1_800_000  # the whole page, read in the fresh worker
    assert "a worker process died running read_server_html (killed by SIGSEGV), attempt 1 of 2" in caplog.text
    with trio.fail_after(5):
        while not all(reaped(pid) for pid in killed):
            await trio.sleep(0.05)
    neighbour = await d.fetch(site.url("/article"))
    assert neighbour["type"] == "result" and ARTICLE_TEXT[0] in neighbour["content"]


async def test_a_page_the_parser_keeps_crashing_on_is_a_clear_error(start_daemon, site):
    site.html("/long", LONG_PAGE)
    d = await _warm(await start_daemon(), site)

    async def keep_crashing() -> None:
        # A worker past a second of CPU is inside the parse (starting one takes ~0.4 s): crash it there, as
        # a page that always crashes the parser would, each time it is tried.
        while True:
            _kill([pid for pid in parser_workers(os.getpid()) if cpu_seconds(pid) > 1.0])
            await trio.sleep(0.02)

    r = await _fetch_while(d, site.url("/long"), keep_crashing)
    assert r["type"] == "error" and r["code"] == "extraction_failed", r
    assert r["message"].startswith("the parser crashed on this document twice (killed by SIGSEGV); the daemon "
                                   "is fine and serves other requests"), r
    after = await d.fetch(site.url("/article"))
    assert after["type"] == "result" and ARTICLE_TEXT[0] in after["content"]


async def test_a_cancel_stops_the_parser_at_once(daemon, site):
    site.html("/long", LONG_PAGE)
    await _warm(daemon, site)
    c = await daemon.client()
    progress: list = []
    await c.send({"id": "long", "op": "fetch", "url": site.url("/long")})
    with trio.fail_after(30):
        while not any(p["stage"] == "extract" for p in progress):
            progress.append(await c.receive())
    await trio.sleep(0.3)  # inside the parser
    working = parser_workers(os.getpid())
    await c.send({"id": "c", "op": "cancel", "target": "long"})
    with trio.fail_after(1.0):  # the worker is killed, not left to finish its seconds of parsing
        while all(not reaped(pid) for pid in working):
            await trio.sleep(0.02)
    await c.aclose()
    r = await daemon.fetch(site.url("/article"))
    assert r["type"] == "result" and ARTICLE_TEXT[0] in r["content"]


@pytest.mark.chromium
async def test_the_parser_workers_end_with_the_daemon(short_tmp):
    d = Daemon(make_config())
    sock = bind_socket(short_tmp / "wf.sock")
    async with trio.open_nursery() as nursery:
        await nursery.start(d.run, sock)
        with trio.fail_after(30):
            while len(parser_workers(os.getpid())) < 2:  # warmed at start
                await trio.sleep(0.05)
        workers = parser_workers(os.getpid())
        nursery.cancel_scope.cancel()
    with trio.fail_after(10):
        while not all(reaped(pid) for pid in workers):
            await trio.sleep(0.05)
