"""`webfetch mcp`: the daemon's tools for every MCP client (Claude Code, Codex CLI, Cursor, Zed, Goose, VS Code),
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
import sys
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
from ..config import log_path_for
from ..protocol import decode_frame
from .client import ClientError, start_daemon
from .tool_text import browse_text, fetch_text, search_text

log = logging.getLogger("webfetch.mcp")

INSTRUCTIONS = (
    "webfetch reads the web for you: web_fetch loads a page in a real browser (JavaScript-rendered pages "
    "work), extracts its main content as markdown and caches it for 15 minutes. Pass a `prompt` to get the "
    "answer from the page instead of the whole page.")

FETCH_DESCRIPTION = " ".join([
    "Fetch a web page (rendered in headless Chrome, main content extracted as markdown) and, best of all,",
    "have it read for you: pass a `prompt` that says what to extract or answer (\"which auth methods does",
    "this API support?\", \"the install steps for Debian\"). With a prompt you get a focused answer from the",
    "page instead of the whole page in your context; this is the most effective way to use this tool.",
    "Without a prompt it returns the page's markdown, or for a large page a map of its sections: use that",
    "only when you really need the whole page. Pages are cached for 15 minutes, so asking again with",
    "another prompt does not load the page again. Redirects to another host are reported, not followed:",
    "call web_fetch again with the new URL if you want it. `offset` (with or without `raw: true`) pages",
    "through the raw markdown: each result says where the next page starts.",
])

FETCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "url": {"type": "string", "description": "Absolute http(s) URL of the page"},
        "prompt": {"type": "string",
                   "description": "What to extract from the page or the question to answer from it (recommended)"},
        "offset": {"type": "integer", "minimum": 0, "description":
                   "Read the raw markdown from this character on (from a previous result's next offset)"},
        "raw": {"type": "boolean", "description": "Return the raw markdown even for a large page, never a summary"},
    },
    "required": ["url"],
    "additionalProperties": False,
}

SEARCH_DESCRIPTION = " ".join([
    "Search the web (the webfetch daemon's search backend: Kagi, Brave or SearXNG) and get a ranked list of",
    "results: title, URL, date and a snippet each, plus related searches. Pass a result's URL to web_fetch,",
    "with a prompt, to read it. `limit` is the number of results (default 10, at most 20).",
])

SEARCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "What to search for, as you would type it into a search engine"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 20,
                  "description": "How many results (default 10, at most 20)"},
    },
    "required": ["query"],
    "additionalProperties": False,
}

# The pi extension's browser tool, word for word (BROWSER_DESCRIPTION, BROWSER_PARAMETERS in
# pi_extension/index.ts): one tool, one wording, whichever client the model sits in.
BROWSER_ACTIONS = ["open", "snapshot", "click", "fill", "type", "press", "select", "check", "hover", "scroll",
                   "wait", "dialog", "tabs", "read", "screenshot", "nav", "close"]

BROWSER_DESCRIPTION = " ".join([
    "Drive a real browser tab (headless Chrome in the webfetch daemon) to test or use a web app: log in, fill",
    "forms, click through, read what the app shows. The loop: `open` a URL -> read the snapshot (one line per",
    "control: `- button \"Save\" [ref=e12]`) -> act on a control by its ref (`click`, `fill`, `select`, `check`,",
    "`press`) -> each result tells what changed (a diff, or a new snapshot after a navigation) -> `read` for the",
    "page's text as markdown, `screenshot` to see it. Refs are stable while the page stays; after a navigation",
    "the old ones fail with stale_ref: use the refs of the newest snapshot. A confirm/prompt dialog blocks the",
    "tab until `dialog` (accept true/false). `wait` for text that appears later (single-page apps);",
    "`snapshot` with `find` reaches rows a long list collapsed. Downloads are refused (use web_fetch).",
])

BROWSER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": BROWSER_ACTIONS, "description": "What to do"},
        "url": {"type": "string", "description": "open: the http(s) URL; wait: a glob the tab's URL must match"},
        "ref": {"type": "string", "description": "The element's ref from the snapshot, e.g. e12"},
        "text": {"type": "string", "description": "fill/type: the text; wait: text to wait for"},
        "submit": {"type": "boolean", "description": "fill: press Enter afterwards"},
        "key": {"type": "string", "description": "press: Enter, Tab, Escape, ArrowDown, Control+a…"},
        "values": {"type": "array", "items": {"type": "string"}, "description": "select: option labels or values"},
        "checked": {"type": "boolean", "description": "check: true to check, false to uncheck"},
        "accept": {"type": "boolean", "description": "dialog: accept (OK) or dismiss (Cancel)"},
        "prompt_text": {"type": "string", "description": "dialog: the answer to a prompt"},
        "to": {"type": "string", "enum": ["back", "forward", "reload"], "description": "nav: where to"},
        "mode": {"type": "string", "enum": ["interactive", "full"],
                 "description": "snapshot: controls only (default) or every line"},
        "find": {"type": "string", "description": "snapshot: only lines containing this text"},
        "offset": {"type": "integer", "minimum": 0, "description": "snapshot/read: continue from this character"},
        "text_gone": {"type": "string", "description": "wait: until this text is gone"},
        "ms": {"type": "integer", "minimum": 0, "maximum": 30000, "description": "wait: a fixed pause"},
        "timeout_s": {"type": "number", "minimum": 1, "maximum": 30,
                      "description": "wait: at most this long (default 10)"},
        "direction": {"type": "string", "enum": ["up", "down"], "description": "scroll without a ref"},
        "new_tab": {"type": "boolean", "description": "open: in a new tab"},
        "tab": {"type": "string", "description": "tabs select/close: the tab (t1, t2…)"},
        "do": {"type": "string", "enum": ["list", "select", "close"], "description": "tabs: what to do"},
        "full_page": {"type": "boolean", "description": "screenshot: the whole page, not just the viewport"},
    },
    "required": ["action"],
    "additionalProperties": False,
}

# They read the web and change nothing, here or there; the web is an open world.
WEB_READER = dict(read_only_hint=True, destructive_hint=False, open_world_hint=True)
# The browser acts: a click can submit, buy or delete, and doing it twice is not doing it once.
WEB_ACTOR = dict(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True)

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

    def __init__(self, path: Path, config: str | None) -> None:
        self.path = path
        self.config = config
        self._starting = trio.Lock()  # two tool calls at once start one daemon, not two

    async def _connect(self, start: bool) -> trio.SocketStream:
        try:
            return await trio.open_unix_socket(str(self.path))
        except (FileNotFoundError, ConnectionRefusedError) as e:
            if not start:
                raise DaemonUnreachable(f"no webfetch daemon listens on {self.path}: {e}") from None
        except OSError as e:
            raise DaemonUnreachable(f"cannot reach the webfetch daemon at {self.path}: {e}") from None
        async with self._starting:
            try:  # another call may have started it while we waited for the lock
                return await trio.open_unix_socket(str(self.path))
            except (FileNotFoundError, ConnectionRefusedError):
                pass
            log.info("no daemon listens on %s; starting one", self.path)
            try:
                await trio.to_thread.run_sync(start_daemon, self.path, self.config, abandon_on_cancel=True)
                return await trio.open_unix_socket(str(self.path))
            except (ClientError, OSError) as e:
                raise DaemonUnreachable(str(e)) from None

    async def request(self, body: dict[str, Any], progress: Progress | None = None, *, start: bool = True
                      ) -> dict[str, Any]:
        """Send one request and return its `result` frame; `progress` frames go to `progress`. An `error`
        frame raises DaemonFailed. Cancelled, it sends the protocol's `cancel` and closes the connection,
        so the daemon closes the request's tab and kills its sub-agent at once. `start=False`: no daemon
        is started for it (DaemonUnreachable when none listens)."""
        stream = await self._connect(start)
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
    the daemon status field that must be non-empty (or true) for the tool to be listed."""

    tool: types.Tool
    call: ToolCall
    needs: str | None = None


async def call_fetch(link: DaemonLink, args: dict[str, Any], progress: Progress) -> types.CallToolResult:
    body: dict[str, Any] = {"op": "fetch", "url": args.get("url")}
    for key in ("prompt", "offset"):
        if args.get(key) is not None:
            body[key] = args[key]
    if args.get("raw"):
        body["raw"] = True
    frame = await link.request(body, progress)  # no model: the daemon's subagent.model decides
    return text_result(fetch_text(frame).text, frame)


async def call_search(link: DaemonLink, args: dict[str, Any], progress: Progress) -> types.CallToolResult:
    body: dict[str, Any] = {"op": "search", "query": args.get("query")}
    if args.get("limit") is not None:
        body["limit"] = args["limit"]
    frame = await link.request(body, progress)
    return text_result(search_text(frame), frame)


class BrowseSession:
    """This MCP client's browse session in the daemon. A `webfetch mcp` process serves one MCP client, so
    the process has one session, named `mcp-<pid>-<random>`: it clashes neither with pi's (`pi-…`) nor the
    CLI's (`cli`), nor with another MCP client's (another pid; the random part keeps a reused pid off a
    session a killed process left behind). The daemon makes the session on its first action; after the
    model's `close`, the next action starts a fresh one (new cookies, tab t1) under the same name."""

    def __init__(self) -> None:
        self.name = f"mcp-{os.getpid()}-{secrets.token_hex(4)}"
        self.opened = False  # an action since the last close may have made it in the daemon

    async def call(self, link: DaemonLink, args: dict[str, Any], progress: Progress) -> types.CallToolResult:
        # a model's null means "not given", so the daemon's defaults apply; the session (and the request's
        # id) are never the model's
        body = {key: value for key, value in args.items() if value is not None and key in BROWSER_SCHEMA["properties"]}
        body |= {"op": "browse", "session": self.name, "action": args.get("action")}
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


TOOLS: list[ToolSpec] = [
    ToolSpec(types.Tool(name="web_fetch", title="Web fetch", description=FETCH_DESCRIPTION, input_schema=FETCH_SCHEMA,
                        annotations=types.ToolAnnotations(title="Web fetch", idempotent_hint=True, **WEB_READER)),
             call_fetch),
    # Listed only when the daemon has a search backend: a tool that can only fail costs the model a turn
    # and every request the tokens of its description, and the client's own search stays the one used.
    ToolSpec(types.Tool(name="web_search", title="Web search", description=SEARCH_DESCRIPTION,
                        input_schema=SEARCH_SCHEMA,
                        annotations=types.ToolAnnotations(title="Web search", **WEB_READER)),
             call_search, needs="search"),
    # Named as in pi (where it becomes webfetch_browser only when another extension holds agent_browser;
    # MCP clients prefix every tool with its server's name, so nothing here can take it). Listed only when
    # the daemon serves the browse op (browse.enabled), for the same reason as web_search.
    ToolSpec(types.Tool(name="agent_browser", title="Browser", description=BROWSER_DESCRIPTION,
                        input_schema=BROWSER_SCHEMA,
                        annotations=types.ToolAnnotations(title="Browser", **WEB_ACTOR)),
             BROWSE_SESSION.call, needs="browse_enabled"),
]


class McpFrontDoor:
    """The MCP handlers: list the tools the daemon can serve, forward calls, report progress."""

    def __init__(self, link: DaemonLink, tools: list[ToolSpec] | None = None) -> None:
        self.link = link
        self.tools = {spec.tool.name: spec for spec in (tools or TOOLS)}

    async def list_tools(self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
                         ) -> types.ListToolsResult:
        status: dict[str, Any] | None = None
        if any(spec.needs for spec in self.tools.values()):
            try:  # starts the daemon when none listens: its Chrome is then warm for the first fetch
                status = await self.link.request({"op": "status"})
            except (DaemonFailed, DaemonUnreachable) as e:
                log.warning("cannot ask the daemon which tools it can serve: %s", e)
        listed = [spec.tool for spec in self.tools.values()
                  if spec.needs is None or status is None or status.get(spec.needs)]
        return types.ListToolsResult(tools=listed)

    async def call_tool(self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
                        ) -> types.CallToolResult:
        spec = self.tools.get(params.name)
        if spec is None:
            return error_result("bad_request", f"no tool named {params.name!r}; this server has "
                                f"{', '.join(self.tools)}")
        sent = 0

        async def progress(frame: dict[str, Any]) -> None:
            # MCP wants a number that grows; the daemon's frames count up. A no-op without a progressToken.
            nonlocal sent
            sent += 1
            await ctx.session.report_progress(sent, None, str(frame.get("message") or frame.get("stage") or ""))

        try:
            return await spec.call(self.link, params.arguments or {}, progress)
        except DaemonFailed as e:
            extra = {k: v for k, v in e.frame.items() if k not in ("type", "id", "code", "message")}
            return error_result(e.code, e.message, **extra)
        except DaemonUnreachable as e:
            return error_result("daemon_unreachable", str(e))


def build_server(link: DaemonLink) -> Server[Any]:
    door = McpFrontDoor(link)
    return Server("webfetch", version=__version__, title="webfetch", instructions=INSTRUCTIONS,
                  on_list_tools=door.list_tools, on_call_tool=door.call_tool)


async def serve_stdio(path: Path, config: str | None) -> None:
    """Serve MCP on stdin/stdout until the client closes stdin, then close the browse session. While
    serving, the SDK points fd 1 at stderr, so nothing but the protocol reaches stdout."""
    link = DaemonLink(path, config)
    server = build_server(link)
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


def main(path: Path, config: str | None, log_level: str = "warning") -> int:
    import anyio

    logging.basicConfig(level=log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        anyio.run(serve_stdio, path, config, backend="trio")
    except KeyboardInterrupt:
        pass
    return 0
