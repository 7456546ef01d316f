"""Small trio helpers shared by the actors."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator


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
        if len(leaves) == 1:
            raise leaves[0] from None
        raise
