"""Wire structs and codecs for PROTOCOL.md version 1: requests in, frames out, one JSON object per line."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, get_args

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from .errors import BadRequest, WebfetchError

RequestId = str | int | None
# pi's thinking levels today; a level a newer pi adds passes through to it (each pi takes a level it does
# not know without complaint), so a session at a new level does not break every web_fetch.
THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh", "max")
Thinking = Annotated[str, Meta(pattern="^[a-z][a-z0-9_-]{0,31}$")]

EXAMPLE_LINE = '{"id":1,"op":"fetch","url":"https://example.com"}'
OPS = ("fetch", "search", "browse", "status", "cancel", "stop", "reload", "crawl", "map", "cache_clear", "view")


# --- requests ---------------------------------------------------------------------------------------


MAX_INT = 2**53  # integers a JavaScript client can hold exactly; larger ones are refused, not echoed


MAX_BATCH_URLS = 50  # a batch fetch's `urls`: PROTOCOL.md, batch


class FetchRequest(Struct, tag_field="op", tag="fetch", kw_only=True):
    url: str = ""    # one of url and urls (decode_request checks): "" only when urls is given
    urls: list[str] | None = None  # a batch: each URL fetched as `url` would be, each page its own frame
    prompt: str | None = None
    offset: Annotated[int, Meta(ge=0, le=MAX_INT)] | None = None
    max_chars: Annotated[int, Meta(ge=1, le=MAX_INT)] | None = None
    raw: bool = False
    fresh: bool = False
    timeout_s: Annotated[float, Meta(gt=0)] | None = None
    model: str | None = None
    thinking: Thinking | None = None
    find: str | None = None  # words or /regex/: only the passages that match (webfetch/parse/find.py)
    profile: Annotated[str, Meta(max_length=200)] | None = None  # a profile's name (webfetch profile list)
    # A JSON Schema (draft 2020-12) the sub-agent's answer must validate against: the result is `kind: "data"`
    # (parse/json_answer.py checks the schema and the reply)
    schema: dict[str, Any] | None = None
    # "user": read signed in with the person's own running browser's cookies for this URL ([user_browser])
    browser: Literal["user"] | None = None
    # Text the page hides from people (webfetch/parse/hidden.py) is left out ("drop"), or kept ("keep").
    hidden: Literal["drop", "keep"] = "drop"


class SearchRequest(Struct, tag_field="op", tag="search", kw_only=True):
    query: Annotated[str, Meta(max_length=2000)]
    limit: Annotated[int, Meta(ge=1, le=20)] | None = None  # default: search.limit (10)
    backend: Literal["kagi", "brave", "searxng"] | None = None


class StatusRequest(Struct, tag_field="op", tag="status", kw_only=True):
    pass


class StopRequest(Struct, tag_field="op", tag="stop", kw_only=True):
    """End the daemon as SIGTERM does (`webfetch stop`): the answer goes out first."""


class ReloadRequest(Struct, tag_field="op", tag="reload", kw_only=True):
    """Read the config file again and apply what can change while running (`webfetch reload`, SIGHUP)."""


class ViewRequest(Struct, tag_field="op", tag="view", kw_only=True):
    """The daemon's local web page (`webfetch view`): its URL with a one-time key, the front door started first
    when it is off (view.enabled = false)."""


class CacheClearRequest(Struct, tag_field="op", tag="cache_clear", kw_only=True):
    """Forget every cached page, in memory and on disk (`webfetch cache clear`); with `profile`, only the
    pages read with that profile (`webfetch profile delete`)."""

    profile: Annotated[str, Meta(max_length=200)] | None = None


class CancelRequest(Struct, tag_field="op", tag="cancel", kw_only=True):
    target: Annotated[str, Meta(min_length=1, max_length=128)] | Annotated[int, Meta(ge=-MAX_INT, le=MAX_INT)]


BrowseAction = Literal["open", "nav", "snapshot", "click", "fill", "type", "press", "select", "check", "hover",
                       "scroll", "wait", "dialog", "tabs", "read", "screenshot", "console", "network", "request", "har",
                       "viewport", "offline", "route", "unroute", "routes", "emulate", "pdf", "upload",
                       "save", "close"]
Ref = Annotated[str, Meta(pattern=r"^e[0-9]{1,9}$")]
# how a browse route fails a request: Chrome's names (CDP Fetch.ErrorReason)
NetworkError = Literal["Failed", "Aborted", "TimedOut", "AccessDenied", "ConnectionClosed", "ConnectionReset",
                       "ConnectionRefused", "ConnectionAborted", "ConnectionFailed", "NameNotResolved",
                       "InternetDisconnected", "AddressUnreachable", "BlockedByClient", "BlockedByResponse"]


class BrowseRequest(Struct, tag_field="op", tag="browse", kw_only=True):
    """One action on a browse session (PROTOCOL.md, browse); which fields apply depends on `action`."""

    session: Annotated[str, Meta(min_length=1, max_length=128)]
    action: BrowseAction
    url: str | None = None
    new_tab: bool = False
    to: Literal["back", "forward", "reload"] | None = None
    mode: Literal["interactive", "full"] = "interactive"
    ref: Ref | None = None
    find: Annotated[str, Meta(max_length=200)] | None = None
    max_chars: Annotated[int, Meta(ge=100, le=MAX_INT)] | None = None
    offset: Annotated[int, Meta(ge=0, le=MAX_INT)] = 0
    button: Literal["left", "right", "middle"] = "left"
    double: bool = False
    text: Annotated[str, Meta(max_length=100_000)] | None = None
    submit: bool = False
    key: Annotated[str, Meta(min_length=1, max_length=64)] | None = None
    values: list[str] | None = None
    checked: bool | None = None
    direction: Literal["up", "down"] | None = None
    px: Annotated[int, Meta(ge=1, le=100_000)] | None = None
    text_gone: str | None = None
    ms: Annotated[int, Meta(ge=0, le=30_000)] | None = None
    timeout_s: Annotated[float, Meta(gt=0, le=30)] | None = None
    accept: bool | None = None
    prompt_text: str | None = None
    do: Literal["list", "select", "close"] = "list"
    tab: Annotated[str, Meta(pattern=r"^t[0-9]{1,9}$")] | None = None
    full_page: bool = False
    # open, viewport: the session's device (browse/device.py)
    width: Annotated[int, Meta(ge=100, le=10_000)] | None = None
    height: Annotated[int, Meta(ge=100, le=10_000)] | None = None
    mobile: bool | None = None
    scale: Annotated[float, Meta(ge=0.5, le=5)] | None = None
    path: Annotated[str, Meta(min_length=1, max_length=4096)] | None = None  # pdf, har: the file to write
    overwrite: bool = False  # pdf, har: replace a file that is at `path` (else file_exists)
    profile: Annotated[str, Meta(max_length=200)] | None = None  # open: the profile the session starts with
    create: bool = False  # open: make `profile` (empty, for the URL's host) if none has that name; else unknown_profile
    record: bool | None = None  # open: record the session it starts (true) or not (false); absent: browse.record
    files: list[Annotated[str, Meta(min_length=1, max_length=4096)]] | None = None  # upload: paths to set
    # the client's working directory (absolute): an upload's relative paths start there, and it is an
    # upload root (browse/uploads.py); the CLI, the pi extension and `webfetch mcp` send it
    cwd: Annotated[str, Meta(min_length=1, max_length=4096)] | None = None
    # network: which requests (the URL substring is `find`); request: which one
    status_class: Literal["2xx", "3xx", "4xx", "5xx", "failed"] | None = None
    resource_type: Annotated[str, Meta(min_length=1, max_length=32)] | None = None
    request_id: Annotated[str, Meta(pattern=r"^r[0-9]{1,9}$")] | None = None
    enabled: bool | None = None  # offline: true (or left out) cuts the session's network, false restores it
    # route (browse/routes.py): `url` is the pattern; the response, or `abort` with a network error
    status: Annotated[int, Meta(ge=200, le=599)] | None = None
    headers: dict[str, str] | None = None  # route: the response's; emulate: extra request headers
    body: Annotated[str, Meta(max_length=1 << 20)] | None = None
    body_file: Annotated[str, Meta(min_length=1, max_length=4096)] | None = None  # under the upload rule
    abort: NetworkError | None = None
    times: Annotated[int, Meta(ge=1, le=10_000)] | None = None  # the route answers this many requests, then goes
    # emulate (browse/emulation.py); `headers` are the extra request headers then
    latitude: Annotated[float, Meta(ge=-90, le=90)] | None = None
    longitude: Annotated[float, Meta(ge=-180, le=180)] | None = None
    locale: Annotated[str, Meta(min_length=1, max_length=35)] | None = None
    timezone: Annotated[str, Meta(min_length=1, max_length=64)] | None = None
    color_scheme: Literal["light", "dark", "no-preference"] | None = None
    reduced_motion: bool | None = None
    user_agent: Annotated[str, Meta(min_length=1, max_length=512)] | None = None
    header_origins: list[Annotated[str, Meta(min_length=1, max_length=256)]] | None = None
    reset: bool = False  # emulate: everything it set back to nothing first (offline and routes stay)
    # open: "user" starts the session in the person's own browser ([user_browser]), its tabs in a window of
    # their own, on the hosts user_browser.hosts lists
    browser: Literal["user"] | None = None


# A crawl's or map's patterns: globs over the URL's path and query (`/docs/*`), or `/regex/` (PROTOCOL.md).
CrawlPattern = Annotated[str, Meta(min_length=1, max_length=1000)]
# at most this many include (and as many exclude) patterns: each is compiled and tried on every link
CrawlPatterns = Annotated[list[CrawlPattern], Meta(max_length=64)]
CRAWL_MAX_LIMIT = 500     # pages in one crawl result (each with its markdown, up to its share: crawl/crawler.py)
MAP_MAX_LIMIT = 10_000    # URLs in one map result


class CrawlRequest(Struct, tag_field="op", tag="crawl", kw_only=True):
    """Pages of a site from a start URL, each with its markdown, within its host and path (crawl/crawler.py)."""

    url: str
    limit: Annotated[int, Meta(ge=1, le=CRAWL_MAX_LIMIT)] = 20
    depth: Annotated[int, Meta(ge=0, le=50)] = 3
    include: CrawlPatterns = []
    exclude: CrawlPatterns = []
    timeout_s: Annotated[float, Meta(gt=0)] | None = None   # the whole crawl; default crawl.timeout_s
    fresh: bool = False
    # Each page's characters in the result, at most (default: an equal share of crawl.result_chars, which
    # also bounds all pages together); the rest is read with `fetch` and `offset` (the page's next_offset).
    max_chars: Annotated[int, Meta(ge=1, le=MAX_INT)] | None = None
    # Also send each page whole, in a `page` frame, the moment it is crawled (`webfetch crawl` writes them)
    stream: bool = False


class MapRequest(Struct, tag_field="op", tag="map", kw_only=True):
    """The URLs of a site from a start URL: its sitemaps, then the links of its pages (webfetch/crawl/crawler.py)."""

    url: str
    limit: Annotated[int, Meta(ge=1, le=MAP_MAX_LIMIT)] = 500
    depth: Annotated[int, Meta(ge=0, le=50)] = 3
    include: CrawlPatterns = []
    exclude: CrawlPatterns = []
    timeout_s: Annotated[float, Meta(gt=0)] | None = None
    fresh: bool = False


Request = (FetchRequest | SearchRequest | BrowseRequest | StatusRequest | CancelRequest | StopRequest
           | ReloadRequest | CrawlRequest | MapRequest | CacheClearRequest | ViewRequest)


class Envelope(Struct):
    """A decoded request line: its id (as sent, or None when absent) and the typed request."""

    id: RequestId
    request: Request


_any_decoder = msgspec.json.Decoder()
# Each op's request type: converting to it costs well under a microsecond, where converting to the union
# `Request` costs ~35 µs (msgspec builds a union's type info anew on every call), on every request.
_REQUEST_TYPES: dict[str, type[Request]] = {t.__struct_config__.tag: t for t in get_args(Request)}


def decode_request(line: bytes) -> Envelope:
    """Parse one request line. Raises BadRequest carrying the id when one could be read (attribute `id`)."""
    try:
        obj = _any_decoder.decode(line)
    except msgspec.DecodeError:
        raise _bad(None, f"not valid JSON; send one JSON object per line, for example {EXAMPLE_LINE}") from None
    except RecursionError:  # found by tests/test_fuzz.py: thousands of nested arrays
        raise _bad(None, "JSON nested too deeply; send one flat JSON object per line, for example "
                         + EXAMPLE_LINE) from None
    if not isinstance(obj, dict):
        raise _bad(None, f"expected a JSON object, got {_json_type(obj)}; for example {EXAMPLE_LINE}")
    rid = obj.get("id")
    if isinstance(rid, bool) or not (rid is None or isinstance(rid, (str, int))):
        raise _bad(None, f"`id` must be a string (1-128 characters) or an integer, got {_json_type(rid)} - at `$.id`")
    if isinstance(rid, int) and not -MAX_INT <= rid <= MAX_INT:
        raise _bad(None, "`id` must be a string of 1-128 characters or an integer within ±2^53 - at `$.id`")
    if isinstance(rid, str) and not 1 <= len(rid) <= 128:
        raise _bad(None, "`id` must be a string of 1-128 characters or an integer - at `$.id`")
    op = obj.get("op")
    if op is None:
        raise _bad(rid, f"missing field `op` (one of {', '.join(OPS)}) - at `$.op`")
    if op not in OPS:
        raise _bad(rid, f"unknown op {op!r}; expected one of {', '.join(OPS)} - at `$.op`")
    try:
        req = msgspec.convert(obj, _REQUEST_TYPES[op])
    except msgspec.ValidationError as e:
        raise _bad(rid, str(e)) from None
    if isinstance(req, FetchRequest):
        _check_url_or_urls(rid, req, "url" in obj)
    return Envelope(rid, req)


def _check_url_or_urls(rid: RequestId, req: FetchRequest, has_url: bool) -> None:
    """A fetch names one page (`url`) or several (`urls`), never both; a batch holds 1-50 URLs and reads
    each page from its start."""
    if req.urls is None:
        if not has_url:
            raise _bad(rid, "Object missing required field `url`; pass `url`, or `urls` with up to "
                            f"{MAX_BATCH_URLS} URLs")
        return
    if has_url:
        raise _bad(rid, "pass `url` (one page) or `urls` (several), not both - at `$.urls`")
    if not req.urls:
        raise _bad(rid, "`urls` is empty; pass 1 to 50 URLs - at `$.urls`")
    if len(req.urls) > MAX_BATCH_URLS:
        raise _bad(rid, f"`urls` holds {len(req.urls)} URLs; a batch fetches at most {MAX_BATCH_URLS}: split "
                        f"them into calls of {MAX_BATCH_URLS} or fewer - at `$.urls`")
    if req.offset is not None:
        raise _bad(rid, "`offset` reads on in one page and does not go with `urls`: fetch that page's `url` with "
                        "the `offset` its batch entry gave - at `$.offset`")


def _bad(rid: RequestId, message: str) -> BadRequest:
    return BadRequest(message, request_id=rid)


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array",
            dict: "an object"}.get(type(v), type(v).__name__)


# --- frames -----------------------------------------------------------------------------------------


# The stages a request reports progress in, and how the code doing the work reports it: the server turns
# each call into a ProgressFrame for the request's client.
# `person`: the request waits on the person at the machine (to allow the connection to their browser, or to
# hand back a browser they took over in the view); clients show it even where they show no other progress
Stage = Literal["queued", "cache", "render", "extract", "subagent", "search", "browse", "crawl", "map", "person"]
ReportProgress = Callable[[Stage, str], None]


class ProgressFrame(Struct, tag_field="type", tag="progress", kw_only=True):
    id: RequestId
    stage: Stage
    message: str
    elapsed_ms: int


class UsageCost(Struct, kw_only=True):
    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    total: float = 0.0


class Usage(Struct, kw_only=True):
    """What the sub-agent's model call cost, as pi counts it (tokens; cost in the provider's dollars)."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total_tokens: int = 0
    cost: UsageCost = msgspec.field(default_factory=UsageCost)


class Passage(Struct, kw_only=True):
    """A passage that matched a fetch's `find`: where it starts in the page's markdown, under which headings."""

    offset: int
    headings: list[str]
    text: str


class FetchResult(Struct, tag_field="type", tag="result", kw_only=True):
    id: RequestId = None
    op: str = "fetch"
    kind: Literal["page", "summary", "answer", "data", "redirect", "find"] = "page"
    url: str = ""
    final_url: str = ""
    status: int | None = None
    content_type: str | None = None
    title: str | None = None
    content: str = ""
    offset: int = 0
    next_offset: int | None = None
    total_chars: int = 0
    cached: bool = False
    age_s: float = 0.0
    extractor: str | None = None
    truncated: bool = False
    redirect_url: str | None = None
    model: str | None = None
    usage: Usage | None = None  # the sub-agent's tokens and cost, when an answer or summary came from it
    notes: list[str] = []
    flags: list[str] = []  # webfetch.parse.flags.FLAG_NAMES: the content is not the page the caller wanted
    # Characters of text (white space not counted) the page hid from people and the content leaves out
    # (webfetch/parse/hidden.py); 0 when the request asked for `hidden: "keep"`.
    hidden_text_removed: int = 0
    # Only on a `find` result (kind "find"), absent from every other frame (UNSET is not encoded): the
    # pattern, how many places matched, and the passages shown in `content`.
    find: str | UnsetType = UNSET
    matches: int | UnsetType = UNSET
    passages: list[Passage] | UnsetType = UNSET
    # Only on a `data` result (a fetch with a `schema`): the sub-agent's JSON, validated against the schema
    # (`content` holds the same JSON, indented, for a reader)
    data: Any | UnsetType = UNSET


class PageFrame(FetchResult, tag="page", kw_only=True):
    """A batch's page (`urls`), sent as soon as it is ready: a fetch result's fields and the URL's index."""

    index: int = 0


class PageError(Struct, kw_only=True, omit_defaults=True):
    """Why one URL of a batch failed: an error frame's fields."""

    code: str
    message: str
    status: int | None = None
    content_type: str | None = None
    retry_after: str | None = None


class PageFailed(Struct, tag_field="type", tag="page", kw_only=True):
    """A batch's URL that failed, sent when it failed; the other URLs go on."""

    id: RequestId = None
    index: int
    url: str
    error: PageError


class BatchEntry(Struct, kw_only=True, omit_defaults=True):
    """One URL of a batch in its final result: what its page frame said, without the content."""

    index: int
    url: str
    kind: str | None = None       # the page's result kind; absent when it failed
    final_url: str | None = None
    title: str | None = None
    total_chars: int | None = None
    next_offset: int | None = None
    flags: list[str] = []
    error: str | None = None      # the error code, when it failed
    message: str | None = None    # the error message, when it failed


class BatchResult(Struct, tag_field="type", tag="result", kw_only=True):
    """The end of a batch fetch, after every page frame: one entry per URL, in the order given."""

    id: RequestId = None
    op: str = "fetch"
    kind: Literal["batch"] = "batch"
    pages: list[BatchEntry]
    fetched: int                  # URLs that gave a page (flagged ones included)
    failed: int                   # URLs that ended in an error
    content: str                  # one line per URL, for a reader


# Why a crawl or map ended: it reached `limit`; nothing in scope was left to visit; its deadline passed; too
# many pages failed (crawl.max_errors). A cancel ends it with the `cancelled` error frame instead.
StopReason = Literal["limit", "scope_exhausted", "deadline", "errors"]


class CrawledPage(Struct, kw_only=True):
    url: str              # the URL crawled (normalized)
    final_url: str        # after same-host redirects
    depth: int            # links followed from the start URL (a sitemap's URLs count as 1)
    status: int | None
    title: str | None
    content: str          # the page's extracted markdown: in a result, its first `max_chars` (its share)
    chars: int            # the whole markdown's characters
    extractor: str | None
    cached: bool
    flags: list[str] = []
    notes: list[str] = []
    next_offset: int | None = None   # where the rest starts (`fetch` it with this `offset`); None: content is whole


class CrawlPageFrame(CrawledPage, tag_field="type", tag="page", kw_only=True):
    """A crawled page, whole, sent the moment it is crawled when the crawl asked to `stream`; `index` is its
    place in the result's `pages`."""

    id: RequestId = None
    op: str = "crawl"
    index: int = 0


class CrawlFailure(Struct, kw_only=True):
    url: str
    code: str             # an error code (PROTOCOL.md), or `redirect` for a redirect to another host
    message: str


class CrawlResult(Struct, tag_field="type", tag="result", kw_only=True):
    id: RequestId = None
    op: str = "crawl"
    url: str
    pages: list[CrawledPage]
    failed: list[CrawlFailure]
    stopped: StopReason
    queued: int                 # URLs in scope found but not visited when it stopped
    robots: Literal["obeyed", "ignored", "none"]   # none: the site has no robots.txt
    sitemaps: list[str]         # the sitemaps read
    notes: list[str] = []


class MapResult(Struct, tag_field="type", tag="result", kw_only=True):
    id: RequestId = None
    op: str = "map"
    url: str
    urls: list[str]
    failed: list[CrawlFailure]
    stopped: StopReason
    queued: int
    robots: Literal["obeyed", "ignored", "none"]
    sitemaps: list[str]
    notes: list[str] = []


class SearchHit(Struct, kw_only=True):
    title: str
    url: str
    snippet: str
    published: str | None  # YYYY-MM-DD


class SearchResult(Struct, tag_field="type", tag="result", kw_only=True):
    id: RequestId = None
    op: str = "search"
    query: str
    backend: str
    results: list[SearchHit]
    related: list[str]
    content: str
    cached: bool = False
    age_s: float = 0.0


class PageInfo(Struct, kw_only=True):
    tab: str
    url: str
    title: str


class TabInfo(Struct, kw_only=True):
    tab: str
    url: str
    title: str
    active: bool


ConsoleLevel = Literal["error", "warning", "info", "log", "debug"]


class ConsoleEntry(Struct, kw_only=True, omit_defaults=True):
    """One console message of a browsed tab (PROTOCOL.md, browse: console)."""

    kind: str           # console, exception, rejection, or the browser's source: network, security, deprecation…
    level: ConsoleLevel
    text: str
    url: str | None = None
    line: int | None = None     # 1-based, in `url`
    stack: str | None = None    # "    at f (url:line:col)" lines, for exceptions, rejections, errors, traces
    nav: int = 0                # the tab's navigation it came from (`console_navs`); 0, the tab's first document


class ConsoleNav(Struct, kw_only=True, omit_defaults=True):
    """A navigation of a browsed tab that console entries came from (PROTOCOL.md, browse: console)."""

    nav: int                    # the tab's main-frame documents so far, a back/forward cache restore counting
    url: str                    # the URL the document was at when it came
    restored: bool = False      # a page restored from the back/forward cache: its scripts did not run again


class Download(Struct, kw_only=True, omit_defaults=True):
    """A file a browsed page downloaded (PROTOCOL.md, browse: downloads)."""

    url: str
    filename: str                     # the name it is saved under (sanitised), or would have been
    state: Literal["saved", "too_large", "failed", "in_progress"]
    path: str | None = None           # where it is, once saved
    size: int | None = None           # bytes: saved, or received when it stopped
    mime: str | None = None           # the server's Content-Type, else guessed from the name
    message: str | None = None        # why it was not saved


class Viewport(Struct, kw_only=True):
    """A browse session's device: the viewport in CSS pixels, device pixels per CSS pixel, a phone or not."""

    width: int
    height: int
    scale: float
    mobile: bool


class NetworkEntry(Struct, kw_only=True, omit_defaults=True):
    """One request a browsed tab made (PROTOCOL.md, browse: network)."""

    id: str                     # r1, r2, … in the session: the `request` action's request_id
    tab: str
    method: str
    url: str
    type: str                   # the resource type, lower case: document, script, fetch, xhr, image…
    status: int | None = None   # the HTTP status, when a response came
    size: int | None = None     # the body's bytes as received (decoded)
    time_ms: int | None = None  # from the request's start to its last byte (or its failure)
    failure: str | None = None  # net::ERR_… when it failed
    blocked: str | None = None  # why the address policy refused it (blocked_url's reason)
    routed: str | None = None   # a route of the session answered it, not the server: `route 2: 500, 23 B`


class HeaderLine(Struct):
    name: str
    value: str


class BodyInfo(Struct, kw_only=True, omit_defaults=True):
    """A request's or response's body: its text (cut to size), or only its size and type when binary."""

    size: int
    mime_type: str = ""
    text: str | None = None     # None: binary, or no longer available (`note` says which)
    truncated: bool = False
    note: str | None = None


class RequestDetail(Struct, kw_only=True, omit_defaults=True):
    """One request with its headers and bodies (PROTOCOL.md, browse: request)."""

    entry: NetworkEntry
    status_text: str = ""
    request_headers: list[HeaderLine] = []
    response_headers: list[HeaderLine] = []
    request_body: BodyInfo | None = None
    response_body: BodyInfo | None = None


class BrowseResult(Struct, tag_field="type", tag="result", kw_only=True, omit_defaults=True):
    """The common fields are always sent; an action's own fields only when it has them."""

    id: RequestId
    op: str
    action: str
    session: str
    page: PageInfo | None
    change: Literal["navigation", "same_document", "dom", "none"]
    refs_reset: bool
    snapshot: str
    snapshot_kind: Literal["full", "diff", "none"]
    elapsed_ms: int
    ref_count: int | None = None
    next_offset: int | None = None
    status: int | None = None
    value: str | None = None
    new_tabs: list[dict[str, str]] | None = None
    dialog: dict[str, str] | None = None
    downloads: list[Download] | None = None
    files: list[str] | None = None              # upload: the file names the input holds now
    waited_for: str | None = None
    tabs: list[TabInfo] | None = None
    content: str | None = None
    image: str | None = None
    width: int | None = None
    height: int | None = None
    console: list[ConsoleEntry] | None = None   # the console action's entries, newest last
    console_dropped: int | None = None          # older entries not in `console`: the ring dropped them, or too long
    console_navs: list[ConsoleNav] | None = None  # the navigations `console`'s entries came from, in order
    console_errors: int | None = None           # errors the tab logged since the previous result (left out when 0)
    viewport: Viewport | None = None            # open with a device, viewport: the session's device
    path: str | None = None                     # pdf: the file written
    size: int | None = None                     # pdf: its size in bytes
    requests: list[NetworkEntry] | None = None  # the network action's requests (this page of them), newest last
    request: RequestDetail | None = None        # the request action's request
    forced: str | None = None                   # what the session forces on its pages now: `offline; 2 routes`
    notes: list[str] | None = None


class BrowseSessionStatus(Struct, kw_only=True):
    session: str
    tabs: int
    url: str
    idle_s: float
    profile: str | None = None  # the profile it was opened with (its name; never a cookie)
    browser: Literal["user"] | None = None  # "user": it runs in the person's own browser


class BrowserStatus(Struct, kw_only=True):
    state: str
    version: str | None = None
    executable: str | None = None
    endpoint: str | None = None


class UserBrowserStatus(Struct, kw_only=True):
    """[user_browser]: the person's own browser (chrome/user_browser.py)."""

    state: str                        # off, idle, connecting, waiting for approval, connected, gone, failed
    detail: str                       # one line: why off, how it was found, what to do
    hosts: list[str] = []


class CacheStatus(Struct, kw_only=True):
    entries: int
    bytes: int
    hits: int
    misses: int
    # the pages kept on disk (PROTOCOL.md, fetch semantics): where, how many, their bytes and the bound
    disk_dir: str | None = None       # None: nothing is kept on disk (cache.disk_max_bytes = 0)
    disk_entries: int = 0
    disk_bytes: int = 0
    disk_max_bytes: int = 0


class RequestsStatus(Struct, kw_only=True):
    in_flight: int
    served: int


class SubagentStatus(Struct, kw_only=True):
    command: str | None
    available: bool
    version: str | None = None


class DaemonInfo(Struct, kw_only=True):
    """Which daemon this is: what a client compares with what it would start (`webfetch status`)."""

    pid: int
    started_at: str                   # ISO 8601, UTC
    socket: str | None                # None: systemd's socket (socket activation)
    socket_activated: bool
    exit_when_idle: bool              # started on demand by a client (it exits after server.idle_exit_s)
    config: str | None                # the config file it read; None: no file, all defaults
    config_digest: str | None         # sha256 of that file's bytes, 16 hex digits
    log: str | None                   # where it logs; None: stderr (a terminal, or systemd's journal)
    needs_restart: list[str] = []     # keys the file changes that a reload could not apply (`section.key`)


class StatusResult(Struct, tag_field="type", tag="result", kw_only=True):
    id: RequestId
    op: str = "status"
    version: str
    protocol: int
    uptime_s: float
    browser: BrowserStatus
    cache: CacheStatus
    requests: RequestsStatus
    subagent: SubagentStatus
    search: list[str]
    problems: list[str]
    browse: list[BrowseSessionStatus] = []
    browse_enabled: bool = True       # browse.enabled: whether the browse op serves (MCP lists its tool by it)
    browse_allow_local: list[str] = []  # browse.allow_local in force: the loopback host:ports browse may reach
    daemon: DaemonInfo | None = None
    view: str | None = None           # the local web page's address while it is open (no token: `webfetch view`)
    user_browser: UserBrowserStatus | None = None


class StopResult(Struct, tag_field="type", tag="result", kw_only=True):
    id: RequestId
    op: str = "stop"
    pid: int
    in_flight: int                    # other requests still running: `shutting_down` after a 2 s grace
    browse_sessions: int              # open browse sessions, closed with the browser
    socket_activated: bool            # systemd keeps the socket: the next client starts the daemon again


class ReloadResult(Struct, tag_field="type", tag="result", kw_only=True):
    id: RequestId
    op: str = "reload"
    config: str | None                # the file read; None: no file, all defaults
    config_digest: str | None
    changed: list[str]                # keys whose value differs from the running config (`section.key`)
    applied: list[str]                # of those, the ones in force now
    needs_restart: list[str]          # of those, the ones only `webfetch restart` applies


class CacheClearResult(Struct, tag_field="type", tag="result", kw_only=True):
    id: RequestId
    op: str = "cache_clear"
    entries: int                      # pages forgotten from memory
    disk_entries: int                 # page files deleted from disk
    disk_bytes: int                   # their bytes


class ViewResult(Struct, tag_field="type", tag="result", kw_only=True):
    id: RequestId
    op: str = "view"
    url: str                          # http://127.0.0.1:PORT/?token=KEY: a new one-time key, traded for a cookie
    port: int
    addresses: list[str]              # where it listens: 127.0.0.1:PORT, and [::1]:PORT when the host has IPv6
    started: bool                     # this request turned the front door on (view.enabled was false)
    token_file: str                   # the token alone (0600), for an MCP client's `Authorization: Bearer`


class CancelResult(Struct, tag_field="type", tag="result", kw_only=True):
    id: RequestId
    op: str = "cancel"
    target: str | int
    found: bool


class ErrorFrame(Struct, tag_field="type", tag="error", kw_only=True, omit_defaults=True):
    id: RequestId
    code: str
    message: str
    status: int | None = None
    content_type: str | None = None
    retry_after: str | None = None
    covered_by: str | None = None     # browse `covered`: the element at the click point


def error_frame(rid: RequestId, error: WebfetchError) -> ErrorFrame:
    """The `error` frame a client sees for `error`, its optional fields included where it has them."""
    return ErrorFrame(id=rid, code=error.code, message=error.message, status=error.status,
                      content_type=error.content_type, retry_after=error.retry_after, covered_by=error.covered_by)


Frame = (ProgressFrame | FetchResult | PageFrame | PageFailed | BatchResult | SearchResult | BrowseResult
         | StatusResult | CancelResult | StopResult | ReloadResult | CrawlPageFrame | CrawlResult | MapResult
         | CacheClearResult | ViewResult | ErrorFrame)

# How a request that answers in several frames (a batch's or a streamed crawl's pages) sends one before its
# terminal frame: the server writes them in order, and the call returns once its frame is written, so a slow
# client makes the request wait rather than pile up frames (a crawl's may be 10 MB each) in the daemon.
SendFrame = Callable[[Frame], Awaitable[None]]

_encoder = msgspec.json.Encoder()


def encode_frame(frame: Frame) -> bytes:
    """One frame as a JSON line, newline included."""
    buf = bytearray()
    _encoder.encode_into(frame, buf)
    buf += b"\n"
    return bytes(buf)


def decode_frame(line: bytes | str) -> dict[str, Any]:
    """Clients read frames as plain dicts: unknown fields from a newer daemon must not break them."""
    obj = _any_decoder.decode(line)
    if not isinstance(obj, dict):
        raise ValueError(f"daemon sent a non-object frame: {line!r}")
    return obj
