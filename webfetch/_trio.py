"""Small trio helpers shared by the actors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import trio


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


@contextmanager
def single_error() -> Iterator[None]:
    """Nurseries wrap every error in an ExceptionGroup. Where a nursery only runs helpers around one body,
    let the one real error through unwrapped so callers can catch it by type."""
    try:
        yield
    except BaseExceptionGroup as group:
        leaves = _leaves(group)
        real = [e for e in leaves if not isinstance(e, trio.Cancelled)] or leaves
        # one failure seen by several helpers (the browser went away under all of them) is one failure
        if len({type(e) for e in real}) == 1:
            raise real[0] from None
        raise


def pop_lines(buf: bytearray) -> Iterator[bytes]:
    """The complete `\n`-terminated lines at the front of `buf`, without their newline, each removed from
    `buf` as it is yielded; a partial last line stays for the next read."""
    while True:
        nl = buf.find(b"\n")
        if nl < 0:
            return
        line = bytes(buf[:nl])
        del buf[:nl + 1]
        yield line
