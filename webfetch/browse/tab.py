"""One tab of a browse session: its CDP events (the address policy on every request, dialogs, documents,
requests in flight, console messages), its refs, and the waits an action needs (a navigation's load, then
quiet)."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import trio

from .._trio import single_error
from ..cdp import CDPClosed, CDPError, Subscription
from ..chrome import CRASH_EVENTS, PageTarget
from ..errors import DialogOpen, StaleRef, UnknownRef, WebfetchError
from ..page_scripts import Script, invoke, load
from ..protocol import ConsoleEntry, Download
from ..proxy import Failure
from ..render import classify
from ..urls import GATE_FETCH_PATTERN, HostGate
from . import console
from .downloads import DownloadRecord, Downloads
from .network import NetworkLog
from .snapshot import NODE_BUDGET, PAGE_JS, PENDING_JS, WORLD_NAME, Snapshot

log = logging.getLogger("webfetch.browse")

VIEWPORT = {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False}
# Every request is paused once for the host gate (urls.py); documents again at the response stage, where
# a download (an attachment, a type that is not a page) is handed to Chrome's download manager, which saves
# it in the session's directory (downloads.py).
FETCH_PATTERNS = [GATE_FETCH_PATTERN, {"urlPattern": "*", "resourceType": "Document", "requestStage": "Response"}]
# Console entries after which the page's console objects are let go (release_console)
CONSOLE_RELEASE_EVERY = 100
# The settle counts the page's requests begun up to this long before the action: the page's clock, as the
# daemon maps its own to it (page_clock), is coarsened (0.1 ms) and the mapping is never late, so a little
# slack is all the rounding needs.
ACTION_CLOCK_SLACK_MS = 5
# How long the settle waits for Chrome to report a navigation the page said it began, before it carries on
# as if none had (one cancelled at once: a 204, a download); Chrome's report comes in milliseconds.
NAVIGATION_NEWS_S = 1.0
# Finds a ref's element in the world and calls an action's function on it (webfetch/js/on_ref.js).
ON_REF = load("on_ref")


@dataclass
class FrameInfo:
    parent: str | None
    loader: str
    url: str


@dataclass
class RefInfo:
    frame: str
    loader: str


@dataclass
class Marks:
    """Where the tab stood when an action began, to tell what the action changed."""

    doc_gen: int
    same_doc: int
    request_seq: int
    dialogs: int
    downloads: int
    download_responses: int
    frame: str      # the frame the action acts in: the settle asks its document what is still pending
    at: float       # when the action began (time.monotonic()): what the page began after it is the action's


class BrowseTab:
    """One page of a session. Its state is its own: the event pump (`run`) keeps it true to the page, the
    other modules read it through the properties below and change it only through its methods."""

    def __init__(self, name: str, page: PageTarget, gate: HostGate, network: NetworkLog | None = None,
                 downloads: Downloads | None = None) -> None:
        self._name = name               # t1, t2, …
        self._page = page
        self._gate = gate               # the session's: the address policy for every request of the page
        self._network = network or NetworkLog(enabled=False)  # the session's: every request of its tabs
        self._saver = downloads         # the session's: where the page's downloads go, and the size cap
        self._url = "about:blank"
        self._frames: dict[str, FrameInfo] = {}
        self._refs: dict[str, RefInfo] = {}
        self._next_ref = 1
        self._iframes: dict[str, str] = {}    # an iframe's ref -> the frame it shows (child_frame)
        self._doc_gen = 0               # main-frame documents committed
        self._same_doc = 0              # history pushes and fragment changes in the main frame
        self._loading_frames: set[str] = set()  # frames whose document is loading
        self._request_seq = 0
        self._inflight: dict[str, int] = {}     # Network requestId -> its sequence number
        self._dialog: dict[str, str] | None = None           # an open confirm or prompt
        self._dialogs: list[dict[str, str]] = []             # every dialog seen, in order
        self._downloads: list[DownloadRecord] = []
        self._download_types: dict[str, str] = {}   # a download's URL -> its Content-Type, seen at the response
        self._download_responses = 0                # document responses handed to the download manager
        self._status: int | None = None     # the main document's HTTP status
        self._blocked: str | None = None    # why the address policy refused the last main-frame navigation
        self._worlds: dict[str, tuple[str, int]] = {}  # frame -> (loader, context id)
        # frame -> (loader, time origin, ms to add to time.monotonic() * 1000 for that document's
        # performance.now()), at most: the page's clock as of its latest answer (page_clock), so a time
        # mapped to it is never late. The origin tells documents apart where the loader may lag behind.
        self._clocks: dict[str, tuple[str, float, float]] = {}
        self._last_lines: list[str] | None = None
        self._last_doc_gen = -1             # the document _last_lines shows
        self._console = console.ConsoleLog()
        self._console_held = 0              # console events since their objects were last let go
        self._crashed = False
        self._closed = False
        self._changed = trio.Event()

    # --- what others read ------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def target_id(self) -> str:
        """The page target, which is also the id of its main frame."""
        return self._page.target_id

    @property
    def url(self) -> str:
        return self._url

    @property
    def dialog(self) -> dict[str, str] | None:
        """The confirm or prompt open now, if one is."""
        return self._dialog

    @property
    def dialogs(self) -> Sequence[dict[str, str]]:
        """Every dialog the page raised, in order."""
        return self._dialogs

    @property
    def downloads(self) -> Sequence[DownloadRecord]:
        """Every download the page started, in order."""
        return self._downloads

    @property
    def download_responses(self) -> int:
        """Document responses turned into downloads so far (each becomes one of `downloads` when Chrome
        reports it began)."""
        return self._download_responses

    @property
    def status(self) -> int | None:
        """The main document's HTTP status, if it came from the network."""
        return self._status

    @property
    def blocked(self) -> str | None:
        """Why the address policy refused the latest main-frame navigation since the action began, if it did."""
        return self._blocked

    @property
    def doc_gen(self) -> int:
        """Main-frame documents committed so far."""
        return self._doc_gen

    @property
    def same_doc(self) -> int:
        """History pushes and fragment changes in the main frame so far."""
        return self._same_doc

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def loading(self) -> bool:
        return bool(self._loading_frames)

    # methods, not properties: they change under an await, which type checkers would not expect
    def dialog_pending(self) -> bool:
        return self._dialog is not None

    def navigating(self) -> bool:
        return self.target_id in self._loading_frames

    @property
    def main_loading(self) -> bool:
        return self.target_id in self._loading_frames

    def has_frame(self, frame: str) -> bool:
        return frame in self._frames

    def connect_failure(self, url: str) -> Failure | None:
        """Why the address-policy proxy failed the latest connection for `url`, if it did lately."""
        return self._page.connect_failure(url)

    # --- what others change, through the tab ---------------------------------------------------------

    def start_action(self, ref: str | None = None) -> Marks:
        """Where the tab stands as an action on `ref` (or the page) begins; a refusal of an earlier action's
        navigation is forgotten."""
        self._blocked = None
        return self.marks(ref)

    def start_navigation(self) -> None:
        """Forget the last navigation's status and refusal: the caller is about to navigate."""
        self._blocked = None
        self._status = None

    def previous_lines(self) -> list[str] | None:
        """The last whole snapshot's lines, if it showed the document the tab shows now."""
        return self._last_lines if self._last_doc_gen == self._doc_gen else None

    def remember_lines(self, lines: list[str]) -> None:
        """Keep a whole snapshot of the current document, to tell what the next action changed."""
        self._last_lines, self._last_doc_gen = lines, self._doc_gen

    def take_console(self) -> tuple[list[ConsoleEntry], int]:
        """The console entries not read yet (newest last) and how many the ring dropped unread; read from now."""
        return self._console.take_new()

    def take_console_errors(self) -> int:
        """The errors the page logged since the last call: counted once, by the result that reports them."""
        return self._console.take_error_count()

    def unreported_downloads(self) -> list[DownloadRecord]:
        """The downloads no result has told in their final state yet (one may begin after the result of the
        action that started it went out: a link with `download`, a file a script made)."""
        return [d for d in self._downloads if not d.reported]

    def take_downloads(self) -> list[Download]:
        """The downloads for a result: those not told yet, each counted as told once it has ended."""
        told = self.unreported_downloads()
        for d in told:
            d.reported = d.final
        return [d.public() for d in told]

    def download_type(self, url: str) -> str | None:
        """The Content-Type of the download response for `url`, if the tab saw one."""
        return self._download_types.get(url)

    def mark_closed(self) -> None:
        """The tab is gone (closed by the agent, or its session ended): waits on it end."""
        self._closed = True
        self._network.tab_gone(self._name)
        self._pulse()

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self._page.call(method, params)

    async def call_in_order(self, commands: Sequence[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
        return await self._page.call_in_order(commands)

    # --- events --------------------------------------------------------------------------------

    def _pulse(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, condition: Callable[[], bool]) -> None:
        """Until `condition()` holds, re-checked on every event of the tab (no polling)."""
        while not condition():
            if self._closed or self._crashed:
                raise CDPClosed("the tab is gone")
            await self._changed.wait()

    async def setup(self) -> None:
        await self.call("Page.enable")
        # every document counts what the settle waits for; the one already there too (a pop-up's first)
        await self.call("Page.addScriptToEvaluateOnNewDocument", {"source": PENDING_JS, "runImmediately": True})
        await self.call("Network.enable", {"maxTotalBufferSize": 1 << 20, "maxResourceBufferSize": 1 << 18})
        await self.call("Fetch.enable", {"patterns": FETCH_PATTERNS})
        # console messages and uncaught exceptions (Runtime), the browser's own messages (Log); both send
        # what the page logged before they were enabled (a pop-up's first script) as events too
        await self.call("Runtime.enable")
        await self.call("Log.enable")
        await self.call("Emulation.setDeviceMetricsOverride", VIEWPORT)
        # headless pages without focus would not take keyboard input or fire focus events
        await self.call("Emulation.setFocusEmulationEnabled", {"enabled": True})
        tree = (await self.call("Page.getFrameTree"))["frameTree"]
        self._learn_frames(tree, None)

    def _learn_frames(self, node: dict[str, Any], parent: str | None) -> None:
        f = node["frame"]
        self._frames[f["id"]] = FrameInfo(parent, f.get("loaderId", ""), f.get("url", ""))
        if parent is None:
            self._url = f.get("url", self._url)
        for child in node.get("childFrames", []):
            self._learn_frames(child, f["id"])

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The tab's event pump, run in its session's nursery (not a request's): started once it hears the
        tab's events, it keeps the tab's state true to them until the tab or the browser goes."""
        # a page loading hundreds of resources at once sends thousands of events: room for them
        with self._page.subscribe(buffer=16_384) as sub:
            task_status.started()
            try:
                await self._pump(sub)
            except CDPClosed:
                pass
            finally:
                self.mark_closed()

    async def _pump(self, sub: Subscription) -> None:
        """Handle the tab's events until it closes; requests are answered in tasks of their own."""
        # the subscription's end (CDPClosed) leaves as itself, not wrapped in the nursery's ExceptionGroup,
        # so `run` ends quietly instead of taking the session's nursery down with it
        with single_error():
            async with trio.open_nursery() as nursery:
                while True:
                    event = await sub.receive()
                    self._event(event.get("method", ""), event.get("params", {}), nursery)
                    self._pulse()

    def _event(self, method: str, p: dict[str, Any], nursery: trio.Nursery) -> None:
        handler = _EVENT_HANDLERS.get(method)
        if handler is not None:
            handler(self, p, nursery)

    # --- one handler per CDP event (the table _EVENT_HANDLERS, below the class) ---------------------

    def _on_request_paused(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        nursery.start_soon(self._paused_safely, p)

    def _on_request_sent(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        self._network.on_request(self._name, p)
        if p["requestId"] not in self._inflight:
            self._request_seq += 1
            self._inflight[p["requestId"]] = self._request_seq

    def _on_request_ended(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        # a response that arrived is the end the settle waits for, not the body's last byte: a page may never
        # read a no-store body (a fetch it started and forgot), and Chrome then never finishes loading it
        self._inflight.pop(p["requestId"], None)

    def _on_response(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        self._network.on_response(self._name, p)
        self._on_request_ended(p, nursery)

    def _on_loading_finished(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        self._network.on_finished(self._name, p)
        self._on_request_ended(p, nursery)

    def _on_loading_failed(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        self._network.on_failed(self._name, p, self.connect_failure)
        self._on_request_ended(p, nursery)

    def _on_request_extra(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        self._network.on_request_extra(self._name, p)

    def _on_response_extra(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        self._network.on_response_extra(self._name, p)

    def _on_data(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        self._network.on_data(self._name, p)

    def _on_frame_navigated(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        f = p["frame"]
        parent = f.get("parentId")
        old = self._frames.get(f["id"])
        self._frames[f["id"]] = FrameInfo(parent, f["loaderId"], f["url"])
        if parent is None:
            self._url = f["url"] + f.get("urlFragment", "")  # frame.url leaves the fragment out
            if old is None or old.loader != f["loaderId"]:
                self._doc_gen += 1
                # requests of the old document will never report their end
                self._inflight.clear()

    def _on_frame_detached(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        self._frames.pop(p["frameId"], None)
        self._clocks.pop(p["frameId"], None)
        self._loading_frames.discard(p["frameId"])

    def _on_navigated_within_document(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        if p["frameId"] == self.target_id:
            self._url = p["url"]
            self._same_doc += 1

    def _on_frame_started_loading(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        self._loading_frames.add(p["frameId"])

    def _on_frame_stopped_loading(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        self._loading_frames.discard(p["frameId"])

    def _on_dialog_opening(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        dialog = {"type": p.get("type", "alert"), "message": p.get("message", "")}
        if p.get("type") == "prompt":
            dialog["default_prompt"] = p.get("defaultPrompt", "")
        self._dialogs.append(dialog)
        if dialog["type"] in ("alert", "beforeunload"):
            # nothing to decide: accepted at once and reported with the action's result
            nursery.start_soon(self._accept_dialog)
        else:
            self._dialog = dialog

    def _on_dialog_closed(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        self._dialog = None

    def _on_console_api(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        self._console.add(console.from_console_api(p))
        self._console_event(nursery)

    def _on_exception(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        self._console.add(console.from_exception(p))
        self._console_event(nursery)

    def _console_event(self, nursery: trio.Nursery) -> None:
        self._console_held += 1
        if self._console_held == CONSOLE_RELEASE_EVERY:
            nursery.start_soon(self._release_console)

    async def _release_console(self) -> None:
        """Let the renderer drop what it keeps for the console events we have read: each logged object's
        handle (the "console" object group) and its own store of messages with their arguments. Entries are
        made from the events' previews and text at once, so nothing is lost; without this a page that logs
        objects in a loop grows the renderer by everything it ever logged."""
        try:
            await self.call("Runtime.releaseObjectGroup", {"objectGroup": "console"})
            await self.call("Runtime.discardConsoleEntries")
        except (CDPError, CDPClosed):
            pass  # the page went away: so did what it held
        finally:
            self._console_held = 0

    def _on_log_entry(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        self._console.add(console.from_log_entry(p))

    def _on_download_begin(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        if self._saver is not None:  # else the context denies downloads and none begins
            self._downloads.append(self._saver.began(p, self.download_type(p.get("url", ""))))

    def _on_download_progress(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        if self._saver is not None:
            self._saver.progress(p, nursery)

    def _on_crashed(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        self._crashed = True

    def _on_detached(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        self._closed = True

    async def _accept_dialog(self) -> None:
        try:
            await self.call("Page.handleJavaScriptDialog", {"accept": True})
        except (CDPError, CDPClosed):
            pass

    async def _paused_safely(self, p: dict[str, Any]) -> None:
        try:
            await self._paused(p)
        except (CDPError, CDPClosed) as e:
            log.debug("request handling: %s", e)  # the page cancelled it meanwhile

    async def _paused(self, p: dict[str, Any]) -> None:
        rid = p["requestId"]
        url = p["request"]["url"]
        main = p.get("resourceType") == "Document" and p.get("frameId") == self.target_id
        if "responseStatusCode" in p or "responseErrorReason" in p:
            status = p.get("responseStatusCode")
            headers = {h["name"].lower(): h["value"] for h in p.get("responseHeaders") or []}
            disposition = headers.get("content-disposition", "")
            attachment = disposition.lower().startswith("attachment")
            if status is not None and status < 300 and (attachment or classify(headers.get("content-type")) == "other"):
                await self._download(p, url, headers.get("content-type", ""), attachment)
                return
            if main:
                self._status = status
            await self.call("Fetch.continueRequest", {"requestId": rid})
            return
        why = await self._gate.check(url)
        if why is not None:
            log.info("browse: blocked a %s request to %s: %s", p.get("resourceType"), url, why)
            if main:
                self._blocked = why
            self._network.on_blocked(self._name, p.get("networkId"), why)
            await self.call("Fetch.failRequest", {"requestId": rid, "errorReason": "BlockedByClient"})
            return
        await self.call("Fetch.continueRequest", {"requestId": rid})

    async def _download(self, p: dict[str, Any], url: str, ctype: str, attachment: bool) -> None:
        """A document response that is a download: Chrome's download manager saves it and the tab stays on
        its page. A type Chrome would show (an image, a PDF) is made an attachment, so it is saved too."""
        self._download_types[url] = ctype
        self._download_responses += 1
        self._pulse()
        if attachment:
            await self.call("Fetch.continueRequest", {"requestId": p["requestId"]})
            return
        headers = [h for h in p.get("responseHeaders") or [] if h["name"].lower() != "content-disposition"]
        await self.call("Fetch.continueResponse", {
            "requestId": p["requestId"], "responseCode": p["responseStatusCode"],
            "responseHeaders": headers + [{"name": "Content-Disposition", "value": "attachment"}]})

    # --- script in the page, without ever hanging on a dialog ------------------------------------

    async def unless_dialog(self, fn: Callable[[], Awaitable[Any]]) -> Any:
        """`fn()`, unless a confirm or prompt opens first: then None. (While one is open, script in the
        page and the mouse release never return.)"""
        if self._dialog is not None:
            return None
        result: list[Any] = []

        async def run(cancel: trio.CancelScope) -> None:
            result.append(await fn())
            cancel.cancel()

        with single_error():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run, nursery.cancel_scope)
                await self.wait_for(lambda: self._dialog is not None)
                nursery.cancel_scope.cancel()
        return result[0] if result else None

    async def in_world(self, frame: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A Runtime call in the frame's isolated world (`contextId` or `executionContextId` filled in);
        a world that vanished under us (the document was replaced a moment ago) is made again once."""
        if self._dialog is not None:
            raise self.dialog_open()
        for attempt in (1, 2):
            ctx = await self.world(frame)
            key = "contextId" if method == "Runtime.evaluate" else "executionContextId"
            try:
                reply = await self.unless_dialog(partial(self.call, method, params | {key: ctx}))
            except CDPError as e:
                if attempt == 2 or "context" not in e.message.lower():
                    raise
                self._worlds.pop(frame, None)
                continue
            if reply is None:
                raise self.dialog_open()
            return await self.check(reply)
        raise AssertionError("unreachable")

    async def world(self, frame: str) -> int:
        """The isolated world of `frame`'s current document, with the snapshot library installed."""
        info = self._frames.get(frame)
        if info is None:
            raise StaleRef("that frame is gone from the page; take a new snapshot")
        known = self._worlds.get(frame)
        if known is not None and known[0] == info.loader:
            return known[1]
        ctx = (await self.call("Page.createIsolatedWorld", {"frameId": frame, "worldName": WORLD_NAME,
                                                           "grantUniveralAccess": False}))["executionContextId"]
        await self.check(await self.call("Runtime.evaluate", {"expression": PAGE_JS, "contextId": ctx}))
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
        if self._dialog is not None:
            raise self.dialog_open()
        arguments = [{"value": a} for a in args] + [{"objectId": o} for o in objects]
        reply = await self.unless_dialog(lambda: self.call("Runtime.callFunctionOn", {
            "objectId": object_id, "functionDeclaration": script.source,
            "arguments": arguments, "returnByValue": True, "awaitPromise": True}))
        if reply is None:
            raise self.dialog_open()
        return (await self.check(reply))["result"].get("value")

    @staticmethod
    async def check(reply: dict[str, Any]) -> dict[str, Any]:
        """A Runtime call's reply, or the page's exception as an error."""
        if "exceptionDetails" in reply:
            d = reply["exceptionDetails"]
            what = d.get("exception", {}).get("description") or d.get("text")
            raise WebfetchError(f"script in the page failed: {what}")
        return reply

    def dialog_open(self) -> DialogOpen:
        d = self._dialog or {}
        return DialogOpen(f"a {d.get('type')} dialog is open on {self.name} ({d.get('message', '')!r}); answer it "
                          f"with the dialog action (accept true or false) before anything else on this tab")

    # --- refs -----------------------------------------------------------------------------------

    def ref_frame(self, ref: str) -> str:
        """The frame of a ref's document; unknown_ref or stale_ref."""
        info = self._refs.get(ref)
        if info is None:
            raise UnknownRef(f"{ref} was never given out on tab {self.name}; take a snapshot and use a ref from it")
        frame = self._frames.get(info.frame)
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
        frame = self.ref_frame(ref) if ref is not None else self.target_id
        opts = {"mode": mode, "ref": ref, "find": find, "next": 0, "budget": NODE_BUDGET, "both": both}
        inside: list[str] = []
        lines, full, truncated, title = await self._frame_lines(frame, 0, opts, inside)
        return Snapshot(lines, full if both else None, truncated, title, inside)

    async def _frame_lines(self, frame: str, base: int, opts: dict[str, Any],
                           inside: list[str]) -> tuple[list[str], list[str], bool, str]:
        """The frame's lines (both views) with its iframes' inlined; what changed inside its collapsed runs is
        added to `inside`."""
        loader = self._frames[frame].loader
        got = await self.evaluate(frame, invoke("__wf.snapshot", opts | {"next": self._next_ref}))
        if got and "clock" in got:
            self._learn_clock(frame, loader, got["clock"])
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
                    if child is None or child not in self._frames:
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
        info = self._frames.get(known or "")
        if known is not None and info is not None and info.parent == frame:
            return known
        get = {"expression": invoke("__wf.get", iframe_ref)}
        obj = (await self.in_world(frame, "Runtime.evaluate", get))["result"]
        if "objectId" not in obj:
            return None
        node = (await self.call("DOM.describeNode", {"objectId": obj["objectId"]}))["node"]
        frame_id = node.get("frameId")
        if not frame_id:
            return None
        self._iframes[iframe_ref] = str(frame_id)
        return str(frame_id)

    # --- waiting for what an action started --------------------------------------------------------

    def marks(self, ref: str | None = None) -> Marks:
        known = self._refs.get(ref or "")
        frame = known.frame if known is not None and known.frame in self._frames else self.target_id
        return Marks(self._doc_gen, self._same_doc, self._request_seq, len(self._dialogs), len(self._downloads),
                     self._download_responses, frame, time.monotonic())

    async def settle(self, since: Marks, nav_timeout_s: float, settle_s: float) -> list[str]:
        """Wait as a person would: a navigation the action started loads (at most `nav_timeout_s`), then the
        requests the action started end and the DOM is quiet (at most `settle_s`). Never a fixed sleep.
        An open confirm or prompt ends the wait at once. Returns notes for the result."""
        notes: list[str] = []
        with trio.move_on_after(nav_timeout_s) as nav:
            while True:
                if self.dialog_pending():
                    return notes
                if self.navigating():
                    await self.wait_for(lambda: not self.navigating() or self.dialog_pending())
                    continue
                busy = await self._until_quiet(since, settle_s)
                if self.navigating() or self.dialog_pending():
                    continue
                if busy:
                    notes.append(f"the page was still busy {settle_s:g} s after the action; the snapshot "
                                 f"is what it showed then (use wait for what you expect)")
                return notes
        if nav.cancelled_caught:
            try:
                await self.call("Page.stopLoading")
            except CDPError:
                pass
            notes.append(f"stopped waiting for the page to load after {nav_timeout_s:g} s")
        return notes

    async def _until_quiet(self, since: Marks, settle_s: float) -> bool:
        """Wait until the action's requests ended and the DOM is quiet, or a navigation or a dialog begins
        (the caller tells which). True when `settle_s` ran out first: the page was still busy."""
        def idle() -> bool:
            # no frame loading (a form posted in an iframe), none of the action's requests pending
            return not self.loading and not any(seq > since.request_seq for seq in self._inflight.values())

        deadline = trio.current_time() + settle_s
        with trio.move_on_at(deadline) as quiet:
            while True:
                await self.wait_for(lambda: self.dialog_pending() or self.navigating() or idle())
                if self.navigating() or self.dialog_pending():
                    break
                # the action's frame, while it lives (a form posted in an iframe replaced its document: the
                # new one counts from its start); else the page
                frame = since.frame if since.frame in self._frames else self.target_id
                loader = self._frames[frame].loader
                try:
                    offset = await self.page_clock(frame)
                    # the page stops on its own when the daemon would: no turn goes on after its wait ended
                    cap_ms = max(1, int((deadline - trio.current_time()) * 1000))
                    # what the page began since the action is its: requests, and a navigation (told once)
                    began = since.at * 1000 + offset - ACTION_CLOCK_SLACK_MS
                    state = await self.evaluate(frame, invoke("__wf.quiet", cap_ms, began, began))
                except (CDPError, WebfetchError):
                    state = None  # the document went away under us: a navigation, handled by the caller
                if state == "leaving":
                    # the page began to navigate away; Chrome's report of it may still be on its way
                    with trio.move_on_after(NAVIGATION_NEWS_S):
                        await self.wait_for(partial(self._left, frame, loader))
                    continue
                if idle():  # else the quiet time let a request or a frame's load begin: wait for it
                    break
        return quiet.cancelled_caught

    async def page_clock(self, frame: str) -> float:
        """What to add to time.monotonic() * 1000 for the frame's document's performance.now(): both are
        the system's monotonic clock, from different origins. Learned from the document's latest answer
        that told its time (every snapshot does), or asked now; since the answer left the page a moment
        before it arrived, the mapping is a little early, never late."""
        loader = self._frames[frame].loader
        known = self._clocks.get(frame)
        if known is None or known[0] != loader:
            self._learn_clock(frame, loader, await self.evaluate(frame, invoke("__wf.clock")))
        return self._clocks[frame][2]

    def _learn_clock(self, frame: str, loader: str, clock: Sequence[float]) -> None:
        """Learn from the page's [performance.now(), performance.timeOrigin], just received."""
        page_now, origin = float(clock[0]), float(clock[1])
        offset = page_now - time.monotonic() * 1000
        known = self._clocks.get(frame)
        if known is not None and known[1] == origin:  # the same document
            offset = max(offset, known[2])  # each answer bounds it from below: the highest is the tightest
        self._clocks[frame] = (loader, origin, offset)

    def _left(self, frame: str, loader: str) -> bool:
        """Chrome told of the navigation `frame`'s document `loader` began (or of its end already), or a
        dialog opened."""
        now = self._frames.get(frame)
        return self.loading or now is None or now.loader != loader or self.dialog_pending()

    async def title(self) -> str:
        return await self._page.title()


# CDP event name -> the BrowseTab method that keeps the tab's state true to it; other events are ignored.
_EVENT_HANDLERS: dict[str, Callable[[BrowseTab, dict[str, Any], trio.Nursery], None]] = {
    "Fetch.requestPaused": BrowseTab._on_request_paused,
    "Network.requestWillBeSent": BrowseTab._on_request_sent,
    "Network.responseReceived": BrowseTab._on_response,
    "Network.loadingFinished": BrowseTab._on_loading_finished,
    "Network.loadingFailed": BrowseTab._on_loading_failed,
    "Network.requestWillBeSentExtraInfo": BrowseTab._on_request_extra,
    "Network.responseReceivedExtraInfo": BrowseTab._on_response_extra,
    "Network.dataReceived": BrowseTab._on_data,
    "Page.frameNavigated": BrowseTab._on_frame_navigated,
    "Page.frameDetached": BrowseTab._on_frame_detached,
    "Page.navigatedWithinDocument": BrowseTab._on_navigated_within_document,
    "Page.frameStartedLoading": BrowseTab._on_frame_started_loading,
    "Page.frameStoppedLoading": BrowseTab._on_frame_stopped_loading,
    "Page.javascriptDialogOpening": BrowseTab._on_dialog_opening,
    "Page.javascriptDialogClosed": BrowseTab._on_dialog_closed,
    "Runtime.consoleAPICalled": BrowseTab._on_console_api,
    "Runtime.exceptionThrown": BrowseTab._on_exception,
    "Log.entryAdded": BrowseTab._on_log_entry,
    # Chrome reports a download to the page that started it (the Browser domain's twins never came)
    "Page.downloadWillBegin": BrowseTab._on_download_begin,
    "Page.downloadProgress": BrowseTab._on_download_progress,
    **{name: BrowseTab._on_crashed for name in CRASH_EVENTS},
    "Inspector.detached": BrowseTab._on_detached,
}


def now_ms(start: float) -> int:
    return int((time.monotonic() - start) * 1000)
