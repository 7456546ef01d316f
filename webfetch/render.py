"""Loading one URL in one tab: redirects checked hop by hop, the main response inspected before Chrome
renders it, unneeded resources refused, and the DOM taken once the page's JavaScript has settled."""

from __future__ import annotations

import base64
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable
from urllib.parse import urljoin

import trio

from ._trio import single_error
from .cdp import CDPClosed, CDPError, Subscription
from .chrome import Tab
from .errors import (BlockedUrl, BrowserCrashed, HttpError, NetworkError, UnsupportedContentType,
                     WebfetchError)
from .flags import explain_error_page
from .pdf import is_pdf
from .urls import AddressPolicy, check_host, host_of, parse_url, same_host

log = logging.getLogger("webfetch.render")

MAX_NAVIGATIONS = 20          # main-frame documents per fetch: redirect hops, meta refresh, script navigation
ERROR_BODY_BYTES = 64 * 1024  # enough of a 4xx/5xx page to quote its first lines
SETTLE_QUIET_MS = 50          # no DOM change for this long (and nothing pending) = settled
DCL_GRACE_S = 5.0            # after the document arrived, how long a stalled parser may hold it back
META_REFRESH_MAX_S = 10       # a meta refresh sooner than this is a redirect; later ones are the page's own business
IO_CHUNK = 1 << 20

HTML_TYPES = ("text/html", "application/xhtml+xml")
PDF_TYPES = ("application/pdf", "application/x-pdf")
# Servers that do not know what they serve: a body of these types is read when the URL names a .pdf,
# and taken as one when it starts like a PDF.
UNTYPED = ("application/octet-stream", "binary/octet-stream", "application/download", "application/force-download",
           "application/x-download")
TEXT_TYPES = ("text/plain", "text/markdown", "text/x-markdown", "application/json", "text/json",
              "application/xml", "text/xml", "text/csv")

CAPTURE_JS = r"""
(() => {
  const m = document.querySelector('meta[http-equiv="refresh" i]');
  return {html: document.documentElement ? document.documentElement.outerHTML : "",
          title: document.title || null, url: location.href, refresh: m ? m.getAttribute("content") : null};
})()
"""

Progress = Callable[[str, str], None]
# Called with the main document's HTML as the server sent it, before Chrome renders it. True means the
# content is already there: the render stops and Chrome never parses the page or runs its scripts.
BodyCheck = Callable[[bytes, str | None, str], Awaitable[bool]]


@dataclass
class Rendered:
    url: str
    final_url: str
    status: int | None = None
    content_type: str | None = None
    charset: str | None = None
    html: str | None = None          # the rendered DOM, for HTML pages
    body: bytes | None = None        # the main document's bytes as the server sent them (after the size cap)
    title: str | None = None
    truncated: bool = False
    redirect_url: str | None = None
    raw: bool = False                # a text body (plain, markdown, JSON, XML) that needs no rendering
    pdf: bool = False                # a PDF body (also raw: read, never rendered)
    rendered: bool = False           # html is Chrome's DOM (False: the server's HTML sufficed)
    notes: list[str] = field(default_factory=list)


def classify(content_type: str | None, url: str = "") -> str:
    """'html', 'text', 'pdf' or 'other' for a Content-Type header value (and the URL, for untyped bodies)."""
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    if not mime or mime in HTML_TYPES:
        return "html"
    if mime in PDF_TYPES or (mime in UNTYPED and url.split("?", 1)[0].split("#", 1)[0].lower().endswith(".pdf")):
        return "pdf"
    if mime in TEXT_TYPES or mime.startswith("text/") or mime.endswith("+json") or mime.endswith("+xml"):
        return "text"
    return "other"


def _mime(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def _charset(content_type: str | None) -> str | None:
    for part in (content_type or "").split(";")[1:]:
        key, _, value = part.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            return value.strip().strip('"\'')
    return None


def _header(headers: list[dict[str, str]] | None, name: str) -> str | None:
    for h in headers or ():
        if h.get("name", "").lower() == name:
            return h.get("value")
    return None


class _Render:
    def __init__(self, tab: Tab, url: str, policy: AddressPolicy, settle_s: float, max_bytes: int,
                 block_types: list[str], progress: Progress, body_check: BodyCheck | None) -> None:
        self.body_check = body_check
        self.tab = tab
        self.url = url
        self.policy = policy
        self.settle_s = settle_s
        self.max_bytes = max_bytes
        self.block_types = set(block_types)
        self.progress = progress
        self.result = Rendered(url=url, final_url=url)
        self.navigations = 0
        # Generations tell the documents of one fetch apart (redirect hops, meta refresh, script
        # navigation): a DOMContentLoaded or load belongs to the document committed last.
        self.nav_generation = 0          # bumped by every main-frame document request
        self.committed_gen = 0
        self.dom_gen = 0
        self.load_gen = 0
        self._changed = trio.Event()     # pulsed on every change of the above
        self.finished = trio.Event()     # raw body, redirect or error decided in the pump
        self.main_request: str | None = None  # the paused main-document request being handled
        self.main_aborted = False        # we ended the main document's request ourselves
        self.failure: BaseException | None = None
        self.marks: dict[str, float] = {"start": time.monotonic()}
        self.settle_state: str | None = None
        self._hosts: dict[str, bool] = {}  # the address policy's verdict per host, for this page

    # --- the event pump ---------------------------------------------------------------------------

    async def pump(self, sub: Subscription, nursery: trio.Nursery) -> None:
        while True:
            event = await sub.receive()
            method = event.get("method")
            params = event.get("params", {})
            if method == "Fetch.requestPaused":
                if self._is_main(params):
                    await self._paused_safely(params)  # main-document steps happen one after another
                else:
                    nursery.start_soon(self._paused_safely, params)  # never hold up other events
            elif method == "Page.frameNavigated" and params.get("frame", {}).get("id") == self.tab.target_id:
                self.marks.setdefault("committed", time.monotonic())
                self.committed_gen = self.nav_generation
                self._pulse()
            elif method == "Page.domContentEventFired":
                self.dom_gen = self.committed_gen
                self._pulse()
            elif method == "Page.loadEventFired":
                self.dom_gen = self.load_gen = self.committed_gen
                self._pulse()
            elif method == "Page.javascriptDialogOpening":
                accept = params.get("type") == "beforeunload"
                try:
                    await self.tab.call("Page.handleJavaScriptDialog", {"accept": accept})
                except CDPError:
                    pass
            elif method in ("Inspector.targetCrashed", "Target.targetCrashed"):
                self._finish(BrowserCrashed("the page's renderer process crashed"))

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
            self._finish(e)

    def _pulse(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def _wait_for(self, condition: Callable[[], bool]) -> None:
        while not (self.finished.is_set() or condition()):
            await self._changed.wait()

    def _finish(self, failure: BaseException | None = None) -> None:
        if not self.finished.is_set():
            self.failure = failure
            self.finished.set()
            self._pulse()

    async def _fail(self, request_id: str, reason: str = "Aborted") -> None:
        if request_id == self.main_request:
            self.main_aborted = True  # before the call: Page.navigate may report the abort first
        await self.tab.call("Fetch.failRequest", {"requestId": request_id, "errorReason": reason})

    async def _continue(self, request_id: str) -> None:
        await self.tab.call("Fetch.continueRequest", {"requestId": request_id})

    async def _paused(self, p: dict[str, Any]) -> None:
        rid = p["requestId"]
        url = p["request"]["url"]
        rtype = p.get("resourceType")
        main = self._is_main(p)
        response_stage = "responseStatusCode" in p or "responseErrorReason" in p
        if self.finished.is_set():
            await self._fail(rid)
            return
        if not main:
            # Frames are separate documents that the main document's DOM does not contain, so the
            # extractor never sees them: loading them (ads, embeds, trackers) only costs time.
            if rtype in self.block_types or rtype == "Document" or response_stage:
                await self._fail(rid, "BlockedByClient")
            elif not await self._address_allowed(url):
                log.info("blocked a %s request of %s to %s (address policy)", rtype, self.url, url)
                await self._fail(rid, "BlockedByClient")
            else:
                await self._continue(rid)
            return
        self.main_request = rid
        if not response_stage:
            await self._main_request(rid, url, p["request"].get("headers") or {})
        else:
            await self._main_response(rid, url, p)

    async def _address_allowed(self, url: str) -> bool:
        """The address policy for a request the page makes (script, fetch, XHR, beacon, …); one DNS
        lookup per host and page."""
        if self.policy.allow_private:
            return True
        if url.startswith(("ws://", "wss://")):
            url = "http" + url[2:]  # a websocket's handshake is an HTTP request to the same host
        try:
            host = parse_url(url)[1]
        except WebfetchError:
            return False  # not an http(s) URL with a host: nothing a page needs to load
        if host not in self._hosts:
            try:
                await check_host(host, self.policy)
                self._hosts[host] = True
            except BlockedUrl:
                self._hosts[host] = False
        return self._hosts[host]

    async def _main_request(self, rid: str, url: str, headers: dict[str, str]) -> None:
        self.marks.setdefault("req", time.monotonic())
        self.navigations += 1
        self.nav_generation += 1
        self._pulse()
        if self.navigations > MAX_NAVIGATIONS:
            await self._fail(rid)
            raise NetworkError(f"net::ERR_TOO_MANY_REDIRECTS: {self.url} redirects in a loop "
                               f"(more than {MAX_NAVIGATIONS} navigations)")
        if not url.startswith(("http://", "https://")):
            await self._fail(rid, "BlockedByClient")
            raise BlockedUrl(f"the page navigated to {url.split(':', 1)[0]}: URL, which webfetch does not follow")
        await check_host(parse_url(url)[1], self.policy)
        if not same_host(self.url, url):
            await self._fail(rid)
            self.result.redirect_url = url
            self._finish()
            return
        if self.navigations > 1:
            self.progress("render", f"following redirect to {url}")
        if self.tab.uses > 1:
            # A recycled tab's context may hold an earlier response in its HTTP cache: revalidate.
            sent = [{"name": k, "value": v} for k, v in headers.items()
                    if k.lower() not in ("cache-control", "pragma")]
            sent += [{"name": "Cache-Control", "value": "no-cache"}, {"name": "Pragma", "value": "no-cache"}]
            await self.tab.call("Fetch.continueRequest", {"requestId": rid, "headers": sent})
            return
        await self._continue(rid)

    async def _main_response(self, rid: str, url: str, p: dict[str, Any]) -> None:
        status = p.get("responseStatusCode")
        headers = p.get("responseHeaders") or []
        if status is None:  # a network failure; Page.navigate reports it by name
            await self._continue(rid)
            return
        if 300 <= status < 400 and _header(headers, "location"):
            target = urljoin(url, _header(headers, "location") or "")
            if target.startswith(("http://", "https://")):
                await check_host(parse_url(target)[1], self.policy)
            if not same_host(self.url, target):
                await self._fail(rid)
                self.result.redirect_url = target
                self.result.status = status
                self._finish()
                return
            await self._continue(rid)
            return
        ctype = _header(headers, "content-type")
        kind = classify(ctype, url)
        if kind == "other" and status < 400 and self.committed_gen > 0:
            # The page we have started a download (or a navigation to something that is not text):
            # refuse it, never to disk, and go on reading the page.
            log.info("refused a download or navigation of %s to %s (%s)", self.url, url, _mime(ctype))
            await self._fail(rid, "BlockedByClient")
            self.nav_generation = self.committed_gen
            self._pulse()
            return
        r = self.result
        r.final_url, r.status, r.content_type, r.charset = url, status, _mime(ctype) or None, _charset(ctype)
        if status >= 400:
            body, _ = await self._read_body(rid, ERROR_BODY_BYTES)
            await self._fail(rid)
            raise HttpError(f"{url} answered HTTP {status}" + _first_lines(body, ctype)
                            + explain_error_page(status, body, url), status=status)
        if kind == "other":
            await self._fail(rid, "BlockedByClient")
            raise UnsupportedContentType(
                f"{url} is {_mime(ctype)}, which webfetch cannot turn into text; it fetches HTML, XHTML, "
                f"plain text, markdown, JSON, XML and PDF", content_type=_mime(ctype))
        self.marks.setdefault("resp", time.monotonic())
        body, truncated = await self._read_body(rid, self.max_bytes)
        self.marks.setdefault("body", time.monotonic())
        r.body, r.truncated = body, truncated
        if kind == "pdf" and _mime(ctype) in UNTYPED and not is_pdf(body):
            await self._fail(rid)
            raise UnsupportedContentType(f"{url} is {_mime(ctype)} and not a PDF, which webfetch cannot turn "
                                         f"into text", content_type=_mime(ctype))
        if kind in ("text", "pdf"):
            r.pdf = kind == "pdf"
            await self._fail(rid)
            r.raw = True
            self._finish()
            return
        if self.body_check is not None and await self.body_check(body, r.charset, url):
            await self._fail(rid)
            self._finish()
            return
        self.progress("render", f"running the page's scripts ({url})")
        # Hand Chrome exactly what we read (cut at the size cap), decoded: drop the transfer headers.
        kept = [h for h in headers if h.get("name", "").lower() not in
                ("content-encoding", "content-length", "transfer-encoding")]
        await self.tab.call("Fetch.fulfillRequest", {
            "requestId": rid, "responseCode": status, "responseHeaders": kept,
            "body": base64.b64encode(body).decode()})
        self.marks.setdefault("fulfilled", time.monotonic())

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
            self._finish(NetworkError(f"cannot load {url}: {e.message}"))
            return
        error = reply.get("errorText")
        # Our own failRequest of the main document shows up here too (ERR_ABORTED, ERR_BLOCKED_BY_CLIENT).
        if error and not self.main_aborted:
            proxy = self.tab.browser.proxy
            failure = proxy.failure(host_of(url)) if proxy is not None and "SOCKS" in error else None
            if failure is not None and failure.blocked:
                # the name passed the check above, then answered with a blocked address
                self._finish(BlockedUrl(f"{failure.message} (it resolved to an allowed address a moment "
                                        f"before: the name changes its answer, as in DNS rebinding)"))
            else:
                self._finish(NetworkError(f"{failure.message if failure else error} while loading {url}"))

    async def run(self) -> Rendered:
        conn = self.tab.browser.conn
        try:
            with conn.subscribe(self.tab.session_id) as sub:
                with single_error():
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(self.pump, sub, nursery)
                        self.progress("render", f"loading {self.url}")
                        nursery.start_soon(self.navigate, self.url)
                        await self._until_captured(nursery)
                        nursery.cancel_scope.cancel()
        except CDPClosed as e:
            raise BrowserCrashed(str(e)) from None
        # The request ended before Chrome committed any document: the tab can serve another request.
        self.tab.reusable = self.main_aborted and self.committed_gen == 0 and self.finished.is_set()
        if self.failure is not None:
            raise self.failure
        return self.result

    async def _until_captured(self, nursery: trio.Nursery) -> None:
        while True:
            await self._wait_for(lambda: self.nav_generation > 0 and self.committed_gen == self.nav_generation)
            if self.finished.is_set():
                return
            gen = self.nav_generation
            # A parser-blocking script that never arrives holds DOMContentLoaded back for ever; the
            # document parsed so far is still worth reading.
            with trio.move_on_after(max(self.settle_s, DCL_GRACE_S)):
                await self._wait_for(lambda: self.dom_gen == gen or self.nav_generation != gen)
            if self.finished.is_set():
                return
            if self.nav_generation != gen:
                continue
            self.marks["dom"] = time.monotonic()
            with trio.move_on_after(self.settle_s):
                await self._wait_for(lambda: self.load_gen == gen or self.nav_generation != gen)
            if self.finished.is_set():
                return
            if self.nav_generation != gen:
                continue  # the page navigated meanwhile (meta refresh, script): wait for the new document
            if self.load_gen != gen:
                try:
                    await self.tab.call("Page.stopLoading")
                except CDPError:
                    pass
                self.result.notes.append(
                    f"stopped loading after waiting {self.settle_s:g} s for slow resources; "
                    f"the content is what had arrived by then")
            self.marks["load"] = time.monotonic()
            state = await self._settle()
            self.marks["settle"] = time.monotonic()
            self.settle_state = state
            if self.finished.is_set():
                return
            if self.nav_generation != gen or state is None:
                continue
            if state != "settled":
                self.result.notes.append(
                    f"the page was still running scripts after {self.settle_s:g} s; "
                    f"the content is what it showed then")
            captured = (await self.tab.call("Runtime.evaluate", {
                "expression": CAPTURE_JS, "returnByValue": True}))["result"].get("value") or {}
            if self.nav_generation != gen:
                continue
            target = _meta_refresh_target(captured.get("refresh"), captured.get("url") or self.url)
            if target:
                nursery.start_soon(self.navigate, target)
                await self._wait_for(lambda: self.nav_generation != gen)
                continue
            r = self.result
            r.html = captured.get("html") or ""
            r.rendered = True
            r.title = captured.get("title")
            if captured.get("url", "").startswith(("http://", "https://")):
                r.final_url = captured["url"]
            return

    async def _settle(self) -> str | None:
        """'settled', 'busy' or 'changing' (cap reached), or None when the document went away."""
        try:
            reply = await self.tab.call("Runtime.evaluate", {
                "expression": f"window.__webfetchSettle ? window.__webfetchSettle({self.settle_s * 1000:.0f}, "
                              f"{SETTLE_QUIET_MS}) : 'settled'",
                "awaitPromise": True, "returnByValue": True})
        except CDPError:
            return None  # "Execution context was destroyed": a navigation replaced the document
        if "exceptionDetails" in reply:
            return None
        return reply["result"].get("value")


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


def _first_lines(body: bytes, content_type: str | None, limit: int = 300) -> str:
    text = body.decode(_charset(content_type) or "utf-8", errors="replace")
    if classify(content_type) == "html":
        try:
            import lxml.html
            doc = lxml.html.fromstring(text or "<html></html>")
            for bad in doc.xpath("//script|//style|//noscript|//head"):
                bad.drop_tree()
            text = doc.text_content()
        except Exception:  # an error page we cannot parse still gets a status in the message
            return ""
    lines = [" ".join(line.split()) for line in text.splitlines()]
    snippet = " / ".join(line for line in lines if line)[:limit]
    return f": {snippet}" if snippet else ""


async def render(tab: Tab, url: str, *, policy: AddressPolicy, settle_s: float, max_bytes: int,
                 block_types: list[str], progress: Progress, body_check: BodyCheck | None = None) -> Rendered:
    """Load `url` in `tab` and return what extraction needs. Raises a WebfetchError or BrowserCrashed."""
    r = _Render(tab, url, policy, settle_s, max_bytes, block_types, progress, body_check)
    result = await r.run()
    if log.isEnabledFor(logging.DEBUG):
        m = r.marks
        steps = " ".join(f"{k}={(v - m['start']) * 1000:.0f}ms" for k, v in m.items() if k != "start")
        log.debug("rendered %s in %.0f ms: %s settle=%s", url, (time.monotonic() - m["start"]) * 1000, steps,
                  r.settle_state)
    return result
