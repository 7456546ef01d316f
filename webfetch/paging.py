"""Paging a long text for replies that must fit an agent's limits: by characters and lines, cut at a line, else
between words."""

from __future__ import annotations

import re

_LAST_SPACE = re.compile(r"\s(?=\S*\Z)")  # the last white space of a text: the end of its last whole word


def paginate(text: str, offset: int, max_chars: int, max_lines: int) -> tuple[str, int | None]:
    """The slice of `text` from `offset`: at most `max_chars` characters and `max_lines` lines. Cut after the
    last line break when one lies in its second half; else after the last white space there (a paragraph
    longer than the page is cut between words, not inside one); else after any line break; else at the
    limit (a run with no space, such as minified code). Returns (content, next_offset or None at the end):
    the pages from offset 0 on, each read from the last one's `next_offset`, join to exactly `text`."""
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
        chunk = chunk[:_cut_point(chunk)]
    stop = offset + len(chunk)
    return chunk, (stop if stop < len(text) else None)


def _cut_point(chunk: str) -> int:
    """Where a page that ends before the text does is cut: the length of `chunk` to keep."""
    half = len(chunk) // 2
    line = chunk.rfind("\n")
    if line >= half:
        return line + 1
    space = _LAST_SPACE.search(chunk, half)
    if space is not None:
        return space.end()
    return line + 1 if line > 0 else len(chunk)
