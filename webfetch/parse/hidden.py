"""Text a person does not see on the page, taken out of it before extraction (issue 41 item 3): a page can
hide an instruction for the agent in markup no reader is shown. What counts as hidden is what the markup
itself says, element by element: the `hidden` attribute, `<template>`, `aria-hidden="true"`, and an inline
style that hides (display:none, visibility:hidden or collapse, a zero font size, a position far off the
screen, a clip to nothing or a box of zero or one pixel with its overflow hidden).

Content a person can open (a collapsed menu, an accordion's panel, a tab not shown) is hidden by the same
markup and is left out the same way: what is handed over is what a reader sees without acting on the page.
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

_CANDIDATES = lxml.etree.XPath(
    "//template|//*[@hidden or @aria-hidden='true' or @style]")
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
    if el.tag == "template" or el.get("hidden") is not None:
        return True
    style = el.get("style")
    return bool(style) and style_hides(style)


def _chars(el: lxml.html.HtmlElement) -> int:
    return len("".join(el.text_content().split()))


def drop_hidden(doc: lxml.html.HtmlElement) -> int:
    """Removes from `doc` the elements a person does not see (see the module's docstring), the text that
    follows each in its parent (its tail, which is outside it) kept. Returns the characters of text removed,
    white space not counted. The page's html, head and body elements are never removed (a body hidden
    until its scripts show it is the page)."""
    body = doc.find("body")
    total = _chars(body if body is not None else doc)
    hidden: set[lxml.html.HtmlElement] = set()
    removed = 0
    streamed = _streamed_segments(doc)
    for el in _CANDIDATES(doc):  # in document order: an element's ancestors come before it
        if not isinstance(el.tag, str) or el.tag in _PAGE_ITSELF or any(a in hidden for a in el.iterancestors()):
            continue
        if el.get("id") in streamed:
            continue
        if _hides(el) or (el.get("aria-hidden") == "true" and _chars(el) < ARIA_MOST_SHARE * total):
            hidden.add(el)
            removed += _chars(el)
    for el in hidden:
        el.drop_tree()
    return removed


_PAGE_ITSELF = frozenset({"html", "head", "body"})


def _streamed_segments(doc: lxml.html.HtmlElement) -> set[str]:
    """The ids of the hidden segments React's streaming server rendering sends (`<div hidden id="S:0">`)
    ahead of the script that moves each into its placeholder (`<template id="B:0">`, or "P:0"): hidden only
    until that script runs, as the page loads, so people see them. Known by React's own naming of the two,
    not by the script, which a stored page may have lost."""
    if not doc.xpath("//template[starts-with(@id, 'B:') or starts-with(@id, 'P:')]"):
        return set()
    return {i for i in doc.xpath("//div[@hidden][starts-with(@id, 'S:')]/@id") if i[2:].isdigit()}
