"""Decompression bombs for the tests, made in memory in well under a second, and the peak memory of a process.

A bomb is `head` then `filler` repeated to `size` bytes (1 GiB by default), gzip'd: the filler's block is
compressed once and repeated (each block is deflated on its own after a full flush, so the copies are the same
bytes), about 1 000 times smaller than what it inflates to; `layers=2` gzips that again (a few KB: the copies
compress too)."""

from __future__ import annotations

import functools
import gzip
import struct
import zlib
from pathlib import Path

GIB = 1 << 30
BLOCK = 1 << 20


@functools.cache
def bomb(head: bytes = b"", filler: bytes = b" ", size: int = GIB, layers: int = 1) -> bytes:
    block = (filler * (BLOCK // len(filler) + 1))[:BLOCK]
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    first = deflate.compress(head) + deflate.flush(zlib.Z_FULL_FLUSH)
    repeated = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    count = -(-(size - len(head)) // BLOCK)
    crc = zlib.crc32(head)
    for _ in range(count):
        crc = zlib.crc32(block, crc)
    total = len(head) + count * BLOCK
    body = (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + first + repeated * count + deflate.flush()
            + struct.pack("<II", crc, total & 0xFFFFFFFF))
    for _ in range(layers - 1):
        body = gzip.compress(body, 9)
    return body


def reset_peak(pid: int) -> None:
    """Start the process's peak resident size (VmHWM) afresh from its current size (Linux's clear_refs)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def peak_kb(pid: int) -> int:
    """The process's peak resident size since its start or the last `reset_peak`, in kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise LookupError(f"no VmHWM for process {pid}")
