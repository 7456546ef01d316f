"""Faults in the browser: a renderer crash in one tab, the CDP websocket dropped with Chrome alive."""

import trio

from webfetch.cdp import CDPError
from webfetch.config import FetchConfig

from .conftest import make_config
from .site import ARTICLE_TEXT, simple_page

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


async def test_a_dropped_websocket_is_detected_and_the_browser_replaced(start_daemon, site):
    d = await start_daemon()
    browser = await d.daemon.chrome.wait_browser()
    old_pid = browser.pid
    await browser.conn._ws._stream.aclose()  # the transport goes; Chrome itself is fine
    with trio.fail_after(30):
        r = await d.fetch(site.url("/article"))
    assert r["type"] == "result" and ARTICLE_TEXT[0] in r["content"]
    new = await d.daemon.chrome.wait_browser()
    assert new is not browser and new.pid != old_pid
    status = await d.request({"id": "s", "op": "status"})
    assert status["browser"]["state"] == "ready" and status["problems"] == []
    from .helpers import pid_alive
    with trio.fail_after(10):
        while pid_alive(old_pid):  # the orphaned browser was closed, not left running
            await trio.sleep(0.05)
