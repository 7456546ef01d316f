"""A tab's console: what the page logged (console.*), what it threw and left unhandled, and what the browser
said about it (a resource that failed to load, a blocked request, a deprecation), as entries a model reads.

The tab's pump turns each CDP event into a `ConsoleEntry` here and keeps it in a `ConsoleLog`: a ring of the
newest `RING` entries, newest last, with two cursors: the console action's (what it has not shown yet) and
the error count's (the errors no result has counted yet). Each entry is marked with the tab's navigation it
came from. Entries are page output, cookies and tokens included when the page prints them: they go to the
client, never to the daemon's log.

A page restored from the back/forward cache is the same document, and Chrome (156) sends every console
message, exception and browser message it had logged again, with their first timestamps, before its
Page.frameNavigated (type BackForwardCacheRestore). Those are no news: each event's key (`console_key`,
`exception_key`, `log_key`: its kind and timestamp, and what tells two apart within a microsecond) is
remembered, and an event whose key was seen is dropped."""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from typing import Any
from urllib.parse import urlsplit

import trio

from ..chrome.cdp import CDPClosed, CDPError
from ..protocol import ConsoleEntry, ConsoleLevel, ConsoleNav
from .snapshot import PENDING_SCRIPT_URL

RING = 500          # entries kept per tab; older ones are dropped and counted
TEXT_CHARS = 2000   # one entry's text, cut: a page that logs a megabyte string costs a model no more
STACK_FRAMES = 10   # frames of a stack shown; the rest are counted
# Console entries after which the page's console objects are let go (TabConsole.release)
CONSOLE_RELEASE_EVERY = 100
# Events whose keys are remembered, to know one sent again by a back/forward cache restore: more than the
# ring; a page restored after the tab logged more than this since it left may report its oldest again
SEEN = 4 * RING
KEY_CHARS = 200     # of a text or value in a key: enough to tell messages apart, a bounded cost to keep

# console.<type> -> the level a model reads (Chrome's console groups them the same way)
_API_LEVELS: dict[str, ConsoleLevel] = {
    "error": "error", "assert": "error", "warning": "warning", "info": "info", "debug": "debug",
}
# Log.entryAdded's levels (the browser's own messages)
_LOG_LEVELS: dict[str, ConsoleLevel] = {"error": "error", "warning": "warning", "info": "info", "verbose": "debug"}
# console.* calls that print nothing a model needs
_SILENT = {"startGroup", "startGroupCollapsed", "endGroup", "clear", "profile", "profileEnd"}


class ConsoleLog:
    """One tab's console entries, newest last, at most `RING` of them, each marked with its navigation."""

    def __init__(self, ring: int = RING) -> None:
        self._entries: deque[tuple[int, ConsoleEntry]] = deque(maxlen=ring)  # (sequence number, entry)
        self._seq = 0           # entries ever added
        self._read = 0          # the sequence number the console action has shown up to
        self._errors = 0        # errors ever added
        self._errors_counted = 0
        self._nav = ConsoleNav(nav=0, url="about:blank")    # the navigation entries come from now
        self._navs: dict[int, ConsoleNav] = {0: self._nav}  # those the ring's entries came from, and this one
        self._seen: dict[Hashable, None] = {}               # the newest `SEEN` events' keys, oldest first

    def navigated(self, nav: int, url: str, restored: bool = False) -> None:
        """The tab's main frame is at a new document (`restored`: one back from the back/forward cache), its
        `nav`th: what comes from now on came from it."""
        self._nav = ConsoleNav(nav=nav, url=url, restored=restored)
        self._navs[nav] = self._nav
        oldest = self._entries[0][1].nav if self._entries else nav
        for gone in [n for n in self._navs if n < oldest]:
            del self._navs[gone]

    def navs_of(self, entries: list[ConsoleEntry]) -> list[ConsoleNav]:
        """The navigations `entries` came from, in order."""
        return [self._navs[n] for n in sorted({e.nav for e in entries}) if n in self._navs]

    def add(self, entry: ConsoleEntry | None, key: Hashable | None = None) -> None:
        """Keep `entry`, marked with the navigation in force, unless its event's `key` was seen: an event
        sent again (a back/forward cache restore) is no new entry."""
        if entry is None:
            return
        if key is not None:
            if key in self._seen:
                return
            self._seen[key] = None
            if len(self._seen) > SEEN:
                del self._seen[next(iter(self._seen))]
        entry.nav = self._nav.nav
        self._seq += 1
        self._entries.append((self._seq, entry))
        if entry.level == "error":
            self._errors += 1

    @property
    def count(self) -> int:
        """Entries ever added: a watcher's cursor (watch.py)."""
        return self._seq

    def newest(self, n: int) -> list[ConsoleEntry]:
        """The newest `n` entries, newest last, without marking them shown (a person's view reads them too)."""
        return [e for _, e in list(self._entries)[-n:]]

    def take_new(self) -> tuple[list[ConsoleEntry], int]:
        """The entries the console action has not shown yet, newest last, and how many of those the ring
        dropped before they could be shown; they count as shown from now on, their errors as counted."""
        unread = [e for seq, e in self._entries if seq > self._read]
        dropped = self._seq - self._read - len(unread)
        self._read = self._seq
        self._errors_counted = self._errors
        return unread, dropped

    def take_error_count(self) -> int:
        """Errors since the last call (or the last console action): the count every action's result carries."""
        new, self._errors_counted = self._errors - self._errors_counted, self._errors
        return new


class TabConsole(ConsoleLog):
    """A tab's console log, which also lets the renderer go of what it holds for the events read."""

    def __init__(self, call: Callable[[str, dict[str, Any] | None], Awaitable[Any]], ring: int = RING) -> None:
        super().__init__(ring)
        self._call = call               # the tab's CDP call
        self._held = 0                  # console events since their objects were last let go

    def add_held(self, entry: ConsoleEntry | None, key: Hashable | None, nursery: trio.Nursery) -> None:
        """An entry from an event whose objects the renderer keeps (console.*, an exception)."""
        self.add(entry, key)
        self._held += 1
        if self._held == CONSOLE_RELEASE_EVERY:
            nursery.start_soon(self.release)

    async def release(self) -> None:
        """Let the renderer drop what it keeps for the console events we have read: each logged object's
        handle (the "console" object group) and its own store of messages with their arguments. Entries are
        made from the events' previews and text at once, so nothing is lost; without this a page that logs
        objects in a loop grows the renderer by everything it ever logged."""
        try:
            await self._call("Runtime.releaseObjectGroup", {"objectGroup": "console"})
            await self._call("Runtime.discardConsoleEntries", None)
        except (CDPError, CDPClosed):
            pass  # the page went away: so did what it held
        finally:
            self._held = 0


def from_console_api(p: dict[str, Any]) -> ConsoleEntry | None:
    """Runtime.consoleAPICalled: console.log/info/warn/error/debug/assert/trace…"""
    kind = p.get("type", "log")
    if kind in _SILENT:
        return None
    text = _format_args(p.get("args") or [])
    if kind == "assert":
        text = "Assertion failed" + (f": {text}" if text else "")
    frames = _page_frames((p.get("stackTrace") or {}).get("callFrames") or [])
    url, line = _where(frames[0] if frames else {})
    stack = _stack(frames) if kind in ("trace", "assert", "error") and len(frames) > 1 else None
    return ConsoleEntry(kind="console", level=_API_LEVELS.get(kind, "log"), text=_cut(text), url=url, line=line,
                        stack=stack)


def from_exception(p: dict[str, Any]) -> ConsoleEntry:
    """Runtime.exceptionThrown: an uncaught exception, or a promise rejection nothing handled."""
    d = p.get("exceptionDetails") or {}
    exc = d.get("exception") or {}
    lead = d.get("text") or "Uncaught"                      # "Uncaught" or "Uncaught (in promise)"
    description = str(exc.get("description") or _value(exc) or "")
    # an Error's description is its message and then V8's stack, one "    at …" line a frame
    message, _, rest = description.partition("\n    at ")
    frames = _page_frames((d.get("stackTrace") or {}).get("callFrames") or [])
    stack = _stack(frames) if frames else (_cut_stack(_page_lines("    at " + rest)) if rest else None)
    url, line = _where(d)
    if url in (None, PENDING_SCRIPT_URL):  # the page's own frame, if the stack has one
        url, line = _where(frames[0]) if frames else (None, None)
    return ConsoleEntry(kind="rejection" if "(in promise)" in lead else "exception", level="error",
                        text=_cut(f"{lead} {message}".strip() if message else lead), url=url, line=line, stack=stack)


def from_log_entry(p: dict[str, Any]) -> ConsoleEntry | None:
    """Log.entryAdded: the browser's own messages (network, security, deprecation, intervention…)."""
    e = p.get("entry") or {}
    if e.get("source") == "network" and urlsplit(str(e.get("url") or "")).path == "/favicon.ico":
        return None  # the icon Chrome asks for by itself: no page asked, and most apps have none
    return ConsoleEntry(kind=str(e.get("source") or "other"), level=_LOG_LEVELS.get(e.get("level", ""), "info"),
                        text=_cut(str(e.get("text") or "")), url=e.get("url") or None,
                        line=e["lineNumber"] + 1 if isinstance(e.get("lineNumber"), int) else None)


def console_key(p: dict[str, Any]) -> Hashable | None:
    """What tells a Runtime.consoleAPICalled apart from every other, and equal when Chrome sends it again: its
    timestamp (microseconds), type and arguments (an object sent again lacks its preview: by its class)."""
    if p.get("timestamp") is None:
        return None
    return ("console", p["timestamp"], p.get("type"), tuple(_arg_key(a) for a in p.get("args") or []))


def exception_key(p: dict[str, Any]) -> Hashable | None:
    """The same for a Runtime.exceptionThrown: its timestamp, and the exception's id and place."""
    d = p.get("exceptionDetails") or {}
    if p.get("timestamp") is None:
        return None
    return ("exception", p["timestamp"], d.get("exceptionId"), d.get("scriptId"), d.get("lineNumber"),
            d.get("columnNumber"))


def log_key(p: dict[str, Any]) -> Hashable | None:
    """The same for a Log.entryAdded: its timestamp, source, level, text and URL."""
    e = p.get("entry") or {}
    if e.get("timestamp") is None:
        return None
    return ("log", e["timestamp"], e.get("source"), e.get("level"), str(e.get("text") or "")[:KEY_CHARS],
            str(e.get("url") or "")[:KEY_CHARS])


def _arg_key(arg: dict[str, Any]) -> tuple[Any, ...]:
    value = arg.get("value")
    shown = str(value)[:KEY_CHARS] if isinstance(value, (str, int, float, bool)) else arg.get("className")
    return arg.get("type"), arg.get("subtype"), shown


def _page_frames(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The page's own frames of a stack: webfetch's counter in the page (pending.js) wraps fetch and
    requestAnimationFrame, so a failed fetch's stack begins in it."""
    return [f for f in frames if f.get("url") != PENDING_SCRIPT_URL]


def _page_lines(stack: str) -> str:
    """_page_frames for a stack V8 wrote as text."""
    return "\n".join(line for line in stack.split("\n") if f"{PENDING_SCRIPT_URL}:" not in line)


def _where(node: dict[str, Any]) -> tuple[str | None, int | None]:
    """(url, 1-based line) of a call frame or exception details; CDP counts lines from 0."""
    url = node.get("url") or None
    line = node.get("lineNumber")
    return url, (line + 1 if isinstance(line, int) and url else None)


def _stack(frames: list[dict[str, Any]]) -> str:
    lines = [f"    at {f.get('functionName') or '(anonymous)'} ({f.get('url') or '<anonymous>'}:"
             f"{f.get('lineNumber', 0) + 1}:{f.get('columnNumber', 0) + 1})" for f in frames[:STACK_FRAMES]]
    if len(frames) > STACK_FRAMES:
        lines.append(f"    … {len(frames) - STACK_FRAMES} more frames")
    return "\n".join(lines)


def _cut_stack(stack: str) -> str:
    lines = stack.split("\n")
    if len(lines) > STACK_FRAMES:
        lines = lines[:STACK_FRAMES] + [f"    … {len(lines) - STACK_FRAMES} more frames"]
    return _cut("\n".join(lines))


def _cut(text: str) -> str:
    return text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS] + f"… ({len(text):,} characters)"


def _format_args(args: list[dict[str, Any]]) -> str:
    """The line Chrome's console would print: the first string's %s/%d/%i/%f/%o/%O/%c filled in from the
    arguments after it, the rest joined by spaces."""
    rest = list(args)
    if rest and rest[0].get("type") == "string" and "%" in str(rest[0].get("value", "")):
        head = _substitute(str(rest.pop(0)["value"]), rest)
        return " ".join([head] + [_show(a) for a in rest])
    return " ".join(_show(a) for a in rest)


def _substitute(fmt: str, rest: list[dict[str, Any]]) -> str:
    out: list[str] = []
    i = 0
    while i < len(fmt):
        c, spec = fmt[i], fmt[i + 1:i + 2]
        if c == "%" and spec == "%":
            out.append("%")
            i += 2
        elif c == "%" and spec in ("s", "d", "i", "f", "o", "O", "c") and rest:
            arg = rest.pop(0)
            if spec in ("d", "i") and isinstance(arg.get("value"), (int, float)):
                out.append(str(int(arg["value"])))
            elif spec != "c":  # %c is CSS: it styles, it prints nothing
                out.append(_show(arg))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _show(obj: dict[str, Any]) -> str:
    """One console argument (a CDP RemoteObject) as text: a string as itself, an object by its preview."""
    if obj.get("type") == "string":
        return str(obj.get("value", ""))
    preview = obj.get("preview")
    if preview is not None and obj.get("subtype") not in ("error", "node", "regexp", "date"):
        return _preview(preview)
    value = _value(obj)
    return value if value is not None else str(obj.get("description") or obj.get("type") or "")


def _value(obj: dict[str, Any]) -> str | None:
    if "unserializableValue" in obj:
        return str(obj["unserializableValue"])
    if obj.get("type") == "undefined":
        return "undefined"
    if obj.get("subtype") == "null":
        return "null"
    if "value" in obj and obj.get("type") in ("number", "boolean"):
        return "true" if obj["value"] is True else "false" if obj["value"] is False else _number(obj["value"])
    return None


def _number(v: Any) -> str:
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


def _preview(p: dict[str, Any]) -> str:
    """An object's preview as a console shows it: {a: 1, b: "x"} or [1, 2, 3], with … when Chrome cut it."""
    array = p.get("subtype") == "array"
    parts = []
    for prop in p.get("properties") or []:
        v = prop.get("value", "")
        v = f'"{v}"' if prop.get("type") == "string" else v
        parts.append(str(v) if array else f"{prop.get('name')}: {v}")
    if p.get("overflow"):
        parts.append("…")
    inner = ", ".join(parts)
    return f"[{inner}]" if array else f"{{{inner}}}"
