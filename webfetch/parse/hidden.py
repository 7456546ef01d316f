"""Text a person does not see on the page, taken out of it before extraction (issue 41 item 3): a page can
hide an instruction for the agent in markup no reader is shown. What counts as hidden is what the markup
itself says, element by element: the `hidden` attribute, `<template>`, `aria-hidden="true"`, an inline
style that hides (display:none, visibility:hidden or collapse, a zero font size, a position far off the
screen, a clip to nothing or a box of zero or one pixel with its overflow hidden), and in a rendered page
what the page's own styles hide (computed display:none or visibility:hidden, marked by
webfetch/js/capture.js: STYLE_MARK).

Text hidden at load that the person can open in place is content, and stays, opened: a panel whose id a
control the person sees names (`aria-controls`, a `role="region"` labelled by a button with `aria-expanded`,
a collapse or tab toggle's `data-bs-target`/`data-target`/`href`), a `role="tabpanel"`, `hidden="until-found"`
(the browser's find opens it), and a `<details>` body (which the markup never hides). The control is what
makes it reachable, so it is known by structure the page declares for people and assistive technology,
never by class names; a dialog is a layer over the page, not the page's text, and stays out even when a
button opens it. An instruction hidden with no control (display:none, zero size, off screen, `<template>`)
is out as before.

Two limits that keep ordinary pages whole: an aria-hidden block is text people see (aria-hidden hides it
from screen readers only, and dialog libraries set it on the whole page behind an open dialog), so one that
holds at least ARIA_MOST_SHARE of the page's text stays; and the decorative icons aria-hidden usually marks
hold no text, so leaving them out changes nothing."""

from __future__ import annotations

import re

import lxml.etree
import lxml.html

# An aria-hidden block holding at least this share of the page's text is the page behind a dialog, or a
# page that misuses the attribute: people see it, and it stays.
ARIA_MOST_SHARE = 0.5
# A FAQ's question, before the answer it opens: a line, not a paragraph that happens to end in "?".
QUESTION_MAX_CHARS = 200
# The nodes (comments and processing instructions too) a question and its answer's wrapper may hold: two
# elements and the odd comment; a wrapper of hundreds is no pair, and is not walked.
_PAIR_MAX_NODES = 8

# The mark webfetch/js/capture.js puts on what a rendered page's own styles hide (computed display:none or
# visibility:hidden): in a page's own HTML it can only hide more, which the page could do anyway.
STYLE_MARK = "data-webfetch-hidden"
_CANDIDATES = lxml.etree.XPath(
    f"//template|//*[@hidden or @aria-hidden='true' or @style or @{STYLE_MARK}]")
# Inline style declarations, white space removed and lowercased, that hide an element's text.
_STYLE_HIDES = re.compile(
    r"(?:^|;)(?:display:none|visibility:(?:hidden|collapse)"
    r"|font-size:0(?:\.0*)?(?:[a-z%]+)?(?:!important)?(?:;|$)"
    r"|clip:rect\(0(?:px)?,?0(?:px)?,?0(?:px)?,?0(?:px)?\)|clip:rect\(1px,?1px,?1px,?1px\)"
    r"|clip-path:inset\((?:50|100)%\))")
# Off screen: a negative offset this large, in the unit given (an indent of -9999px hides a heading's text
# behind its logo; -100px is a layout tweak).
_OFFSET = re.compile(
    r"(?:^|;)(?:left|top|right|text-indent|margin-left|margin-top):-(\d+(?:\.\d+)?)(px|em|rem|vw|vh|%)")
_FAR = {"px": 500.0, "em": 50.0, "rem": 50.0, "vw": 100.0, "vh": 100.0, "%": 100.0}
# A box of zero or one pixel that hides what overflows it: the screen-reader-only pattern, and a collapsed
# panel's height:0.
_TINY_BOX = re.compile(r"(?:^|;)(?:width|height|max-height):(?:0|1px|0px)(?:;|$|!)")

# The controls that open a panel in place, and how each names it: ARIA's disclosure, accordion and tab
# patterns (aria-controls on the button or tab; the panel's aria-labelledby naming a button that says
# whether it is expanded), and the toggles of Bootstrap-style collapse and tab scripts (data-toggle or
# data-bs-toggle, the target by id). A modal's toggle is not among them: a dialog is not the page's text.
_CONTROLS = lxml.etree.XPath(
    "//*[@aria-controls][self::button or self::a or self::summary or @aria-expanded"
    " or @role='button' or @role='tab']"
    "|//*[@data-toggle or @data-bs-toggle][@data-target or @data-bs-target or @href]")
_TOGGLES_IN_PLACE = frozenset({"collapse", "tab", "pill", "list"})
_LABELLED_PANELS = lxml.etree.XPath("//*[@aria-labelledby][@role='region']")
_EXPANDERS = lxml.etree.XPath("//*[@aria-expanded][@id]")
_DIALOG_ROLES = frozenset({"dialog", "alertdialog"})


def style_hides(style: str) -> bool:
    """Whether an inline style keeps its element's text from being seen."""
    s = "".join(style.lower().split())
    if _STYLE_HIDES.search(s):
        return True
    for amount, unit in _OFFSET.findall(s):
        if float(amount) >= _FAR[unit] and (unit != "px" or "position:" in s or "text-indent" in s):
            return True
    return bool(_TINY_BOX.search(s)) and "overflow:hidden" in s


def _hides(el: lxml.html.HtmlElement) -> bool:
    """Whether the element itself is hidden (aria-hidden judged apart: see drop_hidden)."""
    if el.tag == "template" or el.get("hidden") is not None or el.get(STYLE_MARK) is not None:
        return True
    style = el.get("style")
    return bool(style) and style_hides(style)


def _chars(el: lxml.html.HtmlElement) -> int:
    return len("".join(el.text_content().split()))


def drop_hidden(doc: lxml.html.HtmlElement) -> int:
    """Removes from `doc` the elements a person does not see (see the module's docstring), the text that
    follows each in its parent (its tail, which is outside it) kept, and opens those the person can open
    (their hiding markup taken off, so that what follows reads them as shown). Returns the characters of text
    removed, white space not counted. The page's html, head and body elements are never removed (a body
    hidden until its scripts show it is the page)."""
    body = doc.find("body")
    total = _chars(body if body is not None else doc)
    hidden: set[lxml.html.HtmlElement] = set()
    removed = 0
    streamed = _streamed_segments(doc)
    openable, regions = _openable(doc)
    for el in _CANDIDATES(doc):  # in document order: an element's ancestors come before it
        if not isinstance(el.tag, str) or el.tag in _PAGE_ITSELF or any(a in hidden for a in el.iterancestors()):
            continue
        if el.get("id") in streamed:
            continue
        if _hides(el) or (el.get("aria-hidden") == "true" and _chars(el) < ARIA_MOST_SHARE * total):
            if el in regions or _reachable(el, openable):
                _open(el)
                continue
            hidden.add(el)
            removed += _chars(el)
    for el in hidden:
        el.drop_tree()
    return removed


_PAGE_ITSELF = frozenset({"html", "head", "body"})


def _openable(doc: lxml.html.HtmlElement) -> tuple[set[str], set[lxml.html.HtmlElement]]:
    """The panels a control on the page opens in place: the ids that controls name (see _CONTROLS), and the
    regions labelled by a button that expands; each with a control that is not itself hidden with no control
    of its own (judged one level up: a control inside a panel another control opens counts)."""
    named: dict[str, list[lxml.html.HtmlElement]] = {}
    for control in _CONTROLS(doc):
        for target in _targets(control):
            named.setdefault(target, []).append(control)
    ids = {target for target, controls in named.items() if any(_seen(c, named) for c in controls)}
    expanders = {el.get("id"): el for el in _EXPANDERS(doc)}
    regions = {panel for panel in _LABELLED_PANELS(doc)
               if any(_seen(expanders[i], named) for i in (panel.get("aria-labelledby") or "").split()
                      if i in expanders)}
    return ids, regions


def _targets(control: lxml.html.HtmlElement) -> list[str]:
    toggle = control.get("data-bs-toggle") or control.get("data-toggle")
    if toggle is None:
        return (control.get("aria-controls") or "").split()
    if toggle.strip().lower() not in _TOGGLES_IN_PLACE:
        return []
    target = control.get("data-bs-target") or control.get("data-target") or control.get("href") or ""
    return [target[1:]] if target.startswith("#") and len(target) > 1 else []


def _seen(control: lxml.html.HtmlElement, named: dict[str, list[lxml.html.HtmlElement]]) -> bool:
    """Whether a control is shown, or inside a panel some control names."""
    return not any(_hides(a) and a.get("id") not in named for a in (control, *control.iterancestors()))


def _reachable(el: lxml.html.HtmlElement, openable: set[str]) -> bool:
    """Whether the person can open this hidden element in place: a panel a control names, a tab's panel,
    or one the browser's find opens; never a dialog (a layer over the page) or a template."""
    if el.tag in ("template", "dialog") or el.get("role") in _DIALOG_ROLES or el.get("aria-modal") == "true":
        return False
    if el.get("hidden") == "until-found" or el.get("role") == "tabpanel":
        return True
    return el.get("id") in openable or _answers_a_question(el)


def _answers_a_question(el: lxml.html.HtmlElement) -> bool:
    """A FAQ's answer hidden behind its question, which a script opens on a click without declaring it:
    the answer alone with a visible question before it (a short text that ends in "?") in their wrapper."""
    parent = el.getparent()
    if parent is None or len(parent) > _PAIR_MAX_NODES:
        return False
    pair = [child for child in parent if isinstance(child.tag, str)]
    if len(pair) != 2 or pair[1] is not el or _hides(pair[0]):
        return False
    question = " ".join(pair[0].text_content().split())
    return 0 < len(question) <= QUESTION_MAX_CHARS and question.endswith("?")


def _open(el: lxml.html.HtmlElement) -> None:
    """Takes the hiding markup off a panel the person can open, as opening it would: what reads the page
    next (the extractor) sees it shown."""
    for name in ("hidden", "aria-hidden", STYLE_MARK):
        el.attrib.pop(name, None)
    style = el.get("style")
    if style and style_hides(style):
        del el.attrib["style"]


def _streamed_segments(doc: lxml.html.HtmlElement) -> set[str]:
    """The ids of the hidden segments React's streaming server rendering sends (`<div hidden id="S:0">`)
    ahead of the script that moves each into its placeholder (`<template id="B:0">`, or "P:0"): hidden only
    until that script runs, as the page loads, so people see them. Known by React's own naming of the two,
    not by the script, which a stored page may have lost."""
    if not doc.xpath("//template[starts-with(@id, 'B:') or starts-with(@id, 'P:')]"):
        return set()
    return {i for i in doc.xpath("//div[@hidden][starts-with(@id, 'S:')]/@id") if i[2:].isdigit()}
