"""Markdown the site offers: the main document's request asks for text/markdown below HTML (the server's own log
shows the Accept header, on a fresh tab and on a recycled one); a server that answers with markdown has it used
as it is (`extractor: "markdown"`), still paged and searched like any page; a server that ignores the header
answers HTML, read as ever; an llms.txt and a .md file come back verbatim."""

from __future__ import annotations

import threading

import trio

from webfetch.fetch.in_chrome import main_request_headers
from webfetch.fetch.load import MAIN_ACCEPT
from webfetch.parse.extractor import extract_raw

from .support.site import ARTICLE_TEXT, NOISY_ARTICLE

DOCS_MD = """# Widget API

The widget API answers in JSON.  Two spaces stay two spaces; *emphasis* stays as written.

## Authentication

Send the token in the `Authorization` header:

```http
Authorization: Bearer <token>
```

## Limits

The rate limit is 10 requests a second.
"""

LLMS_TXT = """# Widget

> Widgets for everyone.

## Docs

- [Quick start](https://widget.example/start.md): the first steps
- [API](https://widget.example/api.md)
"""


def test_markdown_is_ranked_below_html_and_other_headers_are_kept():
    assert MAIN_ACCEPT.startswith("text/html,application/xhtml+xml,")
    quality = dict(part.split(";q=") if ";q=" in part else (part, "1") for part in MAIN_ACCEPT.split(","))
    assert float(quality["text/markdown"]) < float(quality["text/html"])
    sent = main_request_headers({"Accept": "text/html", "User-Agent": "UA", "Upgrade-Insecure-Requests": "1"}, False)
    assert sent == [{"name": "User-Agent", "value": "UA"}, {"name": "Upgrade-Insecure-Requests", "value": "1"},
                    {"name": "Accept", "value": MAIN_ACCEPT}]
    recycled = main_request_headers({"accept": "*/*", "Pragma": "x", "User-Agent": "UA"}, True)
    assert [h["name"] for h in recycled] == ["User-Agent", "Accept", "Cache-Control", "Pragma"]


def test_a_markdown_body_is_kept_verbatim_with_its_title():
    e = extract_raw(DOCS_MD.encode(), "text/markdown", "utf-8")
    assert (e.markdown, e.extractor, e.title) == (DOCS_MD, "markdown", "Widget API")
    plain = extract_raw(LLMS_TXT.encode(), "text/plain", None)
    assert (plain.markdown, plain.extractor) == (LLMS_TXT, "raw")


class Negotiating:
    """Routes that log the Accept header of every request: one that answers markdown when asked for it (as
    docs sites that serve agents do), one that ignores the header."""

    def __init__(self, site) -> None:
        self.accept: dict[str, list[str]] = {}
        self.lock = threading.Lock()
        site.route("/docs/widget", self._offers)
        site.route("/plain/widget", self._ignores)
        site.route("/llms.txt", lambda h: (self._log(h), h.reply(200, "text/plain; charset=utf-8", LLMS_TXT)))
        site.route("/docs/widget.md", lambda h: (self._log(h), h.reply(200, "text/markdown; charset=utf-8", DOCS_MD)))

    def _log(self, h) -> None:
        with self.lock:
            self.accept.setdefault(h.path, []).append(h.headers.get("Accept", ""))

    def _offers(self, h) -> None:
        self._log(h)
        if "text/markdown" in h.headers.get("Accept", ""):
            h.reply(200, "text/markdown; charset=utf-8", DOCS_MD, {"Vary": "Accept"})
        else:
            h.reply(200, "text/html; charset=utf-8", NOISY_ARTICLE, {"Vary": "Accept"})

    def _ignores(self, h) -> None:
        self._log(h)
        h.reply(200, "text/html; charset=utf-8", NOISY_ARTICLE)


async def test_a_server_that_offers_markdown_answers_with_it_and_it_is_used_as_it_is(daemon, site):
    server = Negotiating(site)
    with trio.fail_after(60):
        r = await daemon.fetch(site.url("/docs/widget"))
        found = await daemon.fetch(site.url("/docs/widget"), find="rate limit")
        paged = await daemon.fetch(site.url("/docs/widget"), offset=10, max_chars=30)
    assert r["type"] == "result", r
    assert (r["kind"], r["extractor"], r["content_type"], r["title"]) == ("page", "markdown", "text/markdown",
                                                                          "Widget API")
    assert r["content"] == DOCS_MD and r["flags"] == []
    assert server.accept["/docs/widget"] == [MAIN_ACCEPT]  # one request: find and offset read the cache
    assert (found["kind"], found["matches"]) == ("find", 1) and found["passages"][0]["headings"] == [
        "Widget API", "Limits"]
    assert paged["content"] == DOCS_MD[10:40] or DOCS_MD[10:].startswith(paged["content"])


async def test_a_server_that_ignores_the_header_answers_html_read_as_ever_on_fresh_and_recycled_tabs(daemon, site):
    server = Negotiating(site)
    with trio.fail_after(60):
        first = await daemon.fetch(site.url("/plain/widget"))
        again = await daemon.fetch(site.url("/plain/widget"), fresh=True)  # a tab the pool has used before
    for r in (first, again):
        assert r["type"] == "result", r
        assert r["extractor"] == "trafilatura" and r["content_type"] == "text/html"
        assert ARTICLE_TEXT[0] in r["content"] and "Copyright" not in r["content"]
    assert server.accept["/plain/widget"] == [MAIN_ACCEPT, MAIN_ACCEPT]


async def test_an_llms_txt_and_a_md_file_come_back_verbatim(daemon, site):
    Negotiating(site)
    with trio.fail_after(60):
        llms = await daemon.fetch(site.url("/llms.txt"))
        md = await daemon.fetch(site.url("/docs/widget.md"))
    assert (llms["content"], llms["extractor"], llms["content_type"]) == (LLMS_TXT, "raw", "text/plain")
    assert (md["content"], md["extractor"], md["title"]) == (DOCS_MD, "markdown", "Widget API")
