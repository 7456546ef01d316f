"""The extractor actor: trafilatura to markdown in worker threads, a whole-page fallback, raw text bodies."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass

import lxml.html
import markdownify
import trafilatura
import trio

from .errors import ExtractionFailed

log = logging.getLogger("webfetch.extractor")

# trafilatura keeps the main content only; when it keeps less than this share of a page's visible text,
# and the page holds a fair amount of text, it has missed the point (a listing, a forum thread): convert
# the whole page instead. Tuned on ../shared/corpus with bin/bench's word F1: 3 % lifts the mixed page
# types (0.868 -> 0.871) and leaves every article alone; 10 % cost the articles 0.017.
FALLBACK_SHARE = 0.03
FALLBACK_MIN_VISIBLE = 1000
# trafilatura's output with every link and heading lost, while it covers nearly the whole page: an index.
STRUCTURELESS_MAX_COVER = 1.5
_NOISE = "//script|//style|//noscript|//template|//svg|//head|//iframe|//object|//canvas"
_LINK_TARGET = re.compile(r"\]\([^)]*\)")
_MARKDOWN = re.compile(r"^(#{1,6} |[-*+] |\d+\. |\||> |```)|\]\(|\*\*", re.M)


@dataclass
class Extracted:
    markdown: str
    extractor: str  # "trafilatura" | "fallback" | "raw"
    title: str | None = None

    @property
    def text_len(self) -> int:
        """Characters of text, not counting white space or link targets."""
        return len("".join(_LINK_TARGET.sub("]", self.markdown).split()))


def _title(doc: lxml.html.HtmlElement | None) -> str | None:
    if doc is None:
        return None
    title = doc.findtext(".//title")
    return " ".join(title.split()) or None if title else None


def visible_text_len(doc: lxml.html.HtmlElement) -> int:
    for bad in doc.xpath(_NOISE):
        bad.drop_tree()
    return len("".join(doc.text_content().split()))


def trafilatura_markdown(html: str | bytes, url: str | None) -> str:
    """The equivalent of `trafilatura --markdown --formatting` with links and tables kept."""
    return trafilatura.extract(
        html, url=url, output_format="markdown", include_formatting=True, include_links=True,
        include_tables=True, include_comments=False, include_images=False, with_metadata=False) or ""


def fallback_markdown(doc: lxml.html.HtmlElement) -> str:
    """The whole page as markdown: headings, lists, links, tables and code blocks kept; scripts dropped."""
    body = doc.find("body")
    html = lxml.html.tostring(body if body is not None else doc, encoding="unicode")
    md = markdownify.markdownify(html, heading_style="ATX", bullets="-", strip=["img"],
                                 code_language_callback=None)
    return re.sub(r"\n{3,}", "\n\n", md).strip()


def _structureless(md: str) -> bool:
    """trafilatura's last-resort baseline returns the page's text as bare short lines, every heading, list,
    table and link lost: the sign that it found no main content (an index, a listing)."""
    lines = [line for line in md.splitlines() if line.strip()]
    if len(lines) < 8 or _MARKDOWN.search(md):
        return False
    return sum(map(len, lines)) / len(lines) < 60


def extract_html(html: str | bytes, url: str | None, charset: str | None = None) -> Extracted:
    """Main content as markdown; the whole page when trafilatura misses it. ExtractionFailed when no text.
    Bytes are decoded with `charset` (the Content-Type header's) if given, else as the page declares."""
    if isinstance(html, bytes) and charset:
        try:
            html = html.decode(charset, errors="replace")
        except LookupError:
            pass
    main = trafilatura_markdown(html, url).strip()
    try:
        doc = lxml.html.fromstring(html if html else "<html></html>")
    except (lxml.etree.ParserError, ValueError):
        doc = None
    title = _title(doc)
    visible = visible_text_len(doc) if doc is not None else 0
    main_len = len("".join(main.split()))
    missed = ((visible >= FALLBACK_MIN_VISIBLE and main_len < FALLBACK_SHARE * visible)
              or (_structureless(main) and visible <= STRUCTURELESS_MAX_COVER * main_len))
    if main and not missed:
        return Extracted(main, "trafilatura", title)
    if doc is not None and visible:
        whole = fallback_markdown(doc)
        if len("".join(whole.split())) >= main_len:
            return Extracted(whole, "fallback", title)
    if main:
        return Extracted(main, "trafilatura", title)
    raise ExtractionFailed("no text could be extracted from the page (it may be empty, or all images or "
                           "scripts); try the URL in a browser, or fetch a more specific page")


def decode_text(body: bytes, charset: str | None) -> str:
    if charset:
        try:
            return body.decode(charset, errors="replace")
        except LookupError:
            pass
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        from charset_normalizer import from_bytes  # trafilatura's own dependency
        best = from_bytes(body).best()
        return str(best) if best is not None else body.decode("utf-8", errors="replace")


def extract_raw(body: bytes, mime: str | None, charset: str | None) -> Extracted:
    """A text body as is; JSON pretty-printed."""
    text = decode_text(body, charset)
    if mime and (mime.endswith("json")):
        try:
            text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            pass  # a cut or broken JSON body is still worth reading
    if not text.strip():
        raise ExtractionFailed("the response body is empty")
    return Extracted(text, "raw")


class Extractor:
    """Runs extraction in worker threads, at most `threads` at once, so the event loop never blocks."""

    def __init__(self, threads: int) -> None:
        self.limiter = trio.CapacityLimiter(threads)

    async def html(self, html: str | bytes, url: str | None, charset: str | None = None) -> Extracted:
        return await trio.to_thread.run_sync(extract_html, html, url, charset, limiter=self.limiter,
                                             abandon_on_cancel=True)

    async def raw(self, body: bytes, mime: str | None, charset: str | None) -> Extracted:
        return await trio.to_thread.run_sync(extract_raw, body, mime, charset, limiter=self.limiter,
                                             abandon_on_cancel=True)
