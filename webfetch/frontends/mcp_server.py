"""`webfetch mcp`: the daemon's tools for every MCP client (Claude Code, Codex, Cursor, VS Code: README),
an MCP server over stdio that forwards each tool call to the daemon over its socket.

It is a thin front door, a process of its own per MCP client: the daemon (one Chrome, one cache) stays
shared by every agent on the machine, and is started here when none listens, as the CLI starts it. The
official SDK (`mcp`) speaks the protocol; it is written on anyio, and runs here on anyio's trio backend
(the SDK's own `python -m mcp.server` runs on trio too), so this module uses the same trio vocabulary as
the daemon and needs no asyncio.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp_types as types
import trio
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from .. import __version__
from ..config import load_config_and_source, log_path_for
from ..errors import ConfigError
from ..protocol import decode_frame
from ..trust.socket_trust import UntrustedSocket, open_stream
from . import arguments, contract
from .client import ClientError, start_daemon
from .skew import reconcile
from .tool_text import batch_text, browse_text, fetch_text, search_text

log = logging.getLogger("webfetch.mcp")

INSTRUCTIONS = (
    "webfetch reads the web for you: web_fetch loads a page in a real browser (JavaScript-rendered pages "
    "work), extracts its main content as markdown and caches it for 15 minutes. When web_fetch takes a "
    "`prompt`, pass one to get the answer from the page instead of the whole page.")

# How long the exit waits for the daemon to close the browse session: the SDK's stdio client gives a
# server 2 s after closing its stdin before it sends SIGTERM. The daemon forgets the session as soon as it
# reads the request, so a slow answer costs nothing.
CLOSE_TIMEOUT_S = 1.5


class DaemonFailed(Exception):
    """The daemon answered with an `error` frame: its wire code and message."""

    def __init__(self, frame: dict[str, Any]) -> None:
        self.code = str(frame.get("code") or "internal")
        self.message = str(frame.get("message") or "")
        self.frame = frame
        super().__init__(f"{self.code}: {self.message}")


class DaemonUnreachable(Exception):
    """No daemon could be started or reached, or it went away mid-request."""


Progress = Callable[[dict[str, Any]], Awaitable[None]]


class DaemonLink:
    """Requests to the daemon, one connection each (as the pi extension does): closing it is the surest
    cancel, and a slow request never holds up another."""

    def __init__(self, path: Path, config: str | None, *, in_daemon: bool = False) -> None:
        """`in_daemon`: the link of MCP over HTTP, served by the daemon it talks to (mcp_http.py): it never
        starts a daemon and never restarts one for another config (that would be itself)."""
        self.path = path
        self.config = config
        self.in_daemon = in_daemon
        self._starting = trio.Lock()  # two tool calls at once start one daemon, not two
        self._reconciled = in_daemon

    async def reconcile_once(self) -> str | None:
        """Before this process's first request: a daemon that runs another config or version is restarted
        when it was started in the background and is idle, else named (skew.py); the line that says which."""
        async with self._starting:
            if self._reconciled:
                return None
            self._reconciled = True
            try:
                source = load_config_and_source(self.config)[1]
            except ConfigError:
                return None  # McpFrontDoor answers every call with the error
            note = await trio.to_thread.run_sync(reconcile, self.path, source, abandon_on_cancel=True)
        if note is not None:
            log.warning("%s", note)
        return note

    async def _connect(self, start: bool) -> trio.SocketStream:
        """A connection to the user's own daemon (socket_trust.open_stream: nothing is sent to a socket in
        a directory or served by a process of another user), started first when none listens and `start`."""
        try:
            return await open_stream(self.path)
        except UntrustedSocket as e:
            raise DaemonUnreachable(str(e)) from None
        except (FileNotFoundError, ConnectionRefusedError) as e:
            if not start:
                raise DaemonUnreachable(f"no webfetch daemon listens on {self.path}: {e}") from None
        except OSError as e:
            raise DaemonUnreachable(f"cannot reach the webfetch daemon at {self.path}: {e}") from None
        async with self._starting:
            try:  # another call may have started it while we waited for the lock
                return await open_stream(self.path)
            except (FileNotFoundError, ConnectionRefusedError):
                pass
            except (UntrustedSocket, OSError) as e:
                raise DaemonUnreachable(str(e)) from None
            log.info("no daemon listens on %s; starting one", self.path)
            try:
                await trio.to_thread.run_sync(start_daemon, self.path, self.config, abandon_on_cancel=True)
                return await open_stream(self.path)
            except (ClientError, UntrustedSocket, OSError) as e:
                raise DaemonUnreachable(str(e)) from None

    async def request(self, body: dict[str, Any], progress: Progress | None = None, *, start: bool = True,
                      pages: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """Send one request and return its `result` frame; `progress` frames go to `progress`, a batch's
        `page` frames into `pages`. An `error` frame raises DaemonFailed. Cancelled, it sends the protocol's
        `cancel` and closes the connection, so the daemon closes the request's tab and kills its sub-agent at
        once. `start=False`: no daemon is started for it (DaemonUnreachable when none listens)."""
        stream = await self._connect(start and not self.in_daemon)
        rid = 1
        try:
            await stream.send_all(json.dumps({"id": rid, **body}).encode() + b"\n")
            buf = bytearray()
            while True:
                data = await stream.receive_some(1 << 16)
                if not data:
                    raise DaemonUnreachable("the webfetch daemon closed the connection before answering; its log "
                                            f"may say why ({log_path_for(self.path)}, or `webfetch logs`)")
                buf += data
                *lines, rest = buf.split(b"\n")
                buf = bytearray(rest)
                for line in lines:
                    frame = decode_frame(bytes(line))
                    if frame.get("id") != rid:
                        continue
                    if frame.get("type") == "progress":
                        if progress is not None:
                            await progress(frame)
                    elif frame.get("type") == "page":
                        if pages is not None:
                            pages.append(frame)
                    elif frame.get("type") == "error":
                        raise DaemonFailed(frame)
                    else:
                        return frame
        except trio.Cancelled:
            with trio.move_on_after(1, shield=True):
                await stream.send_all(json.dumps({"id": "cancel", "op": "cancel", "target": rid}).encode() + b"\n")
            raise
        except (trio.BrokenResourceError, OSError) as e:
            raise DaemonUnreachable(f"lost the connection to the webfetch daemon: {e}") from None
        finally:
            with trio.CancelScope(shield=True):
                await stream.aclose()


# ---- tools -----------------------------------------------------------------------------------------


def text_result(text: str, frame: dict[str, Any]) -> types.CallToolResult:
    """A result frame as tool content: the text, and an image when the frame carries one (a base64 PNG,
    as the browse op's screenshot does)."""
    content: list[types.ContentBlock] = [types.TextContent(text=text)]
    if isinstance(frame.get("image"), str):
        content.append(types.ImageContent(data=frame["image"], mime_type="image/png"))
    return types.CallToolResult(content=content)


def error_result(code: str, message: str, **extra: Any) -> types.CallToolResult:
    """An MCP tool error (isError): the model reads the daemon's code and message and can act on them."""
    return types.CallToolResult(content=[types.TextContent(text=f"{code}: {message}")],
                                structured_content={"code": code, "message": message, **extra}, is_error=True)


ToolCall = Callable[[DaemonLink, dict[str, Any], Progress], Awaitable[types.CallToolResult]]


@dataclass(frozen=True)
class ToolSpec:
    """One tool: what the client lists, and how a call becomes a daemon request. `needs`, when set, is
    the daemon status field that must be non-empty (or true) for the tool to be listed; `without_subagent`
    is the tool as listed when the daemon's status says it has no sub-agent to answer prompts."""

    tool: types.Tool
    call: ToolCall
    needs: str | None = None
    without_subagent: types.Tool | None = None

    def listed(self, status: dict[str, Any] | None) -> types.Tool | None:
        """The tool as the daemon with this status serves it; None when it cannot (status None: unknown,
        so every tool as written)."""
        if status is None:
            return self.tool
        if self.needs is not None and not status.get(self.needs):
            return None
        if self.without_subagent is not None and (status.get("subagent") or {}).get("available") is False:
            return self.without_subagent
        return self.tool


NEEDS_URL = "web_fetch needs `url` (one page) or `urls` (several, up to 50): absolute http(s) URLs"


async def call_fetch(link: DaemonLink, args: dict[str, Any], progress: Progress) -> types.CallToolResult:
    if args.get("url") is None and args.get("urls") is None:  # the schema cannot say "one of the two" to every client
        return error_result("bad_request", NEEDS_URL)
    body: dict[str, Any] = {"op": "fetch"}
    for key in ("url", "urls", "prompt", "schema", "offset", "find", "profile", "browser", "hidden"):
        if args.get(key) is not None:
            body[key] = args[key]
    for key in ("raw", "fresh"):
        if args.get(key):
            body[key] = True
    pages: list[dict[str, Any]] = []
    frame = await link.request(body, progress, pages=pages)  # no model: the daemon's subagent.model decides
    prompted = args.get("prompt") is not None or args.get("schema") is not None
    if frame.get("kind") == "batch":
        return text_result(batch_text(pages, frame, prompted=prompted), frame)
    return text_result(fetch_text(frame, prompted=prompted).text, frame)


async def call_search(link: DaemonLink, args: dict[str, Any], progress: Progress) -> types.CallToolResult:
    body: dict[str, Any] = {"op": "search", "query": args.get("query")}
    if args.get("limit") is not None:
        body["limit"] = args["limit"]
    frame = await link.request(body, progress)
    return text_result(search_text(frame), frame)


# What a model may set in a browse request: the schema's properties (the session and the id are ours).
BROWSER_FIELDS = frozenset(contract.BROWSER.input_schema["properties"])


class BrowseSession:
    """This MCP client's browse session in the daemon. A `webfetch mcp` process serves one MCP client, so
    the process has one session, named `mcp-<pid>-<random>`: it clashes neither with pi's (`pi-…`) nor the
    CLI's (`cli`), nor with another MCP client's (another pid; the random part keeps a reused pid off a
    session a killed process left behind). The daemon makes the session on its first action; after the
    model's `close`, the next action starts a fresh one (new cookies, tab t1) under the same name."""

    def __init__(self, cwd: Callable[[], str | None] = os.getcwd) -> None:
        self.name = f"mcp-{os.getpid()}-{secrets.token_hex(4)}"
        self.opened = False  # an action since the last close may have made it in the daemon
        # the directory uploads start from and may read under: the one the MCP client started us in (its
        # project); none over HTTP, where this runs in the daemon, whose own directory is no client's
        self.cwd = cwd

    async def call(self, link: DaemonLink, args: dict[str, Any], progress: Progress) -> types.CallToolResult:
        # a model's null means "not given", so the daemon's defaults apply; the session (and the request's
        # id) are never the model's
        body = {key: value for key, value in args.items() if value is not None and key in BROWSER_FIELDS}
        body |= {"op": "browse", "session": self.name, "action": args.get("action")}
        # the directory the MCP client started us in (its project): an upload's relative paths start there,
        # and uploads may read only under it (and the user's browse.upload_roots)
        cwd = self.cwd()
        if cwd is not None:
            body["cwd"] = cwd
        closing = body["action"] == "close"
        if not closing:
            self.opened = True  # before the request: even an action that fails or is cancelled makes the session
        frame = await link.request(body, progress)
        if closing:
            self.opened = False
        return text_result(browse_text(frame), frame)

    async def aclose(self, link: DaemonLink) -> None:
        """Close the session when the MCP client goes, so its browser context does not wait out
        `browse.idle_s` in the daemon. Never starts a daemon for it; never raises."""
        if not self.opened:
            return
        self.opened = False
        with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_TIMEOUT_S):
            try:
                await link.request({"op": "browse", "session": self.name, "action": "close"}, start=False)
            except (DaemonFailed, DaemonUnreachable) as e:
                log.warning("could not close the browse session %s: %s", self.name, e)


BROWSE_SESSION = BrowseSession()


def mcp_tool(c: contract.ToolContract | None) -> types.Tool:
    """The contract's tool as MCP lists it; the annotations' title is the tool's."""
    assert c is not None
    return types.Tool(name=c.name, title=c.title, description=c.description, input_schema=c.input_schema,
                      annotations=types.ToolAnnotations.model_validate({"title": c.title, **c.annotations}))


TOOLS: list[ToolSpec] = [
    # Without a sub-agent a prompt cannot be answered: the tool is listed without one, rather than
    # steering the model to a parameter that brings back the whole page anyway.
    ToolSpec(mcp_tool(contract.FETCH), call_fetch, without_subagent=mcp_tool(contract.FETCH.without_subagent)),
    # Listed only when the daemon has a search backend: a tool that can only fail costs the model a turn
    # and every request the tokens of its description, and the client's own search stays the one used.
    ToolSpec(mcp_tool(contract.SEARCH), call_search, needs="search"),
    # Named as in pi (where it becomes webfetch_browser only when another extension holds agent_browser;
    # MCP clients prefix every tool with its server's name, so nothing here can take it). Listed only when
    # the daemon serves the browse op (browse.enabled), for the same reason as web_search.
    ToolSpec(mcp_tool(contract.BROWSER), BROWSE_SESSION.call, needs="browse_enabled"),
]


class McpFrontDoor:
    """The MCP handlers: list the tools the daemon can serve, forward calls, report progress."""

    def __init__(self, link: DaemonLink, tools: list[ToolSpec] | None = None, config_error: str | None = None
                 ) -> None:
        self.link = link
        self.tools = {spec.tool.name: spec for spec in (tools or TOOLS)}
        # The config could not be read: the server still serves, so that every call can tell the model
        # (and through it the user) why; a server that exits shows only "Connection closed" in the client.
        self.config_error = config_error

    async def _listed(self) -> list[types.Tool]:
        status: dict[str, Any] | None = None
        if self.config_error is None:
            try:  # starts the daemon when none listens: its Chrome is then warm for the first fetch
                status = await self.link.request({"op": "status"})
            except (DaemonFailed, DaemonUnreachable) as e:
                log.warning("cannot ask the daemon which tools it can serve: %s", e)
        return [tool for spec in self.tools.values() if (tool := spec.listed(status)) is not None]

    async def list_tools(self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
                         ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=await self._listed())

    async def call_tool(self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
                        ) -> types.CallToolResult:
        if self.config_error is not None:
            return error_result("config_error", self.config_error)
        spec = self.tools.get(params.name)
        if spec is None:  # named with the tools the model was given, not those the daemon cannot serve
            names = [tool.name for tool in await self._listed()]
            return error_result("bad_request", f"no tool named {params.name!r}; this server has "
                                f"{', '.join(names)}")
        args = params.arguments or {}
        try:
            arguments.check(spec.tool.name, spec.tool.input_schema, args)
        except arguments.BadArguments as e:
            return error_result("bad_request", str(e))
        sent = 0

        async def progress(frame: dict[str, Any]) -> None:
            # MCP wants a number that grows; the daemon's frames count up. A no-op without a progressToken.
            nonlocal sent
            sent += 1
            await ctx.session.report_progress(sent, None, str(frame.get("message") or frame.get("stage") or ""))

        note = await self.link.reconcile_once()
        try:
            result = await spec.call(self.link, args, progress)
            if note is not None:  # once: the model can tell its user why the daemon changed, or what to run
                result.content.append(types.TextContent(type="text", text=f"webfetch: {note}"))
            return result
        except DaemonFailed as e:
            extra = {k: v for k, v in e.frame.items() if k not in ("type", "id", "code", "message")}
            return error_result(e.code, e.message, **extra)
        except DaemonUnreachable as e:
            return error_result("daemon_unreachable", str(e))


def build_server(link: DaemonLink, config_error: str | None = None) -> Server[Any]:
    door = McpFrontDoor(link, config_error=config_error)
    return Server("webfetch", version=__version__, title="webfetch", instructions=INSTRUCTIONS,
                  on_list_tools=door.list_tools, on_call_tool=door.call_tool)


async def serve_stdio(path: Path, config: str | None, config_error: str | None = None) -> None:
    """Serve MCP on stdin/stdout until the client closes stdin, then close the browse session. While
    serving, the SDK points fd 1 at stderr, so nothing but the protocol reaches stdout."""
    link = DaemonLink(path, config)
    server = build_server(link, config_error)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_close_on_signal, link)
        try:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
        finally:
            await BROWSE_SESSION.aclose(link)
        nursery.cancel_scope.cancel()


async def _close_on_signal(link: DaemonLink) -> None:
    """SIGTERM or SIGHUP (a client that kills its server rather than closing stdin, or once its grace after
    closing it ran out): close the browse session, then die of the signal as before. Cancelling the server
    instead would wait for its stdin reader, a thread that only a line or EOF ends."""
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
        async for signum in signals:
            await BROWSE_SESSION.aclose(link)
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)


def main(path: Path, config: str | None, log_level: str = "warning", config_error: str | None = None) -> int:
    """Serve until stdin ends. `config_error`: the config could not be read; every call answers with it."""
    import anyio

    from .logs import log_to_stderr

    log_to_stderr(log_level)
    if config_error is not None:
        log.error("%s", config_error)
    try:
        anyio.run(serve_stdio, path, config, config_error, backend="trio")
    except KeyboardInterrupt:
        pass
    return 0
