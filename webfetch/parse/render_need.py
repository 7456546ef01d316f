"""Whether a page needs Chrome: the decision taken on the HTML as the server sent it, before any script runs.

The principle: render when the server's HTML does not hold what a reader of the page would see, and only
then. A page is never rendered merely because it is short: a 400-character note or a product page holds
what its reader sees whatever its length, scripts or not (analytics, a framework hydrating the markup the
server drew, a comment widget). What says the reader would see something else is evidence in the HTML:

- an anti-bot challenge (its markup, or its words as the title of a short page): Chrome may pass it;
- no text at all to extract;
- a meta refresh naming a page, or on a page that shows little a script sending the reader on
  (`location.href = …`): the render follows it, as a redirect;

and, on a page that runs scripts (one that runs none shows in Chrome what the server sent), signs of
client rendering:

- an empty mount point: an app's root element (`#root`, `#app`, `#__next`…), the page's one marked main
  (`main`, `[role=main]`) or an `aria-busy` element holding no text or only "Loading…";
- a body whose text is tiny beside its scripts: almost none, or inline script many times the text;
- a `noscript` or the body asking for JavaScript (not a comment widget's), on a page that holds little else;
- text only inside script data: prose in inline scripts and JSON data (`__NEXT_DATA__`, a state blob; never
  JSON-LD, which no reader sees) that the page does not show, several times what it shows, on a page
  that shows little;
- text hidden until a script shows it (`hidden`, `display:none`) that the extraction did not keep: hidden
  text is in the HTML, so when the extraction kept it the server's HTML holds it and nothing is rendered.

`measure` reads the signs on the server's tree (in the extractor's worker, on the extraction's own parse),
`judge` weighs them with the extraction's length and returns the first that holds, as the reason logged
for the render, or None: the server's HTML holds the content. On ../shared/corpus (static pages) this
renders 4 of 692 pages (three with no text, one challenge) where "render unless 1 000 characters were
extracted" rendered 85 (bin/bench_renders.py).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

import lxml.etree
import lxml.html

from .flags import APP_ROOT_IDS, CHALLENGE_MARKUP, CHALLENGE_TEXT, ENABLE_JS, WALL_MAX_CHARS, WIDGET_ASK

# A mount point or marked main "holds no text" below this many characters (a "Loading…", a skip link);
# one whose text, scripts and all, is this long is not looked into further.
EMPTY_MOUNT_MAX_CHARS = 30
MOUNT_TEXT_MAX_CHARS = 2000
# A challenge page shows less than this (parse/flags.py judges a challenge on pages this short too).
CHALLENGE_SHOWN_MAX_CHARS = 2 * WALL_MAX_CHARS
# A body showing fewer characters than this, on a page that runs scripts, is an app's shell (a site name,
# a "Loading…"); a short page that shows its few hundred characters is not.
TINY_BODY_MAX_CHARS = 30
# ...and so is one whose inline scripts are this many times its visible text, while that text is short
# (a bundle inlined into a shell; an article beside its analytics has the text to outweigh them).
SCRIPT_TO_TEXT = 20
SCRIPT_HEAVY_MAX_CHARS = 1000
# A page asking for JavaScript is a shell when it holds less than this besides the request.
ASKS_JS_MAX_CHARS = 500
# Text only in script data: prose strings in the page's inline scripts this many times what it shows, on a
# page that shows little (an article's page keeps other articles' teasers, its comments or its own text in
# a state blob beside its text: measured on ../shared/corpus, six news pages in 181 showing 1 300 to 5 600
# characters held 3 000 to 42 000 characters of prose they do not show).
DATA_TO_TEXT = 2.0
DATA_MIN_CHARS = 200
DATA_SHOWN_MAX_CHARS = 1000
# A string of script data is prose when it is this long and holds this many spaces (a sentence, not a
# class name, a URL or a hash).
PROSE_MIN_CHARS = 40
PROSE_MIN_SPACES = 5
PROSE_LETTERS = 0.85  # the share of letters and spaces in prose
# Hidden text: most of the page's text (this share) hidden, the rest at most this much, and the extraction
# kept less than this share of it (no extraction keeps a page's every word: an article page hidden whole
# until its scripts run, on ../shared/corpus, gave 3 780 characters of its 7 658).
HIDDEN_SHARE = 0.5
HIDDEN_VISIBLE_MAX_CHARS = 500
HIDDEN_KEPT_SHARE = 0.25

_LOADING = re.compile(r"^\s*(loading|please wait|chargement|wird geladen|cargando|caricamento)\W*$", re.I)
# a string literal in double or single quotes, at least PROSE_MIN_CHARS long
_STRING = re.compile(r'"((?:[^"\\\n]|\\.){' + str(PROSE_MIN_CHARS) + r',})"|'
                     r"'((?:[^'\\\n]|\\.){" + str(PROSE_MIN_CHARS) + r",})'")
_NAVIGATION = re.compile(r"\blocation(\.href)?\s*=[^=]|\blocation\.(replace|assign)\s*\(")
_CODE = re.compile(r"[{}=;|\\]|\(\)|&&|=>|\bfunction\b|\bvar\b|\breturn\b")
_TAG = re.compile(r"<[^>]{0,200}>")
_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|.)")
# Script elements a browser runs (no type, a JavaScript type, a module); and those that are data.
_JS_TYPES = ("", "text/javascript", "application/javascript", "module", "text/ecmascript", "application/ecmascript")
_DATA_TYPES = ("application/json", "text/json")
_STYLED = "//body//*[@hidden or @style]"
_HIDING_RULES = ("display:none", "visibility:hidden")
_NOISE_TAGS = ("script", "style", "noscript", "template", "svg", "iframe", "object", "canvas")
_OUTER_NOISE = lxml.etree.XPath("(" + " | ".join(f".//{tag}" for tag in _NOISE_TAGS) + ")[not(ancestor::*["
                                + " or ".join(f"self::{tag}" for tag in _NOISE_TAGS) + "])]")
_SHOWN = lxml.etree.XPath(".//text()[not(" + " or ".join(f"ancestor::{tag}" for tag in _NOISE_TAGS) + ")]",
                          smart_strings=False)
# The elements that could be a mount point (an app root's id, the page's mark of its main content, a busy
# element), sorted in Python: one pass over the tree testing only that the attributes exist. A union of an
# XPath per id cost a pass each, and comparing the values in XPath 3 times this (most of `measure`'s time).
_MOUNT_CANDIDATES = lxml.etree.XPath("//body//*[@id or @role or @aria-busy or self::main]")


@dataclass(frozen=True)
class Markup:
    """What the server's tree says, measured once (in the worker, beside the extraction)."""

    runs_scripts: bool
    visible_chars: int      # text a reader sees before scripts run (hidden elements not counted)
    hidden_chars: int       # text in hidden elements
    script_chars: int       # inline script source
    data_prose_chars: int   # prose in inline scripts and JSON data (not JSON-LD) that the page does not show
    empty_mount: str | None  # what the empty mount point is ("#root", "an empty <main>", '"Loading…"')
    asks_js: str | None     # the words asking for JavaScript
    challenge: str | None   # the challenge's markup or title
    refresh: bool = False   # a meta refresh naming a page to go to
    navigates: bool = False  # an inline script sends the reader to another page (on a page that shows little)


def _chars(text: str) -> int:
    return len("".join(text.split()))


def _visible_chars(el: lxml.html.HtmlElement) -> int:
    """Characters of `el`'s text a reader sees: its whole text less that of its scripts, styles and the like
    (what `_text` holds, counted without building it: a fraction of the cost on a large page)."""
    return _chars(el.text_content()) - sum(_chars(noise.text_content()) for noise in _OUTER_NOISE(el))


def _text(el: lxml.html.HtmlElement) -> str:
    """The text of `el` a reader sees, white space collapsed: without scripts, styles, templates, comments
    and the like (one XPath, evaluated in C: a Python walk of a large page cost tens of milliseconds)."""
    return " ".join(" ".join(_SHOWN(el)).split())


def _strings(source: str) -> Iterator[str]:
    """The long string literals of a script or JSON text, unescaped, markup and entities dropped, white
    space collapsed."""
    for m in _STRING.finditer(source):
        raw = m.group(1) if m.group(1) is not None else m.group(2)
        try:
            text = json.loads(f'"{raw}"') if m.group(1) is not None else raw
        except ValueError:
            text = _ESCAPE.sub(" ", raw)
        yield " ".join(html.unescape(_TAG.sub(" ", text)).split())


def _is_prose(text: str) -> bool:
    """Words and sentences, not code (minified code between two quotes of different strings reads as one
    long string): no code's punctuation, and letters for most of it."""
    if _CODE.search(text):
        return False
    return sum(c.isalpha() or c == " " for c in text) >= PROSE_LETTERS * len(text)


def _unseen_prose(source: str, shown: str) -> int:
    """Characters of prose in the string literals of `source` that the page's text `shown` (white space
    collapsed) does not hold: a sentence of it is looked for in the text by a few of its words."""
    total = 0
    for text in _strings(source):
        words = text.split(" ")
        if len(words) <= PROSE_MIN_SPACES or len(text) < PROSE_MIN_CHARS or not _is_prose(text):
            continue
        probe = " ".join(words[1:PROSE_MIN_SPACES])
        if probe not in shown:
            total += _chars(text)
    return total


def _scripts(doc: lxml.html.HtmlElement) -> tuple[bool, int]:
    """(whether the page runs scripts, characters of inline script)."""
    runs, source = False, 0
    for script in doc.iter("script"):
        if (script.get("type") or "").strip().lower() in _JS_TYPES:
            runs = True
            source += len(script.text or "")
    return runs, source


def _navigates(doc: lxml.html.HtmlElement) -> bool:
    """An inline script that sends the reader on (`location.href = …`, `location.replace(…)`): the page is
    a way station, and the render follows it as it follows a redirect."""
    return any(_NAVIGATION.search(script.text or "") for script in doc.iter("script")
               if (script.get("type") or "").strip().lower() in _JS_TYPES)


def _data_prose(doc: lxml.html.HtmlElement, shown: str) -> int:
    """Characters of prose in the page's inline scripts and JSON data that `shown`, the page's text, does
    not hold."""
    return sum(_unseen_prose(script.text or "", shown) for script in doc.iter("script")
               if (script.get("type") or "").strip().lower() in _JS_TYPES + _DATA_TYPES)


def _mount_candidates(doc: lxml.html.HtmlElement) -> list[lxml.html.HtmlElement]:
    """The app roots, then the page's one marked main (two marks name none as the content's place), then the
    busy elements, each in document order."""
    found: list[lxml.html.HtmlElement] = _MOUNT_CANDIDATES(doc)
    roots = [el for el in found if el.get("id") in APP_ROOT_IDS]
    marked = [el for el in found if el.tag == "main" or el.get("role") == "main"]
    busy = [el for el in found if el.get("aria-busy") == "true"]
    return roots + (marked if len(marked) == 1 else []) + busy


def _empty_mount(doc: lxml.html.HtmlElement) -> str | None:
    """The app root or the page's one marked main (a page with two marks none as the content's place)
    where the text should be, holding none or a loading placeholder; what it is, for the reason."""
    for el in _mount_candidates(doc):
        if el.get("aria-busy") == "true":
            return "a loading placeholder"
        if _chars(el.text_content()) >= MOUNT_TEXT_MAX_CHARS:
            continue  # holds text (scripts and all, but a mount point's scripts are not that long)
        text = _text(el)
        if _LOADING.match(text):
            return f'"{text}"'
        if _chars(text) < EMPTY_MOUNT_MAX_CHARS:
            return f"#{el.get('id')}" if el.get("id", "").lower() in APP_ROOT_IDS else f"an empty <{el.tag}>"
    return None


def _asks_js(doc: lxml.html.HtmlElement, shown: str) -> str | None:
    """Words asking for JavaScript, in a noscript or the body's text `shown` (given for a page that shows
    little): not a comment widget's ("enable JavaScript to view the comments")."""
    for text in [" ".join(n.text_content().split()) for n in doc.iter("noscript")] + [shown[:2000]]:
        m = ENABLE_JS.search(text)
        if m is not None and not WIDGET_ASK.search(text):
            return m.group(0)
    return None


def _challenge(doc: lxml.html.HtmlElement, source: str) -> str | None:
    lowered = source.lower()
    markup = next((x for x in CHALLENGE_MARKUP if x in lowered), None)
    if markup is not None:
        return f'challenge markup "{markup}"'
    title = " ".join((doc.findtext(".//title") or "").split())
    said = CHALLENGE_TEXT.search(title)
    if said is not None and len(said.group(0)) >= 0.5 * len(title):
        return f'"{said.group(0)}"'
    return None


def _refreshes(doc: lxml.html.HtmlElement) -> bool:
    """A meta refresh naming a page: the render follows it when it comes soon enough to be a redirect
    (fetch/in_chrome.py's META_REFRESH_MAX_S); a refresh of the page itself (no URL) is no reason to render."""
    return any("url=" in "".join(c.split()).lower() for c in doc.xpath(
        "//meta[translate(@http-equiv,'REFSH','refsh')='refresh']/@content"))


def _hidden_chars(doc: lxml.html.HtmlElement) -> int:
    """Characters of text in the page's hidden elements (the outermost of them)."""
    hidden = [el for el in doc.xpath(_STYLED) if el.get("hidden") is not None or
              any(rule in "".join(el.get("style", "").split()).lower() for rule in _HIDING_RULES)]
    ids = {id(el) for el in hidden}
    return sum(_visible_chars(el) for el in hidden if not any(id(a) in ids for a in el.iterancestors()))


def measure(doc: lxml.html.HtmlElement, source: str) -> Markup:
    """The signs on the server's tree `doc` (left as it is) of the page whose HTML is `source`. What can
    only matter on a page that shows little (a challenge, prose in script data) is measured only there:
    on a long page it would cost tens of milliseconds for nothing."""
    body = doc.find("body")
    root = body if body is not None else doc
    hidden = _hidden_chars(doc)
    visible_chars = max(_visible_chars(root) - hidden, 0)
    runs, script_chars = _scripts(doc)
    # the text itself, for the searches in it, where it is short (and the signs that need it can hold)
    shown = _text(root) if runs and visible_chars < DATA_SHOWN_MAX_CHARS else ""
    return Markup(runs_scripts=runs, visible_chars=visible_chars, hidden_chars=hidden, script_chars=script_chars,
                  data_prose_chars=_data_prose(doc, shown) if shown else 0, navigates=bool(shown) and _navigates(doc),
                  empty_mount=_empty_mount(doc) if runs else None, asks_js=_asks_js(doc, shown) if runs else None,
                  challenge=_challenge(doc, source) if visible_chars < CHALLENGE_SHOWN_MAX_CHARS else None,
                  refresh=_refreshes(doc))


def judge(m: Markup, text_chars: int) -> str | None:
    """Why the page must be rendered, or None when the server's HTML holds what a reader sees.
    `text_chars`: the extraction's characters of text (0 when nothing could be extracted)."""
    if m.challenge is not None:
        return f"the server answered with an anti-bot challenge ({m.challenge})"
    if text_chars == 0:
        return "the server's HTML holds no text to extract"
    if m.refresh:
        return "the page moves on with a meta refresh"
    if m.navigates:
        return "the page moves on by script"
    if not m.runs_scripts:
        return None  # Chrome would show what the server sent
    return next((reason for sign in _CLIENT_SIGNS if (reason := sign(m, text_chars)) is not None), None)


def _empty_mount_sign(m: Markup, _text_chars: int) -> str | None:
    if m.empty_mount is None:
        return None
    return f"the page's mount point is empty until its scripts run ({m.empty_mount})"


def _scripts_outweigh_text(m: Markup, _text_chars: int) -> str | None:
    text = m.visible_chars + m.hidden_chars  # hidden text is the page's too: a script shows it (_text_hidden)
    if text < TINY_BODY_MAX_CHARS:
        return f"the body holds {text} characters of text and runs scripts"
    if text < SCRIPT_HEAVY_MAX_CHARS and m.script_chars > SCRIPT_TO_TEXT * text:
        return f"{m.script_chars} characters of inline script beside {text} of text"
    return None


def _asks_for_javascript(m: Markup, text_chars: int) -> str | None:
    if m.asks_js is None or text_chars >= ASKS_JS_MAX_CHARS:
        return None
    return f'the page asks for JavaScript ("{m.asks_js}")'


def _text_in_data(m: Markup, _text_chars: int) -> str | None:
    if not (m.data_prose_chars >= DATA_MIN_CHARS and m.data_prose_chars > DATA_TO_TEXT * m.visible_chars
            and m.visible_chars < DATA_SHOWN_MAX_CHARS):
        return None
    return (f"its text is only in script data ({m.data_prose_chars} characters of prose there the page does not "
            f"show, {m.visible_chars} shown)")


def _text_hidden(m: Markup, text_chars: int) -> str | None:
    """Most of the page's text hidden, and the extraction (`text_chars`) holds little beyond the visible
    text: it left the hidden text out (webfetch/parse/hidden.py does, unless asked to keep it), so what a
    person sees once the scripts ran takes a render."""
    if not (m.hidden_chars > HIDDEN_SHARE * (m.hidden_chars + m.visible_chars)
            and m.visible_chars <= HIDDEN_VISIBLE_MAX_CHARS
            and text_chars - m.visible_chars < HIDDEN_KEPT_SHARE * m.hidden_chars):
        return None
    return f"its text is hidden until a script shows it ({m.hidden_chars} characters hidden)"


_CLIENT_SIGNS = (_empty_mount_sign, _scripts_outweigh_text, _asks_for_javascript, _text_in_data, _text_hidden)


@dataclass(frozen=True)
class Need:
    """The decision with its reason (None: no render needed)."""

    reason: str | None

    @property
    def render(self) -> bool:
        return self.reason is not None
