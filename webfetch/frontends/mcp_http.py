"""MCP over streamable HTTP at `/mcp` on the daemon's local web page (issue 37), for MCP clients that cannot
start `webfetch mcp` (a devcontainer, an MCP gateway): the same tools, listed and called as `webfetch mcp`
does (mcp_server.py's `McpFrontDoor` and `TOOLS`), served by the MCP SDK's `StreamableHTTPSessionManager`,
which runs on anyio and so on the daemon's trio.

It is a frontend, so the daemon cannot import it: the CLI's `serve` hands `mount(...)` to the daemon, whose
view enters it while its front door is open (view/server.py's `Mounted`). A tool call goes to the daemon
over its own socket, as from `webfetch mcp`: the same requests, cancellation by closing the connection, and
the request shows on the dashboard like any other. The view's door has checked the bearer token, the Host
and the Origin before a request reaches the SDK (view/door.py); the SDK's own DNS-rebinding check is off.

Each MCP session (one client's connection) gets its own browse session, as each `webfetch mcp` process has
one; it closes with `close`, or when idle for `browse.idle_s`.

A request's body is read whole by the SDK before it is parsed, so `BoundedBody` reads it first, up to
`server.max_line_bytes` (what the socket takes as one request, which a tool call becomes): past that it is
a 413 that says so, and no more of it is read.
"""

from __future__ import annotations

import contextvars
import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import __version__
from ..view.door import MCP_PATH
from ..view.server import Mounted
from ..view.viewed import Viewed
from . import contract
from .mcp_server import INSTRUCTIONS, TOOLS, BrowseSession, DaemonLink, McpFrontDoor, Progress

# The MCP session of the tool call running in this task (the SDK runs each request in a task of its own).
CLIENT: contextvars.ContextVar[object] = contextvars.ContextVar("webfetch_mcp_http_client")


class BrowseSessions:
    """The browser tool over HTTP: one browse session per MCP session (forgotten with it)."""

    def __init__(self) -> None:
        self.by_client: WeakKeyDictionary[object, BrowseSession] = WeakKeyDictionary()

    async def call(self, link: DaemonLink, args: dict[str, Any], progress: Progress) -> types.CallToolResult:
        client = CLIENT.get()
        session = self.by_client.get(client)
        if session is None:
            # no working directory: this runs in the daemon, whose own is no client's project; uploads read
            # only under browse.upload_roots
            session = self.by_client[client] = BrowseSession(cwd=lambda: None)
        return await session.call(link, args, progress)


class HttpFrontDoor(McpFrontDoor):
    """`webfetch mcp`'s handlers, with the MCP session each call comes from known to the browser tool."""

    async def call_tool(self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
                        ) -> types.CallToolResult:
        token = CLIENT.set(ctx.session)
        try:
            return await super().call_tool(ctx, params)
        finally:
            CLIENT.reset(token)


class BoundedBody:
    """`app` given a request's body only when it is at most `limit` bytes (a declared Content-Length is
    checked before anything is read); a longer one is answered 413."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"0")
        if not declared.isdigit() or int(declared) > self.limit:
            await self._too_large(send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away mid-body
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._too_large(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body: Message | None = {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        async def replay() -> Message:
            nonlocal body
            if body is not None:
                message, body = body, None
                return message
            return await receive()  # after the body: the disconnect

        await self.app(scope, replay, send)

    async def _too_large(self, send: Send) -> None:
        text = (f"request body larger than {self.limit} bytes (server.max_line_bytes, what one request may "
                "be): send a smaller tool call\n").encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(text)).encode()), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": text})


def build_server(link: DaemonLink) -> Server[Any]:
    sessions = BrowseSessions()
    tools = [dataclasses.replace(spec, call=sessions.call) if spec.tool.name == contract.BROWSER.name else spec
             for spec in TOOLS]
    door = HttpFrontDoor(link, tools)
    return Server("webfetch", version=__version__, title="webfetch", instructions=INSTRUCTIONS,
                  on_list_tools=door.list_tools, on_call_tool=door.call_tool)


def mount(socket: Path, config: str | None) -> Mounted:
    """MCP at `/mcp` for a daemon serving on `socket` (with the config file `config`), for View's mounts."""

    @asynccontextmanager
    async def mounted(daemon: Viewed) -> AsyncIterator[list[BaseRoute]]:
        # The view's door is the security check; stateful sessions, so that a client's browse session is
        # its own across calls.
        manager = StreamableHTTPSessionManager(app=build_server(DaemonLink(socket, config, in_daemon=True)))
        async with manager.run():
            endpoint = BoundedBody(StreamableHTTPASGIApp(manager), daemon.config.server.max_line_bytes)
            yield [Route(MCP_PATH, endpoint=endpoint)]

    return mounted
