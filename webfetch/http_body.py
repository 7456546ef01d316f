"""A response body read with httpx within a bound on the bytes it decodes to, whatever its Content-Encoding.

httpx inflates `Content-Encoding` (stacked `gzip, gzip` too) a whole network chunk at a time, with no limit
on what one chunk inflates to, before its caller sees a byte to count: a 1 827-byte robots.txt took the
daemon from 50 MB to 2.15 GB. So the body is read raw (`aiter_raw`) and inflated here, each layer with zlib's
`max_length`, STEP bytes of output at a time, every step counted against the cap before the next is made:
what a bomb costs is the cap and one step, and the CPU of inflating the cap (a few ms a MB), in small steps
with a checkpoint between them. Only the codings webfetch asks for (ACCEPT_ENCODING: the ones zlib inflates)
are taken, at most MAX_CODINGS of them stacked (a server compresses once; two is a proxy compressing again;
more is a bomb's trick, refused)."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    import httpx

ACCEPT_ENCODING = "gzip, deflate"
MAX_CODINGS = 2
STEP = 64 * 1024   # bytes of output one inflating step makes at most


class BodyRefused(Exception):
    """A body that cannot be read within the bounds: too large, an encoding refused, damaged. The message
    says which and is written to follow the URL ("… {url} {message}")."""

    def __init__(self, message: str, *, too_large: bool = False) -> None:
        super().__init__(message)
        self.too_large = too_large


class _Deflate:
    """`deflate` as servers send it: zlib-wrapped (RFC 9110), or raw, as some servers do; told apart by the
    first bytes, as browsers and httpx do."""

    def __init__(self) -> None:
        self._inflate = zlib.decompressobj()
        self._started = False

    def decompress(self, data: bytes, max_length: int) -> bytes:
        if not self._started and data:
            self._started = True
            try:
                return self._inflate.decompress(data, max_length)
            except zlib.error:
                self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
        return self._inflate.decompress(data, max_length)

    @property
    def unconsumed_tail(self) -> bytes:
        return self._inflate.unconsumed_tail


class Inflater:
    """Undoes a response's Content-Encoding, its layers in the reverse of the order they were applied."""

    def __init__(self, content_encoding: list[str]) -> None:
        """`content_encoding`: the header's codings, in order (several headers or one with commas)."""
        codings = [c.strip().lower() for c in content_encoding]
        codings = [c for c in codings if c and c != "identity"]
        if len(codings) > MAX_CODINGS:
            raise BodyRefused(f"is compressed {len(codings)} times over (Content-Encoding: {', '.join(codings)}); "
                              f"webfetch inflates at most {MAX_CODINGS} layers, as no real server needs more")
        for coding in codings:
            if coding not in ("gzip", "x-gzip", "deflate"):
                raise BodyRefused(f"is sent with Content-Encoding {coding}, which webfetch did not ask for "
                                  f"(Accept-Encoding: {ACCEPT_ENCODING}) and cannot read")
        self.layers: list[_Deflate | zlib._Decompress] = [
            _Deflate() if c == "deflate" else zlib.decompressobj(16 + zlib.MAX_WBITS) for c in reversed(codings)]

    def feed(self, raw: bytes) -> Iterator[bytes]:
        """The decoded bytes `raw` makes, at most STEP at a time: a caller that stops iterating stops the
        inflating there."""
        try:
            yield from self._through(0, raw)
        except zlib.error as e:
            raise BodyRefused(f"is damaged: its compressed body does not inflate ({e})") from None

    def _through(self, i: int, data: bytes) -> Iterator[bytes]:
        if i == len(self.layers):
            if data:
                yield data
            return
        layer = self.layers[i]
        while True:
            # max_length keeps what does not fit in unconsumed_tail, and zlib may hold output back once its
            # input is all taken: asking again (with the tail, or with nothing) until nothing comes drains both
            out = layer.decompress(data, STEP)
            if not out:
                return
            yield from self._through(i + 1, out)
            data = layer.unconsumed_tail


async def read_body(response: httpx.Response, max_bytes: int, sink: Callable[[bytes], object], *,
                    cut_ok: bool) -> bool:
    """Hand `sink` the decoded body of `response` (opened with `client.stream`), at most `max_bytes` of it;
    as many bytes on the wire at most too (compressing never makes a real body larger than a little over its
    size). Past the bound: with `cut_ok` the first `max_bytes` are kept and True returned (the rest is never
    read), else BodyRefused. A checkpoint after each step: a body never holds the event loop for long."""
    inflater = Inflater(response.headers.get_list("content-encoding", split_commas=True))
    wire = decoded = 0
    async for raw in response.aiter_raw():
        wire += len(raw)
        if wire > max_bytes and not cut_ok:
            raise BodyRefused(f"is larger than {max_bytes} bytes", too_large=True)
        for piece in inflater.feed(raw):
            room = max_bytes - decoded
            if len(piece) > room:
                if not cut_ok:
                    how = " once inflated" if inflater.layers else ""
                    raise BodyRefused(f"is larger than {max_bytes} bytes{how}", too_large=True)
                sink(piece[:room])
                return True
            decoded += len(piece)
            sink(piece)
            await trio.lowlevel.checkpoint()
        if wire > max_bytes:
            return True
    return False
