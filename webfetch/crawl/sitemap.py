"""Sitemaps (sitemaps.org): a `urlset` of page URLs or a `sitemapindex` of further sitemaps, parsed as the
bytes arrive. The parser is the stdlib's expat with every document type declaration refused: no DTD, so no
entity can be declared, expanded (billion laughs) or fetched (external entities); sitemaps never have one.
defusedxml does the same refusing but is not a dependency here, and one handler is all it takes. A gzip'd
sitemap (`.xml.gz`, or a body starting with gzip's magic) is inflated in bounded steps, so a small bomb
cannot make a large document: the inflated bytes count against the same cap as plain ones."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Literal
from xml.parsers import expat

# sitemaps.org's own bounds: 50 000 URLs and 50 MB (uncompressed) a file.
MAX_URLS = 50_000
MAX_BYTES = 50 * 1000 * 1000
_GZIP_MAGIC = b"\x1f\x8b"
_INFLATE_STEP = 256 * 1024


class SitemapError(Exception):
    """A sitemap that cannot be read: not XML, a DTD, too large, not a urlset or index."""


@dataclass
class Sitemap:
    kind: Literal["urlset", "sitemapindex"] | None = None
    locs: list[str] = field(default_factory=list)   # page URLs (urlset) or sitemap URLs (index)
    cut: bool = False                               # more than MAX_URLS entries: the rest were left out


# The parser is given a sitemap in pieces of at least this much: expat before 2.6 scans a token that is not
# finished yet again from its start at every call, so a hostile sitemap of one 10 MB token fed as it arrives
# (4 KiB pieces) cost 20 s of the event loop; in 1 MiB pieces, a few dozen milliseconds.
PARSE_AT_BYTES = 1 << 20

class SitemapParser:
    """Feed it the body in chunks as they arrive (`feed`), then `close()` for the sitemap."""

    def __init__(self, max_bytes: int = MAX_BYTES, max_urls: int = MAX_URLS) -> None:
        self.max_bytes = max_bytes
        self.max_urls = max_urls
        self.sitemap = Sitemap()
        self._seen = 0
        self._started = False
        self._inflate: zlib._Decompress | None = None
        self._in_loc = False
        self._text: list[str] = []
        self._depth = 0
        self._pending: list[bytes] = []   # what is not parsed yet (PARSE_AT_BYTES)
        self._pending_bytes = 0
        self.parses = 0                   # calls into expat so far (each rescans an unfinished token)
        self._parser = expat.ParserCreate(namespace_separator=" ")
        self._parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
        self._parser.StartDoctypeDeclHandler = self._refuse_doctype
        self._parser.EntityDeclHandler = self._refuse_entity
        self._parser.StartElementHandler = self._start
        self._parser.EndElementHandler = self._end
        self._parser.CharacterDataHandler = self._chars

    def feed(self, chunk: bytes) -> None:
        if not self._started:
            self._started = True
            if chunk.startswith(_GZIP_MAGIC):
                self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        if self._inflate is None:
            self._parse(chunk)
            return
        try:
            data = self._inflate.decompress(chunk, _INFLATE_STEP)
            while data:
                self._parse(data)
                data = self._inflate.decompress(self._inflate.unconsumed_tail, _INFLATE_STEP)
        except zlib.error as e:
            raise SitemapError(f"the gzip'd sitemap is damaged ({e})") from None

    def close(self) -> Sitemap:
        if not self._seen:
            raise SitemapError("it is empty")
        self._parse(b"", final=True)
        if self.sitemap.kind is None:
            raise SitemapError("it is not a sitemap (no <urlset> or <sitemapindex> element)")
        return self.sitemap

    def _parse(self, data: bytes, final: bool = False) -> None:
        self._seen += len(data)
        if self._seen > self.max_bytes:
            raise SitemapError(f"it is larger than {self.max_bytes} bytes")
        self._pending.append(data)
        self._pending_bytes += len(data)
        if self._pending_bytes < PARSE_AT_BYTES and not final:
            return
        data, self._pending, self._pending_bytes = b"".join(self._pending), [], 0
        self.parses += 1
        try:
            self._parser.Parse(data, final)
        except expat.ExpatError as e:
            raise SitemapError(f"it is not well-formed XML ({expat.errors.messages[e.code]}, line {e.lineno}, "
                               f"column {e.offset})") from None

    def _refuse_doctype(self, *_: object) -> None:
        raise SitemapError("it has a document type declaration, which sitemaps never have (refused: entities)")

    def _refuse_entity(self, *_: object) -> None:
        raise SitemapError("it declares an entity, which sitemaps never do (refused)")

    def _start(self, name: str, _attrs: dict[str, str]) -> None:
        local = name.rsplit(" ", 1)[-1]
        self._depth += 1
        if self._depth == 1:
            if local not in ("urlset", "sitemapindex"):
                raise SitemapError(f"its root element is <{local}>, not <urlset> or <sitemapindex>")
            self.sitemap.kind = "urlset" if local == "urlset" else "sitemapindex"
        elif local == "loc" and self._depth == 3:
            self._in_loc, self._text = True, []

    def _end(self, name: str) -> None:
        self._depth -= 1
        if self._in_loc and name.rsplit(" ", 1)[-1] == "loc":
            self._in_loc = False
            loc = "".join(self._text).strip()
            if loc:
                if len(self.sitemap.locs) < self.max_urls:
                    self.sitemap.locs.append(loc)
                else:
                    self.sitemap.cut = True

    def _chars(self, data: str) -> None:
        if self._in_loc:
            self._text.append(data)


def parse_sitemap(body: bytes, max_bytes: int = MAX_BYTES) -> Sitemap:
    """A whole body at once (tests, small files)."""
    parser = SitemapParser(max_bytes)
    parser.feed(body)
    return parser.close()
