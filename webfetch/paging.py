"""Paging a long text for replies that must fit an agent's limits: by characters and lines, cut at a line."""

from __future__ import annotations


def paginate(text: str, offset: int, max_chars: int, max_lines: int) -> tuple[str, int | None]:
    """The slice of `text` from `offset`: at most `max_chars` characters and `max_lines` lines, cut at a line
    boundary where possible. Returns (content, next_offset or None at the end)."""
    if offset >= len(text):
        return "", None
    end = min(len(text), offset + max_chars)
    chunk = text[offset:end]
    cut = -1
    for _ in range(max_lines):
        cut = chunk.find("\n", cut + 1)
        if cut < 0:
            break
    if cut >= 0:  # more than max_lines lines: end after the last allowed line
        chunk = chunk[:cut + 1]
    elif end < len(text):
        last = chunk.rfind("\n")
        if last > 0:
            chunk = chunk[:last + 1]
    stop = offset + len(chunk)
    return chunk, (stop if stop < len(text) else None)
