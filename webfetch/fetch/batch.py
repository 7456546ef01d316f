"""Many URLs in one fetch (`urls`): each URL fetched as a `url` of its own would be, a few at a time, each
page's frame sent the moment it is ready, and a URL that fails is its own frame, never the batch's end."""

from __future__ import annotations

import logging

import trio
from msgspec.structs import asdict, replace

from ..errors import Internal, WebfetchError
from ..protocol import (
    BatchEntry,
    BatchResult,
    FetchRequest,
    FetchResult,
    PageError,
    PageFailed,
    PageFrame,
    ReportProgress,
    RequestId,
    SendFrame,
    Stage,
)
from .pipeline import Pipeline

log = logging.getLogger("webfetch.batch")

# A batch's pages share one reply: without `max_chars`, each page gets an equal share of one page's
# characters (fetch.page_chars), but never fewer than this; `next_offset` reads on in a page.
MIN_PAGE_CHARS = 1000

async def fetch_batch(pipeline: Pipeline, req: FetchRequest, rid: RequestId, progress: ReportProgress,
                      send: SendFrame) -> BatchResult:
    """Fetch `req.urls`, sending a `page` frame per URL as it ends; the result sums them up in order.

    At most as many pages load at once as the browser has tabs (browser.max_renders), so a batch of 50
    never opens 50 tabs and a fetch from another client waits its turn beside the batch's, not behind all
    of it. Without a `prompt`, pages are read raw (no sub-agent summary per page): an agent reads a page
    on by its `next_offset`; with one, each page's answer is the sub-agent's, under its own limits."""
    await pipeline.checked(req)  # a bad pattern or schema is the batch's error, before anything loads
    urls = req.urls or []
    budget = req.max_chars or max(MIN_PAGE_CHARS, pipeline.config.fetch.page_chars // len(urls))
    single = replace(req, urls=None, max_chars=budget, raw=req.raw or (req.prompt is None and req.schema is None))
    at_once = trio.CapacityLimiter(max(1, min(len(urls), pipeline.render_slots.total_tokens)))
    entries: list[BatchEntry] = [BatchEntry(index=i, url=u) for i, u in enumerate(urls)]

    async def one(i: int, url: str) -> None:
        def page_progress(stage: Stage, message: str) -> None:
            progress(stage, f"[{i + 1}/{len(urls)}] {message}")

        try:
            async with at_once:
                result = await pipeline.fetch(replace(single, url=url), page_progress, checked=True)
        except WebfetchError as e:
            entries[i] = BatchEntry(index=i, url=url, error=e.code, message=e.message)
            await send(PageFailed(id=rid, index=i, url=url, error=_page_error(e)))
            return
        except Exception as e:  # a bug on one page must not take the others with it
            log.exception("batch page %d (%s) failed", i, url)
            err = Internal(f"internal error ({type(e).__name__}: {e}); this is a bug in webfetch, the daemon's "
                           f"log has the traceback")
            entries[i] = BatchEntry(index=i, url=url, error=err.code, message=err.message)
            await send(PageFailed(id=rid, index=i, url=url, error=_page_error(err)))
            return
        entries[i] = _entry(i, url, result)
        await send(PageFrame(**asdict(replace(result, id=rid)), index=i))

    progress("queued", f"fetching {len(urls)} URLs, at most {at_once.total_tokens} at once")
    async with trio.open_nursery() as nursery:
        for i, url in enumerate(urls):
            nursery.start_soon(one, i, url)
    failed = sum(1 for e in entries if e.error is not None)
    return BatchResult(pages=entries, fetched=len(urls) - failed, failed=failed, content=_summary(entries))


def _page_error(e: WebfetchError) -> PageError:
    return PageError(code=e.code, message=e.message, status=e.status, content_type=e.content_type,
                     retry_after=e.retry_after)


def _entry(i: int, url: str, r: FetchResult) -> BatchEntry:
    return BatchEntry(index=i, url=url, kind=r.kind, final_url=r.final_url, title=r.title, total_chars=r.total_chars,
                      next_offset=r.next_offset, flags=list(r.flags))


def _summary(entries: list[BatchEntry]) -> str:
    """One line per URL, in the order given: what came of it."""
    lines = []
    for e in entries:
        if e.error is not None:
            lines.append(f"{e.index + 1}. {e.url} — failed ({e.error}): {e.message}")
            continue
        facts = [f"{e.total_chars} characters"]
        if e.next_offset is not None:
            facts.append(f"more from offset {e.next_offset}")
        if e.flags:
            facts.append("flags: " + ", ".join(e.flags))
        lines.append(f"{e.index + 1}. {e.url} — {e.title or '(no title)'} ({'; '.join(facts)})")
    failed = sum(1 for e in entries if e.error is not None)
    head = f"{len(entries) - failed} of {len(entries)} URLs fetched" + (f", {failed} failed" if failed else "")
    return head + "\n" + "\n".join(lines)
