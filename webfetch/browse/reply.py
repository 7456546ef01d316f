"""What a browse request answers: the result's common fields, the page line, the snapshot an action shows
(whole, or what changed since the last one of the same document, cut to size), the dialogs and
downloads the page raised meanwhile, the console errors no result has counted yet, and the console
action's entries."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..protocol import BrowseRequest, BrowseResult, PageInfo
from .settle import Marks
from .snapshot import diff
from .tab import BrowseTab, now_ms


@dataclass(frozen=True)
class Reply:
    """One request's answer in the making: its id, action and session, and when it began."""

    rid: Any
    action: str
    session: str
    started: float

    def result(self, page: PageInfo | None, tab: BrowseTab | None = None, **fields: Any) -> BrowseResult:
        """The result; it shows no change and no snapshot unless `fields` say otherwise. With the `tab` it
        shows, it counts the console errors the tab logged since its previous result, so an agent notices
        them without asking."""
        common: dict[str, Any] = {"change": "none", "refs_reset": False, "snapshot": "", "snapshot_kind": "none"}
        if tab is not None:
            common["console_errors"] = tab.console.take_error_count() or None
            common["forced"] = tab.forced.summary()
        return BrowseResult(id=self.rid, op="browse", action=self.action, session=self.session, page=page,
                            elapsed_ms=now_ms(self.started), **(common | fields))


async def after_action(reply: Reply, tab: BrowseTab, marks: Marks, opened: Sequence[BrowseTab], max_chars: int, *,
                       full: bool = False, snapshot: bool = True, stated: str | None = None,
                       **fields: Any) -> BrowseResult:
    """The result of an action that may have changed the page: the page, what changed since `marks`, and the
    snapshot (whole, or what changed). `opened` are the tabs the page opened meanwhile; the newest is shown.
    `stated`: the ref whose new value the result states (`value`), which changed lines do not repeat."""
    if opened:
        fields["new_tabs"] = [{"tab": t.name, "url": t.url} for t in opened]
        tab = opened[-1]  # the newest tab is the active one now: show it
        full = True
    navigated = tab.doc_gen != marks.doc_gen or bool(opened)
    change = "navigation" if navigated else "same_document" if tab.same_doc != marks.same_doc else "none"
    fields.update(_events_since(tab, marks))
    if snapshot and tab.dialog is None:
        shown = await _shown(tab, whole=full or navigated, stated=stated)
    else:
        shown = _Shown(title=await tab.title())
    if shown.dom_changed and change == "none":
        change = "dom"
    text = header(tab, shown.title) + "\n" + shown.body if shown.kind != "none" else ""
    chunk, next_offset = page(text, 0, max_chars)
    if next_offset is not None:
        fields["next_offset"] = next_offset
    return reply.result(PageInfo(tab=tab.name, url=tab.url, title=shown.title), tab, change=change,
                        refs_reset=navigated, snapshot=chunk, snapshot_kind=shown.kind, **fields)


async def snapshot(reply: Reply, tab: BrowseTab, req: BrowseRequest, max_chars: int) -> BrowseResult:
    """The snapshot action's result: the tab (or a ref's subtree, or what matches `find`) as text, a page of it."""
    whole = req.ref is None and req.find is None
    snap = await tab.worlds.snapshot(req.mode, req.ref, req.find, both=whole)
    if whole and snap.full is not None:
        tab.worlds.remember_lines(_with_title(snap.title, snap.full))
    title = snap.title
    text = header(tab, title) + "\n" + snap.text
    if snap.truncated:
        text += "\n- … (the page is larger than the snapshot's node budget: use find or ref to reach the rest)"
    chunk, next_offset = page(text, req.offset, req.max_chars or max_chars)
    return reply.result(PageInfo(tab=tab.name, url=tab.url, title=title), tab, snapshot=chunk, snapshot_kind="full",
                        ref_count=sum(1 for line in snap.lines if "ref=e" in line), next_offset=next_offset)


async def console(reply: Reply, tab: BrowseTab, max_chars: int) -> BrowseResult:
    """The console action's result: the tab's console entries since its previous console action (or since it
    opened), newest last, with the navigations they came from; the oldest are left out (and counted) when they
    would not fit `max_chars`."""
    entries, dropped = tab.console.take_new()
    kept, size = 0, 0
    for entry in reversed(entries):
        size += len(entry.text) + len(entry.stack or "") + len(entry.url or "") + 24  # its line(s) as read
        if size > max_chars and kept:
            break
        kept += 1
    cut = len(entries) - kept
    shown = entries[cut:]
    return reply.result(PageInfo(tab=tab.name, url=tab.url, title=await tab.title()), tab,
                        console=shown, console_dropped=(dropped + cut) or None,
                        console_navs=tab.console.navs_of(shown) or None)


class _Shown(NamedTuple):
    """The snapshot a result shows: its kind (full, diff or none), and whether the document's lines changed."""

    title: str
    kind: str = "none"
    body: str = ""
    dom_changed: bool = False


async def _shown(tab: BrowseTab, *, whole: bool, stated: str | None = None) -> _Shown:
    """The tab's interactive snapshot: whole, or only what changed since the last one of the same document.
    The line of `stated` is left out when all that changed on it is its value (and focus, and a checkbox's
    checked): the result says the value, and the model knows which element it acted on (issue 40)."""
    snap = await tab.worlds.snapshot("interactive", None, None, both=True)
    old = tab.worlds.previous_lines()
    assert snap.full is not None
    new = _with_title(snap.title, snap.full)
    tab.worlds.remember_lines(new)
    if whole or old is None:
        return _Shown(snap.title, "full", snap.text)
    # what changed is told from every line, text included ("Profile saved"), not only controls; and the
    # title, which changed lines' reply does not otherwise repeat (a script may change only it)
    added, removed = diff(old, new)
    told = [line.lstrip() for line in added if not (stated and _only_value_changed(stated, old, line))]
    if not told and not removed and not snap.inside:  # nothing changed, or only what `value` says
        return _Shown(snap.title, dom_changed=len(told) < len(added))
    added = told
    inside = _dedent(snap.inside)
    body = "\n".join(added + inside + ([f"- (removed: {', '.join(removed)})"] if removed else []))
    if len(body) > len(snap.text) + len("\n".join(inside)):
        return _Shown(snap.title, "full", "\n".join([snap.text] + inside), dom_changed=True)
    return _Shown(snap.title, "diff", body, dom_changed=True)


def _only_value_changed(ref: str, old: list[str], line: str) -> bool:
    """Whether `line` is the line of `ref` and differs from its line in `old` only in what an action's `value`
    states: the value after the brackets, the checked state, and focus (which the action moved there)."""
    mark = f"ref={ref}]"
    if mark not in line:
        return False
    before = next((o for o in old if mark in o), None)
    return before is not None and _valueless(before) == _valueless(line)


def _valueless(line: str) -> str:
    """A snapshot line without its value (`: …` after the ref's bracket), its checked state and its focus."""
    head, _, _ = line.partition("]")
    name, _, attrs = head.partition(" [")
    kept = [a for a in attrs.split(", ") if a not in ("focused", "checked")]
    return f"{name.strip()} [{', '.join(kept)}]"


def _with_title(title: str, lines: list[str]) -> list[str]:
    """A snapshot's lines as remembered to tell what the next action changed: the page's title first, as a
    line of its own, so a new title is a changed line like any other."""
    return [f"- title {json.dumps(title, ensure_ascii=False)}", *lines]


def _dedent(lines: list[str]) -> list[str]:
    """`lines` moved left as a block, their indents relative to each other kept."""
    cut = min((len(line) - len(line.lstrip()) for line in lines), default=0)
    return [line[cut:] for line in lines]


def _events_since(tab: BrowseTab, marks: Marks) -> dict[str, Any]:
    """The dialog (the latest) the page raised since the action began, and the downloads no result told yet."""
    events: dict[str, Any] = {}
    dialogs = tab.dialogs[marks.dialogs:]
    if dialogs:
        events["dialog"] = dialogs[-1]
    downloads = tab.downloads.take()
    if downloads:
        events["downloads"] = downloads
    return events


def header(tab: BrowseTab, title: str) -> str:
    """The page line that heads a snapshot: the tab, its title and its address, and what the session forces
    on it while it does (routes, offline, emulation: forced.py), so no reading of the page forgets it."""
    forced = tab.forced.summary()
    return f"[{tab.name}] {title or '(no title)'} — {tab.url}" + (f" [forced: {forced}]" if forced else "")


def page(text: str, offset: int, max_chars: int) -> tuple[str, int | None]:
    """`max_chars` of `text` from `offset`, cut at a line end where possible; and the next offset or None."""
    if offset >= len(text):
        return "", None
    end = offset + max_chars
    if end >= len(text):
        return text[offset:], None
    cut = text.rfind("\n", offset, end)
    if cut <= offset:
        cut = end
    return text[offset:cut], cut + (1 if text[cut:cut + 1] == "\n" else 0)
