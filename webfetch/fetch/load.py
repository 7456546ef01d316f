"""The fetch path's shared vocabulary: what a load is asked (`Load`) and what it ends in (`Outcome`), for both
transports (`over_http.load`, `in_chrome.load`) and the pipeline that chooses between them.

A load ends in one of seven outcomes: a cross-host `Redirect`, a `TextBody` or a `PdfBody` that needs no
browser, `HtmlBody` (the http transport's: the server's HTML, which the pipeline reads to decide), `ServerHtml`
whose extraction already held the content (Chrome never ran the page), the `RenderedDom` after the page's
scripts ran, or `NotModified`: the server answered 304 to a revalidation (`Validators`, from a page kept in
the cache). Failures are raised as WebfetchError (or BrowserCrashed)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..parse.extractor import Extracted
from ..protocol import ReportProgress
from ..urls import AddressPolicy

MAX_NAVIGATIONS = 20          # main-frame documents per fetch: redirect hops, meta refresh, script navigation
ERROR_BODY_BYTES = 64 * 1024  # enough of a 4xx/5xx page to quote its first lines
# The main document's Accept: Chrome's own for a navigation, less its image types, with markdown ranked below
# HTML and XML (a server choosing by q-value sends HTML; one serving markdown to agents sees it asked for).
MAIN_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,text/markdown;q=0.8,*/*;q=0.7"

# Called with the host of each same-host main-frame hop before it is requested; raises a WebfetchError to
# refuse it (a profile's host list: the hop to `www.` is the same host to webfetch, not to a profile).
CheckHost = Callable[[str], None]


@dataclass(frozen=True)
class Load:
    """One main document to load, as either transport takes it: `url` (prepared: the cache key) under the
    address `policy`, at most `max_bytes` of its body read, `progress` told of each hop; `check_host` may
    refuse a same-host hop's host; `validators` make the request for their URL conditional (a 304 to it is
    the outcome NotModified)."""

    url: str
    policy: AddressPolicy
    max_bytes: int
    progress: ReportProgress
    check_host: CheckHost | None = None
    validators: Validators | None = None


@dataclass(frozen=True)
class MainResponse:
    """What the server answered for the page (after same-host redirects), whatever became of it."""

    url: str                       # the URL asked for (the cache key)
    final_url: str
    status: int | None
    content_type: str | None       # the MIME type, parameters dropped
    charset: str | None
    truncated: bool                # the body was cut at the size cap
    notes: tuple[str, ...]
    etag: str | None = None        # the validators the server sent with the page, for revalidating it later
    last_modified: str | None = None


@dataclass(frozen=True)
class Redirect:
    """The page sends the reader to another host, which webfetch does not follow by itself."""

    response: MainResponse         # status: the 3xx, or the page whose meta refresh or script navigated
    target: str


@dataclass(frozen=True)
class TextBody:
    """A text body (plain, markdown, JSON, XML) that needs no browser."""

    response: MainResponse
    body: bytes


@dataclass(frozen=True)
class PdfBody:
    """A PDF, read by webfetch/parse/pdf.py, never by the browser."""

    response: MainResponse
    body: bytes


@dataclass(frozen=True)
class HtmlBody:
    """The main document's HTML as the server sent it, read by the http transport: the pipeline reads it to
    decide whether it holds the content (ServerHtml) or Chrome renders it from these bytes (Prefetched)."""

    response: MainResponse
    status: int
    headers: list[dict[str, str]]  # as received, CDP's {name, value}: Chrome is answered with them
    body: bytes                    # cut at the size cap
    # every cookie the redirect hops and the document set, as CDP's CookieParam: Chrome gets them before
    # the page runs (its scripts and requests see the cookies they would have after Chrome's own hops)
    cookies: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class ServerHtml:
    """The HTML as the server sent it already held the content: Chrome never parsed the page."""

    response: MainResponse
    extracted: Extracted
    body: bytes                    # the HTML as sent (cut at the size cap)


@dataclass(frozen=True)
class RenderedDom:
    """The DOM after the page's scripts ran, with the server's HTML and its extraction when there was one."""

    response: MainResponse
    html: str
    title: str | None
    server: Extracted | None
    server_body: bytes


@dataclass(frozen=True)
class NotModified:
    """The server answered 304 to the conditional request: the page kept in the cache is still its page."""

    response: MainResponse


@dataclass(frozen=True)
class Validators:
    """What a cached page was sent with, to ask its server whether it changed (If-None-Match,
    If-Modified-Since), on the request for `url`: the page's final URL, the one they belong to."""

    url: str
    etag: str | None
    last_modified: str | None

    def headers(self) -> list[dict[str, str]]:
        return ([{"name": "If-None-Match", "value": self.etag}] if self.etag else []) + \
            ([{"name": "If-Modified-Since", "value": self.last_modified}] if self.last_modified else [])


# What a transport's `load` ends in. HtmlBody comes from the http transport only: the pipeline reads it and
# decides, so what it extracts from is a `Loaded`.
Outcome = Redirect | TextBody | PdfBody | HtmlBody | ServerHtml | RenderedDom | NotModified
# An outcome once the server's HTML was read: the page the pipeline extracts from, or why there is none.
Loaded = Redirect | TextBody | PdfBody | ServerHtml | RenderedDom | NotModified


@dataclass(frozen=True)
class Prefetched:
    """The main document already fetched (fetch/over_http.py) whose server HTML did not hold the content: Chrome
    renders it from these bytes, status and headers (and the hops' cookies), answering its own request for
    the document's final URL with them, so that the server sees one GET."""

    document: HtmlBody
    server: Extracted | None       # the server HTML's extraction, the rendered one's rival


@dataclass(frozen=True)
class ServerRead:
    """The pipeline's reading of the server's HTML: its extraction (None when nothing could be extracted)
    and whether that already holds the content, so that the page need not be rendered."""

    extracted: Extracted | None
    holds_content: bool


# Called with the main document's HTML as the server sent it, before Chrome renders it.
ReadServerHtml = Callable[[bytes, str | None, str], Awaitable[ServerRead]]
