"""Layer 1: the render state machine (fetch/in_chrome.py) against a scripted browser, on the mock clock.

Each test is one path a page load can take: a redirect hop, a cross-host 302, a meta refresh, a
renderer crash, a DOMContentLoaded that never fires, the server's HTML holding the content, a text body
and a download started by the page."""

from __future__ import annotations

import ipaddress

import pytest
import trio

from webfetch.dns import IPAddress
from webfetch.errors import BrowserCrashed
from webfetch.fetch.in_chrome import Rendering, load
from webfetch.fetch.load import Load, Redirect, RenderedDom, ServerHtml, ServerRead, TextBody
from webfetch.parse.extractor import Extracted
from webfetch.urls import AddressPolicy

from .support.scripted_browser import Page, ScriptedTab

BASE = "https://site.test"


async def public_address(host: str) -> list[IPAddress]:
    return [ipaddress.ip_address("93.184.216.34")]  # a stub: no thread, no DNS, nothing connected to


POLICY = AddressPolicy(resolver=public_address)
SETTLE_S = 2.0


async def run(tab: ScriptedTab, url: str, *, holds_content: bool = False, progress: list[str] | None = None):
    async def read_server_html(body: bytes, charset: str | None, page_url: str) -> ServerRead:
        return ServerRead(Extracted("server text", "trafilatura", None), holds_content)

    messages = progress if progress is not None else []
    with trio.fail_after(60):
        return await load(tab, Load(url, POLICY, 1_000_000, lambda _s, m: messages.append(m)),
                          Rendering(SETTLE_S, [], read_server_html))


def redirect(to: str, status: int = 302) -> Page:
    return Page(status=status, headers={"Location": to}, body=b"")


async def test_a_same_host_redirect_is_followed_to_the_rendered_page(autojump_clock):
    tab = ScriptedTab({f"{BASE}/old": redirect("/new"), f"{BASE}/new": Page(title="New")})
    progress: list[str] = []
    outcome = await run(tab, f"{BASE}/old", progress=progress)
    assert isinstance(outcome, RenderedDom)
    assert outcome.response.final_url == f"{BASE}/new" and outcome.response.status == 200
    assert outcome.title == "New" and outcome.server is not None
    assert f"following redirect to {BASE}/new" in progress
    assert tab.navigated == [f"{BASE}/new"] and not tab.reuse_allowed


async def test_a_cross_host_302_is_a_redirect_outcome_and_the_tab_ran_no_page(autojump_clock):
    tab = ScriptedTab({f"{BASE}/go": redirect("https://elsewhere.test/x", 301)})
    outcome = await run(tab, f"{BASE}/go")
    assert isinstance(outcome, Redirect)
    assert outcome.target == "https://elsewhere.test/x" and outcome.response.status == 301
    assert tab.navigated == [] and tab.reuse_allowed
    assert tab.failed == [(f"{BASE}/go", "Aborted")]


async def test_a_meta_refresh_is_followed_and_the_new_document_captured(autojump_clock):
    tab = ScriptedTab({f"{BASE}/a": Page(meta_refresh="0; url=/b", title="A"),
                       f"{BASE}/b": Page(title="B")})
    outcome = await run(tab, f"{BASE}/a")
    assert isinstance(outcome, RenderedDom) and outcome.title == "B"
    assert outcome.response.final_url == f"{BASE}/b"
    assert tab.navigated == [f"{BASE}/a", f"{BASE}/b"]


async def test_a_meta_refresh_to_another_host_ends_as_a_redirect(autojump_clock):
    tab = ScriptedTab({f"{BASE}/a": Page(meta_refresh="1;URL='https://other.test/'")})
    outcome = await run(tab, f"{BASE}/a")
    assert isinstance(outcome, Redirect) and outcome.target == "https://other.test/"
    assert not tab.reuse_allowed  # a document ran in it


async def test_a_renderer_crash_is_raised_as_browser_crashed(autojump_clock):
    tab = ScriptedTab({f"{BASE}/": Page(crashes_after_commit=True)})
    with pytest.raises(BrowserCrashed, match="renderer process crashed"):
        await run(tab, f"{BASE}/")


async def test_a_crash_under_a_call_that_never_returns_still_ends_the_render(autojump_clock):
    tab = ScriptedTab({f"{BASE}/": Page(crashes_while_settling=True)})
    start = trio.current_time()
    with pytest.raises(BrowserCrashed, match="renderer process crashed"):
        await run(tab, f"{BASE}/")
    assert trio.current_time() - start < 1  # at once, not at the request's deadline


async def test_a_dom_content_loaded_that_never_fires_is_waited_for_a_bounded_time(autojump_clock):
    tab = ScriptedTab({f"{BASE}/stuck": Page(fires_dom_content_loaded=False, fires_load=False)})
    start = trio.current_time()
    outcome = await run(tab, f"{BASE}/stuck")
    waited = trio.current_time() - start
    assert isinstance(outcome, RenderedDom)
    # settle_s from the commit for the whole document (DOMContentLoaded, load, settle), and no longer
    assert waited == pytest.approx(SETTLE_S, abs=0.01)
    assert ("Page.stopLoading", {}) in tab.calls
    assert any("stopped loading after waiting 2 s" in n for n in outcome.response.notes)


async def test_a_page_that_loads_is_captured_without_waiting(autojump_clock):
    tab = ScriptedTab({f"{BASE}/": Page()})
    start = trio.current_time()
    outcome = await run(tab, f"{BASE}/")
    assert isinstance(outcome, RenderedDom) and outcome.response.notes == ()
    assert trio.current_time() - start < 0.01


async def test_server_html_that_holds_the_content_ends_the_render_before_chrome_parses_it(autojump_clock):
    tab = ScriptedTab({f"{BASE}/article": Page()})
    outcome = await run(tab, f"{BASE}/article", holds_content=True)
    assert isinstance(outcome, ServerHtml) and outcome.extracted.markdown == "server text"
    assert tab.navigated == [] and tab.reuse_allowed
    assert not [c for c in tab.calls if c[0] == "Fetch.fulfillRequest"]


async def test_a_text_body_needs_no_browser(autojump_clock):
    tab = ScriptedTab({f"{BASE}/data.json": Page(headers={"Content-Type": "application/json"}, body=b'{"a": 1}')})
    outcome = await run(tab, f"{BASE}/data.json")
    assert isinstance(outcome, TextBody) and outcome.body == b'{"a": 1}'
    assert outcome.response.content_type == "application/json" and tab.reuse_allowed


async def test_a_download_started_by_the_page_is_refused_and_the_page_still_read(autojump_clock):
    zip_page = Page(headers={"Content-Type": "application/zip"}, body=b"PK")
    tab = ScriptedTab({f"{BASE}/page": Page(fires_load=False, title="Page"), f"{BASE}/file.zip": zip_page})

    async def start_download_once_committed() -> None:
        while not tab.navigated:  # noqa: ASYNC110 - the scripted browser has no event for this
            await trio.sleep(0.01)
        tab._pause(f"{BASE}/file.zip")  # the page's script navigates to a download
        await trio.sleep(0.5)
        tab.emit("Page.loadEventFired", timestamp=3)  # then the page finishes loading

    async with trio.open_nursery() as nursery:
        nursery.start_soon(start_download_once_committed)
        outcome = await run(tab, f"{BASE}/page")
    assert isinstance(outcome, RenderedDom) and outcome.title == "Page"
    assert (f"{BASE}/file.zip", "BlockedByClient") in tab.failed
    assert outcome.response.notes == (), "the page loaded: nothing was cut short"
