"""A crawl's links: found in a page's HTML (or, for a page the cache already held, its markdown), made
absolute and normalized, so one page is one URL however a link spells it."""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urljoin, urlsplit

import lxml.html

from ..urls import build_url

MAX_LINKS = 5000   # links taken from one page; a page with more is a listing the crawl need not exhaust
_MARKDOWN_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def normalize_link(url: str, base: str) -> str | None:
    """`url` (as a page writes it) made absolute against `base`: the fragment dropped, the scheme and host
    lowercased, the default port dropped, an empty path made `/`. The trailing slash is kept as written:
    `/docs` and `/docs/` may be different pages, and a server that redirects one to the other is followed
    once (the crawl keeps the final URL as seen). None for what is not an http(s) page link."""
    url = url.strip()
    if not url or url.startswith(("#", "mailto:", "javascript:", "tel:", "data:")):
        return None
    try:
        parts = urlsplit(urljoin(base, url))
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".").lower()
    if scheme not in ("http", "https") or not host:
        return None
    return build_url(scheme, host, port, parts.path or "/", parts.query)


def html_links(html: str | bytes, base: str) -> list[str]:
    """The href of every `a` and `area` in the page, absolute and normalized, in page order, each once
    (runs in a parser worker: lxml on a hostile page must not take the daemon down). A `<base href>` counts."""
    if not html:
        return []
    try:
        doc = lxml.html.fromstring(html)
    except (ValueError, lxml.etree.ParserError):
        return []
    declared = doc.xpath("//base/@href")
    if declared:
        base = urljoin(base, str(declared[0]))
    return _unique(normalize_link(str(href), base) for href in doc.xpath("//a/@href | //area/@href"))


def markdown_links(markdown: str, base: str) -> list[str]:
    """The link targets of a page's markdown (a page the cache held: its HTML is not kept)."""
    return _unique(normalize_link(m.group(1), base) for m in _MARKDOWN_LINK.finditer(markdown))


def _unique(links: Iterable[str | None]) -> list[str]:
    seen: dict[str, None] = {}
    for link in links:
        if link is not None and link not in seen:
            seen[link] = None
            if len(seen) >= MAX_LINKS:
                break
    return list(seen)
