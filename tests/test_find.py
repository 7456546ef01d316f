"""Find in a page (`fetch` with `find`): the passages webfetch/parse/find.py picks from a page's markdown, with their
heading paths and offsets that `offset` reads on from, the outline when nothing matches, clear errors for
empty and malformed patterns (with where), a 2 MB page searched fast; then through the real daemon: a large
page and a PDF searched from the cache (the server sees one download), the regular expression that
backtracks without end cut at the request's deadline while the daemon answers others, and the text a model
reads."""

from __future__ import annotations

import re
import time

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from webfetch.frontends.tool_text import fetch_text
from webfetch.paging import paginate
from webfetch.parse import find
from webfetch.parse.extractor import markdown_title
from webfetch.parse.find import BadPattern, parse, problem, search

from .support import pdfs

DOC = """# Widget manual

Widgets are small.

## Install

### Debian
Run apt-get install widget.
Then set the Auth token in the config.

Restart the service.

## Usage

Call widget --help for options.
The AUTH_TOKEN variable overrides the config.

## Limits

The rate limit is 10 requests a second.
"""


def texts(pattern: str, md: str = DOC) -> list[tuple[int, tuple[str, ...], str]]:
    return [(p.offset, p.headings, p.text) for p in search(md, parse(pattern)).passages]


def test_words_must_all_appear_in_a_passage_in_any_case():
    found = search(DOC, parse("auth token"))
    assert found.matches == 2
    assert [p.headings for p in found.passages] == [("Widget manual", "Install", "Debian"),
                                                    ("Widget manual", "Usage")]
    assert found.passages[0].text == ("### Debian\nRun apt-get install widget.\nThen set the Auth token in the "
                                      "config.\n\nRestart the service.")
    assert search(DOC, parse("auth nowhere")).matches == 0


def test_a_quoted_phrase_is_one_word():
    assert [h for _, h, _ in texts('"rate limit"')] == [("Widget manual", "Limits")]
    assert texts('"limit rate"') == []
    assert [h for _, h, _ in texts('"auth token"')] == [("Widget manual", "Install", "Debian")]  # not AUTH_TOKEN


def test_a_regular_expression_is_case_sensitive_unless_i():
    assert [h for _, h, _ in texts("/AUTH_\\w+/")] == [("Widget manual", "Usage")]
    assert texts("/auth_\\w+/") == []
    assert len(texts("/auth/i")) == 2
    assert [h for _, h, _ in texts("/widget\\s+--help/")] == [("Widget manual", "Usage")]


def test_a_path_that_starts_with_a_slash_is_words():
    p = parse("/usr/bin/env")
    assert p.regex is None and p.words == ("/usr/bin/env",)


def test_each_offset_is_where_fetch_with_offset_reads_on():
    for offset, _, text in texts("auth") + texts("/limit/"):
        page, _ = paginate(DOC, offset, 50_000, 2_000)
        assert page.startswith(text)


def test_a_match_in_a_section_that_starts_with_its_heading_takes_no_lines_from_the_section_above():
    found = search("x\nx\nx\n# H\nabc", parse("abc"))
    assert [(p.offset, p.headings, p.text) for p in found.passages] == [(6, ("H",), "# H\nabc")]


def test_headings_inside_code_are_not_headings():
    md = "# Real\n\n```\n# a shell comment\nmake install\n```\n"
    assert [(h.level, h.text) for h in search(md, parse("x")).outline] == [(1, "Real")]
    assert texts("make", md)[0][1] == ("Real",)


# What a heading's text meant when a regular expression took its closing `#`s off (and backtracked in quadratic
# time doing it): the reference the linear code is held to.
_OLD_HEADING = re.compile(r"\n(#{1,6})[ \t]+([^\n]*?)(?:[ \t]+#+)?[ \t]*(?=\n|\Z)")
_OLD_TITLE = re.compile(r"^# +(.+?)\s*#*\s*$", re.MULTILINE)


@given(st.text("# \ta\n", max_size=16))
def test_headings_and_the_title_read_as_they_did(md):
    old = [(m.start(), len(m.group(1)), m.group(2)) for m in _OLD_HEADING.finditer("\n" + md) if m.group(2)]
    assert [(h.offset, h.level, h.text) for h in find.search(md, parse("zzz")).outline] == old
    title = _OLD_TITLE.search(md)
    if title is None or title.group(1).strip():   # a `# ` line of spaces alone was a title "" before
        assert markdown_title(md) == (title.group(1).strip() if title else None)


def test_a_heading_line_of_many_spaces_is_read_in_linear_time():
    """Both held the event loop (find's words run there) or a worker: the outline's regular expression
    backtracked for minutes on this line, the title's for hours. Bounded by pytest's timeout."""
    line = "# Install" + " " * 200_000 + "now ##"
    outline = find.search(line + "\n\nbody", parse("zzz")).outline
    assert [h.text for h in outline] == ["Install" + " " * 200_000 + "now"]
    assert markdown_title("# Install" + " " * 15_000 + "x #") == "Install" + " " * 15_000 + "x"


def test_a_passage_is_cut_around_its_match_on_a_long_block():
    md = "# Log\n" + "".join(f"line {i} of the log\n" for i in range(2000)) + "the needle is here\n" + "tail\n" * 100
    [(offset, _, text)] = texts("needle", md)
    assert "the needle is here" in text and len(text) <= find.MAX_PASSAGE_CHARS
    assert md[offset:offset + len(text)] == text
    one_line = "x" * 100_000 + " needle " + "y" * 100_000
    [(offset, _, text)] = texts("needle", one_line)
    assert "needle" in text and len(text) <= find.MAX_PASSAGE_CHARS and one_line[offset:].startswith(text)


def test_passages_that_touch_are_one():
    md = "a needle\nb\nc needle\n"
    assert search(md, parse("needle")).matches == 1
    md = "a needle\n\nb\n\nc needle\n"
    found = search(md, parse("needle"))
    assert found.matches == 2 and [p.text for p in found.passages] == ["a needle\n\nb\n\nc needle"]


def test_the_content_a_model_reads():
    pattern = parse("auth token")
    content, shown, notes = find.content(search(DOC, pattern), pattern, len(DOC), 50_000)
    assert (shown, notes) == (2, [])
    assert content == (
        f'The words "auth" "token" match in 2 places of the page\'s {len(DOC)} characters. Each passage starts at '
        "the offset shown: fetch the same URL with that `offset` (and no `find`) to read on from there.\n"
        "\n── offset 49 · Widget manual › Install › Debian\n### Debian\nRun apt-get install widget.\n"
        "Then set the Auth token in the config.\n\nRestart the service.\n"
        "\n── offset 160 · Widget manual › Usage\nCall widget --help for options.\n"
        "The AUTH_TOKEN variable overrides the config.\n")


def test_nothing_matches_gives_the_outline():
    pattern = parse("/kubernetes/")
    content, shown, _ = find.content(search(DOC, pattern), pattern, len(DOC), 50_000)
    assert shown == 0
    assert content == (
        f"Nothing in the page's {len(DOC)} characters matches the regular expression /kubernetes/. The page's "
        "outline instead, each heading with the offset it starts at (fetch the same URL with that `offset`, "
        "without `find`, to read the section):\n"
        "offset 0  # Widget manual\noffset 37    ## Install\noffset 49      ### Debian\n"
        "offset 150    ## Usage\noffset 239    ## Limits\n")
    for line in content.splitlines()[1:]:
        offset = int(line.split()[1])
        assert DOC[offset:].startswith(line.split("  ", 1)[1].strip())
    none = find.content(search("plain text", pattern), pattern, 10, 50_000)[0]
    assert none == ("Nothing in the page's 10 characters matches the regular expression /kubernetes/. The page has "
                    "no headings to show instead; try other words, or read it from offset 0 (fetch without `find`).")


def test_passages_beyond_max_chars_are_counted_not_shown():
    md = "".join(f"# Part {i}\n\nneedle number {i}\n\n" for i in range(100))
    pattern = parse("needle")
    content, shown, notes = find.content(search(md, pattern), pattern, len(md), 1_000)
    assert 0 < shown < 100 and len(content) < 1_200
    assert content.endswith(f"\n[{100 - shown} more passages not shown: narrow the pattern, or read on from the "
                            "last offset]\n")
    assert notes == [f"{100 - shown} of 100 passages did not fit in 1000 characters"]


@pytest.mark.parametrize(("pattern", "message"), [
    ("", "`find` is empty: pass the words to look for (every one must appear in a passage, in any case; "
         "\"a phrase\" in quotes) or a regular expression written /…/"),
    ("   ", "`find` is empty"),
    ('""', '`find` has only empty quotes (""): put the words to look for between them'),
    ('auth "token', '`find` has a quote that is not closed at position 5\n  auth "token\n       ^\n'),
    ("//", "`find` is an empty regular expression (//)"),
    ("/(v1|v2/", "`find` is not a valid regular expression: missing ), unterminated subpattern at position 1\n"
                 "  /(v1|v2/\n   ^"),
    ("/a{3,1}/", "`find` is not a valid regular expression: min repeat greater than max repeat at position 3\n"
                 "  /a{3,1}/\n     ^"),
    ("x" * 1001, "`find` is 1001 characters long; at most 1000"),
])
def test_empty_and_malformed_patterns_say_what_and_where(pattern, message):
    # the text's rules in the daemon (parse); a regular expression compiled in a parser worker (problem)
    try:
        parse(pattern)
    except BadPattern as e:
        assert e.code == "bad_request" and e.message.startswith(message)
    else:
        assert (problem(pattern) or "").startswith(message)


def test_a_2_mb_page_is_searched_whole():
    """Every match counted to the page's last line (how fast: bin/bench's find row, not a timed test)."""
    paras = [f"## Section {i}\n\nParagraph {i}: the quick brown fox jumps over the lazy dog, item {i}.\n"
             for i in range(24_000)]
    md = "# Big\n\n" + "\n".join(paras)
    assert len(md) > 2_000_000
    for pattern, matches in (("item 23999.", 1), ("/item 1234\\b/", 1), ("fox lazy", 24_000)):
        assert search(md, parse(pattern)).matches == matches


def test_the_facts_line_a_model_reads():
    frame = {"kind": "find", "url": "https://x.test/", "final_url": "https://x.test/", "cached": True, "age_s": 3,
             "total_chars": 12345, "find": "auth token", "matches": 2, "content": "…", "notes": []}
    assert fetch_text(frame).text.splitlines()[0] == (
        'https://x.test/ · cached (3 s old) · 2 matches for "auth token" in 12,345 characters')
    frame |= {"matches": 0}
    assert fetch_text(frame).text.splitlines()[0] == (
        'https://x.test/ · cached (3 s old) · no match for "auth token" in 12,345 characters '
        "(the page's outline instead)")


# --- through the daemon ------------------------------------------------------------------------------


async def test_find_on_a_large_page_reads_the_cache(daemon, site):
    with trio.fail_after(60):
        page = await daemon.fetch(site.url("/large"), raw=True)
        assert page["type"] == "result" and page["total_chars"] > 100_000, page
        r = await daemon.fetch(site.url("/large"), find="Paragraph 1234:")
    assert r["type"] == "result", r
    assert (r["kind"], r["cached"], r["matches"], r["find"]) == ("find", True, 1, "Paragraph 1234:")
    [p] = r["passages"]
    # the paragraph with two lines of context each side (here the paragraphs before and after it)
    assert p["headings"] == ["A very large page"] and p["text"].startswith("Paragraph 1232: the quick brown fox")
    assert [line[:15] for line in p["text"].split("\n\n")] == [f"Paragraph {i}:" for i in range(1232, 1237)]
    assert f"── offset {p['offset']} · A very large page\n" in r["content"]
    after = await daemon.fetch(site.url("/large"), offset=p["offset"])
    assert after["content"].startswith(p["text"])
    assert site.hits["/large"] == 1  # found in the cached page: no second download


async def test_find_on_a_pdf(daemon, site):
    data, _ = pdfs.large()
    site.route("/manual.pdf", lambda h: h.reply(200, "application/pdf", data))
    with trio.fail_after(60):
        r = await daemon.fetch(site.url("/manual.pdf"), find="/^#+ .*/m")
        assert r["kind"] == "find" and r["extractor"] == "pdf" and r["matches"] > 10, r
        page = await daemon.fetch(site.url("/manual.pdf"), raw=True)
        word = page["content"].split("\n\n")[3].split()[1]
        again = await daemon.fetch(site.url("/manual.pdf"), find=word)
    assert again["cached"] and again["matches"] >= 1
    for p in again["passages"]:
        assert word.lower() in p["text"].lower()
        assert page["content"][p["offset"]:].startswith(p["text"]) or p["offset"] >= len(page["content"])
    assert site.hits["/manual.pdf"] == 1


async def test_find_errors_come_before_any_load(daemon, site):
    with trio.fail_after(30):
        bad = await daemon.fetch(site.url("/article"), find="/(v1|v2/")
        both = await daemon.fetch(site.url("/article"), find="otters", prompt="what about otters?")
        paged = await daemon.fetch(site.url("/article"), find="otters", offset=10)
    assert (bad["type"], bad["code"]) == ("error", "bad_request")
    assert bad["message"].startswith("`find` is not a valid regular expression: missing ), unterminated "
                                     "subpattern at position 1")
    assert both["code"] == "bad_request" and both["message"].startswith("pass either `find`")
    assert paged["code"] == "bad_request" and paged["message"].startswith("`find` searches the whole page")
    assert site.hits.get("/article", 0) == 0


async def test_a_regex_that_backtracks_without_end_times_out_and_the_daemon_serves_on(daemon, site):
    site.route("/aaa", lambda h: h.reply(200, "text/plain", "a" * 40 + "!"))
    with trio.fail_after(60):
        first = await daemon.fetch(site.url("/aaa"))
        assert first["type"] == "result", first
        async with trio.open_nursery() as nursery:
            results: dict[str, dict] = {}

            async def stuck() -> None:
                results["stuck"] = await daemon.fetch(site.url("/aaa"), find="/(a+)+$/", timeout_s=2)

            nursery.start_soon(stuck)
            await trio.sleep(0.5)
            started = time.monotonic()
            results["other"] = await daemon.fetch(site.url("/aaa"), find="/a{40}/")
            other_s = time.monotonic() - started
    assert results["other"]["matches"] == 1 and other_s < 1.0  # the event loop was not held
    stuck_r = results["stuck"]
    assert (stuck_r["type"], stuck_r["code"]) == ("error", "timeout")
    assert stuck_r["message"] == ("the search for the regular expression /(a+)+$/ ran for 2 s on the page's 41 "
                                  "characters without finishing; it backtracks (nested repeats such as (a+)+ or "
                                  "(.*)*): simplify it, or search for words")
