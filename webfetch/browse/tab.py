"""One tab of a browse session: its state and the event pump that keeps it true to the page's CDP events
(the address policy on every request, then the session's routes and headers in forced.py; dialogs,
documents, requests in flight, console messages, downloads). The tab owns its parts: its isolated worlds
and refs (`Worlds`, worlds.py), the page's clock (`PageClock`, settle.py, whose `settle` is the wait after
an action), its console (`TabConsole`) and its downloads (`TabDownloads`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import trio

from .. import redact
from .._trio import single_error
from ..chrome.browser import CRASH_EVENTS, PageTarget
from ..chrome.cdp import CDPClosed, CDPError, Subscription
from ..errors import DialogOpen
from ..mime import classify
from ..proxy import Failure
from ..urls import GATE_FETCH_PATTERN, HostGate
from . import console
from .downloads import Downloads, TabDownloads, as_download
from .forced import Forced
from .network import NetworkLog
from .settle import Marks, PageClock
from .snapshot import PENDING_JS
from .worlds import Worlds

log = logging.getLogger("webfetch.browse")

VIEWPORT = {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False}
# main-frame documents whose context is remembered, to know one back from the back/forward cache (Chrome
# keeps 6 by default)
DOCUMENTS = 32
# Every request is paused once for the host gate (urls.py); documents again at the response stage, where
# a download (an attachment, a type that is not a page) is handed to Chrome's download manager, which saves
# it in the session's directory (downloads.py).
FETCH_PATTERNS = [GATE_FETCH_PATTERN, {"urlPattern": "*", "resourceType": "Document", "requestStage": "Response"}]


@dataclass
class FrameInfo:
    parent: str | None
    loader: str
    url: str


def _nothing() -> None:
    pass


@dataclass
class TabHooks:
    """Who else hears of a tab's events: the session's watch (watch.py) is told of each one, so a person's
    view of the console and the requests follows the page, and is sent the screencast's frames while it runs
    on this tab."""

    on_change: Callable[[], None] = _nothing
    on_frame: Callable[[BrowseTab, dict[str, Any], trio.Nursery], None] | None = None


class Restores:
    """The main frame's documents by their default context's uniqueId, to know one back from the back/forward
    cache early: a new document's context comes after its Page.frameNavigated, but Chrome makes a restored
    one's contexts again (the same uniqueId) before its frameNavigated, and what its pageshow logs comes in
    between. So the restore is the tab's new document from there, and that frameNavigated (the same loader)
    is no other."""

    def __init__(self) -> None:
        self._documents: dict[str, tuple[str, str]] = {}   # uniqueId -> (loader, URL), newest last

    def restored(self, p: dict[str, Any], main_frame: str, now: FrameInfo | None, url: str) -> tuple[str, str] | None:
        """(loader, URL) of the document whose context Runtime.executionContextCreated `p` makes again, when
        the main frame (`now`, at `url`) is not at it yet; a new document's context is remembered."""
        context = p.get("context") or {}
        aux = context.get("auxData") or {}
        if aux.get("frameId") != main_frame or not aux.get("isDefault") or now is None:
            return None
        unique = str(context.get("uniqueId", ""))
        known = self._documents.get(unique)
        if known is None:
            self._documents[unique] = (now.loader, url)
            if len(self._documents) > DOCUMENTS:
                del self._documents[next(iter(self._documents))]
            return None
        return known if known[0] != now.loader else None


class BrowseTab:
    """One page of a session. Its state is its own: the event pump (`run`) keeps it true to the page, the
    other modules read it through the properties below and change it only through its methods."""

    def __init__(self, name: str, page: PageTarget, gate: HostGate, network: NetworkLog | None = None,
                 downloads: Downloads | None = None, forced: Forced | None = None) -> None:
        self._name = name               # t1, t2, …
        self._page = page
        self._gate = gate               # the session's: the address policy for every request of the page
        self._network = network or NetworkLog(enabled=False)  # the session's: every request of its tabs
        self._url = "about:blank"
        self._frames: dict[str, FrameInfo] = {}
        self._doc_gen = 0               # main-frame documents committed
        self._same_doc = 0              # history pushes and fragment changes in the main frame
        self._restores = Restores()     # to know a document back from the back/forward cache
        self._loading_frames: set[str] = set()  # frames whose document is loading
        self._request_seq = 0
        self._inflight: dict[str, int] = {}     # Network requestId -> its sequence number
        self._dialog: dict[str, str] | None = None           # an open confirm or prompt
        self._dialogs: list[dict[str, str]] = []             # every dialog seen, in order
        self._status: int | None = None     # the main document's HTTP status
        self._blocked: str | None = None    # why the address policy refused the last main-frame navigation
        self._crashed = False
        self._closed = False
        self._changed = trio.Event()
        self.worlds = Worlds(self)          # script in its frames' isolated worlds, refs, snapshots
        self.console = console.TabConsole(self.call)    # what the page logged
        self.downloads = TabDownloads(downloads)        # what the page downloaded, saved by the session
        self.clock = PageClock(self)        # the daemon's clock mapped to each document's
        self.forced = forced or Forced(self._network)   # the session's routes and emulation
        self.hooks = TabHooks()             # the session's watch (watch.py): told of every event, sent frames

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
    def request_seq(self) -> int:
        """Requests the page began so far."""
        return self._request_seq

    @property
    def frames(self) -> Mapping[str, FrameInfo]:
        """The frames of the page by id: each one's parent, document (loader) and URL."""
        return self._frames

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

    def has_frame(self, frame: str) -> bool:
        return frame in self._frames

    def in_flight_since(self, request_seq: int) -> bool:
        """Whether a request the page began after its `request_seq`th is still waiting for its response."""
        return any(seq > request_seq for seq in self._inflight.values())

    def connect_failure(self, url: str) -> Failure | None:
        """Why the address-policy proxy failed the latest connection for `url`, if it did lately."""
        return self._page.connect_failure(url)

    # --- what others change, through the tab ---------------------------------------------------------

    def start_action(self, ref: str | None = None) -> Marks:
        """Where the tab stands as an action on `ref` (or the page) begins; a refusal of an earlier action's
        navigation is forgotten."""
        self._blocked = None
        return Marks.of(self, ref)

    def refuse(self, why: str) -> None:
        """The main frame shows a document the gate refuses (`held_to_the_list`): the action fails so."""
        self._blocked = why

    def start_navigation(self) -> None:
        """Forget the last navigation's status and refusal: the caller is about to navigate."""
        self._blocked = None
        self._status = None

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
        self.hooks.on_change()

    async def wait_for(self, condition: Callable[[], bool]) -> None:
        """Until `condition()` holds, re-checked on every event of the tab (no polling)."""
        while not condition():
            if self._closed or self._crashed:
                raise CDPClosed("the tab is gone")
            await self._changed.wait()

    async def intercept(self) -> None:
        """Every request of the page meets `_paused` from now on: first of all, as a page held at its start
        (one the agent's tab opened in the person's browser) answers nothing else before it runs on."""
        await self.call("Fetch.enable", {"patterns": FETCH_PATTERNS})

    async def setup(self) -> None:
        """The rest, once `intercept` is in place (and a held page runs on)."""
        await self.call("Page.enable")
        # the frames first: what Runtime.enable reports (a pop-up's first messages, its contexts) is theirs
        tree = (await self.call("Page.getFrameTree"))["frameTree"]
        self._learn_frames(tree, None)
        self.console.navigated(self._doc_gen, self._url)   # the document there already (a pop-up's page)
        # every document counts what the settle waits for; the one already there too (a pop-up's first)
        await self.call("Page.addScriptToEvaluateOnNewDocument", {"source": PENDING_JS, "runImmediately": True})
        await self.call("Network.enable", {"maxTotalBufferSize": 1 << 20, "maxResourceBufferSize": 1 << 18})
        # console messages and uncaught exceptions (Runtime), the browser's own messages (Log); both send
        # what the page logged before they were enabled (a pop-up's first script) as events too
        await self.call("Runtime.enable")
        await self.call("Log.enable")
        await self.call("Emulation.setDeviceMetricsOverride", VIEWPORT)
        # headless pages without focus would not take keyboard input or fire focus events
        await self.call("Emulation.setFocusEmulationEnabled", {"enabled": True})

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
                self._new_document(p.get("type") == "BackForwardCacheRestore")
                if self._gate.in_persons_browser and f["url"].startswith(("http://", "https://")):
                    nursery.start_soon(held_to_the_list, self, self._gate, f["url"])

    def _new_document(self, restored: bool) -> None:
        """The main frame is at another document (at `self._url`)."""
        self._doc_gen += 1
        # requests of the old document will never report their end
        self._inflight.clear()
        self.console.navigated(self._doc_gen, self._url, restored)

    def _on_context_created(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        back = self._restores.restored(p, self.target_id, self._frames.get(self.target_id), self._url)
        if back is not None:
            self._frames[self.target_id] = FrameInfo(None, *back)
            self._url = back[1]
            self._new_document(restored=True)

    def _on_frame_detached(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        self._frames.pop(p["frameId"], None)
        self.clock.forget(p["frameId"])
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
        self.console.add_held(console.from_console_api(p), console.console_key(p), nursery)

    def _on_exception(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        self.console.add_held(console.from_exception(p), console.exception_key(p), nursery)

    def _on_log_entry(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        self.console.add(console.from_log_entry(p), console.log_key(p))

    def _on_download_begin(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        self.downloads.began(p)

    def _on_download_progress(self, p: dict[str, Any], nursery: trio.Nursery) -> None:
        self.downloads.progress(p, nursery)

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
                # a download: Chrome's download manager saves it and the tab stays on its page
                self.downloads.handed_over(url, headers.get("content-type", ""))
                self._pulse()
                await self.call(*as_download(p, attachment))
                return
            if main:
                self._status = status
            await self.call("Fetch.continueRequest", {"requestId": rid})
            return
        why = await self._gate.check(url, navigation=main)
        if why is not None:
            log.info("browse: blocked a %s request to %s: %s", p.get("resourceType"), url, why)
            if main:
                self._blocked = why
            self._network.on_blocked(self._name, p.get("networkId"), why)
            await self.call("Fetch.failRequest", {"requestId": rid, "errorReason": "BlockedByClient"})
            return
        routed = await self.forced.answer(self._name, p, self.call)  # the session's routes, else the network
        if main and routed is not None:
            self._status = routed

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

    def dialog_open(self) -> DialogOpen:
        d = self._dialog or {}
        return DialogOpen(f"a {d.get('type')} dialog is open on {self.name} ({d.get('message', '')!r}); answer it "
                          f"with the `dialog` action (`accept` true or false) before anything else on this tab")

    async def title(self) -> str:
        return await self._page.title()


def _on_screencast_frame(tab: BrowseTab, p: dict[str, Any], nursery: trio.Nursery) -> None:
    if tab.hooks.on_frame is not None:
        tab.hooks.on_frame(tab, p, nursery)
    else:  # the screencast is stopping: acked all the same, or Chrome would keep it waiting
        nursery.start_soon(_ack_frame, tab, p.get("sessionId"))


async def _ack_frame(tab: BrowseTab, screencast_session: Any) -> None:
    try:
        await tab.call("Page.screencastFrameAck", {"sessionId": screencast_session})
    except (CDPError, CDPClosed):
        pass


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
    "Runtime.executionContextCreated": BrowseTab._on_context_created,  # a back/forward cache restore (Restores)
    "Runtime.consoleAPICalled": BrowseTab._on_console_api,
    "Runtime.exceptionThrown": BrowseTab._on_exception,
    "Log.entryAdded": BrowseTab._on_log_entry,
    # Chrome reports a download to the page that started it (the Browser domain's twins never came)
    "Page.downloadWillBegin": BrowseTab._on_download_begin,
    "Page.downloadProgress": BrowseTab._on_download_progress,
    # the live view's frames (watch.py), sent only while a person watches or the session records
    "Page.screencastFrame": _on_screencast_frame,
    **{name: BrowseTab._on_crashed for name in CRASH_EVENTS},
    "Inspector.detached": BrowseTab._on_detached,
}


def now_ms(start: float) -> int:
    return int((time.monotonic() - start) * 1000)


async def held_to_the_list(tab: BrowseTab, gate: HostGate, url: str) -> None:
    """A document committed in the person's browser, judged again by the gate: Chrome's own preloading
    (speculation rules' prefetch and prerender, to a host of the same site) loads a page without a request
    the tab's interception sees, and a navigation there then shows it. One the gate refuses is left at once
    for a blank page, and the action that brought it fails `blocked_url`: the agent never reads it."""
    why = await gate.check(url, navigation=True)
    if why is None:
        return
    log.warning("browse: your browser showed %s without a request the gate saw (preloaded): left it: %s",
                redact.url(url), why)
    tab.refuse(why)
    with suppress(CDPError, CDPClosed):
        await tab.call("Page.navigate", {"url": "about:blank"})
