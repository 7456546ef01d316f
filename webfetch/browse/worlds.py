"""A browse tab's isolated worlds: one per frame's document, holding the snapshot library and the map from
ref to element; script evaluated there, elements found by ref, the refs given out (each with its frame and
document, so a ref of a replaced document is stale before the page is asked), and the snapshot that walks
every frame, inlining each iframe's under its line. The tab (tab.py) owns one `Worlds`."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from ..chrome.cdp import CDPError
from ..errors import StaleRef, UnknownRef, WebfetchError
from ..page_scripts import Script, invoke, load
from .snapshot import NODE_BUDGET, PAGE_JS, WORLD_NAME, Snapshot

if TYPE_CHECKING:
    from .tab import BrowseTab

# Finds a ref's element in the world and calls an action's function on it (webfetch/js/on_ref.js).
ON_REF = load("on_ref")


@dataclass
class RefInfo:
    frame: str
    loader: str


class Worlds:
    """The isolated worlds of one tab's frames and the refs its snapshots gave out. Script in them never
    hangs on a dialog: every call races the tab's dialog event (BrowseTab.unless_dialog)."""

    def __init__(self, tab: BrowseTab) -> None:
        self._tab = tab
        self._worlds: dict[str, tuple[str, int]] = {}  # frame -> (loader, context id)
        self._refs: dict[str, RefInfo] = {}
        self._next_ref = 1
        self._iframes: dict[str, str] = {}    # an iframe's ref -> the frame it shows (child_frame)
        self._last_lines: list[str] | None = None
        self._last_doc_gen = -1             # the document _last_lines shows

    def previous_lines(self) -> list[str] | None:
        """The last whole snapshot's lines, if it showed the document the tab shows now."""
        return self._last_lines if self._last_doc_gen == self._tab.doc_gen else None

    def remember_lines(self, lines: list[str]) -> None:
        """Keep a whole snapshot of the current document, to tell what the next action changed."""
        self._last_lines, self._last_doc_gen = lines, self._tab.doc_gen

    # --- script in the frames' worlds ----------------------------------------------------------------

    async def in_world(self, frame: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A Runtime call in the frame's isolated world (`contextId` or `executionContextId` filled in);
        a world that vanished under us (the document was replaced a moment ago) is made again once."""
        if self._tab.dialog is not None:
            raise self._tab.dialog_open()
        for attempt in (1, 2):
            ctx = await self.world(frame)
            key = "contextId" if method == "Runtime.evaluate" else "executionContextId"
            try:
                reply = await self._tab.unless_dialog(partial(self._tab.call, method, params | {key: ctx}))
            except CDPError as e:
                if attempt == 2 or "context" not in e.message.lower():
                    raise
                self._worlds.pop(frame, None)
                continue
            if reply is None:
                raise self._tab.dialog_open()
            return await self.check(reply)
        raise AssertionError("unreachable")

    async def world(self, frame: str) -> int:
        """The isolated world of `frame`'s current document, with the snapshot library installed."""
        info = self._tab.frames.get(frame)
        if info is None:
            raise StaleRef("that frame is gone from the page; take a new snapshot")
        known = self._worlds.get(frame)
        if known is not None and known[0] == info.loader:
            return known[1]
        ctx = (await self._tab.call("Page.createIsolatedWorld", {"frameId": frame, "worldName": WORLD_NAME,
                                                                "grantUniveralAccess": False}))["executionContextId"]
        await self.check(await self._tab.call("Runtime.evaluate", {"expression": PAGE_JS, "contextId": ctx}))
        self._worlds[frame] = (info.loader, int(ctx))
        return int(ctx)

    async def evaluate(self, frame: str, expression: str) -> Any:
        """`expression` in the frame's isolated world, its value by JSON."""
        reply = await self.in_world(frame, "Runtime.evaluate", {
            "expression": expression, "returnByValue": True, "awaitPromise": True})
        return reply["result"].get("value")

    async def on_element(self, object_id: str, script: Script, *args: Any, objects: tuple[str, ...] = ()) -> Any:
        """`script`'s function called with the element as `this`, in its isolated world; `objects` come after
        `args` as elements."""
        if self._tab.dialog is not None:
            raise self._tab.dialog_open()
        arguments = [{"value": a} for a in args] + [{"objectId": o} for o in objects]
        reply = await self._tab.unless_dialog(lambda: self._tab.call("Runtime.callFunctionOn", {
            "objectId": object_id, "functionDeclaration": script.source,
            "arguments": arguments, "returnByValue": True, "awaitPromise": True}))
        if reply is None:
            raise self._tab.dialog_open()
        return (await self.check(reply))["result"].get("value")

    @staticmethod
    async def check(reply: dict[str, Any]) -> dict[str, Any]:
        """A Runtime call's reply, or the page's exception as an error."""
        if "exceptionDetails" in reply:
            d = reply["exceptionDetails"]
            what = d.get("exception", {}).get("description") or d.get("text")
            raise WebfetchError(f"script in the page failed: {what}")
        return reply

    # --- refs -----------------------------------------------------------------------------------

    def live_frame(self, ref: str | None) -> str | None:
        """The frame a ref was given out in, while that frame lives (its document may have changed)."""
        known = self._refs.get(ref or "")
        return known.frame if known is not None and known.frame in self._tab.frames else None

    def ref_frame(self, ref: str) -> str:
        """The frame of a ref's document; unknown_ref or stale_ref."""
        info = self._refs.get(ref)
        if info is None:
            raise UnknownRef(f"{ref} was never given out on tab {self._tab.name}; take a snapshot and use a ref "
                             f"from it")
        frame = self._tab.frames.get(info.frame)
        if frame is None or frame.loader != info.loader:
            raise StaleRef(f"{ref} belongs to a document that is gone (the page navigated); take a new snapshot "
                           f"and use the refs it shows")
        return info.frame

    async def on_ref(self, ref: str, script: Script, *args: Any) -> Any:
        """`script`'s function with the ref's element as `this`, in one round trip."""
        frame = self.ref_frame(ref)
        reply = await self.in_world(frame, "Runtime.callFunctionOn", {
            "functionDeclaration": ON_REF.call(script), "arguments": [{"value": ref}] + [{"value": a} for a in args],
            "returnByValue": True, "awaitPromise": True})
        value = reply["result"].get("value")
        if isinstance(value, dict) and value.get("__stale"):
            raise StaleRef(f"{ref} is no longer in the page (its script removed it); take a new snapshot")
        return value

    async def element(self, ref: str) -> tuple[str, str]:
        """(frame, objectId) of a ref's element; stale_ref when its document is gone or it left the page."""
        frame = self.ref_frame(ref)
        obj = (await self.in_world(frame, "Runtime.evaluate", {"expression": invoke("__wf.get", ref)}))["result"]
        if obj.get("subtype") != "node" or "objectId" not in obj:
            raise StaleRef(f"{ref} is no longer in the page (its script removed it); take a new snapshot")
        return frame, obj["objectId"]

    async def snapshot(self, mode: str, ref: str | None, find: str | None, both: bool = False) -> Snapshot:
        """The tab as text, every frame inlined under its iframe line; new refs are recorded. `both` adds
        the full view beside an interactive one (what changed is told from the full view)."""
        frame = self.ref_frame(ref) if ref is not None else self._tab.target_id
        opts = {"mode": mode, "ref": ref, "find": find, "next": 0, "budget": NODE_BUDGET, "both": both}
        inside: list[str] = []
        lines, full, truncated, title = await self._frame_lines(frame, 0, opts, inside)
        return Snapshot(lines, full if both else None, truncated, title, inside)

    async def _frame_lines(self, frame: str, base: int, opts: dict[str, Any],
                           inside: list[str]) -> tuple[list[str], list[str], bool, str]:
        """The frame's lines (both views) with its iframes' inlined; what changed inside its collapsed runs is
        added to `inside`."""
        loader = self._tab.frames[frame].loader
        got = await self.evaluate(frame, invoke("__wf.snapshot", opts | {"next": self._next_ref}))
        if got and "clock" in got:
            self._tab.clock.learn(frame, loader, got["clock"])
        if not got or got.get("error"):
            raise StaleRef(f"{opts['ref']} is no longer in the page; take a new snapshot")
        self._next_ref = got["next"]
        for r in got["created"]:
            self._refs[r] = RefInfo(frame, loader)
        truncated = bool(got["truncated"])
        inside += ["  " * (base + int(depth)) + text for depth, text, _ in got.get("inside") or []]
        child_opts = opts | {"ref": None}
        inlined: dict[str, tuple[list[str], list[str]]] = {}  # iframe ref -> its lines (both views)

        async def expand(rows: list[list[Any]], view: int) -> list[str]:
            nonlocal truncated
            out: list[str] = []
            for depth, text, iframe_ref in rows:
                out.append("  " * (base + int(depth)) + text)
                if iframe_ref is None:
                    continue
                if iframe_ref not in inlined:
                    child = await self.child_frame(frame, iframe_ref)
                    if child is None or child not in self._tab.frames:
                        inlined[iframe_ref] = ([], [])
                        continue
                    try:
                        sub, sub_full, cut, _ = await self._frame_lines(child, base + int(depth) + 1, child_opts,
                                                                        inside)
                    except WebfetchError as e:
                        note = "  " * (base + int(depth) + 1) + f"- (frame not readable: {e})"
                        sub, sub_full, cut = [note], [note], False
                    inlined[iframe_ref] = (sub, sub_full)
                    truncated = truncated or cut
                out += inlined[iframe_ref][view]
            return out

        lines = await expand(got["lines"], 0)
        full = await expand(got["full"], 1) if got.get("full") is not None else lines
        return lines, full, truncated, str(got.get("title") or "")

    async def child_frame(self, frame: str, iframe_ref: str) -> str | None:
        """The frame an iframe's ref shows, or None when the ref is not a frame's element. Known once asked:
        an iframe element keeps its frame while the frame lives (a new one, re-inserted, is another frame),
        which spares every snapshot two round trips per iframe."""
        known = self._iframes.get(iframe_ref)
        info = self._tab.frames.get(known or "")
        if known is not None and info is not None and info.parent == frame:
            return known
        get = {"expression": invoke("__wf.get", iframe_ref)}
        obj = (await self.in_world(frame, "Runtime.evaluate", get))["result"]
        if "objectId" not in obj:
            return None
        node = (await self._tab.call("DOM.describeNode", {"objectId": obj["objectId"]}))["node"]
        frame_id = node.get("frameId")
        if not frame_id:
            return None
        self._iframes[iframe_ref] = str(frame_id)
        return str(frame_id)
