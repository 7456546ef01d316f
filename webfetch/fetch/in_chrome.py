"""Loading one URL in one tab: redirects checked hop by hop, the main response inspected before Chrome
renders it, unneeded resources refused, and the DOM taken once the page's JavaScript has settled.

The Chrome transport: `load(tab, Load, Rendering)`, whose outcome (fetch/load.py) is any but HtmlBody
(a `Loaded`): the server's HTML is read here, by the pipeline's `read_server_html`, while Chrome's request for it
is paused. Failures are raised as WebfetchError (or BrowserCrashed)."""

from __future__ import annotations

import base64
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

import trio

from .. import page_scripts
from .._trio import single_error
from ..chrome.browser import CRASH_EVENTS, Tab, TabSetup
from ..chrome.cdp import CDPClosed, CDPError, Subscription
from ..errors import (
    BlockedUrl,
    BrowserCrashed,
    HttpError,
    NetworkError,
    NoContent,
    UnsupportedContentType,
    WebfetchError,
)
from ..mime import NO_CONTENT, UNTYPED, charset, classify, first_lines, media_type
from ..parse.extractor import Extracted
from ..parse.flags import SHELL_VISIBLE_MAX_CHARS, explain_error_page, still_a_shell
from ..parse.pdf import is_pdf
from ..urls import GATE_FETCH_PATTERN, HostGate, admit_host, parse_url, same_host
from .load import (
    ERROR_BODY_BYTES,
    MAIN_ACCEPT,
    MAX_NAVIGATIONS,
    Load,
    Loaded,
    MainResponse,
    NotModified,
    PdfBody,
    Prefetched,
    ReadServerHtml,
    Redirect,
    RenderedDom,
    ServerHtml,
    TextBody,
)

log = logging.getLogger("webfetch.render")

SETTLE_QUIET_MS = 50          # no DOM change for this long (and nothing pending) = settled
# ... or this long with only short timers pending: a timer that has not changed the DOM for half a
# second is polling or animating (analytics, carousels, countdowns), not about to show the content;
# waiting it out cost such pages the whole settle_s (2 s) in bin/bench's rendered row.
SETTLE_TIMERS_QUIET_MS = 500
SETTLE_MIN_S = 0.1           # the quiet check a document gets even when loading used its whole budget
# A page still a loading shell when the settle rule stops (flags.still_a_shell) is watched this much longer
# for its content, and never past half the time its request has left: a script that fetches the article
# after load takes a second or two on a slow site, and a shell that stays one must still come back in time.
SHELL_WATCH_S = 5.0
META_REFRESH_MAX_S = 10       # a meta refresh sooner than this is a redirect; later ones are the page's own business
IO_CHUNK = 1 << 20
DOCUMENT_PHASES = ("Page.frameNavigated", "Page.domContentEventFired", "Page.loadEventFired",
                   "Page.frameStoppedLoading")


def _is_page_commit(frame: dict[str, Any], target_id: str) -> bool:
    """A document of the page committed in the tab's main frame. Chrome's own error page (chrome-error://,
    shown after a request we failed) and about:blank are not the page: such a commit can also arrive late,
    from the tab's previous fetch, and taken for this page's it made an image URL a "download started by
    the page" and Chrome's error page ("ERR_BLOCKED_BY_CLIENT") the result."""
    return frame.get("id") == target_id and str(frame.get("url", "")).startswith(("http://", "https://"))


def main_request_headers(headers: dict[str, str], recycled: bool,
                         conditional: list[dict[str, str]] | None = None) -> list[dict[str, str]]:
    """The main document's request headers as sent: Accept asks for markdown too, below HTML, so a site that
    serves markdown to agents can answer with it and one that ignores the header answers as to a browser.
    A recycled tab's context may hold an earlier response in its HTTP cache: it revalidates. `conditional`
    (If-None-Match, If-Modified-Since: a page kept in webfetch's cache, past its ttl) replace any the
    browser set, so a 304 answers for the page webfetch kept."""
    dropped: tuple[str, ...] = ("accept", "cache-control", "pragma") if recycled else ("accept",)
    if conditional:
        dropped += ("if-none-match", "if-modified-since")
    sent = [{"name": k, "value": v} for k, v in headers.items() if k.lower() not in dropped]
    sent.append({"name": "Accept", "value": MAIN_ACCEPT})
    if recycled:
        sent += [{"name": "Cache-Control", "value": "no-cache"}, {"name": "Pragma", "value": "no-cache"}]
    return sent + (conditional or [])


def _header(headers: list[dict[str, str]] | None, name: str) -> str | None:
    for h in headers or ():
        if h.get("name", "").lower() == name:
            return h.get("value")
    return None


# --- the tab every fetch renders in -------------------------------------------------------------------

# The scripts it runs in pages (webfetch/js/): settle.js in every document before the page's own scripts,
# so that settled.js can tell a settled page from one whose JavaScript is still working without a fixed
# sleep on every fetch; capture.js takes the page once it settled.
SETTLE_SCRIPT = page_scripts.load("settle").call()
SETTLED = page_scripts.load("settled")
# capture.js marks what the page's own styles hide (for webfetch/parse/hidden.py) looking at this many elements
# at most: a page's elements past it go unmarked, so that a page of a million elements costs a bounded walk.
HIDDEN_MARK_MAX_ELEMENTS = 50_000
CAPTURE_SCRIPT = page_scripts.load("capture").call(SHELL_VISIBLE_MAX_CHARS, HIDDEN_MARK_MAX_ELEMENTS)

# Every request the page makes is paused once, at the request stage, for the host gate (urls.py); the main
# document also at the response stage, to read it before Chrome renders it. A paused request costs one CDP
# round trip, and only rendered pages make subresource requests at all (server HTML first).
FETCH_TAB = TabSetup(
    scripts=(SETTLE_SCRIPT,),
    fetch_patterns=(GATE_FETCH_PATTERN,
                    {"urlPattern": "*", "resourceType": "Document", "requestStage": "Response"}))


# --- one render -----------------------------------------------------------------------------------------


class _Document:
    """One main-frame document of a fetch, from its request to its load event, its phases as Events.

    A newer navigation (or the end of the render) abandons it: every phase event is set, so whoever waits
    on one wakes up, sees `gone` set and follows the render's current document instead."""

    def __init__(self) -> None:
        self.committed = trio.Event()
        self.dom_ready = trio.Event()
        self.loaded = trio.Event()
        self.gone = trio.Event()
        self.seen: set[str] = set()  # the phases Chrome really reported, for `restored`

    def reached(self, phase: str) -> None:
        self.seen.add(phase)
        {"committed": self.committed, "dom_ready": self.dom_ready, "loaded": self.loaded}[phase].set()

    def abandon(self) -> None:
        for event in (self.committed, self.dom_ready, self.loaded, self.gone):
            event.set()

    def restored(self) -> _Document:
        """The same document, current again (a navigation that replaced it turned out to be a download)."""
        doc = _Document()
        for phase in self.seen:
            doc.reached(phase)
        return doc


@dataclass
class _Facts:
    """The main response's facts as the render learns them."""

    url: str
    final_url: str
    status: int | None = None
    content_type: str | None = None
    charset: str | None = None
    truncated: bool = False
    notes: list[str] = field(default_factory=list)
    etag: str | None = None
    last_modified: str | None = None

    def response(self) -> MainResponse:
        return MainResponse(self.url, self.final_url, self.status, self.content_type, self.charset,
                            self.truncated, tuple(self.notes), self.etag, self.last_modified)


@dataclass(frozen=True)
class Rendering:
    """What the Chrome transport takes beside the Load: how long a document may take to settle, the resource
    types refused, `read_server_html` to read the server's HTML before Chrome renders it when
    `server_decides` (its reading may end the render: ServerHtml), else beside the rendering, and
    `prefetched`: the main document as fetch/over_http.py read it, which Chrome renders without requesting
    it again."""

    settle_s: float
    block_types: list[str]
    read_server_html: ReadServerHtml | None = None
    server_decides: bool = True
    prefetched: Prefetched | None = None
    gate: HostGate | None = None       # the rule for the page's requests; by default the load's address policy


# What the pump calls with an event's params
Handler = Callable[[dict[str, Any]], Awaitable[None]]


class _Render:
    def __init__(self, tab: Tab, load: Load, rendering: Rendering) -> None:
        self.tab = tab
        self.prefetched = rendering.prefetched
        self.check_host = load.check_host
        self.validators = load.validators
        self.revalidating = False                     # the main request in flight carries the validators
        self.url = url = load.url
        self.policy = load.policy
        self.settle_s = rendering.settle_s
        self.max_bytes = load.max_bytes
        self.block_types = set(rendering.block_types)
        self.progress = load.progress
        self.read_server_html = rendering.read_server_html
        self.server_decides = rendering.server_decides  # the server HTML's reading decides whether to render
        self.server_read_done: trio.Event | None = None  # set once a reading started aside has finished
        self._aside: trio.Nursery | None = None       # where work beside the render runs (run() sets it)
        self.facts = _Facts(url, url)
        self.navigations = 0
        self.doc = _Document()                        # the document the fetch is heading for
        self.committed_doc: _Document | None = None   # the last one Chrome committed
        self.server: Extracted | None = None
        self.server_body = b""
        self.outcome: Loaded | None = None
        self.failure: BaseException | None = None
        self.ended = trio.Event()                     # an outcome or a failure was decided in the pump
        self.main_request: str | None = None          # the paused main-document request being handled
        self.main_aborted = False                     # we ended the main document's request ourselves
        self.marks: dict[str, float] = {"start": time.monotonic()}
        self.settle_state: str | None = None
        self.gate = rendering.gate or HostGate(load.policy)   # the rule for the page's requests
        self.dead_ends: set[str] = set()              # URLs the page navigated to that brought no document

    def _end(self, outcome: Loaded | None = None, failure: BaseException | None = None) -> None:
        if not self.ended.is_set():
            self.outcome, self.failure = outcome, failure
            self.ended.set()
            self.doc.abandon()

    def _new_document(self) -> None:
        old, self.doc = self.doc, _Document()
        old.abandon()

    # --- the event pump ---------------------------------------------------------------------------

    async def pump(self, sub: Subscription, nursery: trio.Nursery) -> None:
        """Each event of the tab to its handler, in the order they come; the events no handler names are
        not the render's business."""
        handlers = self._handlers(nursery)
        while True:
            event = await sub.receive()
            handler = handlers.get(event.get("method", ""))
            if handler is not None:
                await handler(event.get("params", {}))

    def _handlers(self, nursery: trio.Nursery) -> dict[str, Handler]:
        """The pump's table: one handler an event method; were two to name one method, the earlier in this
        order wins: paused requests, document phases, dialogs, crashes."""
        table: dict[str, Handler] = {m: self._on_crash for m in CRASH_EVENTS}
        table["Page.javascriptDialogOpening"] = self._on_dialog
        table |= {m: functools.partial(self._on_document_phase, m) for m in DOCUMENT_PHASES}
        table["Fetch.requestPaused"] = functools.partial(self._on_paused, nursery)
        return table

    async def _on_paused(self, nursery: trio.Nursery, params: dict[str, Any]) -> None:
        if self._is_main(params):
            await self._paused_safely(params)  # main-document steps happen one after another
        else:
            nursery.start_soon(self._paused_safely, params)  # never hold up other events

    async def _on_document_phase(self, method: str, params: dict[str, Any]) -> None:
        if method == "Page.frameNavigated" and self.gate.in_persons_browser:
            frame = params.get("frame", {})
            url = str(frame.get("url", ""))
            if _is_page_commit(frame, self.tab.target_id) and url.startswith(("http://", "https://")):
                # judged again as it commits: Chrome's preloading (speculation rules) shows a same-site page
                # without the request _main_request judges, and such a page must not be read
                why = await self.gate.check(url, navigation=True)
                if why is not None:
                    self._end(failure=BlockedUrl(f"the page went to {url} without a request webfetch could check "
                                                 f"(Chrome preloaded it), and {why}; it is not read"))
                    return
        self._document_phase(method, params)

    async def _on_dialog(self, params: dict[str, Any]) -> None:
        await self._answer_dialog(params.get("type") == "beforeunload")

    async def _on_crash(self, params: dict[str, Any]) -> None:
        self._end(failure=BrowserCrashed("the page's renderer process crashed"))

    def _document_phase(self, method: str, params: dict[str, Any]) -> None:
        """A main-frame document's progress: its commit, DOMContentLoaded, load."""
        if method == "Page.frameNavigated":
            if _is_page_commit(params.get("frame", {}), self.tab.target_id):
                self.marks.setdefault("committed", time.monotonic())
                self.committed_doc = self.doc
                self.doc.reached("committed")
            return
        doc = self.committed_doc
        if doc is None:
            return
        # Page.frameStoppedLoading: the frame has nothing more to load. After a load event that says nothing
        # new; for a document whose load a navigation aborted (one we then refused) it is the only word.
        stopped = (method == "Page.frameStoppedLoading" and params.get("frameId") == self.tab.target_id
                   and doc is self.doc)
        if method == "Page.domContentEventFired":
            doc.reached("dom_ready")
        elif method == "Page.loadEventFired" or stopped:
            doc.reached("dom_ready")
            doc.reached("loaded")

    async def _answer_dialog(self, accept: bool) -> None:
        # Nobody reads the page's alerts; leaving one open would block its scripts for ever.
        try:
            await self.tab.call("Page.handleJavaScriptDialog", {"accept": accept})
        except CDPError:
            pass

    def _is_main(self, paused: dict[str, Any]) -> bool:
        """A paused request for the tab's own document (not a frame's, not a resource)."""
        return paused.get("resourceType") == "Document" and paused.get("frameId") == self.tab.target_id

    async def _paused_safely(self, params: dict[str, Any]) -> None:
        try:
            await self._paused(params)
        except CDPError as e:
            # the request may have been cancelled by the page meanwhile; that is not our failure
            log.debug("request handling: %s", e)
        except WebfetchError as e:
            self._end(failure=e)

    async def _fail(self, request_id: str, reason: str = "Aborted") -> None:
        if request_id == self.main_request:
            self.main_aborted = True  # before the call: Page.navigate may report the abort first
        await self.tab.call("Fetch.failRequest", {"requestId": request_id, "errorReason": reason})

    async def _continue(self, request_id: str) -> None:
        await self.tab.call("Fetch.continueRequest", {"requestId": request_id})

    async def _paused(self, p: dict[str, Any]) -> None:
        rid = p["requestId"]
        url = p["request"]["url"]
        response_stage = "responseStatusCode" in p or "responseErrorReason" in p
        if self.ended.is_set():
            await self._fail(rid)
        elif not self._is_main(p):
            await self._subresource(rid, url, p.get("resourceType"), response_stage)
        else:
            self.main_request = rid
            if not response_stage:
                await self._main_request(rid, url, p["request"].get("headers") or {})
            else:
                await self._main_response(rid, url, p)

    async def _subresource(self, rid: str, url: str, rtype: str | None, response_stage: bool) -> None:
        # Frames are separate documents that the main document's DOM does not contain, so the
        # extractor never sees them: loading them (ads, embeds, trackers) only costs time.
        if rtype in self.block_types or rtype == "Document" or response_stage:
            await self._fail(rid, "BlockedByClient")
        elif (why := await self.gate.check(url)) is not None:
            log.info("blocked a %s request of %s to %s: %s", rtype, self.url, url, why)
            await self._fail(rid, "BlockedByClient")
        else:
            await self._continue(rid)

    async def _main_request(self, rid: str, url: str, headers: dict[str, str]) -> None:
        self.marks.setdefault("req", time.monotonic())
        self.navigations += 1
        if self.navigations > 1:
            self._new_document()
        if self.navigations > MAX_NAVIGATIONS:
            await self._fail(rid)
            raise NetworkError(f"net::ERR_TOO_MANY_REDIRECTS: {self.url} redirects in a loop "
                               f"(more than {MAX_NAVIGATIONS} navigations)")
        if not url.startswith(("http://", "https://")):
            await self._fail(rid, "BlockedByClient")
            raise BlockedUrl(f"the page navigated to {url.split(':', 1)[0]}: URL, which webfetch does not follow")
        await admit_host(parse_url(url)[1], self.policy)
        if self.gate.in_persons_browser and (why := await self.gate.check(url, navigation=True)) is not None:
            await self._fail(rid, "BlockedByClient")   # its port, too, is held to user_browser.hosts
            raise BlockedUrl(why)
        if not same_host(self.url, url):
            await self._fail(rid)
            self._end(Redirect(self.facts.response(), url))
            return
        if self.check_host is not None:
            try:
                self.check_host(parse_url(url)[1])
            except WebfetchError:
                await self._fail(rid)
                raise
        if self.navigations == 1 and self.prefetched is not None:
            await self._fulfil_prefetched(rid, self.prefetched)
            return
        if self.navigations > 1:
            self.progress("render", f"following redirect to {url}")
        # The page kept in the cache is asked about on the request for its own URL (after the same hops).
        conditional = self.validators.headers() if self.validators and self.validators.url == url else []
        self.revalidating = bool(conditional)
        await self.tab.call("Fetch.continueRequest", {"requestId": rid, "headers": main_request_headers(
            headers, self.tab.uses > 1 or self.revalidating, conditional)})

    async def _fulfil_prefetched(self, rid: str, p: Prefetched) -> None:
        """Answer Chrome's request for the first document with the response fetch/over_http.py already read
        (its Set-Cookie headers too: the page's scripts see the cookies the server set, as they would).
        The body is decoded and maybe cut at the size cap: the transfer headers go."""
        d = p.document
        r = d.response
        f = self.facts
        f.final_url, f.status, f.content_type, f.charset = r.final_url, r.status, r.content_type, r.charset
        f.truncated, f.etag, f.last_modified = r.truncated, r.etag, r.last_modified
        self.server, self.server_body = p.server, d.body
        kept = [h for h in d.headers if h.get("name", "").lower() not in
                ("content-encoding", "content-length", "transfer-encoding")]
        self.progress("render", f"running the page's scripts ({r.final_url})")
        if d.cookies:
            try:
                await self.tab.context.set_cookies(list(d.cookies))
            except CDPError as e:  # one Chrome will not take: the page runs with the last response's cookies
                log.warning("Chrome refused the cookies the redirect hops of %s set (%s)", r.final_url, e.message)
        await self.tab.show()
        await self.tab.call("Fetch.fulfillRequest", {
            "requestId": rid, "responseCode": d.status, "responseHeaders": kept,
            "body": base64.b64encode(d.body).decode()})
        self.marks.setdefault("fulfilled", time.monotonic())

    async def _main_response(self, rid: str, url: str, p: dict[str, Any]) -> None:
        status = p.get("responseStatusCode")
        headers = p.get("responseHeaders") or []
        location = _header(headers, "location")
        ctype = _header(headers, "content-type")
        if self.committed_doc is not None and (status is None or status in NO_CONTENT):
            # A navigation after the page had committed (its script, or its meta refresh) that brings no
            # document: Chrome would commit its own error page, or (204, 205) none at all, and the render
            # would wait for a commit of the page that never comes. Stay on the page as it was.
            await self._stay_on_page(rid, url, self._failed_load(url, p.get("responseErrorReason"))
                                     if status is None else None)
        elif status is None:  # the first document's network failure; Page.navigate reports it by name
            await self._continue(rid)
        elif status == 304 and self.revalidating:
            await self._fail(rid)
            self.facts.final_url, self.facts.status = url, status
            self._end(NotModified(self.facts.response()))
        elif status in NO_CONTENT:  # the first document: Chrome would abort its navigation (ERR_ABORTED)
            await self._fail(rid)
            raise NoContent(url, status)
        elif 300 <= status < 400 and location:
            await self._redirect_hop(rid, status, urljoin(url, location))
        elif classify(ctype, url) == "other" and status < 400 and self.committed_doc is not None:
            await self._refuse_download(rid, url, ctype)
        else:
            await self._page_response(rid, url, status, headers, ctype)

    async def _page_response(self, rid: str, url: str, status: int, headers: list[dict[str, str]],
                             ctype: str | None) -> None:
        """The response that is the page (or its HTTP error)."""
        f = self.facts
        f.final_url, f.status, f.content_type, f.charset = url, status, media_type(ctype) or None, charset(ctype)
        f.etag, f.last_modified = _header(headers, "etag"), _header(headers, "last-modified")
        if status >= 400:
            body, _ = await self._read_body(rid, ERROR_BODY_BYTES)
            await self._fail(rid)
            error = HttpError(f"{url} answered HTTP {status}" + first_lines(body, ctype)
                              + explain_error_page(status, body, url), status=status)
            error.retry_after = _header(headers, "retry-after")  # a crawl waits it out (429, 503)
            raise error
        await self._document_body(rid, url, status, headers)

    async def _redirect_hop(self, rid: str, status: int, target: str) -> None:
        if target.startswith(("http://", "https://")):
            await admit_host(parse_url(target)[1], self.policy)
        if same_host(self.url, target):
            await self._continue(rid)
            return
        await self._fail(rid)
        self.facts.status = status
        self._end(Redirect(self.facts.response(), target))

    async def _refuse_download(self, rid: str, url: str, ctype: str | None) -> None:
        """The page we have started a download (or a navigation to something that is not text): refuse
        it, never to disk, and go on reading the page that started it."""
        log.info("refused a download or navigation of %s to %s (%s)", self.url, url, media_type(ctype))
        await self._fail(rid, "BlockedByClient")
        self._back_to_committed()

    async def _stay_on_page(self, rid: str, url: str, why: str | None) -> None:
        """A later navigation of the page that brings no document (`why` it failed; None for a 204 or
        205, which a browser answers by staying where it was): end it with ERR_ABORTED, which Chrome
        answers by keeping the page it shows, and go on reading that page."""
        log.info("the navigation of %s to %s brought no document (%s)", self.url, url, why or "no content")
        await self._fail(rid)
        self.dead_ends.add(url)
        if why is not None:
            self.facts.notes.append(f"the page navigated to {url}, which {why}; the content is the page as "
                                    f"it was before")
        self._back_to_committed()

    def _failed_load(self, url: str, reason: str | None) -> str:
        """How a navigation failed, in Chrome's words when the proxy knows them (the ErrorReason a paused
        request carries says "Failed" for most)."""
        failure = self.tab.connect_failure(url)
        if failure is not None:
            return f"failed to load ({failure.message})"
        return "failed to load" if reason in (None, "Failed") else f"failed to load ({reason})"

    def _back_to_committed(self) -> None:
        """The navigation under way was refused: the committed document is the current one again."""
        if self.committed_doc is not None and self.doc is not self.committed_doc:
            pending, self.doc = self.doc, self.committed_doc.restored()
            self.committed_doc = self.doc
            pending.abandon()

    async def _document_body(self, rid: str, url: str, status: int, headers: list[dict[str, str]]) -> None:
        kind = classify(self.facts.content_type, url)
        mime = self.facts.content_type or ""
        if kind == "other":
            await self._fail(rid, "BlockedByClient")
            raise UnsupportedContentType(
                f"{url} is {mime}, which webfetch cannot turn into text; it fetches HTML, XHTML, "
                f"plain text, markdown, JSON, XML and PDF", content_type=mime)
        self.marks.setdefault("resp", time.monotonic())
        body, self.facts.truncated = await self._read_body(rid, self.max_bytes)
        self.marks.setdefault("body", time.monotonic())
        if not body:
            await self._fail(rid)
            raise NoContent(url, status)
        if kind == "pdf" and mime in UNTYPED and not is_pdf(body):
            await self._fail(rid)
            raise UnsupportedContentType(f"{url} is {mime} and not a PDF, which webfetch cannot turn "
                                         f"into text", content_type=mime)
        if kind in ("text", "pdf"):
            await self._fail(rid)
            response = self.facts.response()
            self._end(TextBody(response, body) if kind == "text" else PdfBody(response, body))
            return
        if await self._server_html_holds_content(rid, body, url):
            return
        self.server_body = body
        self.progress("render", f"running the page's scripts ({url})")
        # Hand Chrome exactly what we read (cut at the size cap), decoded: drop the transfer headers.
        kept = [h for h in headers if h.get("name", "").lower() not in
                ("content-encoding", "content-length", "transfer-encoding")]
        await self.tab.show()
        await self.tab.call("Fetch.fulfillRequest", {
            "requestId": rid, "responseCode": status, "responseHeaders": kept,
            "body": base64.b64encode(body).decode()})
        self.marks.setdefault("fulfilled", time.monotonic())

    async def _server_html_holds_content(self, rid: str, body: bytes, url: str) -> bool:
        """Read the server's HTML; True when that held the content, which ends the render (ServerHtml)
        before Chrome parses the page. When it does not decide (render = always), it is read beside the
        rendering instead, for the comparison, not before."""
        if self.read_server_html is None:
            return False
        if not self.server_decides:
            if self._aside is not None:
                self.server_read_done = trio.Event()
                self._aside.start_soon(self._read_server_aside, self.read_server_html, self.server_read_done,
                                       body, url)
            return False
        read = await self.read_server_html(body, self.facts.charset, url)
        self.server = read.extracted
        if read.holds_content and read.extracted is not None:
            await self._fail(rid)
            self._end(ServerHtml(self.facts.response(), read.extracted, body))
            return True
        return False

    async def _read_server_aside(self, read_server_html: ReadServerHtml, done: trio.Event, body: bytes,
                                 url: str) -> None:
        try:
            self.server = (await read_server_html(body, self.facts.charset, url)).extracted
        finally:
            done.set()

    async def _read_body(self, rid: str, limit: int) -> tuple[bytes, bool]:
        """Read the paused response's body as a stream, at most `limit` bytes; (bytes, was_cut)."""
        stream = (await self.tab.call("Fetch.takeResponseBodyAsStream", {"requestId": rid}))["stream"]
        chunks: list[bytes] = []
        size = 0
        truncated = False
        try:
            while True:
                part = await self.tab.call("IO.read", {"handle": stream, "size": IO_CHUNK})
                data = part.get("data", "")
                chunk = base64.b64decode(data) if part.get("base64Encoded") else data.encode()
                chunks.append(chunk)
                size += len(chunk)
                if size > limit:
                    truncated = True
                    break
                if part.get("eof"):
                    break
        finally:
            try:
                await self.tab.call("IO.close", {"handle": stream})
            except CDPError:
                pass
        body = b"".join(chunks)
        return body[:limit], truncated

    # --- the main flow ----------------------------------------------------------------------------

    async def navigate(self, url: str) -> None:
        try:
            reply = await self.tab.call("Page.navigate", {"url": url})
        except CDPError as e:
            self._end(failure=NetworkError(f"cannot load {url}: {e.message}"))
            return
        error = reply.get("errorText")
        # Our own failRequest of the main document shows up here too (ERR_ABORTED, ERR_BLOCKED_BY_CLIENT).
        if error and not self.main_aborted:
            failure = self.tab.connect_failure(url) if "SOCKS" in error else None
            if failure is not None and failure.blocked:
                # the name passed the check above, then answered with a blocked address
                self._end(failure=BlockedUrl(f"{failure.message} (it resolved to an allowed address a moment "
                                             f"before: the name changes its answer, as in DNS rebinding)"))
            else:
                self._end(failure=NetworkError(f"{failure.message if failure else error} while loading {url}"))

    async def run(self) -> Loaded:
        try:
            with self.tab.subscribe() as sub, single_error():
                async with trio.open_nursery() as nursery:
                    self._aside = nursery
                    nursery.start_soon(self.pump, sub, nursery)
                    nursery.start_soon(self._stop_when_ended, nursery.cancel_scope)
                    self.progress("render", f"loading {self.url}")
                    nursery.start_soon(self.navigate, self.prefetched.document.response.final_url if self.prefetched
                                       else self.url)
                    await self._follow_documents(nursery)
                    nursery.cancel_scope.cancel()
        except CDPClosed as e:
            raise BrowserCrashed(str(e)) from None
        if self.main_aborted and self.committed_doc is None and self.ended.is_set():
            self.tab.allow_reuse()  # no document was ever committed: no page ran in this tab
        if self.failure is not None:
            raise self.failure
        assert self.outcome is not None
        return self.outcome

    async def _stop_when_ended(self, scope: trio.CancelScope) -> None:
        """An outcome or failure decided in the pump ends the render at once, even while a call into the
        page is waiting: a crashed renderer never answers the one in flight."""
        await self.ended.wait()
        scope.cancel()

    async def _follow_documents(self, nursery: trio.Nursery) -> None:
        """Until an outcome: wait for the current document to be committed, then read it; a document
        replaced meanwhile (redirect hop, meta refresh, script navigation) hands over to its successor."""
        while not self.ended.is_set():
            doc = self.doc
            await doc.committed.wait()
            if not doc.gone.is_set() and await self._read_document(doc, nursery):
                return

    async def _read_document(self, doc: _Document, nursery: trio.Nursery) -> bool:
        """DOMContentLoaded → load → settle → capture → meta refresh, for one committed document.
        False when it was replaced on the way (the caller follows the new one)."""
        # The document's whole budget from its commit is settle_s: a parser-blocking script that never
        # arrives (no DOMContentLoaded), resources that hold the load event back and scripts that never
        # settle all end there, with the document as it is then (what was parsed is worth reading).
        deadline = trio.current_time() + self.settle_s
        with trio.move_on_at(deadline):
            await doc.dom_ready.wait()
        if doc.gone.is_set():
            return False
        self.marks["dom"] = time.monotonic()
        with trio.move_on_at(deadline):
            await doc.loaded.wait()
        if doc.gone.is_set():
            return False
        if not doc.loaded.is_set():
            await self._stop_loading()
        self.marks["load"] = time.monotonic()
        self.settle_state = await self._settle(max(deadline - trio.current_time(), SETTLE_MIN_S))
        self.marks["settle"] = time.monotonic()
        if doc.gone.is_set() or self.settle_state is None:
            return False
        if self.settle_state != "settled":
            self.facts.notes.append(f"the page was still running scripts after {self.settle_s:g} s; "
                                    f"the content is what it showed then")
        captured = await self._content(doc)
        if captured is None:
            return False
        refresh = _meta_refresh_target(captured.get("refresh"), captured.get("url") or self.url)
        if refresh and refresh not in self.dead_ends:  # a refresh that led nowhere is not tried again
            nursery.start_soon(self.navigate, refresh)
            await doc.gone.wait()
            return False
        if str(captured.get("url", "")).startswith(("http://", "https://")):
            self.facts.final_url = captured["url"]
        if self.server_read_done is not None:
            await self.server_read_done.wait()
        self.outcome = RenderedDom(self.facts.response(), captured.get("html") or "", captured.get("title"),
                                   self.server, self.server_body)
        return True

    async def _stop_loading(self) -> None:
        try:
            await self.tab.call("Page.stopLoading")
        except CDPError:
            pass
        self.facts.notes.append(f"stopped loading after waiting {self.settle_s:g} s for slow resources; "
                                f"the content is what had arrived by then")

    async def _evaluate(self, expression: str, await_promise: bool = False) -> Any:
        """The expression's value in the page; None when the document went away meanwhile."""
        try:
            reply = await self.tab.call("Runtime.evaluate", {
                "expression": expression, "awaitPromise": await_promise, "returnByValue": True})
        except CDPError:
            return None  # "Execution context was destroyed": a navigation replaced the document
        if "exceptionDetails" in reply:
            return None
        return reply["result"].get("value")

    async def _settle(self, cap_s: float, changed_after: int = -1) -> str | None:
        """'settled', 'busy' or 'changing' (cap reached), 'unchanged' (no DOM change after the
        `changed_after`th mutation within the cap), or None when the document went away."""
        state = await self._evaluate(SETTLED.call(round(cap_s * 1000), SETTLE_QUIET_MS, SETTLE_TIMERS_QUIET_MS,
                                                  changed_after), await_promise=True)
        return state if isinstance(state, str) else None

    async def _content(self, doc: _Document) -> dict[str, Any] | None:
        """The settled document's capture (capture.js); None when it went away. A capture that is still a
        loading shell (flags.still_a_shell) is taken again each time the DOM changed and settled, until it
        is not or SHELL_WATCH_S ran out: content a script brings after load is worth a wait, and pages that
        settled with their content are not judged at all (their text passes SHELL_VISIBLE_MAX_CHARS)."""
        captured = await self._evaluate(CAPTURE_SCRIPT) or {}
        if doc.gone.is_set():
            return None
        if captured.get("mutations") is None or not self._shell(captured):
            return captured  # (a document without settle.js, Chrome's own, has nothing to wait on)
        now = trio.current_time()
        bound = now + min(SHELL_WATCH_S, (trio.current_effective_deadline() - now) / 2)
        while trio.current_time() < bound:
            state = await self._settle(bound - trio.current_time(), int(captured.get("mutations") or 0))
            if doc.gone.is_set() or state is None:
                return None
            if state == "unchanged":
                break
            captured = await self._evaluate(CAPTURE_SCRIPT) or {}
            if doc.gone.is_set():
                return None
            if not self._shell(captured):
                log.debug("%s: its content arrived after the settle rule stopped", self.url)
                self.marks["content"] = time.monotonic()
                return captured
        log.debug("%s: still a loading shell after watching it %.1f s", self.url, bound - now)
        self.marks["content"] = time.monotonic()
        return captured

    def _shell(self, captured: dict[str, Any]) -> bool:
        if int(captured.get("text") or 0) >= SHELL_VISIBLE_MAX_CHARS:
            return False
        return still_a_shell(html=str(captured.get("html") or ""), title=captured.get("title"),
                             url=str(captured.get("url") or self.url))


def _meta_refresh_target(content: str | None, base: str) -> str | None:
    if not content:
        return None
    delay, _, rest = content.partition(";")
    try:
        if float(delay.strip() or 0) > META_REFRESH_MAX_S:
            return None
    except ValueError:
        return None
    rest = rest.strip()
    if rest[:4].lower() == "url=":
        rest = rest[4:]
    rest = rest.strip().strip("'\"")
    if not rest:
        return None
    target = urljoin(base, rest)
    if not target.startswith(("http://", "https://")):
        return None
    # a refresh to the same document (or a fragment of it) is not a redirect
    return target if target.split("#", 1)[0] != base.split("#", 1)[0] else None


async def load(tab: Tab, load: Load, rendering: Rendering) -> Loaded:
    """Load `load.url` in `tab` (one prepared with FETCH_TAB) and return the outcome. Raises a WebfetchError
    or BrowserCrashed."""
    url = load.url
    r = _Render(tab, load, rendering)
    outcome = await r.run()
    if log.isEnabledFor(logging.DEBUG):
        m = r.marks
        steps = " ".join(f"{k}={(v - m['start']) * 1000:.0f}ms" for k, v in m.items() if k != "start")
        log.debug("rendered %s in %.0f ms: %s settle=%s", url, (time.monotonic() - m["start"]) * 1000, steps,
                  r.settle_state)
    return outcome
