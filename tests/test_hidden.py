"""Text a page hides from people is not handed to the agent (issue 41 item 3; webfetch/parse/hidden.py): through
the daemon, each way of hiding an instruction beside a visible article (tests/support/hidden_pages.py) leaves
the instruction out and every visible sentence in, the result counts what was left out, and `hidden: "keep"`
gives it back."""

from __future__ import annotations

import lxml.html
import trio

from webfetch.config import FetchConfig
from webfetch.parse.hidden import drop_hidden

from .support.daemon import make_config
from .support.hidden_pages import REACHABLE, VISIBLE, WAYS, page, path

# What trafilatura itself keeps when webfetch keeps the hidden text: it drops some inline-hidden markup on
# its own (display:none, visibility:hidden, aria-hidden, a clip), so "keep" can give back only these.
KEPT_BY_THE_EXTRACTOR = ("hidden attribute", "zero font size", "off screen", "text indent", "template",
                         "collapsed panel")


async def test_no_hidden_sentence_reaches_the_markdown_and_every_visible_one_does(daemon, site):
    for way in WAYS:
        site.html(path(way), page(way))
    wrong = []
    with trio.fail_after(120):
        for way, (sentence, _) in WAYS.items():
            r = await daemon.fetch(site.url(path(way)))
            assert r["type"] == "result", r
            if sentence in r["content"]:
                wrong.append(f"{way}: the hidden sentence is in the markdown")
            wrong += [f"{way}: visible sentence lost: {v}" for v in VISIBLE if v not in r["content"]]
            if r["hidden_text_removed"] < len("".join(sentence.split())):
                wrong.append(f"{way}: hidden_text_removed {r['hidden_text_removed']}")
    assert wrong == []


async def test_hidden_keep_gives_the_hidden_text_back_and_is_cached_apart(daemon, site):
    for way in KEPT_BY_THE_EXTRACTOR:
        site.html(path(way), page(way))
    with trio.fail_after(120):
        for way in KEPT_BY_THE_EXTRACTOR:
            sentence = WAYS[way][0]
            dropped = await daemon.fetch(site.url(path(way)))
            kept = await daemon.fetch(site.url(path(way)), hidden="keep")
            again = await daemon.fetch(site.url(path(way)))
            assert sentence not in dropped["content"] and dropped["hidden_text_removed"] > 0, (way, dropped)
            assert sentence in kept["content"] and kept["hidden_text_removed"] == 0, (way, kept)
            assert all(v in kept["content"] for v in VISIBLE), (way, kept["content"])
            # the page as read with its hidden text is cached apart: the default read never serves it
            assert (again["cached"], again["content"]) == (True, dropped["content"]), way


async def test_a_bad_hidden_value_is_refused_naming_the_field(daemon, site):
    site.html("/p", page("template"))
    r = await daemon.fetch(site.url("/p"), hidden="show")
    assert (r["type"], r["code"]) == ("error", "bad_request") and "$.hidden" in r["message"], r


def test_an_aria_hidden_block_holding_most_of_the_page_stays():
    # a dialog library sets aria-hidden on the page behind an open dialog: people still see that page
    doc = lxml.html.document_fromstring(
        "<html><body><div aria-hidden='true'><p>" + " ".join(VISIBLE) + "</p></div>"
        "<div role='dialog'><p>Subscribe to our newsletter</p></div></body></html>")
    assert drop_hidden(doc) == 0
    assert VISIBLE[0] in doc.text_content()


def test_react_streamed_segments_are_not_hidden_text():
    # React's streaming server rendering sends each late part of the page in <div hidden id="S:n">, moved into
    # its <template id="B:n"> placeholder by a script as the page loads
    doc = lxml.html.document_fromstring(
        "<html><body><template id='B:0'></template><div hidden id='S:0'><p>" + VISIBLE[0] + "</p></div>"
        "<div hidden id='other'><p>" + WAYS["hidden attribute"][0] + "</p></div></body></html>")
    assert drop_hidden(doc) == len("".join(WAYS["hidden attribute"][0].split()))
    assert VISIBLE[0] in doc.text_content() and WAYS["hidden attribute"][0] not in doc.text_content()


async def test_text_hidden_at_load_that_the_person_can_open_in_place_is_kept(daemon, site):
    # a <details> body, an accordion's panel its button names, a region labelled by an expanding button, a tab's
    # panel, a collapse toggle's target, hidden="until-found" and a FAQ's answer after its question: a click (or
    # the browser's find) shows each
    for way in REACHABLE:
        site.html(path(way), page(way))
    wrong = []
    with trio.fail_after(120):
        for way, (sentence, _) in REACHABLE.items():
            r = await daemon.fetch(site.url(path(way)))
            assert r["type"] == "result", r
            if sentence not in r["content"]:
                wrong.append(f"{way}: the sentence the person can open is not in the markdown")
            wrong += [f"{way}: visible sentence lost: {v}" for v in VISIBLE if v not in r["content"]]
    assert wrong == []


def test_an_open_panel_is_opened_and_what_no_control_opens_stays_out():
    doc = lxml.html.document_fromstring(
        "<html><body><p>" + VISIBLE[0] + "</p>" + REACHABLE["accordion panel"][1].format(VISIBLE[1])
        + WAYS["display none"][1].format(WAYS["display none"][0])
        # a panel named by a control that is itself hidden with nothing opening it: no one can reach it
        + "<div hidden><button aria-controls='p2'>More</button></div><div id='p2' hidden><p>"
        + WAYS["hidden attribute"][0] + "</p></div></body></html>")
    removed = drop_hidden(doc)
    text = doc.text_content()
    assert VISIBLE[1] in text and WAYS["display none"][0] not in text and WAYS["hidden attribute"][0] not in text
    assert doc.get_element_by_id("method").get("hidden") is None  # opened, as a click would
    assert removed == len("".join((WAYS["display none"][0] + "More" + WAYS["hidden attribute"][0]).split()))


# A page whose own stylesheet (a <style> element: a render refuses stylesheet files) hides by class what no
# attribute or inline style says; one panel it hides is opened by a button, one paragraph is shown again inside
# a hidden block (visibility:visible overrides its parent's hidden).
STYLED = ("<!doctype html><html><head><meta charset='utf-8'><title>Seals of the estuary</title><style>"
          ".promo { display: none } .ghost { visibility: hidden } .ghost .again { visibility: visible }"
          " .panel { display: none }</style></head><body><main><article><h1>Seals counted from the air</h1>"
          f"<p>{VISIBLE[0]}</p><p>{VISIBLE[1]}</p>"
          f"<div class='promo'><p>{WAYS['display none'][0]}</p></div>"
          f"<p class='ghost'>{WAYS['visibility hidden'][0]}</p>"
          f"<div class='ghost'><p class='again'>{VISIBLE[2]}</p></div>"
          "<h3><button aria-expanded='false' aria-controls='method'>Method</button></h3>"
          f"<div id='method' class='panel'><p>{REACHABLE['accordion panel'][0]}</p></div>"
          f"<p>{VISIBLE[3]}</p><p>{VISIBLE[4]}</p></article></main></body></html>")


async def test_what_a_rendered_pages_own_styles_hide_is_left_out_and_what_a_person_can_open_stays(
        start_daemon, site):
    d = await start_daemon(make_config(fetch=FetchConfig(allow_private=True, render="always")))
    site.html("/styled", STYLED)
    with trio.fail_after(60):
        r = await d.fetch(site.url("/styled"))
    assert r["type"] == "result", r
    content = r["content"]
    assert WAYS["display none"][0] not in content and WAYS["visibility hidden"][0] not in content, content
    assert all(v in content for v in VISIBLE), content
    assert REACHABLE["accordion panel"][0] in content, content
    hidden = WAYS["display none"][0] + WAYS["visibility hidden"][0]
    assert r["hidden_text_removed"] >= len("".join(hidden.split())), r["hidden_text_removed"]
