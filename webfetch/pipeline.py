"""The fetch path: address policy → cache → render → extract → shape the result (page / redirect; the
sub-agent's summary and answer plug in at `shape`). Runs in the request's own task, so the client's
cancellation and the request's deadline reach every step."""

from __future__ import annotations

import logging
import time
from typing import Callable

import msgspec
import trio

from .cache import Cache
from .chrome import Chrome
from .config import Config, default_max_renders
from .errors import BrowserCrashed, BrowserUnavailable, ExtractionFailed, Timeout
from .extractor import Extracted, Extractor
from .protocol import FetchRequest, FetchResult
from .render import render
from .subagent import SUMMARY_TASK, Subagent, SubagentFailed
from .urls import AddressPolicy, likely_key, prepare_url

log = logging.getLogger("webfetch.pipeline")

Progress = Callable[[str, str], None]

# The server's HTML "holds the content" when trafilatura finds a main text at least this long in it.
# Shorter pages, SPA shells ("Loading…", "enable JavaScript") and listings are rendered by Chrome.
ENOUGH_TEXT_CHARS = 1000
# With both extractions at hand, the rendered one wins unless it lost more than this share of the text.
RENDERED_MIN_SHARE = 0.9


class Page(msgspec.Struct, frozen=True):
    """What the cache holds for a URL: the whole extraction, before paging and shaping."""

    url: str
    final_url: str
    status: int | None
    content_type: str | None
    title: str | None
    markdown: str
    extractor: str | None
    truncated: bool
    redirect_url: str | None
    notes: tuple[str, ...] = ()


def page_size(page: Page) -> int:
    # strings dominate; count their encoded length plus a fixed overhead per entry
    return (len(page.markdown.encode()) + len(page.url) + len(page.final_url) + len(page.title or "")
            + sum(len(n) for n in page.notes) + 512)


def paginate(text: str, offset: int, max_chars: int, max_lines: int) -> tuple[str, int | None]:
    """The slice of `text` from `offset`: at most `max_chars` characters and `max_lines` lines, cut at a line
    boundary where possible. Returns (content, next_offset or None at the end)."""
    if offset >= len(text):
        return "", None
    end = min(len(text), offset + max_chars)
    chunk = text[offset:end]
    cut = -1
    for _ in range(max_lines):
        cut = chunk.find("\n", cut + 1)
        if cut < 0:
            break
    if cut >= 0:  # more than max_lines lines: end after the last allowed line
        chunk = chunk[:cut + 1]
    elif end < len(text):
        last = chunk.rfind("\n")
        if last > 0:
            chunk = chunk[:last + 1]
    stop = offset + len(chunk)
    return chunk, (stop if stop < len(text) else None)


class Pipeline:
    def __init__(self, config: Config, policy: AddressPolicy, chrome: Chrome, cache: Cache[Page],
                 extractor: Extractor, subagent: Subagent) -> None:
        self.config = config
        self.subagent = subagent
        self.chrome = chrome
        self.cache = cache
        self.extractor = extractor
        self.policy = policy
        self.renders = 0  # how many times Chrome was asked to load a page (tests count these)
        self.render_slots = trio.CapacityLimiter(config.browser.max_renders or default_max_renders())

    async def fetch(self, req: FetchRequest, progress: Progress) -> FetchResult:
        if not req.fresh:
            # Entries exist only for URLs that passed the address policy, and a hit loads nothing.
            hit = self.cache.lookup(likely_key(req.url, self.policy))
            if hit is not None:
                return await self.shape(req, hit[0], hit[1], True, progress)
        key = await prepare_url(req.url, self.policy)
        timeout = req.timeout_s or self.config.fetch.timeout_s
        progress("cache", f"looking up {key}")
        try:
            with trio.fail_after(timeout):
                page, age, cached = await self.cache.get_or_load(key, lambda: self._load(key, progress),
                                                                 fresh=req.fresh)
        except trio.TooSlowError:
            raise Timeout(f"{key} did not finish loading within {timeout:g} s; try again, or pass a larger "
                          f"timeout_s if the site is slow") from None
        return await self.shape(req, page, age, cached, progress)

    async def shape(self, req: FetchRequest, page: Page, age: float, cached: bool,
                    progress: Progress) -> FetchResult:
        """The result the request asked for: an answer to its prompt, a summary of a page too large for
        one reply, a slice of the raw markdown, or a redirect. When the sub-agent fails, the first page
        of raw content with a note saying why."""
        base = dict(url=page.url, final_url=page.final_url, status=page.status, content_type=page.content_type,
                    title=page.title, cached=cached, age_s=round(age, 3), extractor=page.extractor,
                    truncated=page.truncated, notes=list(page.notes))
        if page.redirect_url is not None:
            return FetchResult(kind="redirect", redirect_url=page.redirect_url, **base, content=(
                f"{page.url} redirects to {page.redirect_url}, on a different host. webfetch does not follow "
                f"cross-host redirects; fetch {page.redirect_url} if you want its content."))
        fc = self.config.fetch
        total = len(page.markdown)
        offset = req.offset or 0
        max_chars = req.max_chars or fc.page_chars
        content, next_offset = paginate(page.markdown, offset, max_chars, fc.page_lines)
        task = None
        if req.prompt is not None:
            task = f"Question about this page: {req.prompt}"
        elif req.offset is None and not req.raw and paginate(page.markdown, 0, fc.page_chars,
                                                              fc.page_lines)[1] is not None:
            task = SUMMARY_TASK
        if task is not None:
            try:
                answer = await self.subagent.ask(page.markdown, page.final_url, task, model=req.model,
                                                 thinking=req.thinking, progress=progress)
            except SubagentFailed as e:
                base["notes"].append(f"{e}; here is the page's raw content instead")
            else:
                if req.prompt is not None:
                    return FetchResult(kind="answer", content=answer.text, model=answer.model,
                                       total_chars=total, **base)
                return FetchResult(kind="summary", model=answer.model, total_chars=total, **base,
                                   content=answer.text.rstrip() + "\n\n" + self._paging_facts(total))
        if offset > len(page.markdown):
            base["notes"].append(f"offset {offset} is past the end of the content ({len(page.markdown)} "
                                 f"characters)")
        return FetchResult(kind="page", content=content, offset=offset, next_offset=next_offset,
                           total_chars=len(page.markdown), **base)

    def _paging_facts(self, total: int) -> str:
        fc = self.config.fetch
        pages = -(-total // fc.page_chars)
        return (f"---\nThe page holds {total} characters of markdown, about {pages} pages of {fc.page_chars} "
                f"characters (at most {fc.page_lines} lines each), too much for one reply. For specific "
                f"information, fetch the same URL again with a `prompt` saying what you need: the page is "
                f"cached, so that is fast. To read the raw markdown, fetch it with `offset` 0, then with each "
                f"reply's `next_offset`.")

    async def _load(self, key: str, progress: Progress) -> Page:
        started = time.monotonic()
        fc = self.config.fetch
        bc = self.config.browser
        from_server: Extracted | None = None

        async def server_html(body: bytes, charset: str | None, url: str) -> bool:
            # Extract from the HTML as the server sent it, before Chrome renders anything: for most of the
            # web that is the content, found in a fraction of the time and without scripts' clutter.
            nonlocal from_server
            progress("extract", "extracting the main content from the server's HTML")
            try:
                from_server = await self.extractor.html(body, url, charset)
            except ExtractionFailed:
                from_server = None
                return False
            return (fc.render == "auto" and from_server.extractor in ("trafilatura", "readability")
                    and from_server.text_len >= ENOUGH_TEXT_CHARS)

        if self.render_slots.available_tokens == 0:
            progress("queued", f"waiting for a browser tab ({self.render_slots.total_tokens} pages are loading)")
        for attempt in (1, 2):
            from_server = None
            try:
                self.renders += 1
                async with self.render_slots, self.chrome.open_tab() as tab:
                    rendered = await render(tab, key, policy=self.policy, settle_s=bc.settle_s,
                                            max_bytes=fc.max_bytes, block_types=bc.block_resources,
                                            progress=progress, body_check=server_html)
                break
            except BrowserCrashed as e:
                if attempt == 2:
                    raise BrowserUnavailable(f"the browser failed twice while loading {key} ({e}); "
                                             f"try again in a few seconds") from None
                log.warning("browser went away while loading %s (%s); retrying once", key, e)
                progress("render", f"loading again: {e}")
        render_ms = (time.monotonic() - started) * 1000
        notes = list(rendered.notes)
        if rendered.truncated:
            notes.append(f"the response was larger than {fc.max_bytes} bytes and was cut there before "
                         f"extraction")
        common = dict(url=key, final_url=rendered.final_url, status=rendered.status,
                      content_type=rendered.content_type, truncated=rendered.truncated)
        if rendered.redirect_url is not None:
            return Page(title=None, markdown="", extractor=None, redirect_url=rendered.redirect_url,
                        notes=tuple(notes), **common)
        title = rendered.title
        if rendered.raw:
            progress("extract", "reading the text body")
            extracted = await self.extractor.raw(rendered.body or b"", rendered.content_type, rendered.charset)
        elif not rendered.rendered:
            assert from_server is not None
            extracted = from_server
        else:
            progress("extract", "extracting the main content")
            try:
                extracted = await self.extractor.html(rendered.html or "", rendered.final_url)
            except ExtractionFailed:
                if from_server is None:
                    raise
                extracted = from_server
            if from_server is not None and extracted.text_len < RENDERED_MIN_SHARE * from_server.text_len:
                extracted = from_server  # scripts took text away (or rendering broke it)
        title = title or extracted.title
        if rendered.rendered:
            log.info("loaded %s: rendered in %.0f ms, extracted in %.0f ms, %d chars via %s", key, render_ms,
                     (time.monotonic() - started) * 1000 - render_ms, len(extracted.markdown), extracted.extractor)
        else:
            log.info("loaded %s: %.0f ms, not rendered (%s), %d chars via %s", key, render_ms,
                     "text body" if rendered.raw else "the server's HTML held the content",
                     len(extracted.markdown), extracted.extractor)
        return Page(title=title, markdown=extracted.markdown, extractor=extracted.extractor,
                    redirect_url=None, notes=tuple(notes), **common)
