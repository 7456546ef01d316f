"""`crawl` and `map`: a site's pages (with their markdown) or URLs from a start URL, within its host and path,
exactly `limit` of them at most, always saying why they stopped. A crawl runs in its request's task (the
client's cancel and the deadline reach every await); pages are loaded through the fetch pipeline, so they
land in the cache where `fetch` and `find` reuse them. robots.txt (crawl/robots.py) is obeyed unless
crawl.ignore_robots; every request to the site passes the per-host politeness (crawl/politeness.py).

A crawl's memory is bounded as a batch's output is: the result carries at most crawl.result_chars of page
content, each page its equal share (or the request's max_chars), and says where the rest of a longer page starts
(`next_offset`, read on with `fetch`, from the cache while it holds the page). A page is never held whole past
its visit; a client that wants every page whole asks to `stream` them, each sent (and written to its socket)
as it is crawled."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal
from urllib.parse import urljoin, urlsplit, urlunsplit

import trio
from msgspec.structs import asdict
from msgspec.structs import replace as replace_struct

from .. import __version__
from ..config import Config
from ..errors import (
    BadRequest,
    HttpError,
    NetworkError,
    RobotsDisallowed,
    Timeout,
    WebfetchError,
)
from ..fetch.pipeline import LoadedPage, Pipeline
from ..http_body import ACCEPT_ENCODING, BodyRefused, read_body
from ..paging import paginate
from ..parse import crawl_patterns
from ..parse.extractor import Extractor
from ..parse.links import markdown_links, normalize_link
from ..protocol import (
    CrawledPage,
    CrawlFailure,
    CrawlPageFrame,
    CrawlRequest,
    CrawlResult,
    MapRequest,
    MapResult,
    ReportProgress,
    RequestId,
    SendFrame,
    StopReason,
)
from ..urls import PolicyHolder, host_of, prepare_url, same_host
from .politeness import Politeness, retry_after_s
from .robots import ALLOW_ALL, MAX_ROBOTS_BYTES, Robots, disallow_all, parse_robots
from .sitemap import Sitemap, SitemapError, SitemapParser

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("webfetch.crawl")

MAX_SITEMAPS = 100        # sitemap files read for one request (indexes included)
# URLs taken from sitemaps for one request, all files together: one sitemap's worth. A crawl visits at most a
# few hundred pages, and 100 sitemaps of 50 000 long URLs each queued and remembered were gigabytes.
MAX_SITEMAP_URLS = 50_000
MAX_REDIRECTS = 5         # for robots.txt and sitemaps (RFC 9309 asks for at least five)
MAX_RETRIES = 3           # a page or file answered 429/503 is tried this many times in all
HTTP_TIMEOUT_S = 30.0     # one robots.txt or sitemap download
RETRYABLE = (429, 503)
OFFERS_PER_CHECKPOINT = 16  # URLs robots.txt judges in one thread call (one abandoned at the deadline ends after them)
DEFAULT_DOCUMENTS = ("index.html", "index.htm")  # what a server answers for a directory: the same page
# A crawl's pages share one result: each gets an equal share of crawl.result_chars, never fewer than this
MIN_PAGE_CHARS = 1000


@dataclass(frozen=True)
class Scope:
    """Which URLs a crawl may visit: the start URL's scheme, host and port, under its directory (the path up
    to its last `/`) (`admits`), matching an `include` pattern if any are given and no `exclude` pattern
    (webfetch/parse/crawl_patterns.py: matched in a worker process, `Crawler._offer`)."""

    origin: str
    prefix: str
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @classmethod
    def of(cls, start: str, include: list[str], exclude: list[str]) -> Scope:
        crawl_patterns.check_globs(include, exclude)   # regular expressions: compiled in a worker (_begin)
        parts = urlsplit(start)
        prefix = parts.path[:parts.path.rfind("/") + 1] or "/"
        return cls(f"{parts.scheme}://{parts.netloc}", prefix, tuple(include), tuple(exclude))

    def moved_to(self, url: str) -> Scope:
        """This scope on `url`'s origin and directory (the start URL redirected there), patterns kept."""
        parts = urlsplit(url)
        return replace(self, origin=f"{parts.scheme}://{parts.netloc}",
                       prefix=parts.path[:parts.path.rfind("/") + 1] or "/")

    def admits(self, url: str) -> bool:
        """On the scope's origin, under its directory (the patterns are matched apart)."""
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.netloc}" == self.origin and parts.path.startswith(self.prefix)

    @property
    def patterned(self) -> bool:
        return bool(self.include or self.exclude)


def visit_key(url: str) -> str:
    """What a crawl counts a URL as, for "seen": a directory's default document (`/guide/index.html`,
    `/guide/index.htm`) is the directory (`/guide/`), so a site that links both ways gives one page, not
    two. The URL first met is the one visited and listed. (The directory is always in the scope when its
    index is: the scope is a directory prefix.)"""
    parts = urlsplit(url)
    head, _, last = parts.path.rpartition("/")
    if last in DEFAULT_DOCUMENTS:
        return urlunsplit(parts._replace(path=head + "/"))
    return url


def path_of(url: str) -> str:
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


@dataclass
class _Content:
    """How much of each page's markdown a crawl's result carries: `share` a page, `left` for all of them, and
    where its pages go whole (`send`: the client's `page` frames, when it asked to stream them)."""

    share: int
    left: int
    send: SendFrame | None = None
    rid: RequestId = None        # the request's id, on its `page` frames
    cut: int = 0                 # pages whose content in the result is not whole


@dataclass
class _Run:
    """One crawl or map in progress: the frontier, what was found, why it stopped."""

    kind: Literal["crawl", "map"]
    start: str
    scope: Scope
    robots: Robots
    limit: int
    depth: int
    fresh: bool
    progress: ReportProgress
    timeout: float
    deadline: float                                                     # trio's clock
    queue: deque[tuple[str, int, int]] = field(default_factory=deque)   # url, depth, attempts
    seen: set[str] = field(default_factory=set)
    pages: list[CrawledPage] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)                       # map: what it found, in order
    failed: list[CrawlFailure] = field(default_factory=list)
    errors: int = 0
    in_flight: int = 0
    sitemaps: list[str] = field(default_factory=list)
    sitemap_urls: int = 0     # URLs taken from sitemaps so far (MAX_SITEMAP_URLS)
    notes: list[str] = field(default_factory=list)
    disallowed: int = 0
    matching_cut: int = 0     # URLs whose include/exclude matching was cancelled (the deadline, or the limit)
    stopped: StopReason | None = None
    changed: trio.Event = field(default_factory=trio.Event)
    content: _Content | None = None   # a crawl's; None for a map

    def unseen(self, urls: Iterable[str], depth: int) -> list[str]:
        """The URLs not seen yet, within the depth and the scope's directory, each once, in order."""
        if depth > self.depth:
            return []
        return [u for u in dict.fromkeys(urls) if visit_key(u) not in self.seen and self.scope.admits(u)]

    def offer(self, url: str, depth: int, allowed: bool | None = None) -> bool:
        """Queue `url` (from `unseen`, its patterns matched) if it is still new and robots.txt allows it
        (`allowed`, when the caller has asked robots.txt already); map: record it."""
        if visit_key(url) in self.seen:
            return False
        self.seen.add(visit_key(url))
        if not (self.robots.allowed(path_of(url)) if allowed is None else allowed):
            self.disallowed += 1
            return False
        if self.kind == "map" and len(self.urls) < self.limit:
            self.urls.append(url)
        self.queue.append((url, depth, 0))
        return True

    @property
    def done(self) -> int:
        return len(self.pages) if self.kind == "crawl" else len(self.urls)

    def report(self, what: str) -> None:
        """Progress in the op's own name (`crawl` or `map`): what is done, queued and failed, and `what` now."""
        noun = "page" if self.kind == "crawl" else "URL"
        self.progress(self.kind, f"{self.done} {noun}{'' if self.done == 1 else 's'} done, "
                                 f"{len(self.queue)} queued, {len(self.failed)} failed: {what}")


def _sitemaps_cut(run: _Run, todo: deque[str], read: int) -> str | None:
    """The note for sitemaps left unread by a bound, if one was reached (not for the crawl's limit)."""
    if run.sitemap_urls >= MAX_SITEMAP_URLS:
        return f"the sitemaps list more than {MAX_SITEMAP_URLS} URLs: the rest were not read"
    if todo and read >= MAX_SITEMAPS:
        return f"more than {MAX_SITEMAPS} sitemaps: the rest were not read"
    return None


def _robots_verdicts(robots: Robots, urls: list[str]) -> list[bool]:
    """Whether robots.txt allows each of `urls` (run in a thread: see Crawler._offer)."""
    return [robots.allowed(path_of(u)) for u in urls]


class Crawler:
    def __init__(self, config: Config, policy: PolicyHolder, pipeline: Pipeline, extractor: Extractor,
                 proxy_url: Callable[[], Awaitable[str | None]] | None = None) -> None:
        """`proxy_url` gives the address-policy proxy robots.txt and sitemaps are read through, as pages are
        (None when pages go without it: the policy is then checked by name, as for pages)."""
        self.config = config
        self.policy = policy
        self.proxy_url = proxy_url
        self.pipeline = pipeline
        self.extractor = extractor
        self.politeness = Politeness(config.crawl.per_host)

    def reconfigure(self, config: Config) -> None:
        self.config = config
        self.politeness.reconfigure(config.crawl.per_host)

    async def crawl(self, req: CrawlRequest, progress: ReportProgress, rid: RequestId = None,
                    send: SendFrame | None = None) -> CrawlResult:
        """`send` takes the `page` frames of a crawl asked to `stream`; `rid` is their id."""
        run, robots_state = await self._begin("crawl", req, progress)
        total = self.config.crawl.result_chars
        share = req.max_chars or max(MIN_PAGE_CHARS, total // req.limit)
        run.content = _Content(share, total, send if req.stream else None, rid)
        await self._run(run)
        return CrawlResult(url=run.start, pages=run.pages, failed=run.failed, stopped=run.stopped or "limit",
                           queued=len(run.queue), robots=robots_state, sitemaps=run.sitemaps,
                           notes=self._notes(run))

    async def map(self, req: MapRequest, progress: ReportProgress) -> MapResult:
        run, robots_state = await self._begin("map", req, progress)
        await self._run(run)
        return MapResult(url=run.start, urls=run.urls, failed=run.failed, stopped=run.stopped or "limit",
                         queued=len(run.queue), robots=robots_state, sitemaps=run.sitemaps, notes=self._notes(run))

    def _notes(self, run: _Run) -> list[str]:
        notes = list(run.notes)
        if run.matching_cut and run.stopped == "deadline":  # not a match the limit's end cut short
            notes.append(f"the deadline passed while the include/exclude patterns were matched against "
                         f"{run.matching_cut} URLs: a regular expression that backtracks (nested repeats such as "
                         f"(a+)+ or (.*)*) can take for ever; simplify it, or write a glob")
        if run.content is not None and run.content.cut:
            n, share = run.content.cut, run.content.share
            notes.append(f"{n} page{'s' if n != 1 else ''} longer than {'their' if n != 1 else 'its'} share of the "
                         f"result ({share} characters a page, {self.config.crawl.result_chars} in all: "
                         f"crawl.result_chars): `content` holds the beginning, `next_offset` where `fetch` of the "
                         f"page's url with that `offset` reads on (from the cache while it holds the page)")
        if run.disallowed:
            notes.append(f"{run.disallowed} URL{'s' if run.disallowed != 1 else ''} in scope left out: robots.txt "
                         f"disallows them")
        return notes

    async def _begin(self, kind: Literal["crawl", "map"], req: CrawlRequest | MapRequest,
                     progress: ReportProgress) -> tuple[_Run, Literal["obeyed", "ignored", "none"]]:
        """The start URL checked (address policy, robots.txt), the scope and the first URLs to visit."""
        timeout = req.timeout_s or self.config.crawl.timeout_s
        deadline = trio.current_time() + timeout   # robots.txt and the sitemaps count against it too
        if req.include or req.exclude:   # a bad pattern is refused before anything is asked of the network
            with trio.move_on_at(deadline) as compiling:
                trouble = await self.extractor.patterns_problem(req.include, req.exclude)
            if compiling.cancelled_caught:
                raise Timeout(f"compiling the include/exclude patterns took more than {timeout:g} s: write "
                              f"simpler regular expressions, or globs")
            if trouble is not None:
                raise BadRequest(trouble)
        start = await prepare_url(req.url, self.policy.current)
        scope = Scope.of(start, req.include, req.exclude)
        run: _Run | None = None
        state: Literal["obeyed", "ignored", "none"] = "none"
        with trio.move_on_at(deadline):
            robots, state = await self._robots(start, kind, progress)
            run = _Run(kind, start, scope, robots, req.limit, req.depth, req.fresh, progress, timeout, deadline)
        if run is None:
            raise Timeout(f"{urljoin(start, '/robots.txt')} was not read within the crawl's {timeout:g} s; pass a "
                          f"larger `timeout_s`")
        if not await trio.to_thread.run_sync(robots.allowed, path_of(start), abandon_on_cancel=True):
            why = (f"its robots.txt could not be read ({robots.why}), which RFC 9309 says to take as disallowing "
                   f"everything" if robots.disallow_all else f"its robots.txt disallows {path_of(start)}")
            raise RobotsDisallowed(f"{start} is closed to crawlers: {why}. Fetch single pages with `fetch` (which "
                                   f"does not read robots.txt), or, for a site of your own, set "
                                   f"crawl.ignore_robots = true in the config")
        if robots.cut:
            run.notes.append(f"{urljoin(start, '/robots.txt')} is longer than {MAX_ROBOTS_BYTES} bytes: its rules "
                             f"past that were ignored, as RFC 9309 allows")
        run.seen.add(visit_key(start))
        run.queue.append((start, 0, 0))
        if kind == "map":
            run.urls.append(start)
        with trio.move_on_at(deadline):
            await self._read_sitemaps(run, robots, state != "ignored")
        return run, state

    async def _robots(self, start: str, kind: Literal["crawl", "map"],
                      progress: ReportProgress) -> tuple[Robots, Literal["obeyed", "ignored", "none"]]:
        if self.config.crawl.ignore_robots:
            return ALLOW_ALL, "ignored"
        url = urljoin(start, "/robots.txt")
        progress(kind, f"reading {url}")
        try:
            body, cut = await self._get_bytes(url, MAX_ROBOTS_BYTES)
        except HttpError as e:
            if e.status is not None and e.status < 500 and e.status not in RETRYABLE:
                return ALLOW_ALL, "none"   # RFC 9309: a 4xx robots.txt means no rules
            return disallow_all(f"HTTP {e.status}" if e.status else e.message), "obeyed"
        except (NetworkError, Timeout) as e:
            return disallow_all(e.message), "obeyed"
        robots = parse_robots(body.decode("utf-8", errors="replace"))
        return (replace(robots, cut=True) if cut else robots), "obeyed"

    async def _read_sitemaps(self, run: _Run, robots: Robots, from_robots: bool) -> None:
        """The sitemaps robots.txt names (else /sitemap.xml), indexes followed, each file once; their URLs are
        queued at depth 1. A sitemap that fails is a note: the links still lead through the site."""
        todo = deque([*robots.sitemaps] if from_robots and robots.sitemaps else [urljoin(run.start, "/sitemap.xml")])
        read: set[str] = set()
        while todo and len(read) < MAX_SITEMAPS and run.done < run.limit and run.sitemap_urls < MAX_SITEMAP_URLS:
            url = todo.popleft()
            normal = normalize_link(url, run.start)
            if normal is None or normal in read:
                continue   # an index that lists itself, or two that list each other
            if not same_host(normal, run.start):
                run.notes.append(f"sitemap {normal} skipped: on another host than the crawl's")
                continue
            read.add(normal)
            run.report(f"reading sitemap {normal}")
            try:
                sitemap = await self._sitemap(normal)
            except (WebfetchError, SitemapError) as e:
                if not (isinstance(e, HttpError) and e.status == 404 and not robots.sitemaps):
                    run.notes.append(f"sitemap {normal} skipped: {e}")
                continue
            await self._took_sitemap(run, normal, sitemap, todo)
        cut = _sitemaps_cut(run, todo, len(read))
        if cut is not None:
            run.notes.append(cut)

    async def _took_sitemap(self, run: _Run, url: str, sitemap: Sitemap, todo: deque[str]) -> None:
        """An index's sitemaps join `todo`; a urlset's URLs are offered at depth 1."""
        run.sitemaps.append(url)
        if sitemap.cut:
            run.notes.append(f"sitemap {url} lists more URLs than a sitemap may (50 000); the rest skipped")
        if sitemap.kind == "sitemapindex":
            todo.extend(sitemap.locs[:MAX_SITEMAPS])   # no more are read, whatever an index lists
            return
        locs = sitemap.locs[:MAX_SITEMAP_URLS - run.sitemap_urls]
        run.sitemap_urls += len(locs)
        links = (normalize_link(loc, url) for loc in locs)
        await self._offer(run, (link for link in links if link is not None), 1)

    async def _offer(self, run: _Run, links: Iterable[str], depth: int) -> None:
        """Offer the new links in the scope's directory to the run, those its include/exclude patterns
        refuse left out: the patterns are matched in a worker process, all the links in one job, where the
        crawl's deadline can stop a regular expression that backtracks; robots.txt's rules are matched in a
        thread, OFFERS_PER_CHECKPOINT links at a time: each rule is linear in the URL, but a file of thousands of
        rules against a sitemap of long URLs is still seconds of work that the event loop must not hold (the
        thread is abandoned at the deadline, with at most one such batch left to finish)."""
        fresh = run.unseen(links, depth)
        if fresh and run.scope.patterned:
            try:
                kept = await self.extractor.matching(run.scope.include, run.scope.exclude,
                                                     [path_of(u) for u in fresh])
            except trio.Cancelled:
                run.matching_cut += len(fresh)
                raise
            except WebfetchError as e:  # the worker died twice on them: these links are lost, not the crawl
                run.notes.append(f"{len(fresh)} links left out: matching the include/exclude patterns failed "
                                 f"({e.message})")
                return
            fresh = [fresh[i] for i in kept]
        robots = run.robots
        for start in range(0, len(fresh), OFFERS_PER_CHECKPOINT):
            batch = [u for u in fresh[start:start + OFFERS_PER_CHECKPOINT] if visit_key(u) not in run.seen]
            if robots.rules:
                verdicts = await trio.to_thread.run_sync(_robots_verdicts, robots, batch, abandon_on_cancel=True)
            else:  # nothing to match (no robots.txt, or one that allows or refuses all): no thread to pay for
                verdicts = _robots_verdicts(robots, batch)
                await trio.lowlevel.checkpoint()
            for url, allowed in zip(batch, verdicts, strict=True):
                run.offer(url, depth, allowed)

    async def _sitemap(self, url: str) -> Sitemap:
        parser = SitemapParser(self.config.fetch.max_bytes)
        await self._get(url, self.config.fetch.max_bytes, parser.feed, cut_ok=False)
        return parser.close()

    async def _get_bytes(self, url: str, max_bytes: int) -> tuple[bytes, bool]:
        """The body's first `max_bytes` (decoded), and whether there was more."""
        buf = bytearray()
        cut = await self._get(url, max_bytes, buf.extend, cut_ok=True)
        return bytes(buf), cut

    async def _get(self, url: str, max_bytes: int, sink: Callable[[bytes], object], *, cut_ok: bool) -> bool:
        """GET a robots.txt or sitemap through the address-policy proxy (which connects only to the addresses
        it checked: no second lookup to rebind) and the host's politeness, same-host redirects followed,
        429/503 waited out (Retry-After); the body handed to `sink` as it arrives, inflated within
        `max_bytes` (webfetch/http_body.py). Whether it was cut there (only with `cut_ok`; else an error)."""
        import httpx  # here: the daemon's start does not pay for it (a crawl is rare)

        proxy = await self.proxy_url() if self.proxy_url is not None else None
        redirects = retries = 0
        headers = {"User-Agent": f"Mozilla/5.0 (compatible; webfetch/{__version__})",
                   "Accept-Encoding": ACCEPT_ENCODING}
        async with httpx.AsyncClient(headers=headers, timeout=HTTP_TIMEOUT_S, follow_redirects=False, proxy=proxy,
                                     trust_env=proxy is None) as client:
            while True:
                key = await prepare_url(url, self.policy.current)
                async with self.politeness.slot(host_of(key)):
                    try:
                        async with client.stream("GET", key) as response:
                            target = await self._answer(response, key, max_bytes, sink, cut_ok)
                    except httpx.TimeoutException:
                        raise Timeout(f"{key} did not answer within {HTTP_TIMEOUT_S:g} s") from None
                    except httpx.HTTPError as e:
                        raise NetworkError(f"{key} could not be read: {e}") from None
                    except BodyRefused as e:
                        # a robots.txt is cut, never refused for its size: a refused size is fetch.max_bytes
                        raise NetworkError(f"{key} {e}" + (" (fetch.max_bytes)" if e.too_large else "")) from None
                if isinstance(target, bool):
                    return target
                if target == key:
                    retries += 1
                else:
                    redirects += 1
                if retries >= MAX_RETRIES or redirects > MAX_REDIRECTS:
                    raise NetworkError(f"{url}: too many {'retries' if retries >= MAX_RETRIES else 'redirects'}")
                url = target

    async def _answer(self, response: httpx.Response, key: str, max_bytes: int, sink: Callable[[bytes], object],
                      cut_ok: bool) -> str | bool:
        """Read one response into `sink` (whether it was cut); or the URL to try next (a same-host redirect,
        a 429 waited out)."""
        status = response.status_code
        if 300 <= status < 400 and response.headers.get("location"):
            target = urljoin(key, response.headers["location"])
            if not same_host(target, key):
                raise HttpError(f"{key} redirects to another host ({target}); not followed", status=status)
            return target
        if status in RETRYABLE:
            wait = retry_after_s(response.headers.get("retry-after"))
            if wait > self.config.crawl.max_retry_after_s:
                raise HttpError(f"{key} answered HTTP {status} and asked to wait {wait:.0f} s", status=status)
            self.politeness.back_off(host_of(key), wait)
            return key
        if status >= 400:
            raise HttpError(f"{key} answered HTTP {status}", status=status)
        return await read_body(response, max_bytes, sink, cut_ok=cut_ok)

    async def _run(self, run: _Run) -> None:
        """Visit the queue until the limit, the end of the scope, the deadline or too many errors."""
        with trio.move_on_at(run.deadline) as deadline:
            async with trio.open_nursery() as nursery:
                while (stop := self._next(run, nursery)) is None:
                    await run.changed.wait()
                    run.changed = trio.Event()
                run.stopped = stop
                nursery.cancel_scope.cancel()
        if deadline.cancelled_caught or trio.current_time() >= run.deadline:
            run.stopped = "deadline"
            run.notes.append(f"the crawl's deadline ({run.timeout:g} s) passed; pass a larger `timeout_s` for more")
        run.report(f"stopped: {run.stopped}")

    def _next(self, run: _Run, nursery: trio.Nursery) -> StopReason | None:
        """Start what may start now; why the run is over, or None to wait for a visit to end."""
        if run.errors >= self.config.crawl.max_errors:
            return "errors"
        if run.kind == "map" and run.done >= run.limit:
            return "limit"
        workers = self.config.crawl.per_host
        while run.queue and run.in_flight < workers and (run.kind == "map" or run.done + run.in_flight < run.limit):
            url, depth, attempts = run.queue.popleft()
            if run.kind == "map" and depth >= run.depth:
                continue   # listed already; its links would be deeper than asked
            run.in_flight += 1
            nursery.start_soon(self._visit, run, url, depth, attempts)
        if run.in_flight:
            return None
        if run.kind == "crawl" and run.done >= run.limit:
            return "limit" if run.queue else "scope_exhausted"
        return "scope_exhausted"

    async def _visit(self, run: _Run, url: str, depth: int, attempts: int) -> None:
        try:
            loaded = await self._load(run, url)
        except HttpError as e:
            if e.status in RETRYABLE and attempts + 1 < MAX_RETRIES and \
                    retry_after_s(e.retry_after) <= self.config.crawl.max_retry_after_s:
                self.politeness.back_off(host_of(url), retry_after_s(e.retry_after))
                run.queue.appendleft((url, depth, attempts + 1))
            else:
                self._failed(run, url, e)
        except WebfetchError as e:
            self._failed(run, url, e)
        else:
            await self._took(run, url, depth, loaded)
        finally:
            run.in_flight -= 1
            run.changed.set()

    async def _load(self, run: _Run, url: str) -> LoadedPage:
        timeout = self.config.fetch.timeout_s
        async with self.politeness.slot(host_of(url)):
            with trio.move_on_after(timeout):
                return await self.pipeline.load_page(url, _quiet, fresh=run.fresh)
        raise Timeout(f"{url} did not finish loading within {timeout:g} s (fetch.timeout_s)")

    def _failed(self, run: _Run, url: str, error: WebfetchError) -> None:
        run.failed.append(CrawlFailure(url=url, code=error.code, message=error.message))
        run.errors += 1
        run.report(f"failed {url}: {error.code}")

    async def _took(self, run: _Run, url: str, depth: int, loaded: LoadedPage) -> None:
        page = loaded.page
        if page.redirect_url is not None:
            run.failed.append(CrawlFailure(url=url, code="redirect", message=(
                f"{url} redirects to {page.redirect_url}, on another host; not followed")))
            return
        final = normalize_link(page.final_url, url) or url
        if depth == 0 and not run.scope.admits(final) and same_host(final, url):
            run.scope = run.scope.moved_to(final)  # the site lives at its redirect's origin: crawl it there
        if visit_key(final) != visit_key(url):
            if visit_key(final) in run.seen and any(visit_key(p.final_url) == visit_key(final) for p in run.pages):
                return   # `/docs` redirected to `/docs/`, already crawled: one page, not two
            run.seen.add(visit_key(final))
        if run.content is not None:
            if len(run.pages) >= run.limit:
                return
            await self._keep(run, run.content, url, depth, loaded)
        run.report(url)
        if depth >= run.depth:
            return
        await self._offer(run, await self._links(url, loaded), depth + 1)

    @staticmethod
    async def _keep(run: _Run, content: _Content, url: str, depth: int, loaded: LoadedPage) -> None:
        """The page in the result with its share of the content (the rest stays in the cache), and sent whole
        to a client that streams the pages."""
        page = loaded.page
        whole = CrawledPage(url=url, final_url=page.final_url, depth=depth, status=page.status, title=page.title,
                            content=page.markdown, chars=len(page.markdown), extractor=page.extractor,
                            cached=loaded.cached, flags=list(page.flags), notes=list(page.notes))
        index = len(run.pages)
        # its place is taken before the frame is sent: another page may finish while this one is written
        shown, next_offset = paginate(page.markdown, 0, min(content.share, content.left), content.share)
        content.left -= len(shown)
        content.cut += next_offset is not None
        run.pages.append(replace_struct(whole, content=shown, next_offset=next_offset))
        if content.send is not None:
            await content.send(CrawlPageFrame(**asdict(whole), id=content.rid, index=index))

    async def _links(self, url: str, loaded: LoadedPage) -> list[str]:
        """The page's links from its HTML (a parser worker), else from its markdown (a page from the cache,
        or a parser that died on this page: that costs the page its HTML links, not the crawl)."""
        if loaded.source is not None:
            try:
                return list(await self.extractor.links(loaded.source.html, loaded.source.url,
                                                       loaded.source.charset))
            except WebfetchError as e:
                log.info("links of %s read from its markdown: %s", url, e.code)
        return list(markdown_links(loaded.page.markdown, loaded.page.final_url))


def _quiet(_stage: str, _message: str) -> None:
    """A crawled page's own progress is not the client's: the crawl reports pages done, queued, failed."""
