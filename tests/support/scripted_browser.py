"""A scripted browser for the render state machine's fast tests (layer 1, mock clock): a tab whose CDP
calls are answered the way Chrome answers them, for pages the test describes, with events pushed through
the same subscription the renderer reads. Real Chromium runs the same paths in test_fetch_chrome.py;
this one makes a change to render.py cost a second instead of minutes, and can make Chrome do what it
rarely does on cue (a renderer crash, a DOMContentLoaded that never fires)."""

from __future__ import annotations

import base64
import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

import trio

from webfetch.cdp import CDPClosed

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
    """The Tab handle render.py uses, answered by a script instead of Chrome."""

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
