"""Find in a page: the passages of a page's markdown that match a pattern, each with its heading path and the
offset it starts at, or the page's outline when none match. Pure functions on the cached markdown.

A pattern is words or a regular expression:
- words (the default): every word must appear in a passage, in any case, as part of a word or whole
  (`auth token` matches "Authentication tokens"); a phrase in double quotes is one word (`"rate limit"`).
- `/…/` with optional flags `i` (any case), `m` (^ and $ at each line), `s` (. matches a newline): a Python
  regular expression, matched against the whole markdown (so it may span lines), case-sensitive unless `i`.
  A pattern that starts with `/` but does not end with `/` and those flags (`/usr/bin/env`) is words.

A passage is the block the match is in (a run of lines between blank lines: a paragraph, a list, a table, a
code block without blank lines), with up to CONTEXT_LINES non-blank lines before and after it, never past a
heading (the heading path names it) and cut to MAX_PASSAGE_CHARS around the match. Passages that would
overlap are one passage. Its offset is a character offset into the whole markdown, the unit fetch's `offset`
takes, so a fetch from it reads on from the passage.

Words are searched with escaped literals (linear time). A regular expression can take exponential time
(`/(a+)+$/` on a line of a's) and Python's `re` holds the GIL with no timeout, so the pipeline runs
`search` on a regular expression in the extractor's worker processes, killed at the request's deadline.
"""

from __future__ import annotations

import bisect
import functools
import re
from dataclasses import dataclass

from ..errors import BadRequest
from ..protocol import FetchRequest

CONTEXT_LINES = 2
MAX_PASSAGE_CHARS = 1500
MAX_PATTERN_CHARS = 1000
REGEX_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}
_REGEX = re.compile(r"/(.*)/([ims]*)", re.DOTALL)
# Each matches at the newline before a line, in the markdown with a newline put in front: a leading literal
# lets `re` skip to each newline, where `^` with MULTILINE tried every character (3-5x slower on 2 MB). The
# match's start is then the line's start in the markdown itself.
# The heading's text comes with its closing `#`s and spaces (`heading_text` takes them off): the regular
# expression that took them off itself, a lazy text before optional `[ \t]+#+` and `[ \t]*`, backtracked in
# quadratic time on a heading line of many spaces (200 000 of them held the event loop for minutes).
_HEADING = re.compile(r"\n(#{1,6})[ \t]+([^\n]*)")
_FENCE = re.compile(r"\n[ \t]{0,3}(?:```|~~~)")
_BLANK = re.compile(r"\n[ \t]*(?=\n|\Z)")


class BadPattern(BadRequest):
    """An empty or malformed `find` pattern; the message says where."""


@dataclass(frozen=True)
class Pattern:
    """A `find` pattern as parsed in the daemon: a regular expression stays text there (`expression`, `flags`)
    and is compiled where it is searched (`regex`, in a parser worker): compiling is no free step either
    (`(?i)` over a class of all Unicode is ~12 ms a class), and in the daemon it would hold the event loop."""

    source: str                    # as the caller wrote it
    expression: str | None         # a regular expression's text, or None for words
    words: tuple[str, ...] = ()
    flags: int = 0

    @functools.cached_property
    def regex(self) -> re.Pattern[str] | None:
        """The compiled expression (None for words): for a parser worker, never the daemon's event loop."""
        return None if self.expression is None else re.compile(self.expression, self.flags)

    @property
    def described(self) -> str:
        if self.expression is not None:
            return f"the regular expression {self.source}"
        if len(self.words) == 1:
            return f'the word "{self.words[0]}"'
        return "the words " + " ".join(f'"{w}"' for w in self.words)


@dataclass(frozen=True)
class Heading:
    offset: int
    level: int
    text: str


@dataclass(frozen=True)
class Passage:
    offset: int
    headings: tuple[str, ...]  # the heading path, outermost first
    text: str


@dataclass(frozen=True)
class Found:
    matches: int                # blocks where the pattern matched
    passages: tuple[Passage, ...]
    outline: tuple[Heading, ...]  # every heading of the page, for the answer when nothing matched


def parse(source: str) -> Pattern:
    """The pattern `source` means, or BadPattern saying what is wrong with it and where."""
    if not source.strip():
        raise BadPattern("`find` is empty: pass the words to look for (every one must appear in a passage, in "
                         "any case; \"a phrase\" in quotes) or a regular expression written /…/")
    if len(source) > MAX_PATTERN_CHARS:
        raise BadPattern(f"`find` is {len(source)} characters long; at most {MAX_PATTERN_CHARS}")
    m = _REGEX.fullmatch(source)
    if m is None:
        return Pattern(source, None, _words(source))
    body, flags = m.group(1), m.group(2)
    if not body:
        raise BadPattern("`find` is an empty regular expression (//): write the expression between the slashes, "
                         "for example /v\\d+\\.\\d+/")
    return Pattern(source, body, flags=sum(REGEX_FLAGS[f] for f in set(flags)))


def problem(source: str) -> str | None:
    """Why `source`, a `find` that parses, is no regular expression `re` can compile (None: it is one, or
    words). Compiles it: for a parser worker (Extractor.find_problem), under the request's deadline."""
    pattern = parse(source)
    try:
        _ = pattern.regex
    except re.error as e:
        pos = 1 + (e.pos or 0)  # in `source`, past the opening slash
        return f"`find` is not a valid regular expression: {e.msg} at position {pos}\n  {source}\n  {' ' * pos}^"
    return None


def _words(source: str) -> tuple[str, ...]:
    words: list[str] = []
    rest = source
    while rest:
        quote = rest.find('"')
        if quote < 0:
            words += rest.split()
            break
        close = rest.find('"', quote + 1)
        if close < 0:
            pos = len(source) - len(rest) + quote
            raise BadPattern(f"`find` has a quote that is not closed at position {pos}\n  {source}\n  "
                             f"{' ' * pos}^\nclose the phrase with another \" or leave the quote out")
        words += rest[:quote].split()
        phrase = " ".join(rest[quote + 1:close].split())
        if phrase:
            words.append(phrase)
        rest = rest[close + 1:]
    if not words:
        raise BadPattern('`find` has only empty quotes (""): put the words to look for between them')
    return tuple(words)


def heading_text(rest: str) -> str:
    """An ATX heading's text from the rest of its line: trailing spaces and tabs off, and a closing run of
    `#`s with the spaces before it (`## Title ##`), when a space or tab stands before that run."""
    text = rest.rstrip(" \t")
    bare = text.rstrip("#")
    return bare.rstrip(" \t") if bare != text and bare[-1:] in (" ", "\t") else text


class _Lines:
    """Where the markdown's blank lines and headings are, found by regular expressions over the whole text
    (C speed: no Python step per line, which cost ~0.3 s on 2 MB); a block is a run of non-blank lines, and a
    heading starts one. Lines are addressed by the offset they start at."""

    def __init__(self, md: str) -> None:
        self.md = md
        lined = "\n" + md
        self.blanks = [m.start() for m in _BLANK.finditer(lined)]  # the start of every blank line
        fences = [m.start() for m in _FENCE.finditer(lined)]
        self.headings: list[Heading] = []
        self.paths: list[tuple[str, ...]] = []  # the heading path at each heading
        path: list[Heading] = []
        for m in _HEADING.finditer(lined):
            text = heading_text(m.group(2))
            if bisect.bisect_right(fences, m.start()) % 2 or not text:
                continue  # inside a fenced code block: a comment, not a heading
            heading = Heading(m.start(), len(m.group(1)), text)
            path = [p for p in path if p.level < heading.level] + [heading]
            self.headings.append(heading)
            self.paths.append(tuple(p.text for p in path))
        self.heading_starts = [h.offset for h in self.headings]

    def line_start(self, offset: int) -> int:
        return self.md.rfind("\n", 0, offset) + 1

    def line_end(self, start: int) -> int:
        """Where the line that starts at `start` ends, before its newline."""
        end = self.md.find("\n", start)
        return len(self.md) if end < 0 else end

    def is_blank(self, start: int) -> bool:
        k = bisect.bisect_left(self.blanks, start)
        return k < len(self.blanks) and self.blanks[k] == start

    def is_heading(self, start: int) -> bool:
        k = bisect.bisect_left(self.heading_starts, start)
        return k < len(self.heading_starts) and self.heading_starts[k] == start

    def path_at(self, offset: int) -> tuple[str, ...]:
        k = bisect.bisect_right(self.heading_starts, offset) - 1
        return self.paths[k] if k >= 0 else ()

    def block(self, offset: int) -> tuple[int, int]:
        """The start of the first line and the end of the last line of the block holding `offset`."""
        start = self.line_start(offset)
        if self.is_blank(start):
            return start, self.line_end(start)
        k = bisect.bisect_left(self.blanks, start)
        first = self.line_end(self.blanks[k - 1]) + 1 if k > 0 else 0
        h = bisect.bisect_right(self.heading_starts, start)
        if h > 0:
            first = max(first, self.heading_starts[h - 1])
        stop = self.blanks[k] if k < len(self.blanks) else len(self.md) + 1
        if h < len(self.heading_starts):
            stop = min(stop, self.heading_starts[h])
        return first, stop - 1

    def previous(self, start: int) -> int | None:
        return self.line_start(start - 1) if start > 0 else None

    def next(self, end: int) -> int | None:
        return end + 1 if end < len(self.md) else None


def search(md: str, pattern: Pattern) -> Found:
    """The passages of `md` that match `pattern`, in page order, and the page's outline."""
    lines = _Lines(md)
    regex = pattern.regex
    hits = _regex_hits(md, regex) if regex is not None else _word_hits(md, lines, pattern.words)
    blocks: dict[tuple[int, int], int] = {}  # each matching block, and where its first match is
    for offset in hits:
        blocks.setdefault(lines.block(offset), offset)
    passages: list[Passage] = []
    covered = -1  # where the passages so far end
    for (first, last), at in sorted(blocks.items()):
        first, last = _with_context(lines, first, last)
        if first <= covered and passages:
            first = lines.line_start(passages.pop().offset)  # overlaps the one before: one passage
        passages.append(_passage(lines, first, last, at))
        covered = last
    return Found(len(blocks), tuple(passages), tuple(lines.headings))


def _regex_hits(md: str, regex: re.Pattern[str]) -> list[int]:
    return [m.start() for m in regex.finditer(md)]


def _word_hits(md: str, lines: _Lines, words: tuple[str, ...]) -> list[int]:
    """The first occurrence of the first word in every block that holds all the words."""
    found: dict[tuple[int, int], int] | None = None
    for word in words:
        here: dict[tuple[int, int], int] = {}
        for m in re.finditer(re.escape(word).replace(r"\ ", r"\s+"), md, re.IGNORECASE):
            key = lines.block(m.start())
            if found is None or key in found:
                here.setdefault(key, m.start())
        found = here if found is None else {k: v for k, v in found.items() if k in here}
        if not found:
            return []
    return sorted((found or {}).values())


def _with_context(lines: _Lines, first: int, last: int) -> tuple[int, int]:
    """The block widened by up to CONTEXT_LINES non-blank lines each way, stopping at a heading (a block
    that starts with its heading takes nothing from above it: that is another section)."""
    taken, at = 0, None if lines.is_heading(first) else lines.previous(first)
    while taken < CONTEXT_LINES and at is not None and not lines.is_heading(at):
        if not lines.is_blank(at):
            taken, first = taken + 1, at
        at = lines.previous(at)
    taken, at = 0, lines.next(last)
    while taken < CONTEXT_LINES and at is not None and not lines.is_heading(at):
        if not lines.is_blank(at):
            taken, last = taken + 1, lines.line_end(at)
        at = lines.next(lines.line_end(at))
    return first, last


def _passage(lines: _Lines, start: int, end: int, at: int) -> Passage:
    """md[start:end] as a passage, cut to MAX_PASSAGE_CHARS around offset `at` (the match)."""
    if end - start > MAX_PASSAGE_CHARS:
        start, end = _window(lines, start, end, at)
    text = lines.md[start:end]
    start += len(text) - len(text.lstrip("\n"))
    return Passage(start, lines.path_at(start), text.strip("\n"))


def _window(lines: _Lines, first: int, last: int, at: int) -> tuple[int, int]:
    """The whole lines around `at` that fit MAX_PASSAGE_CHARS, or the characters around it in one long line."""
    lo = lines.line_start(at)
    hi = lines.line_end(lo)
    if hi - lo > MAX_PASSAGE_CHARS:
        start = max(lo, at - MAX_PASSAGE_CHARS // 3)
        return start, min(hi, start + MAX_PASSAGE_CHARS)
    grown = True
    while grown:
        grown = False
        if lo > first and hi - lines.line_start(lo - 1) <= MAX_PASSAGE_CHARS:
            lo, grown = lines.line_start(lo - 1), True
        if hi < last and lines.line_end(hi + 1) - lo <= MAX_PASSAGE_CHARS:
            hi, grown = lines.line_end(hi + 1), True
    return lo, hi


def checked(req: FetchRequest) -> Pattern | None:
    """The request's pattern, or None without `find`; BadRequest for what find cannot be combined with, before
    anything is loaded."""
    if req.find is None:
        return None
    if req.prompt is not None:
        raise BadRequest("pass either `find` (the passages that match, from the page's own text) or `prompt` (an "
                         "answer drawn from the page), not both")
    if req.offset is not None:
        raise BadRequest("`find` searches the whole page, so it takes no `offset`; fetch with a passage's offset, "
                         "without `find`, to read on from it")
    return parse(req.find)


def content(found: Found, pattern: Pattern, total: int, max_chars: int) -> tuple[str, int, list[str]]:
    """The passages as a model reads them, each under its offset and heading path, at most about `max_chars`
    characters; or the outline when nothing matched. Returns (content, passages shown, notes)."""
    if not found.passages:
        return _outline(found, pattern, total, max_chars), 0, []
    places = f"{found.matches} places" if found.matches != 1 else "1 place"
    described = pattern.described[0].upper() + pattern.described[1:]
    verb = "match" if described.startswith("The words") else "matches"
    head = (f"{described} {verb} in {places} of the page's "
            f"{total} characters. Each passage starts at the offset shown: fetch the same URL with that "
            f"`offset` (and no `find`) to read on from there.\n")
    parts = [head]
    size, shown = len(head), 0
    for p in found.passages:
        block = f"\n── offset {p.offset}{' · ' + ' › '.join(p.headings) if p.headings else ''}\n{p.text}\n"
        if shown and size + len(block) > max_chars:
            break
        parts.append(block)
        size, shown = size + len(block), shown + 1
    notes = []
    if shown < len(found.passages):
        rest = len(found.passages) - shown
        parts.append(f"\n[{rest} more passages not shown: narrow the pattern, or read on from the last offset]\n")
        notes.append(f"{rest} of {len(found.passages)} passages did not fit in {max_chars} characters")
    return "".join(parts), shown, notes


def _outline(found: Found, pattern: Pattern, total: int, max_chars: int) -> str:
    head = f"Nothing in the page's {total} characters matches {pattern.described}."
    if not found.outline:
        return (f"{head} The page has no headings to show instead; try other words, or read it from offset 0 "
                f"(fetch without `find`).")
    lines = [f"{head} The page's outline instead, each heading with the offset it starts at (fetch the same "
             f"URL with that `offset`, without `find`, to read the section):"]
    size = len(lines[0])
    for i, h in enumerate(found.outline):
        line = f"offset {h.offset}  {'  ' * (h.level - 1)}{'#' * h.level} {h.text}"
        if size + len(line) + 1 > max_chars:
            lines.append(f"[{len(found.outline) - i} more headings not shown]")
            break
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines) + "\n"
