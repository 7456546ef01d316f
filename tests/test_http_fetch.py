"""The http transport (webfetch/fetch/over_http.py): the main document by libcurl with Chrome's fingerprint, in
the daemon's process, through the address-policy proxy. What the server sees (Chrome's own headers, one
connection for two pages, one GET for a page Chrome then renders), the policy per redirect hop, the size cap,
and a request's deadline ending the call without leaving its thread behind.

HTTP/2 is tested on tests/support/tls_recorder.py's TLS server (the fingerprint test's), with the client given
its test CA, below the daemon (the daemon's client trusts only the public CAs). Plain http is HTTP/1.1 for
libcurl as for Chrome (no h2c upgrade: test_the_server_sees_chromes_own_navigation_headers would see it)."""

from __future__ import annotations

import http.server
import sys
import threading

import pytest
import trio

from webfetch.config import BrowserConfig, FetchConfig
from webfetch.fetch.load import HtmlBody, Load
from webfetch.fetch.over_http import HttpFetcher, Identity, _Pool
from webfetch.urls import AddressPolicy

from .support.daemon import Harness, make_config
from .support.site import ARTICLE_TEXT, JS_PAGE, JS_STORY, QuietHTTPServer, large_page, simple_page
from .support.tls_recorder import PAGE, FingerprintRecorder
from .test_proxy import start_proxy
from .test_reload import reload_with, start_with_file

# Chrome's request headers for the same navigation differ only in what its own state adds: none of these
# for a fresh tab's first document (its context was never used).
CONNECTION_ONLY = {"host"}


def header_lines(content: str) -> dict[str, str]:
    return {k: v.strip() for k, _, v in (line.partition(":") for line in content.splitlines() if line)}


async def test_the_server_sees_chromes_own_navigation_headers(start_daemon, nursery, short_tmp, site):
    over_http = await start_daemon(make_config(transport="http"))
    ours = await over_http.fetch(site.url("/echo-headers"))
    assert ours["type"] == "result", ours
    assert over_http.daemon.pipeline.renders == 0 and over_http.daemon.pipeline.http.requests == 1
    major = (await over_http.daemon.chrome.wait_browser()).version.split("/")[1].split(".")[0]
    sent = header_lines(ours["content"])
    assert f'"Chromium";v="{major}"' in sent["sec-ch-ua"]
    assert f"HeadlessChrome/{major}.0.0.0" in sent["user-agent"]
    assert "upgrade" not in sent and "http2-settings" not in sent  # HTTP/1.1 in the clear, as Chrome
    via_chrome = await Harness.start(nursery, short_tmp / "chrome.sock", make_config(transport="chrome"))
    chromes = await via_chrome.fetch(site.url("/echo-headers"), fresh=True)  # not the first one's, on disk
    assert via_chrome.daemon.pipeline.renders == 1
    expected = {k: v for k, v in header_lines(chromes["content"]).items() if k not in CONNECTION_ONLY}
    assert {k: v for k, v in sent.items() if k not in CONNECTION_ONLY} == expected


class KeepAlive(http.server.BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive, as nearly every server speaks; each instance is one connection."""

    protocol_version = "HTTP/1.1"
    connections: list[str] = []
    requests: list[str] = []

    def setup(self) -> None:
        super().setup()
        self.connections.append(self.client_address[1])

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.requests.append(self.path)
        body = large_page(30).replace("A very large page", f"Page {self.path}").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def keep_alive():
    KeepAlive.connections, KeepAlive.requests = [], []
    server = QuietHTTPServer(("127.0.0.1", 0), KeepAlive)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
async def daemon(start_daemon):
    """This file's subject is the http transport, whatever the suite's."""
    return await start_daemon(make_config(transport="http"))


async def test_two_pages_of_a_host_share_one_connection(daemon, keep_alive):
    for path in ("/one", "/two"):
        r = await daemon.fetch(f"{keep_alive}{path}")
        assert r["type"] == "result" and f"Page {path}" in (r["title"] or ""), r
    assert KeepAlive.requests == ["/one", "/two"]
    assert len(KeepAlive.connections) == 1, KeepAlive.connections
    assert daemon.daemon.pipeline.renders == 0


async def test_a_reload_that_changes_the_address_policy_closes_the_pooled_connections(nursery, short_tmp,
                                                                                      keep_alive):
    base = '[subagent]\ncommand = "/nonexistent/pi-for-tests"\n[fetch]\nallow_private = true\ntransport = "http"\n'
    d, cfg = await start_with_file(nursery, short_tmp, base)
    assert (await d.fetch(f"{keep_alive}/one"))["type"] == "result"
    assert (await reload_with(d, cfg, base + "timeout_s = 40\n"))["applied"] == ["fetch.timeout_s"]
    assert (await d.fetch(f"{keep_alive}/two"))["type"] == "result"
    assert len(KeepAlive.connections) == 1  # the policy stayed: the connection too
    assert (await reload_with(d, cfg, base + 'allow_hosts = ["intranet.example"]\n'))["type"] == "result"
    assert (await d.fetch(f"{keep_alive}/three"))["type"] == "result"
    assert KeepAlive.requests == ["/one", "/two", "/three"] and len(KeepAlive.connections) == 2


def test_a_session_in_use_when_the_pool_closes_is_not_pooled_again():
    pool = _Pool(True)
    epoch = pool.epoch
    in_use = pool.take("example.com")  # an exchange under way while a reload changes the policy
    pool.close()
    pool.give_back("example.com", in_use, epoch)
    fresh = pool.take("example.com")
    assert fresh is not in_use
    pool.give_back("example.com", fresh, pool.epoch)
    assert pool.take("example.com") is fresh  # one taken after the close is pooled as ever
    pool.close()


async def test_a_page_that_needs_rendering_is_requested_once(daemon, site):
    r = await daemon.fetch(site.url("/js"))
    assert r["type"] == "result" and "only exists after the page's JavaScript ran" in r["content"], r
    assert site.hits["/js"] == 1 and site.hits["/api/story"] == 1  # Chrome rendered our bytes
    assert daemon.daemon.pipeline.renders == 1 and daemon.daemon.pipeline.http.requests == 1


async def test_a_redirect_chain_stops_at_a_hop_to_a_blocked_address(start_daemon, site):
    site.route("/chain", lambda h: h.redirect(302, "/chain2"))
    site.route("/chain2", lambda h: h.redirect(301, "http://10.11.12.13/inside"))
    d = await start_daemon(make_config(fetch=FetchConfig(allow_hosts=["127.0.0.1"]), transport="http"))
    r = await d.fetch(site.url("/chain"))
    assert r["type"] == "error" and r["code"] == "blocked_url", r
    assert "10.11.12.13" in r["message"]
    assert site.hits["/chain"] == 1 and site.hits["/chain2"] == 1
    assert d.daemon.pipeline.renders == 0


async def test_same_host_hops_are_followed_and_a_cross_host_one_is_reported(daemon, site):
    site.route("/hop", lambda h: h.redirect(302, "/article"))
    site.route("/away", lambda h: h.redirect(302, "/cross-http"))
    followed = await daemon.fetch(site.url("/hop"))
    assert followed["type"] == "result" and followed["final_url"] == site.url("/article"), followed
    reported = await daemon.fetch(site.url("/away"))
    assert reported["kind"] == "redirect" and "localhost" in reported["redirect_url"], reported
    assert site.hits.get("/elsewhere") is None


async def test_the_size_cap_cuts_the_body(start_daemon, site):
    site.html("/big", large_page(400))
    d = await start_daemon(make_config(fetch=FetchConfig(allow_private=True, max_bytes=20_000), transport="http"))
    r = await d.fetch(site.url("/big"))
    assert r["type"] == "result" and r["truncated"] is True, r
    assert any("larger than 20000 bytes" in n for n in r["notes"]), r["notes"]
    assert "Paragraph 0:" in r["content"] and "Paragraph 399:" not in r["content"]


async def test_one_fetchs_cookies_never_reach_the_next(daemon, site):
    first = await daemon.fetch(site.url("/set-cookie"))
    assert first["type"] == "result", first
    seen = await daemon.fetch(site.url("/echo-headers"))
    assert seen["type"] == "result" and "s3cr3t" not in seen["content"] and "cookie:" not in seen["content"]
    assert daemon.daemon.pipeline.http.requests == 2


@pytest.mark.parametrize("sections, why", [
    ({"transport": "chrome"}, 'fetch.transport is "chrome"'),
    ({"fetch": FetchConfig(allow_private=True, render="always")}, 'fetch.render is "always"'),
    ({"browser": BrowserConfig(args=["--proxy-server=direct://"])},
     "the address-policy proxy is off (browser.args gives Chrome a proxy)"),
])
async def test_the_notes_say_why_chrome_loaded_the_page(start_daemon, site, sections, why):
    d = await start_daemon(make_config(**{"transport": "http", **sections}))
    r = await d.fetch(site.url("/article"))
    assert r["type"] == "result" and d.daemon.pipeline.renders == 1, r
    assert f"loaded in Chrome: {why}" in r["notes"], r["notes"]


async def test_the_notes_say_why_a_page_was_rendered_and_an_article_has_none(daemon, site):
    rendered = await daemon.fetch(site.url("/js"))
    assert rendered["type"] == "result" and daemon.daemon.pipeline.renders == 1, rendered
    assert [n for n in rendered["notes"] if "Chrome" in n] == [
        "rendered in Chrome: the page's mount point is empty until its scripts run (\"Loading…\")"], rendered["notes"]
    article = await daemon.fetch(site.url("/article"))
    assert article["notes"] == [] and daemon.daemon.pipeline.renders == 1, article


async def test_a_static_page_is_read_while_chrome_cannot_start(start_daemon, site, tmp_path):
    # a "Chromium" that says its version and never starts: the page needs no Chrome, and its headers name
    # the installed version, asked of the executable
    exe = tmp_path / "chromium"
    exe.write_text('#!/bin/sh\nif [ "$1" = --version ]; then echo "Chromium 149.0.7000.1 for a test"; exit 0; fi\n'
                   'echo "chromium: error while loading shared libraries: libnss3.so" >&2; exit 127\n')
    exe.chmod(0o755)
    d = await start_daemon(make_config(transport="http", browser=BrowserConfig(executable=str(exe))))
    r = await d.fetch(site.url("/echo-headers"))
    assert r["type"] == "result", r
    sent = header_lines(r["content"])
    assert "HeadlessChrome/149.0.0.0" in sent["user-agent"] and '"Chromium";v="149"' in sent["sec-ch-ua"], sent
    assert d.daemon.chrome.version is None and d.daemon.pipeline.renders == 0


def until_cookie(name: str, page: str):
    """A route that answers `302 Set-Cookie: NAME=1` back to itself until the cookie comes back, then `page`."""
    def route(h):
        if f"{name}=1" in (h.headers.get("Cookie") or ""):
            h.reply(200, "text/html", page)
        else:
            h.send_response(302)
            h.send_header("Set-Cookie", f"{name}=1; Path=/")
            h.send_header("Location", h.path)
            h.send_header("Content-Length", "0")
            h.end_headers()
    return route


async def test_a_cookie_set_on_a_redirect_hop_goes_back_on_the_next(daemon, site):
    site.route("/gate", until_cookie("seen", simple_page("Behind the gate", *ARTICLE_TEXT * 4)))
    r = await daemon.fetch(site.url("/gate"))
    assert r["type"] == "result" and "Behind the gate" in (r["title"] or ""), r
    assert site.hits["/gate"] == 2 and daemon.daemon.pipeline.renders == 0
    # the jar was this fetch's: the next one starts without the cookie
    again = await daemon.fetch(site.url("/gate"), fresh=True)
    assert again["type"] == "result" and site.hits["/gate"] == 4, again


async def test_chrome_renders_with_every_cookie_the_hops_set(daemon, site):
    # the cookie comes with the first hop only; the page's script shows what document.cookie holds
    shows_cookies = JS_PAGE.replace('fetch("/api/story")', 'fetch("/api/story?" + document.cookie)')
    site.route("/gated-js", until_cookie("hop", shows_cookies))
    site.route("/api/story", lambda h: h.reply(200, "application/json", JS_STORY.replace(
        "Rendered by script", f"Cookies {h.path.partition('?')[2] or 'none'}")))
    r = await daemon.fetch(site.url("/gated-js"))
    assert r["type"] == "result" and r["title"] == "Cookies hop=1", r
    assert site.hits["/gated-js"] == 2 and daemon.daemon.pipeline.renders == 1


def exchanges_running() -> int:
    """Threads inside over_http._get right now."""
    return sum(1 for frame in sys._current_frames().values()
               if any(f.f_code.co_name == "_get" and f.f_code.co_filename.endswith("fetch/over_http.py")
                      for f in _stack(frame)))


def _stack(frame):
    while frame is not None:
        yield frame
        frame = frame.f_back


async def test_the_deadline_ends_a_hung_exchange_and_its_thread(daemon, site):
    r = await daemon.fetch(site.url("/hang"), timeout_s=1)
    assert r["type"] == "error" and r["code"] == "timeout", r
    with trio.fail_after(15):  # libcurl's own timeout (the request's time and a second) ends the thread
        while exchanges_running():
            await trio.sleep(0.1)
    again = await daemon.fetch(site.url("/article"))
    assert again["type"] == "result" and ARTICLE_TEXT[0] in again["content"]


async def test_a_cancelled_fetch_closes_its_connection_and_its_thread_ends_at_once(daemon, site):
    # libcurl cannot be interrupted, and its own timeout is a minute away here: the policy proxy closes the
    # exchange's connection under it (the session's label), so the thread ends within seconds.
    c = await daemon.client()
    await c.send({"id": "hung", "op": "fetch", "url": site.url("/hang"), "timeout_s": 60})
    with trio.fail_after(10):
        while not exchanges_running():
            await trio.sleep(0.02)
    await c.send({"id": "c", "op": "cancel", "target": "hung"})
    with trio.fail_after(10):
        assert (await c.terminal("hung"))["code"] == "cancelled"
    await c.aclose()
    with trio.fail_after(10):
        while exchanges_running():
            await trio.sleep(0.05)
    assert daemon.daemon.pipeline.http.proxy.open_tunnels == 0
    again = await daemon.fetch(site.url("/article"))
    assert again["type"] == "result" and ARTICLE_TEXT[0] in again["content"]


async def test_https_goes_through_the_policy_proxy_as_http2_with_chromes_headers(nursery):
    """TLS on loopback (tests/support/tls_recorder.py, whose test CA the client is given): the handshake
    agrees on h2, and the request's headers are the navigation's, in the order Identity sends them."""
    proxy = await start_proxy(nursery, allow_hosts=["127.0.0.1"])
    fetcher = HttpFetcher(proxy)
    with FingerprintRecorder() as rec:
        fetcher.pool.verify = str(rec.cert.ca_file)
        url = f"https://127.0.0.1:{rec.port}/h2"
        with trio.fail_after(30):
            got = await fetcher.load(Load(url, AddressPolicy.from_config(False, ["127.0.0.1"]), 1_000_000,
                                          lambda *a: None), Identity(156))
        connection = rec.requests("/h2")[0]
    fetcher.close()
    assert isinstance(got, HtmlBody) and got.status == 200 and got.body == PAGE  # a short page: Chrome's
    assert connection.alpn == "h2" and connection.h2 is not None
    assert connection.h2.pseudo_headers == [":method", ":authority", ":scheme", ":path"]  # Chrome's order
    # Chrome's HTTP/2 order for a navigation (libcurl's impersonation orders what Identity sends); names,
    # order and values against the running Chromium's: test_fingerprint.py's @chromium test
    assert [name for name, _ in connection.h2.headers] == [
        "sec-ch-ua", "sec-ch-ua-mobile", "sec-ch-ua-platform", "upgrade-insecure-requests", "user-agent",
        "accept", "sec-fetch-site", "sec-fetch-mode", "sec-fetch-user", "sec-fetch-dest", "accept-encoding",
        "accept-language", "priority"]
