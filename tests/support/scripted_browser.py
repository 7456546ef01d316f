"""A scripted browser for the state machines' fast tests (layer 1, mock clock): a tab whose CDP calls are
answered the way Chrome answers them, for pages the test describes, with events pushed through the same
subscription the code under test reads. `ScriptedTab` is the Tab fetch/in_chrome.py drives, `ScriptedPage` the
PageTarget a browse tab (browse/tab.py) drives. Real Chromium runs the same paths in test_fetch_chrome.py
and test_browse.py; this one makes a change to those state machines cost a second instead of minutes, and
can make Chrome do what it rarely does on cue (a renderer crash, a DOMContentLoaded that never fires, a
request that never ends)."""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

import trio

from webfetch.chrome.cdp import CDPClosed, CDPError

TARGET = "T1"


@dataclass
class Page:
    """One URL's answer: a status, headers, a body; and how its document behaves once committed."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "text/html; charset=utf-8"})
    body: bytes = b"<html><body><p>hello</p></body></html>"
    fires_dom_content_loaded: bool = True
    fires_load: bool = True
    crashes_after_commit: bool = False
    crashes_while_settling: bool = False  # the renderer dies under the settle call, which never answers
    title: str | None = "Scripted"
    meta_refresh: str | None = None     # the content of a <meta http-equiv=refresh> in the rendered DOM
    rendered_html: str | None = None    # what the DOM holds once its scripts ran (default: the body)


class _Events:
    def __init__(self) -> None:
        self.send, self.recv = trio.open_memory_channel[dict[str, Any]](1000)

    async def receive(self) -> dict[str, Any]:
        try:
            return await self.recv.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise CDPClosed("scripted browser closed") from None


class ScriptedTab:
    """The Tab handle fetch/in_chrome.py uses, answered by a script instead of Chrome."""

    def __init__(self, pages: dict[str, Page]) -> None:
        self.pages = pages
        self.target_id = TARGET
        self.uses = 1
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.reuse_allowed = False
        self.shown = False               # the window was restored for a page to render
        self.navigated: list[str] = []   # documents committed, in order
        self.failed: list[tuple[str, str]] = []  # (url, reason) of requests failed by the renderer
        self._events = _Events()
        self._ids = itertools.count(1)
        self._requests: dict[str, str] = {}  # request id -> url
        self._committed: str | None = None
        self._responded: set[str] = set()  # requests already paused at the response stage

    # --- the Tab handle ---------------------------------------------------------------------------

    @contextmanager
    def subscribe(self) -> Iterator[_Events]:
        yield self._events

    def connect_failure(self, host: str) -> None:
        return None

    async def show(self) -> None:
        self.shown = True

    def allow_reuse(self) -> None:
        self.reuse_allowed = True

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        params = params or {}
        self.calls.append((method, params))
        handler = getattr(self, "_" + method.replace(".", "_"), None)
        return (await handler(params)) if handler else {}

    # --- what Chrome does -------------------------------------------------------------------------

    def emit(self, method: str, **params: Any) -> None:
        self._events.send.send_nowait({"method": method, "params": params})

    def _pause(self, url: str) -> None:
        rid = f"r{next(self._ids)}"
        self._requests[rid] = url
        self.emit("Fetch.requestPaused", requestId=rid, request={"url": url, "headers": {}},
                  resourceType="Document", frameId=TARGET)

    async def _Page_navigate(self, p: dict[str, Any]) -> dict[str, Any]:
        self._pause(p["url"])
        return {"frameId": TARGET}

    async def _Fetch_continueRequest(self, p: dict[str, Any]) -> dict[str, Any]:
        rid = p["requestId"]
        url = self._requests[rid]
        page = self.pages[url]
        if rid in self._responded:  # a redirect's response let through: Chrome requests its target
            self._pause(urljoin(url, page.headers["Location"]))
        else:
            self._responded.add(rid)
            self._pause_response(rid, url, page)
        return {}

    def _pause_response(self, rid: str, url: str, page: Page) -> None:
        params: dict[str, Any] = {"requestId": rid, "request": {"url": url, "headers": {}},
                                  "resourceType": "Document", "frameId": TARGET,
                                  "responseStatusCode": page.status,
                                  "responseHeaders": [{"name": k, "value": v} for k, v in page.headers.items()]}
        self.emit("Fetch.requestPaused", **params)

    async def _Fetch_failRequest(self, p: dict[str, Any]) -> dict[str, Any]:
        self.failed.append((self._requests[p["requestId"]], p["errorReason"]))
        return {}

    async def _Fetch_takeResponseBodyAsStream(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"stream": p["requestId"]}

    async def _IO_read(self, p: dict[str, Any]) -> dict[str, Any]:
        page = self.pages[self._requests[p["handle"]]]
        return {"data": base64.b64encode(page.body).decode(), "base64Encoded": True, "eof": True}

    async def _Fetch_fulfillRequest(self, p: dict[str, Any]) -> dict[str, Any]:
        url = self._requests[p["requestId"]]
        page = self.pages[url]
        self._committed = url
        self.navigated.append(url)
        self.emit("Page.frameNavigated", frame={"id": TARGET, "url": url})
        if page.crashes_after_commit:
            self.emit("Inspector.targetCrashed")
            return {}
        if page.fires_dom_content_loaded:
            self.emit("Page.domContentEventFired", timestamp=1)
        if page.fires_load:
            self.emit("Page.loadEventFired", timestamp=2)
        return {}

    async def _Runtime_evaluate(self, p: dict[str, Any]) -> dict[str, Any]:
        if "__webfetchSettle" in p["expression"]:
            if self._committed and self.pages[self._committed].crashes_while_settling:
                self.emit("Inspector.targetCrashed")
                await trio.sleep_forever()  # a crashed renderer answers no call
            return {"result": {"type": "string", "value": "settled"}}
        assert self._committed is not None
        page = self.pages[self._committed]
        html = page.rendered_html or page.body.decode()
        return {"result": {"type": "object", "value": {
            "html": html, "title": page.title, "url": self._committed, "refresh": page.meta_refresh}}}


# --- a browse tab's page (webfetch/browse/tab.py) ------------------------------------------------------

@dataclass
class Frame:
    """One frame of a scripted page: its document (a loader id, replaced when it navigates), its parent, and
    the buttons its snapshot lists. Its child frames are the frames that name it as their parent."""

    url: str
    parent: str | None = None
    buttons: list[str] = field(default_factory=list)
    loader: str = "L0"


class ScriptedPage:
    """The PageTarget a BrowseTab drives, answered the way Chrome answers: a frame tree whose documents the
    test navigates, an isolated world per document holding the refs its snapshots gave out (a new document
    starts an empty one, and a world of a replaced document is gone), script that never returns while a
    confirm or prompt is open, and events pushed through the subscription the tab reads."""

    def __init__(self, frames: dict[str, Frame] | None = None, title: str = "Scripted") -> None:
        self.target_id = TARGET
        self.frames = frames if frames is not None else {TARGET: Frame("http://127.0.0.1/")}
        self.page_title = title
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.quiet_s = 0.025              # how long __wf.quiet takes to find the DOM quiet
        self.quiet_answers: list[str] = []  # what __wf.quiet answers next (then "settled")
        self._events = _Events()
        self._loaders = itertools.count(1)
        self._contexts = itertools.count(1)
        self._worlds: dict[int, tuple[str, str]] = {}          # context id -> (frame, loader) it belongs to
        self._refs: dict[tuple[str, str], dict[str, tuple[str, str]]] = {}  # document -> ref -> element
        self._dialog_closed: trio.Event | None = None          # set while a confirm or prompt is open

    # --- the PageTarget handle --------------------------------------------------------------------

    @contextmanager
    def subscribe(self, buffer: int = 1024) -> Iterator[_Events]:
        yield self._events

    def connect_failure(self, host: str) -> None:
        return None

    async def title(self) -> str:
        return self.page_title

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        params = params or {}
        self.calls.append((method, params))
        handler = getattr(self, "_" + method.replace(".", "_"), None)
        return (await handler(params)) if handler else {}

    async def call_in_order(self, commands: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
        return [await self.call(method, params) for method, params in commands]

    def answers(self, method: str) -> list[dict[str, Any]]:
        """The params of every call of `method` the tab made, in order."""
        return [p for m, p in self.calls if m == method]

    # --- what the page does, on the test's cue ------------------------------------------------------

    def emit(self, method: str, **params: Any) -> None:
        self._events.send.send_nowait({"method": method, "params": params})

    def close(self) -> None:
        """The target goes away: the tab's subscription ends."""
        self._events.send.close()

    def navigate(self, frame: str, url: str, *, load: bool = True) -> None:
        """`frame` starts loading and commits a new document at `url`; with `load`, it also finishes loading."""
        info = self.frames[frame]
        info.url, info.loader = url, f"L{next(self._loaders)}"
        self.emit("Page.frameStartedLoading", frameId=frame)
        wire: dict[str, Any] = {"id": frame, "loaderId": info.loader, "url": url}
        if info.parent is not None:
            wire["parentId"] = info.parent
        self.emit("Page.frameNavigated", frame=wire)
        if load:
            self.finish_load(frame)

    def finish_load(self, frame: str) -> None:
        if frame == TARGET:
            self.emit("Page.loadEventFired", timestamp=1)
        self.emit("Page.frameStoppedLoading", frameId=frame)

    def attach(self, frame: str, parent: str, url: str) -> None:
        self.frames[frame] = Frame(url, parent)
        self.emit("Page.frameAttached", frameId=frame, parentFrameId=parent)
        self.navigate(frame, url)

    def detach(self, frame: str) -> None:
        del self.frames[frame]
        self.emit("Page.frameDetached", frameId=frame, reason="remove")

    def open_dialog(self, kind: str, message: str, default: str = "") -> None:
        self._dialog_closed = trio.Event()  # script in the page waits for the answer, whatever the kind
        self.emit("Page.javascriptDialogOpening", url=self.frames[TARGET].url, type=kind, message=message,
                  hasBrowserHandler=False, defaultPrompt=default)

    # --- CDP methods ------------------------------------------------------------------------------

    async def _Page_getFrameTree(self, p: dict[str, Any]) -> dict[str, Any]:
        def node(frame: str) -> dict[str, Any]:
            info = self.frames[frame]
            children = [node(f) for f, i in self.frames.items() if i.parent == frame]
            return {"frame": {"id": frame, "loaderId": info.loader, "url": info.url}, "childFrames": children}
        return {"frameTree": node(TARGET)}

    async def _Page_handleJavaScriptDialog(self, p: dict[str, Any]) -> dict[str, Any]:
        if self._dialog_closed is not None:
            self._dialog_closed.set()
            self._dialog_closed = None
        self.emit("Page.javascriptDialogClosed", result=p["accept"], userInput=p.get("promptText", ""))
        return {}

    async def _Page_createIsolatedWorld(self, p: dict[str, Any]) -> dict[str, Any]:
        ctx = next(self._contexts)
        self._worlds[ctx] = (p["frameId"], self.frames[p["frameId"]].loader)
        return {"executionContextId": ctx}

    async def _Runtime_evaluate(self, p: dict[str, Any]) -> dict[str, Any]:
        frame, loader = await self._world(p["contextId"])
        expression: str = p["expression"]
        if not expression.startswith("__wf."):
            return {"result": {"type": "undefined"}}  # the snapshot library, installed
        name, _, rest = expression[len("__wf."):].partition("(")
        args = json.loads("[" + rest[:-1] + "]")
        if name == "quiet":
            await trio.sleep(self.quiet_s)
            answer = self.quiet_answers.pop(0) if self.quiet_answers else "settled"
            return {"result": {"type": "string", "value": answer}}
        if name == "clock":
            return {"result": {"type": "object", "value": [trio.current_time() * 1000, 1.0e12]}}
        if name == "snapshot":
            return {"result": {"type": "object", "value": self._snapshot(frame, loader, args[0])}}
        if name == "get":
            element = self._refs.get((frame, loader), {}).get(args[0])
            if element is None:
                return {"result": {"type": "undefined"}}
            return {"result": {"type": "object", "subtype": "node", "objectId": f"{element[0]}:{element[1]}"}}
        raise AssertionError(f"unscripted page call {expression}")

    async def _Runtime_callFunctionOn(self, p: dict[str, Any]) -> dict[str, Any]:
        frame, loader = await self._world(p["executionContextId"]) if "executionContextId" in p else ("", "")
        ref = p["arguments"][0]["value"]
        element = self._refs.get((frame, loader), {}).get(ref)
        value = {"__stale": True} if element is None else f"clicked {element[1]}"
        return {"result": {"type": "object", "value": value}}

    async def _DOM_describeNode(self, p: dict[str, Any]) -> dict[str, Any]:
        kind, key = p["objectId"].split(":", 1)
        return {"node": {"nodeName": kind.upper(), "frameId": key if kind == "iframe" else None}}

    async def _world(self, ctx: int) -> tuple[str, str]:
        """The document of an isolated world; script waits while a confirm or prompt is open."""
        while self._dialog_closed is not None:
            await self._dialog_closed.wait()
        frame, loader = self._worlds[ctx]
        if frame not in self.frames or self.frames[frame].loader != loader:
            raise CDPError("Runtime.evaluate", -32000, "Cannot find context with specified id")
        return frame, loader

    def _snapshot(self, frame: str, loader: str, opts: dict[str, Any]) -> dict[str, Any]:
        refs = self._refs.setdefault((frame, loader), {})
        known = {element: ref for ref, element in refs.items()}
        next_ref, created, lines = opts["next"], [], []
        elements = [("button", b) for b in self.frames[frame].buttons]
        elements += [("iframe", f) for f, info in self.frames.items() if info.parent == frame]
        for element in elements:
            ref = known.get(element)
            if ref is None:
                ref, next_ref = f"e{next_ref}", next_ref + 1
                refs[ref] = element
                created.append(ref)
            kind, key = element
            text = f'- {kind} "{key}" [ref={ref}]' if kind == "button" else f"- iframe [ref={ref}]"
            lines.append([0, text, ref if kind == "iframe" else None])
        return {"lines": lines, "full": None, "created": created, "next": next_ref, "truncated": False,
                "title": self.page_title}
