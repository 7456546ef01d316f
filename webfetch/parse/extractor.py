"""The extractor actor: trafilatura to markdown in worker processes, arbitrated by what the page says it is
(its schema.org types and og:type: `page_cues`), a whole-page fallback, raw text bodies."""

from __future__ import annotations

import functools
import importlib
import json
import logging
import re
from collections import Counter
from copy import deepcopy
from dataclasses import dataclass
from typing import Any

import lxml.html
import trio

from ..errors import BadRequest, ExtractionFailed
from .crawl_patterns import admitted
from .crawl_patterns import problem as crawl_patterns_problem
from .find import Found, Pattern, search
from .find import problem as find_problem
from .flags import Evidence, Flag, gather, needs_markup
from .flags import detect as detect_flags
from .flags import detect_on_text as detect_flags_on_text
from .flags import judge as judge_flags
from .hidden import drop_hidden
from .json_answer import Merged, Reply, merge_parts, read_reply
from .json_answer import checked as check_schema
from .links import html_links
from .pdf import PdfText, extract_pdf
from .render_need import Need, judge, measure
from .workers import Workers

log = logging.getLogger("webfetch.extractor")

# trafilatura keeps the main content only; when it keeps less than this share of a page's visible text,
# and the page holds a fair amount of text, it has missed the point (a listing, a forum thread): convert
# the whole page instead. Tuned on ../shared/corpus with bin/bench's word F1: 3 % lifts the mixed page
# types (0.868 -> 0.871) and leaves every article alone; 10 % cost the articles 0.017.
FALLBACK_SHARE = 0.03
FALLBACK_MIN_VISIBLE = 1000
# A page that does not declare itself an article (a listing, a forum, a product, a service page) is more
# often one whose main content is most of the page: there trafilatura's output under this share of the
# visible text means it kept one block of many. Chosen on the "choose" half of ../shared/corpus
# (bin/bench's `half`); the held-out half reports it.
NON_ARTICLE_FALLBACK_SHARE = 0.05
# One trafilatura pass a page (issue 28), its mode chosen by the page's cues: an article gets the precise
# mode, which drops the boilerplate the default keeps (related links, bylines, share bars); any other page
# (a product, a service, a listing) the recall mode, which keeps the blocks the default drops around the
# main one (a product's description and specs, a service page's sections). A mode's cut that keeps less than
# this share of the page's visible text has likely cut into the content: the precise mode sometimes takes
# most of an article with the boilerplate, and the recall mode lacks the default's rescues (justext, its own
# recall retry) where its rules find little. Then the default mode runs as a second pass and its cut is
# taken (on an article also where readability doubts the precise cut: ARTICLE_MIN_AGREEMENT). This replaced
# arbitrating with two passes on every page (the default's beside the mode's, and readability's text on
# articles): chosen on the "choose" half of ../shared/corpus (bin/bench's
# `half`), over the grid 0.1-0.3 each; the held-out half reports it (docs/BENCHMARKS.md, "Extraction quality").
PRECISE_MIN_SHARE = 0.1
RECALL_MIN_SHARE = 0.3
# The precise mode sometimes drops part of an article with its boilerplate (a section of notes in bare
# divs, say) while keeping more than PRECISE_MIN_SHARE of the page. readability-lxml, a different library
# (not a trafilatura pass), checks its cut: where the two agree on less than this share of their words
# (agreement()), the precise cut is in doubt, and trafilatura's default mode runs as a second pass. The cut
# readability agrees with better is taken, and where that is still the precise one, readability's own
# content if it holds more. Chosen on the choose half (grid 0.6-0.9, the sum of both corpora's choose F1):
# 0.8 lifted aeb's choose half 0.9691 -> 0.9769 and left wcxb's at 0.8909. Running readability only where
# the precise cut holds under some share of the page's text (0.3-0.7) would save much of its cost, but
# scored the same on the choose half at every share, so that half cannot pick one, and the cheapest put
# aeb's held-out half below issue 16's figure: readability checks every article's cut.
ARTICLE_MIN_AGREEMENT = 0.8
# On a schema.org QAPage the answers are the content: readability keeps the question with its answers,
# where trafilatura keeps the question only. Unless readability found much less than trafilatura.
QA_MIN_SHARE = 0.5
# schema.org types that mean "this page is one article" (JSON-LD @type or microdata itemtype).
ARTICLE_TYPES = frozenset({"Article", "NewsArticle", "BlogPosting", "Report", "ScholarlyArticle", "TechArticle",
                           "OpinionNewsArticle", "AnalysisNewsArticle", "ReviewNewsArticle", "LiveBlogPosting",
                           "SocialMediaPosting"})
# og:type "article" is also what Open Graph plugins and themes put on every page of a site that is not its
# home page (a product, a service, a documentation page): it counts as the article cue on a page that
# carries a date, which articles do: Open Graph's article:published_time, schema.org's datePublished
# (microdata or JSON-LD), an HTML time element. A schema.org article type is a statement about the page
# and counts alone. Chosen on the "choose" half (bin/bench's `half`): F1 0.884 -> 0.887 on its wcxb pages
# (documentation, forum and service pages marked as articles had got the article's cut), aeb's unchanged;
# requiring a date beside schema.org types too cost aeb's choose half 0.0025 (an article dated only in a
# script) and gained nothing on wcxb's.
_DATED = ('//meta[@property="article:published_time" or @name="article:published_time"]'
          ' | //*[@itemprop="datePublished"] | //time')
_LD_SCRIPTS = '//script[@type="application/ld+json"]/text()'
_LD_TYPE = re.compile(r'"@type"\s*:\s*(?:"([^"]+)"|\[([^\]]*)\])')
_QUOTED = re.compile(r'"([^"]+)"')
_WORD = re.compile(r"\w+")
# trafilatura's output with every link and heading lost, while it covers nearly the whole page: an index.
STRUCTURELESS_MAX_COVER = 1.5
# What a reader of the page never sees; the outermost of them, whose text is all of that text.
_NOISE_TAGS = ("script", "style", "noscript", "template", "svg", "head", "iframe", "object", "canvas")
_NOISE = "|".join(f"//{tag}" for tag in _NOISE_TAGS)
_OUTER_NOISE = f"({_NOISE})[not(ancestor::*[{' or '.join(f'self::{tag}' for tag in _NOISE_TAGS)}])]"
_LINK_TARGET = re.compile(r"\]\([^)]*\)")
_MARKDOWN = re.compile(r"^(#{1,6} |[-*+] |\d+\. |\||> |```)|\]\(|\*\*", re.M)


@dataclass
class Extracted:
    markdown: str
    extractor: str  # "trafilatura" | "readability" | "fallback" | "raw" | "markdown" (served as such)
    title: str | None = None
    # Characters of text (white space not counted) the page hid from people and the extraction left out
    # (webfetch/parse/hidden.py); 0 when asked to keep them.
    hidden_text_removed: int = 0
    # What the page's HTML says for its flags, gathered on the extraction's own tree when the flags need it
    # (flags.needs_markup: a short text): the daemon judges them from it with no parse (Extractor.flags).
    evidence: Evidence | None = None

    @property
    def text_len(self) -> int:
        """Characters of text, not counting white space or link targets."""
        return len("".join(_LINK_TARGET.sub("]", self.markdown).split()))


def _title(doc: lxml.html.HtmlElement | None) -> str | None:
    if doc is None:
        return None
    title = doc.findtext(".//title")
    return " ".join(title.split()) or None if title else None


@dataclass(frozen=True)
class Cues:
    """What a page says about its own type, in its markup (never its address or site)."""

    article: bool  # a schema.org article type, or og:type "article" on a dated page
    qa_page: bool  # a schema.org QAPage: a question with its answers


def schema_types(doc: lxml.html.HtmlElement) -> set[str]:
    """The schema.org types a page declares, in JSON-LD (@type, also inside @graph) and in microdata."""
    types: set[str] = set()
    for script in doc.xpath(_LD_SCRIPTS):
        for one, many in _LD_TYPE.findall(script):
            types.update([one] if one else _QUOTED.findall(many))
    types.update(t.rstrip("/").rsplit("/", 1)[-1] for t in doc.xpath("//@itemtype") for t in t.split())
    return {t.rsplit(":", 1)[-1] for t in types}


def dated(doc: lxml.html.HtmlElement) -> bool:
    """Whether the page gives a date for itself (see _DATED)."""
    return bool(doc.xpath(_DATED)) or any('"datePublished"' in script for script in doc.xpath(_LD_SCRIPTS))


def page_cues(doc: lxml.html.HtmlElement | None) -> Cues:
    if doc is None:
        return Cues(article=False, qa_page=False)
    types = schema_types(doc)
    og_type = " ".join(doc.xpath('//meta[@property="og:type"]/@content')).strip().lower()
    article = bool(types & ARTICLE_TYPES) or (og_type == "article" and dated(doc))
    return Cues(article=article, qa_page="QAPage" in types)


def marked_main(doc: lxml.html.HtmlElement) -> lxml.html.HtmlElement | None:
    """The page's one `main` (or `[role=main]`) element, where the page marks it: docs, listings and app
    pages do, beside a large navigation."""
    marked = doc.xpath('//main | //*[@role="main"]')
    return marked[0] if len(marked) == 1 else None


def visible_text_len(doc: lxml.html.HtmlElement) -> int:
    """Characters of text a reader of the page sees (white space, scripts, styles and the like not counted);
    the tree is left as it is."""
    return _chars(doc.text_content()) - sum(_chars(bad.text_content()) for bad in doc.xpath(_OUTER_NOISE))


def _without_noise(doc: lxml.html.HtmlElement) -> lxml.html.HtmlElement:
    """A copy of the tree without what a reader never sees (scripts, styles, the head, frames)."""
    doc = deepcopy(doc)
    for bad in doc.xpath(_NOISE):
        bad.drop_tree()
    return doc


def trafilatura_markdown(html: str | bytes | lxml.html.HtmlElement, url: str | None, precise: bool = False,
                         recall: bool = False) -> str:
    """The equivalent of `trafilatura --markdown --formatting` with links and tables kept. Given a tree,
    trafilatura works on its own copy of it."""
    import trafilatura  # in the worker processes only: see import_parsers
    return trafilatura.extract(
        html, url=url, output_format="markdown", include_formatting=True, include_links=True,
        include_tables=True, include_comments=False, include_images=False, with_metadata=False,
        favor_precision=precise, favor_recall=recall) or ""


def readability_html(html: str | bytes | lxml.html.HtmlElement) -> str:
    """readability-lxml's main content (the densest block with its siblings), as HTML. Given a tree,
    readability works on a copy (it drops elements from the tree it is given)."""
    from readability import Document  # in the worker processes only: see import_parsers
    try:
        return str(Document(deepcopy(html) if isinstance(html, lxml.html.HtmlElement) else html
                            ).summary(html_partial=True))
    except Exception:  # readability raises its own Unparseable and lxml's errors on odd pages
        return ""


def readability_markdown(html: str | bytes | lxml.html.HtmlElement) -> str:
    """readability-lxml's main content, as markdown."""
    summary = readability_html(html)
    return html_markdown(summary) if summary else ""


def html_words(html: str) -> str:
    """An HTML fragment's text, a space between any two elements: what agreement() compares, at a fraction
    of the cost of converting it to markdown (markdownify parses it again in pure Python, which costs as much
    as readability itself)."""
    return " ".join(lxml.html.fromstring(html).itertext()) if html.strip() else ""


def html_markdown(html: str) -> str:
    import markdownify  # in the worker processes only: see import_parsers
    md = markdownify.markdownify(html, heading_style="ATX", bullets="-", strip=["img"],
                                 code_language_callback=None)
    return re.sub(r"\n{3,}", "\n\n", md).strip()


# The page's marked main element replaces the whole page in the fallback when it holds about as much text
# as trafilatura found: at least this share of its characters (the two converters escape and draw
# tables differently).
MARKED_MAIN_COVER = 0.9


def fallback_markdown(doc: lxml.html.HtmlElement, found: str = "") -> str:
    """The whole page as markdown: headings, lists, links, tables and code blocks kept; scripts dropped.
    Only the page's marked main element when there is one and it holds about as much text as `found`."""
    doc = _without_noise(doc)
    marked = marked_main(doc)
    if marked is not None:
        inner = html_markdown(lxml.html.tostring(marked, encoding="unicode"))
        if inner and _chars(inner) >= MARKED_MAIN_COVER * _chars(found):
            return inner
    body = doc.find("body")
    return html_markdown(lxml.html.tostring(body if body is not None else doc, encoding="unicode"))


def _structureless(md: str) -> bool:
    """trafilatura's last-resort baseline returns the page's text as bare short lines, every heading, list,
    table and link lost: the sign that it found no main content (an index, a listing)."""
    lines = [line for line in md.splitlines() if line.strip()]
    if len(lines) < 8 or _MARKDOWN.search(md):
        return False
    return sum(map(len, lines)) / len(lines) < 60


def _chars(md: str) -> int:
    return len("".join(md.split()))


def _text_chars(md: str) -> int:
    """Characters a reader sees: link targets are not text (a list of links is mostly its targets)."""
    return _chars(_LINK_TARGET.sub("]", md))


def _words(md: str) -> Counter[str]:
    return Counter(_WORD.findall(_LINK_TARGET.sub("]", md).lower()))


def agreement(a: str, b: str) -> float:
    """How much two extractions say the same: the Dice overlap of their bags of words, 0 to 1."""
    wa, wb = _words(a), _words(b)
    total = sum(wa.values()) + sum(wb.values())
    return 2 * sum((wa & wb).values()) / total if total else 0.0


@dataclass(frozen=True)
class Cut:
    """The main content as one extractor cut it."""

    markdown: str
    extractor: str  # "trafilatura" | "readability"


def _main_cut(doc: lxml.html.HtmlElement, url: str | None, cues: Cues, visible: int) -> Cut:
    """trafilatura's cut of the page in the mode its cues call for (precise on an article, checked by
    readability: `_article_cut`; recall on any other page), or its default mode's where that cut kept too
    little of the page's visible text to be trusted (PRECISE_MIN_SHARE, RECALL_MIN_SHARE, of the `visible`
    text): one trafilatura pass on most pages, two on the rest."""
    cut = trafilatura_markdown(doc, url, precise=cues.article, recall=not cues.article).strip()
    least = (PRECISE_MIN_SHARE if cues.article else RECALL_MIN_SHARE) * visible
    if not cut or _text_chars(cut) < least:
        return Cut(trafilatura_markdown(doc, url).strip(), "trafilatura")
    return _article_cut(doc, url, cut) if cues.article else Cut(cut, "trafilatura")


def _article_cut(doc: lxml.html.HtmlElement, url: str | None, precise: str) -> Cut:
    """An article's `precise` cut unless readability doubts it (ARTICLE_MIN_AGREEMENT): then trafilatura's
    default cut if readability agrees with it better, else readability's content where it holds more."""
    summary = readability_html(doc)
    check = html_words(summary)
    agreed = agreement(precise, check)
    if agreed >= ARTICLE_MIN_AGREEMENT:
        return Cut(precise, "trafilatura")
    default = trafilatura_markdown(doc, url).strip()
    if agreement(default, check) > agreed:
        return Cut(default, "trafilatura")
    readable = html_markdown(summary) if summary else ""
    if _text_chars(readable) > _text_chars(precise):
        return Cut(_with_heading(readable, doc), "readability")
    return Cut(precise, "trafilatura")


def _with_heading(md: str, doc: lxml.html.HtmlElement | None) -> str:
    """readability leaves the page's heading out of the content: put its first h1 back on top."""
    h1 = doc.find(".//h1") if doc is not None else None
    heading = " ".join(h1.text_content().split()) if h1 is not None else ""
    return f"# {heading}\n\n{md}" if heading and heading not in md else md


def _decoded(html: str | bytes, charset: str | None) -> str | bytes:
    """Bytes decoded with the Content-Type header's charset when Python knows it; else left as bytes, for
    lxml and trafilatura to decode as the page declares."""
    if isinstance(html, bytes) and charset:
        try:
            return html.decode(charset, errors="replace")
        except LookupError:
            pass
    return html


def _parsed(html: str | bytes) -> lxml.html.HtmlElement | None:
    """The page's tree, parsed once for every pass over it (trafilatura's, readability's, the cues, the
    fallback) and as trafilatura itself parses a page (its decoding, its parser): parsing is a good part of
    what each pass costs. lxml's own parse where trafilatura takes the text for something other than HTML;
    None when lxml cannot parse it either (the cues then say nothing)."""
    import trafilatura  # in the worker processes only: see import_parsers
    tree = trafilatura.load_html(html) if html else None
    if tree is not None:
        return tree
    try:
        return lxml.html.fromstring(html if html else "<html></html>")
    except (lxml.etree.ParserError, ValueError):
        return None


# A link inside a heading to a place on the same page: a section's permalink ("#options"), or the heading
# made a link to itself. Documentation pages have one on every heading.
_SECTION_LINKS = "|".join(f"//h{level}//a[starts-with(@href, '#')]" for level in range(1, 7))


def _unlink_section_headings(doc: lxml.html.HtmlElement) -> None:
    """Headings keep their text without the links to their own section: to trafilatura such a heading is
    a link, which its link-density rule drops as navigation (in its precise mode most of all), and the
    section loses its title. A link without words (a "¶" or "#" permalink) goes; a linked title stays as
    text. In a page's text these links lead nowhere."""
    for link in doc.xpath(_SECTION_LINKS):
        if _WORD.search(link.text_content()):
            link.drop_tag()
        else:
            link.drop_tree()


def _qa_answers(doc: lxml.html.HtmlElement, main: str, cues: Cues) -> str | None:
    """A Q&A page: readability's answers under the page's heading, when they hold at least QA_MIN_SHARE
    of trafilatura's text `main` (trafilatura keeps the question and drops most answers)."""
    if not (cues.qa_page and main):
        return None
    answers = readability_markdown(doc)
    if _chars(answers) >= QA_MIN_SHARE * _chars(main):
        return _with_heading(answers, doc)
    return None


def _missed_main(main: str, visible: int, cues: Cues) -> bool:
    """Whether trafilatura's `main` missed the page's main content, judged against the page's `visible`
    text: too small a share of it (a smaller share still on a page that is not an article), or the bare
    lines of trafilatura's baseline where the page holds little more than that."""
    main_len = _chars(main)
    return ((visible >= FALLBACK_MIN_VISIBLE and main_len < FALLBACK_SHARE * visible)
            or (not cues.article and _text_chars(main) < NON_ARTICLE_FALLBACK_SHARE * visible)
            or (_structureless(main) and visible <= STRUCTURELESS_MAX_COVER * main_len))


def _main_or_fallback(main: str, doc: lxml.html.HtmlElement | None, cues: Cues, title: str | None,
                      visible: int = 0, extractor: str = "trafilatura") -> Extracted:
    """The `extractor`'s `main` unless it missed the main content (judged against the page's `visible`
    text); then the whole page if that says at least as much. ExtractionFailed when neither holds any text."""
    if main and not _missed_main(main, visible, cues):
        return Extracted(main, extractor, title)
    if doc is not None and visible:
        whole = fallback_markdown(doc, main)
        if _chars(whole) >= _chars(main):
            return Extracted(whole, "fallback", title)
    if main:
        return Extracted(main, extractor, title)
    raise ExtractionFailed("no text could be extracted from the page (it may be empty, or all images or "
                           "scripts); try the URL in a browser, or fetch a more specific page")


def extract_html(html: str | bytes, url: str | None, charset: str | None = None, keep_hidden: bool = False
                 ) -> Extracted:
    """Main content as markdown; the whole page when trafilatura misses it. ExtractionFailed when no text.
    Bytes are decoded with `charset` (the Content-Type header's) if given, else as the page declares.
    The page's own cues choose among extractions: an article gets trafilatura's precise mode, checked by
    readability, a page of another type its recall mode and the whole page sooner, either the default mode
    where that cut kept too little of the page or readability doubts the article's cut (one trafilatura
    pass on most pages), a Q&A page readability's answers (see the constants above). Text the page hides
    from people is left out first (webfetch/parse/hidden.py) unless `keep_hidden`."""
    decoded = _decoded(html, charset)
    return _extract_tree(_parsed(decoded), url, _text(decoded), keep_hidden)


def _text(decoded: str | bytes) -> str:
    return decoded if isinstance(decoded, str) else decoded.decode("utf-8", errors="replace")


def _extract_tree(doc: lxml.html.HtmlElement | None, url: str | None, html: str, keep_hidden: bool = False
                  ) -> Extracted:
    """extract_html on the page's parsed tree (parsed from `html`); with the flags' evidence gathered on the
    same tree when they need it."""
    title = _title(doc)
    cues = page_cues(doc)
    if doc is None:
        return _main_or_fallback("", doc, cues, title)
    removed = 0 if keep_hidden else drop_hidden(doc)
    _unlink_section_headings(doc)
    visible = visible_text_len(doc)
    cut = _main_cut(doc, url, cues, visible)
    answers = _qa_answers(doc, cut.markdown, cues)
    if answers is not None:
        extracted = Extracted(answers, "readability", title)
    else:
        extracted = _main_or_fallback(cut.markdown, doc, cues, title, visible, cut.extractor)
    extracted.hidden_text_removed = removed
    if needs_markup(extracted.markdown, url or ""):
        extracted.evidence = gather(doc, html)  # last: it takes the invisible parts out of the tree
    return extracted


@dataclass(frozen=True)
class ServerReading:
    """The server's HTML read before any script runs: its extraction (None when it holds no text) and
    whether the page needs Chrome (webfetch/parse/render_need.py)."""

    extracted: Extracted | None
    need: Need


def read_server_html(html: bytes, url: str | None, charset: str | None = None, keep_hidden: bool = False
                     ) -> ServerReading:
    """extract_html, and render_need's judgement of the same parsed tree (measured before the extraction
    touches it)."""
    decoded = _decoded(html, charset)
    doc = _parsed(decoded)
    text = _text(decoded)
    markup = measure(doc, text) if doc is not None else None
    try:
        extracted: Extracted | None = _extract_tree(doc, url, text, keep_hidden)
    except ExtractionFailed:
        extracted = None
    text_chars = extracted.text_len if extracted is not None else 0
    reason = judge(markup, text_chars) if markup is not None else "the server's HTML could not be parsed"
    return ServerReading(extracted, Need(reason))


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


def links_of(html: str | bytes, base: str, charset: str | None) -> list[str]:
    return html_links(_decoded(html, charset), base)


MARKDOWN_TYPES = ("text/markdown", "text/x-markdown")


def extract_raw(body: bytes, mime: str | None, charset: str | None) -> Extracted:
    """A text body as is; JSON pretty-printed. Markdown the site serves (asked for by the main request's
    Accept, load.MAIN_ACCEPT) is the content as its authors wrote it: kept verbatim, `extractor` markdown."""
    text = decode_text(body, charset)
    if mime in MARKDOWN_TYPES and text.strip():
        return Extracted(text, "markdown", markdown_title(text))
    if mime and (mime.endswith("json")):
        try:
            text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            pass  # a cut or broken JSON body is still worth reading
    if not text.strip():
        raise ExtractionFailed("the response body is empty")
    return Extracted(text, "raw")


def markdown_title(text: str) -> str | None:
    """A markdown document's title: its first `# ` heading (within its first 20 000 characters), its closing
    `#`s and spaces off. Line by line with str methods: the regular expression it was (`^# +(.+?)\\s*#*\\s*$`)
    backtracked in cubic time on a heading line of many spaces (2 000 took 9 s)."""
    for line in text[:20_000].split("\n"):
        body = line[1:].strip()
        if line.startswith("# ") and body:
            return body.rstrip("#").rstrip() or body[0]
    return None


# The longest markdown judged in the daemon's own process (webfetch/parse/flags.py on the text alone: a few
# regular expressions, under 2 ms at this size here); a longer one goes to a worker rather than hold up
# every other request.
IN_PROCESS_FLAGS_MAX_CHARS = 100_000


# What the parsers import, ~0.5 s of a Python start (trafilatura and its dependencies, readability-lxml,
# markdownify with BeautifulSoup, PDFium), measured with `python -X importtime`: imported in each worker
# process as it starts (`import_parsers`, parse/workers.py's `preload`) and never in the daemon's own process,
# whose first answer (status, browse, a cache hit: none of them parses) would otherwise wait for them.
PARSER_MODULES = ("trafilatura", "readability", "markdownify", "pypdfium2")


def import_parsers() -> None:
    for name in PARSER_MODULES:
        importlib.import_module(name)



def request_problem(find: str | None, schema: dict[str, Any] | None) -> str | None:
    """Why a fetch's `find` (a regular expression that does not compile: find.problem) or `schema` (not one
    webfetch takes: json_answer.checked) is refused, else None. Compiles what the model wrote: for a worker."""
    if find is not None and (trouble := find_problem(find)) is not None:
        return trouble
    try:
        check_schema(schema)
    except BadRequest as e:
        return e.message
    return None

class Extractor:
    """The extractor actor: every parse of a page's HTML, text or PDF, and the flags judged on it, runs in
    its worker processes (webfetch/parse/workers.py), so the event loop never blocks and a parser's crash is
    the page's error, not the daemon's end."""

    def __init__(self, workers: int, idle_s: float = 300.0) -> None:
        self.workers = Workers(workers, idle_s, preload=import_parsers)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self.workers.run(task_status=task_status)

    async def html(self, html: str | bytes, url: str | None, charset: str | None = None, keep_hidden: bool = False
                   ) -> Extracted:
        return await self.workers.call(extract_html, html, url, charset, keep_hidden)

    async def server_html(self, html: bytes, url: str | None, charset: str | None = None,
                          keep_hidden: bool = False) -> ServerReading:
        """The server's HTML extracted, and whether the page needs rendering (read_server_html)."""
        return await self.workers.call(read_server_html, html, url, charset, keep_hidden)

    async def raw(self, body: bytes, mime: str | None, charset: str | None) -> Extracted:
        return await self.workers.call(extract_raw, body, mime, charset)

    async def pdf(self, body: bytes, cut: bool) -> PdfText:
        return await self.workers.call(extract_pdf, body, cut)

    async def links(self, html: str | bytes, base: str, charset: str | None) -> list[str]:
        """The page's links, absolute and normalized (webfetch/parse/links.py), for a crawl."""
        return await self.workers.call(links_of, html, base, charset)

    async def matching(self, include: tuple[str, ...], exclude: tuple[str, ...], targets: list[str]) -> list[int]:
        """webfetch/parse/crawl_patterns.py's `admitted` in a worker process: a crawl's regular expression that
        backtracks without end costs a worker, killed at the crawl's deadline, never the event loop."""
        return await self.workers.call(admitted, include, exclude, targets)

    async def patterns_problem(self, include: list[str], exclude: list[str]) -> str | None:
        """Why a crawl's include/exclude patterns are refused (crawl_patterns.problem), compiled in a worker
        process: a tool argument the model chose, whose compiling alone can take seconds; the caller's
        deadline kills the worker."""
        if not include and not exclude:
            return None
        return await self.workers.call(crawl_patterns_problem, include, exclude)

    async def request_problem(self, find: str | None, schema: dict[str, Any] | None) -> str | None:
        """Why a fetch's `find` regular expression or `schema` is refused (`request_problem`), in a worker process,
        as above: a schema's `pattern`s are compiled by its check as well."""
        return await self.workers.call(request_problem, find, schema)

    async def find(self, markdown: str, pattern: Pattern) -> Found:
        """webfetch/parse/find.py's search in a worker process: a regular expression that backtracks without end
        costs a worker, killed when the request's deadline cancels this, never the event loop."""
        return await self.workers.call(search, markdown, pattern)

    async def json_answer(self, reply: str, schema: dict[str, Any]) -> Reply:
        """webfetch/parse/json_answer.py's `read_reply` in a worker process: a schema's `pattern` runs `re` on
        the model's output, which can backtrack without end; the request's deadline kills the worker."""
        return await self.workers.call(read_reply, reply, schema)

    async def merged_answer(self, parts: list[Any], schema: dict[str, Any]) -> tuple[Merged, list[str]]:
        """The answers for a page's parts merged (json_answer.merge_parts) and validated, in a worker process."""
        return await self.workers.call(merge_parts, parts, schema)

    async def flags(self, evidence: Evidence | None = None, **page: Any) -> list[Flag]:
        """webfetch/parse/flags.py's `detect` on a page, keyword for keyword. A page whose flags are judged on its
        text alone (most: a long main text), or from the `evidence` its extraction gathered on the same parse
        of its HTML (Extracted.evidence), is judged here: no parse, and no trip to a worker with the page's
        HTML (1-9 ms a page, measured), unless the text is long enough to hold up the event loop."""
        if evidence is not None and len(page["markdown"]) + len(evidence.visible) <= IN_PROCESS_FLAGS_MAX_CHARS:
            page.pop("html", None)
            return judge_flags(evidence, **page)
        if len(page["markdown"]) <= IN_PROCESS_FLAGS_MAX_CHARS:
            flags = detect_flags_on_text(**page)
            if flags is not None:
                return flags
        return await self.workers.call(functools.partial(detect_flags, **page))
