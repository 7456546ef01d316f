"""PDF to markdown with PDFium (pypdfium2): the text of each page as positioned segments, read column by
column on two-column pages, headings where the font is larger than the body text's, pages marked."""

from __future__ import annotations

import ctypes
import re
import threading
from collections import Counter
from dataclasses import dataclass, field

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from ..errors import ExtractionFailed

# PDFium is not thread-safe: one document at a time in this process.
_PDFIUM = threading.Lock()

# A horizontal gap wider than this many font sizes splits a line into segments (columns, table cells).
SEGMENT_GAP_EM = 1.2
# A line whose font is at least this much larger than the body text's is a heading (when short).
HEADING_MIN_RATIO = 1.15
HEADING_MAX_CHARS = 150
# A page reads as two columns when both halves hold at least this many segments, mostly full lines.
COLUMN_MIN_SEGMENTS = 5
COLUMN_MIN_WIDTH_SHARE = 0.3
# Lines of one paragraph are at most this many font sizes apart, baseline to baseline (typesetters use
# 1.1-1.3); the space between paragraphs makes the step larger.
PARAGRAPH_MAX_LEADING = 1.45
PAGE_MARGIN_SHARE = 0.08  # top and bottom share of a page where a lone number is a page number
_PAGE_NUMBER = re.compile(r"^(page\s+)?\d{1,4}(\s*(/|of)\s*\d{1,4})?$", re.I)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_SPACES = re.compile(r" {1,}")


@dataclass
class Segment:
    """A run of text on one line of a page, with its font size and box (PDF points, y grows upwards)."""

    text: str
    size: float
    x0: float
    x1: float
    bottom: float
    top: float
    baseline: float = 0.0
    column: int = 0  # 0 spanning or single column, 1 left, 2 right


@dataclass
class PdfText:
    markdown: str
    title: str | None
    pages: int
    notes: list[str] = field(default_factory=list)


def is_pdf(body: bytes) -> bool:
    """True when the bytes start like a PDF (the header may follow up to 1 KiB of junk)."""
    return b"%PDF-" in body[:1024]


def extract_pdf(body: bytes, cut: bool = False) -> PdfText:
    """The PDF's text as markdown. ExtractionFailed, with what to do, for an encrypted, broken, cut or
    scanned (no text layer) PDF. `cut`: the body was cut at the size cap."""
    if not is_pdf(body):
        raise ExtractionFailed("the response claims to be a PDF but is not one (no %PDF- header)")
    with _PDFIUM:
        try:
            doc = pdfium.PdfDocument(body)
        except pdfium.PdfiumError as e:
            raise _open_error(e, cut) from None
        try:
            title = _metadata_title(doc)
            pages = [_page_segments(doc[i]) for i in range(len(doc))]
        finally:
            doc.close()
    return _to_markdown(pages, title)


def _open_error(e: pdfium.PdfiumError, cut: bool) -> ExtractionFailed:
    if getattr(e, "err_code", None) == pdfium_c.FPDF_ERR_PASSWORD:
        return ExtractionFailed("the PDF is encrypted with a password; webfetch cannot open it. Look for "
                                "an unprotected copy or an HTML version of the document")
    if cut:
        return ExtractionFailed("the PDF is larger than fetch.max_bytes and was cut there, and a cut PDF "
                                "cannot be read; raise fetch.max_bytes in the config to read it")
    return ExtractionFailed(f"the PDF is damaged and cannot be read ({e}); try the URL again, or look for "
                            f"an HTML version of the document")


def _metadata_title(doc: pdfium.PdfDocument) -> str | None:
    title = " ".join((doc.get_metadata_value("Title") or "").split())
    # word processors fill the field with the file name; that is no title
    if not title or re.search(r"\.(docx?|pdf|tex|indd|odt)$", title, re.I) or title.lower() == "untitled":
        return None
    return title


def _page_segments(page: pdfium.PdfPage) -> list[Segment]:
    """The page's text as segments in reading order."""
    textpage = page.get_textpage()
    try:
        segments = _segments(textpage, page.get_height())
    finally:
        textpage.close()
        page.close()
    return _reading_order(segments)


def _segments(textpage: pdfium.PdfTextPage, height: float) -> list[Segment]:
    text = textpage.get_text_range()
    if not text.strip():
        return []
    page = _PageText(textpage, text)
    out: list[Segment] = []
    pos = 0
    for line in _LINE_BREAK.split(text) if page.aligned else text.splitlines():
        start = pos
        pos += len(line)
        pos += 2 if text.startswith("\r\n", pos) else 1
        if line.strip():
            out += page.line_segments(start, line)
    return [s for s in out if not (page.aligned and _is_page_number(s, height))]


def _is_page_number(s: Segment, height: float) -> bool:
    """A lone number at the top or bottom of the page is its page number: noise in the text."""
    return bool(_PAGE_NUMBER.match(s.text)) and (s.top < PAGE_MARGIN_SHARE * height
                                                 or s.bottom > (1 - PAGE_MARGIN_SHARE) * height)


class _PageText:
    """A page's text with PDFium's geometry of its characters: the boxes, font sizes and baselines that cut
    lines into segments."""

    def __init__(self, textpage: pdfium.PdfTextPage, text: str) -> None:
        self.tp = textpage.raw
        self.text = text
        # False with characters outside the BMP: the text's indexes are not PDFium's, so no geometry
        self.aligned = len(text) == textpage.count_chars()
        # out-parameters of PDFium's calls, allocated once per page
        self.left, self.right = ctypes.c_double(), ctypes.c_double()
        self.bottom, self.top = ctypes.c_double(), ctypes.c_double()
        self.origin_x, self.origin_y = ctypes.c_double(), ctypes.c_double()
        self.refs = (ctypes.byref(self.left), ctypes.byref(self.right), ctypes.byref(self.bottom),
                     ctypes.byref(self.top))

    def box(self, i: int) -> tuple[float, float, float, float]:
        """Character i's left, right, bottom and top; zeros when PDFium has none."""
        if not self.aligned or not pdfium_c.FPDFText_GetCharBox(self.tp, i, *self.refs):
            return 0.0, 0.0, 0.0, 0.0
        return self.left.value, self.right.value, self.bottom.value, self.top.value

    def line_segments(self, start: int, line: str) -> list[Segment]:
        """The line that starts at text index `start`, cut where PDFium put a space over a wide gap."""
        out: list[Segment] = []
        seg_start = start
        for cut, after in self._gaps(start, line):
            s = self.segment(seg_start, cut)
            if s is not None:
                out.append(s)
            seg_start = after
        s = self.segment(seg_start, start + len(line))
        if s is not None:
            out.append(s)
        return out

    def _gaps(self, start: int, line: str) -> list[tuple[int, int]]:
        """(where a run of spaces starts, where the text after it starts) for each wide gap in the line."""
        if not self.aligned:
            return []
        gaps: list[tuple[int, int]] = []
        for m in _SPACES.finditer(line):
            before, after = start + m.start() - 1, start + m.end()
            if m.start() == 0 or after >= start + len(line):
                continue
            if not pdfium_c.FPDFText_IsGenerated(self.tp, before + 1):
                continue  # a space in the text itself; PDFium inserts its own between separate runs

            size = pdfium_c.FPDFText_GetFontSize(self.tp, before) or 10.0
            if self.box(after)[0] - self.box(before)[1] > SEGMENT_GAP_EM * size:
                gaps.append((start + m.start(), after))
        return gaps

    def segment(self, start: int, end: int) -> Segment | None:
        """The text from start to end as a segment, white space trimmed; None when it is all white space."""
        part = self.text[start:end]
        stripped = part.strip()
        if not stripped:
            return None
        first = start + len(part) - len(part.lstrip())
        last = start + len(part.rstrip()) - 1
        size = pdfium_c.FPDFText_GetFontSize(self.tp, first) if self.aligned else 0.0
        x0, _, b0, t0 = self.box(first)
        _, x1, b1, t1 = self.box(last)
        text = " ".join(stripped.split()).replace("\ufffe", "").replace("\u00ad", "")  # PDFium's soft hyphens
        return Segment(text, round(size, 1), x0, x1, min(b0, b1), max(t0, t1), self._baseline(first, b0))

    def _baseline(self, i: int, bottom: float) -> float:
        """Character i's baseline: its origin's y, else the bottom of its box."""
        if self.aligned and pdfium_c.FPDFText_GetCharOrigin(self.tp, i, ctypes.byref(self.origin_x),
                                                            ctypes.byref(self.origin_y)):
            return self.origin_y.value
        return bottom


def _reading_order(segments: list[Segment]) -> list[Segment]:
    """Two-column pages read band by band (the parts between full-width lines such as a title or a
    figure): the left column top to bottom, then the right. Other pages keep the PDF's own order, which
    a single column's typesetter writes in reading order."""
    columns = _columns(segments)
    if columns is None:
        return segments
    left, right = columns
    for s in segments:
        s.column = 1 if s in left else 2 if s in right else 0
    return _by_bands(segments)


def _columns(segments: list[Segment]) -> tuple[list[Segment], list[Segment]] | None:
    """The segments of the left and of the right column when the page has two, else None."""
    placed = [s for s in segments if s.x1 > s.x0]
    if len(placed) < 2 * COLUMN_MIN_SEGMENTS:
        return None
    lo, hi = min(s.x0 for s in placed), max(s.x1 for s in placed)
    mid, width = (lo + hi) / 2, hi - lo
    left = [s for s in placed if s.x1 <= mid + 0.02 * width]
    right = [s for s in placed if s.x0 >= mid - 0.02 * width]

    def full_lines(side: list[Segment]) -> bool:
        wide = [s for s in side if s.x1 - s.x0 >= COLUMN_MIN_WIDTH_SHARE * width]
        return len(side) >= COLUMN_MIN_SEGMENTS and len(wide) >= len(side) / 2

    if not (full_lines(left) and full_lines(right)):
        return None
    return left, right


def _by_bands(segments: list[Segment]) -> list[Segment]:
    """Top to bottom; between two spanning segments (column 0), the left column's, then the right's."""
    ordered: list[Segment] = []
    band: list[Segment] = []
    for s in sorted(segments, key=lambda s: (-s.top, s.x0)):
        if s.column == 0:
            ordered += sorted(band, key=lambda s: (s.column, -s.top, s.x0))
            band = []
            ordered.append(s)
        else:
            band.append(s)
    return ordered + sorted(band, key=lambda s: (s.column, -s.top, s.x0))


def _to_markdown(pages: list[list[Segment]], title: str | None) -> PdfText:
    level = _heading_levels(pages)
    parts: list[str] = []
    empty: list[int] = []
    for number, segs in enumerate(pages, 1):
        parts.append(f"<!-- page {number} -->")
        if not segs:
            empty.append(number)
            continue
        for block in _blocks(segs):
            text = _join(block)
            if block[0].size in level and len(text) <= HEADING_MAX_CHARS and len(block) <= 2:
                parts.append("#" * level[block[0].size] + " " + text)
                if title is None and number == 1:
                    title = text
            else:
                parts.append(text)
    notes = []
    if empty:
        notes.append(f"{_plural(len(empty), 'page')} of {len(pages)} ({_ranges(empty)}) have no text layer "
                     f"(scanned images?); their content is missing here")
    return PdfText("\n\n".join(parts) + "\n", title, len(pages), notes)


def _heading_levels(pages: list[list[Segment]]) -> dict[float, int]:
    """Font size → heading level (1 to 4, largest first) for the sizes enough larger than the body text's,
    the size most of the characters have. ExtractionFailed when the PDF has no text."""
    sizes: Counter[float] = Counter()
    for segs in pages:
        for s in segs:
            sizes[s.size] += len(s.text)
    if not sizes:
        raise ExtractionFailed(f"the PDF has no text layer ({_plural(len(pages), 'page')} of scanned images, "
                               f"or drawings); webfetch does no OCR. Look for an HTML or text version")
    body = sizes.most_common(1)[0][0]
    heading_sizes = sorted({s for s in sizes if s >= body * HEADING_MIN_RATIO}, reverse=True)
    return {s: min(i + 1, 4) for i, s in enumerate(heading_sizes)}


def _blocks(segs: list[Segment]) -> list[list[Segment]]:
    """Consecutive segments of one font size and column, one line below the other, form a paragraph."""
    blocks: list[list[Segment]] = []
    for s in segs:
        if blocks:
            prev = blocks[-1][-1]
            step = prev.baseline - s.baseline  # baseline to baseline: the line spacing
            same_line = abs(step) < 0.5 * s.size
            if (abs(prev.size - s.size) < 0.5 and prev.column == s.column
                    and (same_line or 0 < step <= PARAGRAPH_MAX_LEADING * max(s.size, 1.0))):
                blocks[-1].append(s)
                continue
        blocks.append([s])
    return blocks


def _join(block: list[Segment]) -> str:
    """A paragraph's lines: wrapped lines joined with spaces (hyphens of split words removed), short lines
    such as table rows and list items kept on lines of their own."""
    full = max(s.x1 for s in block) - min(s.x0 for s in block)
    out = block[0].text
    for prev, s in zip(block, block[1:], strict=False):
        wrapped = full > 0 and (prev.x1 - prev.x0) >= 0.8 * full
        if wrapped and out.endswith("-") and len(out) > 1 and out[-2].isalpha() and s.text[:1].islower():
            out = out[:-1] + s.text
        elif wrapped or abs(prev.top - s.top) < 0.5 * s.size:  # same line: segments of a table row
            out += " " + s.text
        else:
            out += "\n" + s.text
    return out


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _ranges(numbers: list[int]) -> str:
    """[1, 2, 3, 5] → '1–3, 5'."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(f"{a}–{b}" if b > a else str(a) for a, b in spans)
