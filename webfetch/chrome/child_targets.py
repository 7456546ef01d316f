"""The frames of a page that run in a process of their own (out-of-process iframes: another site's frame, with
site isolation), held to a gate like the page itself.

A page's Fetch interception pauses the requests its own process makes, its dedicated workers' (Chrome hands
a worker's requests to its frame's interception: a worker has no Fetch domain of its own), and the document
request of each of its frames; but an out-of-process frame's images, scripts and fetch() calls are made by
another process, which the page's Fetch never sees. In the person's own browser each of those carries the
person's cookies, so `hold_children` has the browser attach every child paused at its start
(Target.setAutoAttach with waitForDebuggerOnStart, on the page and on each child in turn): a frame gets a
Fetch of its own whose every request meets `check` (refused: failed as BlockedByClient) and only then runs;
a worker runs at once (its requests meet its frame's Fetch); any other kind of child is never let run."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any

import trio

from .._trio import single_error
from ..urls import GATE_FETCH_PATTERN
from .browser import PageTarget
from .cdp import CDPClosed, CDPError

log = logging.getLogger("webfetch.browse")

# children attach paused, flat (their own sessions on the one connection)
AUTO_ATTACH = {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True}

Check = Callable[[str], Awaitable[str | None]]   # a URL -> why it is refused, or None


async def hold_children(page: PageTarget, check: Check, *,
                        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """Hold `page`'s out-of-process frames and workers to `check` until the page goes (or the task is
    cancelled: the session ends). Started once the page attaches its children paused."""
    with suppress(CDPClosed), single_error():  # the connection's end, as itself: the task just ends
        async with trio.open_nursery() as nursery:
            await _Children(page, check, nursery).hold(page.session_id, task_status)


class _Children:
    """One page's children, each held on its own session for as long as it is attached."""

    def __init__(self, page: PageTarget, check: Check, nursery: trio.Nursery) -> None:
        self.page, self.check, self.nursery = page, check, nursery
        self.scopes: dict[str, trio.CancelScope] = {}   # a child's session -> its task's scope

    async def hold(self, session: str, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The events of one target's session (the page's, or a child's): its children attach paused and are
        held in turn; a child's own requests meet `check`."""
        conn, child = self.page.browser.conn, session != self.page.session_id
        with conn.subscribe(session, buffer=4096) as sub:
            if child:  # its requests are paused before it runs
                await conn.call("Fetch.enable", {"patterns": [GATE_FETCH_PATTERN]}, session)
            await conn.call("Target.setAutoAttach", AUTO_ATTACH, session)
            if child:
                await conn.call("Runtime.runIfWaitingForDebugger", None, session)
            task_status.started()
            while True:
                event = await sub.receive()
                method, p = event.get("method"), event.get("params", {})
                if method == "Target.attachedToTarget":
                    self.nursery.start_soon(self._child, str(p["sessionId"]), p.get("targetInfo") or {})
                elif method == "Target.detachedFromTarget":
                    self.scopes.pop(str(p.get("sessionId")), trio.CancelScope()).cancel()
                elif method == "Fetch.requestPaused" and child:
                    self.nursery.start_soon(_paused, self.page, session, p, self.check)
                elif method == "Inspector.detached":
                    return

    async def _child(self, session: str, info: dict[str, Any]) -> None:
        kind = info.get("type")
        with trio.CancelScope() as scope, suppress(CDPClosed):
            self.scopes[session] = scope
            try:
                if kind == "iframe":
                    await self.hold(session)
                elif kind == "worker":  # its requests meet its frame's Fetch
                    await self.page.browser.conn.call("Runtime.runIfWaitingForDebugger", None, session)
                else:
                    log.info("browse: a %s of a tab in your browser is not run: its requests would not meet "
                             "user_browser.hosts", kind)
            except CDPError as e:  # a frame whose requests cannot be paused stays paused, sending nothing
                log.info("browse: a %s of a tab in your browser is not run: %s", kind, e)
            finally:
                self.scopes.pop(session, None)


async def _paused(page: PageTarget, session: str, p: dict[str, Any], check: Check) -> None:
    url = p["request"]["url"]
    with suppress(CDPError, CDPClosed):  # the request was cancelled meanwhile
        why = await check(url)
        if why is not None:
            log.info("browse: blocked a %s request of a frame or worker to %s: %s", p.get("resourceType"), url, why)
            await page.browser.conn.call("Fetch.failRequest", {"requestId": p["requestId"],
                                                               "errorReason": "BlockedByClient"}, session)
            return
        await page.browser.conn.call("Fetch.continueRequest", {"requestId": p["requestId"]}, session)
