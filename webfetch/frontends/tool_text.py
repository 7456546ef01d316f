"""What a model reads from a tool result: one line of facts, then the content, cut to fit one tool result.

The Python twin of `formatResult` and `browseText` in pi_extension/formatting.ts, so web_fetch and the browser
tool read the same in pi and over MCP; tests/golden holds daemon frames and the text both must make of them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

# One tool result, as pi allows it (DEFAULT_MAX_BYTES / DEFAULT_MAX_LINES in pi-coding-agent). MCP clients
# have their own caps (Claude Code warns above 10 000 tokens and cuts at 25 000 by default): 50 KB of
# markdown is about 12 000 tokens, under the cut.
MAX_BYTES = 50 * 1024
MAX_LINES = 2000


@dataclass(frozen=True)
class Limits:
    bytes: int = MAX_BYTES
    lines: int = MAX_LINES


@dataclass(frozen=True)
class ToolText:
    text: str
    cut_at: int | None  # the offset to read on from, when a page was cut


def _bytes(s: str) -> int:
    return len(s.encode())


def _n(x: int) -> str:
    return f"{x:,}"


def _round(x: float) -> int:
    """Half up, as JavaScript's Math.round in the pi extension (Python's round() goes to the even one)."""
    return math.floor(x + 0.5)


def _age(seconds: float) -> str:
    if seconds < 60:
        return f"{_round(seconds)} s"
    if seconds < 3600:
        return f"{_round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


# The facts line's warnings: a model reads the first line as the verdict on what follows, so what makes the
# content not what it asked for must be there, not only in the notes at the very end.
UNANSWERED = "NOT AN ANSWER: the prompt could not be answered, this is the page itself (the notes say why)"


def facts_line(r: dict[str, Any], shown_end: int | None, prompted: bool = False) -> str:
    """The one line of facts that starts every fetch result. `prompted`: the call passed a prompt, so a
    page (not an answer) means the sub-agent could not answer it."""
    parts = [str(r.get("final_url") or r.get("url"))]
    if r.get("title"):
        parts.append(json.dumps(r["title"], ensure_ascii=False))
    parts.append(f"cached ({_age(r.get('age_s') or 0)} old)" if r.get("cached") else "fetched now")
    parts.append(_extent(r, shown_end))
    if prompted and r.get("kind") == "page":
        parts.append(UNANSWERED)
    if r.get("flags"):
        parts.append(f"FLAGS: {', '.join(r['flags'])} (read the notes before using this content)")
    return " · ".join(parts)


def _extent(r: dict[str, Any], shown_end: int | None) -> str:
    """What the content is: an answer, a summary, or which characters of the page."""
    total = r.get("total_chars") or 0
    offset = r.get("offset") or 0
    if r.get("kind") == "answer":
        return f"answer by {r.get('model') or 'the sub-agent'} from {_n(total)} characters"
    if r.get("kind") == "data":
        return f"data by {r.get('model') or 'the sub-agent'} from {_n(total)} characters, valid against the schema"
    if r.get("kind") == "summary":
        return f"summary of {_n(total)} characters"
    if r.get("kind") == "find":
        return _find_extent(r, total)
    if total == 0:
        return "no text"
    if shown_end is not None and (offset > 0 or shown_end < total):
        return f"characters {_n(offset)}–{_n(shown_end)} of {_n(total)}"
    return f"all {_n(total)} characters"


def _find_extent(r: dict[str, Any], total: int) -> str:
    """How many places matched the find pattern, in how much text."""
    m = r.get("matches") or 0
    what = "no match" if m == 0 else "1 match" if m == 1 else f"{_n(m)} matches"
    outline = " (the page's outline instead)" if m == 0 else ""
    return f"{what} for {json.dumps(r.get('find') or '', ensure_ascii=False)} in {_n(total)} characters{outline}"


def cut_to_fit(text: str, max_bytes: int, max_lines: int) -> str:
    """`text` cut to at most `max_bytes` UTF-8 bytes and `max_lines` lines, at a line boundary when there is
    one in its second half."""
    if _bytes(text) <= max_bytes and text.count("\n") + 1 <= max_lines:
        return text
    cut = text.encode()[:max(0, max_bytes)].decode(errors="ignore")  # a character cut in half is dropped
    lines = cut.split("\n")
    if len(lines) > max_lines:
        cut = "\n".join(lines[:max_lines]) + "\n"
    nl = cut.rfind("\n")
    return cut[:nl + 1] if nl > len(cut) / 2 else cut


def _fits(text: str, limits: Limits) -> bool:
    return _bytes(text) <= limits.bytes and text.count("\n") + 1 <= limits.lines


def fetch_text(r: dict[str, Any], tool: str = "web_fetch", limits: Limits = Limits(), *, prompted: bool = False
               ) -> ToolText:
    """A fetch result frame as the tool's text: the facts line, the content, the notes; a page too big for
    one tool result is cut at a line with the offset to continue from. `prompted`: the call had a prompt."""
    if r.get("kind") == "redirect":
        status = f" (HTTP {r['status']})" if r.get("status") else ""
        return ToolText(f"{r.get('url')} redirects to {r.get('redirect_url')} on a different host; call {tool} "
                        f"with that URL to follow it.{status}", None)
    content: str = r.get("content") or ""
    notes: list[str] = list(r.get("notes") or [])
    tail = ("\n\nNotes:\n" + "\n".join(f"- {x}" for x in notes)) if notes else ""
    offset: int = r.get("offset") or 0
    end = offset + len(content) if r.get("kind") == "page" else None
    text = f"{facts_line(r, end, prompted)}\n\n{content}{tail}"
    if _fits(text, limits):
        return ToolText(text, None)
    # Too big for one tool result: keep what fits and say exactly how to read on.
    reserve = 600  # the facts line and the continuation sentence
    kept = cut_to_fit(content, limits.bytes - reserve - _bytes(tail), limits.lines - 8 - len(notes))
    if r.get("kind") == "page":
        cut_at = offset + len(kept)
        more = (f"\n\n[Cut at the 50 KB limit of one tool result. Call {tool} with url {json.dumps(r.get('url'))} "
                f"and offset {cut_at} to read on.]")
        return ToolText(f"{facts_line(r, cut_at, prompted)}\n\n{kept}{more}{tail}", cut_at)
    narrower = "Narrow the find pattern" if r.get("kind") == "find" else "Ask a narrower prompt"
    more = f"\n\n[Cut at the 50 KB limit of one tool result. {narrower}, or read the raw page with offset.]"
    return ToolText(f"{facts_line(r, None, prompted)}\n\n{kept}{more}{tail}", None)


def batch_text(pages: list[dict[str, Any]], r: dict[str, Any], tool: str = "web_fetch", limits: Limits = Limits(),
               *, prompted: bool = False) -> str:
    """A batch fetch (`urls`) as the tool's text: the count line, then each URL in the order given under a
    `── [i/n] URL` line, its page as fetch_text makes it (or why it failed). When they do not all fit one
    tool result, the room is shared out (short pages whole, the longer ones cut equally), and each cut
    page says the offset to read on from."""
    entries: list[dict[str, Any]] = list(r.get("pages") or [])
    by_index = {p.get("index"): p for p in pages}
    n = len(entries)
    head = (r.get("content") or "").split("\n", 1)[0]
    headings = [f"── [{i + 1}/{n}] {e.get('url')}" for i, e in enumerate(entries)]

    def block(i: int, room: Limits) -> str:
        return f"{headings[i]}\n{_batch_page(by_index.get(i), entries[i], tool, room, prompted)}"

    whole = [block(i, Limits(bytes=1 << 60, lines=1 << 60)) for i in range(n)]
    room = Limits(bytes=limits.bytes - _bytes(head) - 2 * n, lines=limits.lines - 1 - 2 * n)
    if sum(map(_bytes, whole)) <= room.bytes and sum(map(_lines, whole)) <= room.lines:
        return head + "".join("\n\n" + b for b in whole)
    byte_shares = _shares([_bytes(b) for b in whole], room.bytes)
    line_shares = _shares([_lines(b) for b in whole], room.lines)
    kept = [whole[i] if byte_shares[i] >= _bytes(whole[i]) and line_shares[i] >= _lines(whole[i])
            else block(i, Limits(bytes=byte_shares[i] - _bytes(headings[i]) - 1, lines=line_shares[i] - 1))
            for i in range(n)]
    # fetch_text keeps a page's facts line and notes whole: a share smaller than those can still overrun
    return cut_to_fit(head + "".join("\n\n" + b for b in kept), limits.bytes, limits.lines)


def _lines(text: str) -> int:
    return text.count("\n") + 1


def _batch_page(page: dict[str, Any] | None, entry: dict[str, Any], tool: str, room: Limits, prompted: bool) -> str:
    """One URL of a batch: its page as fetch_text makes it, and where to read on when the daemon shortened
    it; or why it failed."""
    if page is None or page.get("error") is not None:
        error = (page or {}).get("error") or {"code": entry.get("error"), "message": entry.get("message")}
        return f"FAILED ({error.get('code')}): {error.get('message')}"
    shown = fetch_text(page, tool, room, prompted=prompted)
    if shown.cut_at is None and page.get("kind") == "page" and page.get("next_offset") is not None:
        return (f"{shown.text}\n\n[More: call {tool} with url {json.dumps(page.get('url'))} and offset "
                f"{page['next_offset']} to read on.]")
    return shown.text


def _shares(sizes: list[int], room: int) -> list[int]:
    """`room` shared out among blocks of these sizes: the smallest whole, the rest equally (water-filling)."""
    shares = [0] * len(sizes)
    left = room
    order = sorted(range(len(sizes)), key=lambda i: (sizes[i], i))
    for k, i in enumerate(order):
        shares[i] = min(sizes[i], left // (len(order) - k))
        left -= shares[i]
    return shares


def search_text(r: dict[str, Any], limits: Limits = Limits()) -> str:
    """A search result frame as the tool's text: the daemon's formatted results, cut to fit."""
    return cut_to_fit(r.get("content") or "", limits.bytes, limits.lines)


def browse_text(r: dict[str, Any], limits: Limits = Limits()) -> str:
    """A browse result frame as the browser tool's text: what happened, then the snapshot (or the changed
    lines, or the page's content), cut to fit."""
    if r.get("action") == "close":
        return f"closed the browser session {r.get('session')}"
    lines = _page_line(r)
    if (r.get("status") or 0) >= 400:
        lines.append(f"HTTP {r['status']}")
    if r.get("value") is not None:
        lines.append(f"value now: {r['value']}")
    if r.get("waited_for"):
        lines.append(f"waited for {r['waited_for']}")
    lines += _device_and_file(r)
    lines += _browse_events(r)
    if r.get("console") is not None:
        lines += console_lines(r)
    elif r.get("content"):
        lines += ["", r["content"]]
    elif r.get("snapshot"):
        # the snapshot's own header line says what the page line says; changed lines say they are
        body = "\n".join(r["snapshot"].split("\n")[1:])
        lines += ["changed:", body] if r.get("snapshot_kind") == "diff" else [body]
    if r.get("next_offset") is not None:
        lines.append(f"(more: call again with offset {r['next_offset']})")
    return cut_to_fit("\n".join(lines), limits.bytes, limits.lines)


# What the page line says of the change; that old refs are stale after a new page, the tool's description
# says once (tools.json), and a stale one is refused with stale_ref, never guessed.
CHANGE_WORDS = {"navigation": " · new page", "same_document": " · new URL, same document", "dom": " · changed",
                "none": " · no change"}


def _page_line(r: dict[str, Any]) -> list[str]:
    """The page line (tab, title, URL, change, what the session forces), when the reply starts with it; else
    only what the session forces, which is on every reply (docs/HONESTY.md, a forced state)."""
    p = r.get("page")
    forced = f" · forced: {r['forced']}" if r.get("forced") else ""
    if p and _page_line_shown(r):
        change = CHANGE_WORDS[r.get("change") or "none"]
        return [f"[{p['tab']}] {p.get('title') or '(no title)'} — {p['url']}{change}{forced}"]
    return [f"forced: {r['forced']}"] if forced else []


def _page_line_shown(r: dict[str, Any]) -> bool:
    """Whether the reply starts with the page line (tab, title, URL, change). Not when the page stayed the
    document and URL the model read with its last snapshot and the reply has its own news: changed lines
    (a changed title is one of them), the value of the field it filled, or a dialog that holds the tab.
    Repeating the page line there is the largest part of most action replies and tells nothing (issue 40,
    context cost)."""
    if r.get("change") == "dom" and r.get("snapshot_kind") != "full":  # changed lines, or only `value now`
        return False
    return not (_blocking(r) and r.get("change") == "none")


def _blocking(r: dict[str, Any]) -> bool:
    """The reply's dialog holds the tab until the `dialog` action answers it."""
    d = r.get("dialog") or {}
    return d.get("type") in ("confirm", "prompt") and r.get("snapshot_kind") == "none"


def _device_and_file(r: dict[str, Any]) -> list[str]:
    """The session's device (open with one, viewport) and the file an action saved (pdf)."""
    lines: list[str] = []
    v = r.get("viewport")
    if v:
        kind = "mobile (touch, a phone's user agent)" if v["mobile"] else "desktop"
        lines.append(f"viewport: {v['width']}×{v['height']} CSS px at {v['scale']:g}× device pixels, {kind}")
    if r.get("path") is not None:
        lines.append(f"saved {r['path']} ({r.get('size')} bytes)")
    return lines


def _browse_events(r: dict[str, Any]) -> list[str]:
    """What happened besides the page: a dialog, tabs opened, downloads, files uploaded, the tab list, notes."""
    lines: list[str] = []
    d = r.get("dialog")
    if d:
        state = "waits for action dialog" if _blocking(r) else "accepted"
        lines.append(f"dialog ({d.get('type')}) {state}: {json.dumps(d.get('message'), ensure_ascii=False)}")
    lines += [f"new tab {t['tab']}: {t['url']} (now active)" for t in r.get("new_tabs") or []]
    lines += [download_line(x) for x in r.get("downloads") or []]
    lines += files_line(r)
    lines += [f"{'*' if t['active'] else ' '} {t['tab']} {t['title']} — {t['url']}" for t in r.get("tabs") or []]
    lines += _console_errors(r.get("console_errors") or 0)
    lines += [f"note: {n}" for n in r.get("notes") or []]
    return lines


def files_line(r: dict[str, Any]) -> list[str]:
    """An upload's result: the files the input holds now."""
    return [] if r.get("files") is None else [f"the file input holds: {', '.join(r['files']) or 'no file'}"]


def download_line(d: dict[str, Any]) -> str:
    """One download of a browse result, as an agent or a person reads it (the pi extension's formatting.ts has
    the twin)."""
    state = d.get("state")
    if state == "saved":
        return f"downloaded {d.get('filename')} ({d.get('size')} bytes, {d.get('mime')}) to {d.get('path')}"
    if state == "in_progress":
        return (f"downloading {d.get('url')} as {d.get('filename')}: not finished when this answer was sent "
                f"(it is saved in the session's download directory when done)")
    return f"download {'stopped' if state == 'too_large' else 'failed'}: {d.get('url')}: {d.get('message')}"


def _console_errors(errors: int) -> list[str]:
    """The line that makes an agent notice the page's errors without asking for the console."""
    if not errors:
        return []
    return [f"{errors} new console error{'s' if errors != 1 else ''} since the last action (action console shows them)"]


# console entries whose kind their text already says (an exception's text starts "Uncaught")
_PLAIN_KINDS = ("console", "exception", "rejection")


def console_lines(r: dict[str, Any]) -> list[str]:
    """The console action's entries, one line each (and their stacks under them), newest last, under a line
    naming the navigation they came from each time it changes."""
    entries = r.get("console") or []
    dropped = r.get("console_dropped") or 0
    if not entries:
        return ["console: no new messages" + (f" ({dropped} older not shown)" if dropped else "")]
    lines = [f"console: {len(entries)} message{'s' if len(entries) != 1 else ''} since the last console action, "
             f"newest last" + (f" ({dropped} older not shown)" if dropped else "")]
    navs = {n.get("nav", 0): _nav_line(n) for n in r.get("console_navs") or []}
    at = None
    for e in entries:
        if e.get("nav", 0) != at:  # the navigation the next messages came from, once each time it changes
            at = e.get("nav", 0)
            lines += [navs[at]] if at in navs else []
        lines += _entry_lines(e)
    return lines


def _entry_lines(e: dict[str, Any]) -> list[str]:
    """One console entry: its line, and its stack under it."""
    kind = "" if e.get("kind") in _PLAIN_KINDS else f"({e.get('kind')}) "
    where = f" — {e['url']}" + (f":{e['line']}" if e.get("line") else "") if e.get("url") else ""
    return [f"[{e.get('level')}] {kind}{e.get('text')}{where}"] + ([e["stack"]] if e.get("stack") else [])


def _nav_line(nav: dict[str, Any]) -> str:
    return (f"navigation {nav.get('nav', 0)}: {nav.get('url')}"
            + (" (restored from the back/forward cache)" if nav.get("restored") else ""))
