"""The view's front door, an actor in the daemon's nursery: an HTTP server on loopback serving the pages
behind `door.Door`: on this install's own address (address.py, 127.A.B.C: no other server's cookies are
the page's, nor its cookie theirs), or where the system has no such address, on 127.0.0.1 and [::1] on the
same port.

Why hypercorn and Starlette: the daemon runs on trio, and hypercorn has a trio worker (`worker_serve`, the
one `hypercorn.trio.serve` calls: handed our own sockets, so we choose the addresses and learn the port
picked for `view.port = 0`); Starlette routes HTTP and websockets on anyio, which runs on trio, and is what
the MCP SDK's streamable-HTTP transport is written for. Nothing here needs asyncio.

Off unless `view.enabled` or the `view` op (`webfetch view`) turns it on; a reload with `enabled = false`
closes it.

How to add a page: write `webfetch/view/NAME.py` with

    def routes(daemon: Viewed) -> list[BaseRoute]: ...

(Starlette `Route`s and `WebSocketRoute`s; `Viewed` is what a page may read of the daemon) and add
`NAME.routes` to `PAGES` below. Every route is behind the door (token, Host, Origin) with nothing more to
do. A live feed (a websocket the page keeps open) counts itself in `daemon.view.watchers` while open, so an
on-demand daemon does not exit under a watcher, and must keep reading its websocket: hypercorn drops what is
sent to a closed one silently, so only a receive learns that the page went (dashboard.py's `live`).

A part that owns tasks for as long as the door is open (MCP's session manager) is a `Mounted`: an async
context manager that yields its routes, handed to `View` by whoever starts the daemon.
"""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from pathlib import Path
from typing import cast

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.config import Sockets
from hypercorn.trio.run import worker_serve
from hypercorn.typing import ASGIFramework
from hypercorn.utils import wrap_app
from starlette.applications import Starlette
from starlette.routing import BaseRoute

from ..config import Config
from . import dashboard, session_page
from .address import FALLBACK, own_address
from .door import Door, Passes, Token
from .viewed import Viewed

log = logging.getLogger("webfetch.view")

PageRoutes = Callable[[Viewed], list[BaseRoute]]
Mounted = Callable[[Viewed], AbstractAsyncContextManager[list[BaseRoute]]]

# The pages, each a module's `routes(daemon)`; their routes are concatenated in this order (a later
# module's route for a path already taken is never reached).
PAGES: tuple[PageRoutes, ...] = (
    dashboard.routes,
    session_page.routes,
)

LISTEN_BACKLOG = 64
# What hypercorn takes in before any page sees it (its defaults allow a 16 MiB websocket message). A page's
# message is at most session_page.MESSAGE_CHARS (4096) characters, 4 bytes each at most in UTF-8; the head
# of a request holds the Host and the cookies of every server on loopback (not scoped by port), so 16 KiB.
WEBSOCKET_MESSAGE_BYTES = 4 * session_page.MESSAGE_CHARS
HEAD_BYTES = 16 * 1024


def bind_loopback(port: int, host: str = FALLBACK) -> list[socket.socket]:
    """Listening sockets on `host`:`port` (0: a free port), a loopback address. On 127.0.0.1 (`host` itself,
    or when `host` is not an address this system has), [::1] on the same port too when the host has IPv6
    loopback; never another address. OSError when the address cannot be bound (the port taken)."""
    try:
        v4 = _listen(host, port)
    except OSError as e:
        if host == FALLBACK or e.errno != errno.EADDRNOTAVAIL:
            raise
        log.info("view: %s is no address here (only 127.0.0.1 is loopback on this system): on 127.0.0.1", host)
        host, v4 = FALLBACK, _listen(FALLBACK, port)
    sockets = [v4]
    chosen = v4.getsockname()[1]
    if host == FALLBACK and socket.has_ipv6:
        v6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        try:
            v6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            v6.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            v6.bind(("::1", chosen))
            v6.listen(LISTEN_BACKLOG)
            sockets.append(v6)
        except OSError as e:  # no IPv6 loopback here, or the port is another's on ::1: IPv4 alone
            v6.close()
            if e.errno not in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT, errno.EADDRINUSE):
                log.warning("view: not listening on [::1]:%d: %s", chosen, e)
    return sockets


def _listen(host: str, port: int) -> socket.socket:
    v4 = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        v4.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        v4.bind((host, port))
        v4.listen(LISTEN_BACKLOG)
    except OSError:
        v4.close()
        raise
    return v4


def address(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"[{host}]:{port}" if sock.family == socket.AF_INET6 else f"{host}:{port}"


class View:
    """The front door. `open()` starts it (if it is not open) and says where it is; `run` is its actor task,
    `reconfigure` follows `view.enabled` on reload."""

    def __init__(self, daemon: Viewed, mounts: Sequence[Mounted] = ()) -> None:
        self.daemon = daemon
        self.mounts = tuple(mounts)
        self.port: int | None = None          # while open
        self.host = FALLBACK                  # the IPv4 address it listens on (address.py)
        self.addresses: list[str] = []
        self.token: Token | None = None       # /mcp's bearer, kept across restarts
        self.passes = Passes()                # the page's cookie and URL keys: this daemon's life only
        self.watchers = 0                     # live feeds open now (viewed.Watched)
        self._runtime_dir: Path | None = None
        self._nursery: trio.Nursery | None = None
        self._scope: trio.CancelScope | None = None
        self._lock = trio.Lock()

    @property
    def base(self) -> str | None:
        """The page's address, no key: what status shows; None while the door is closed."""
        return None if self.port is None else f"http://{self.host}:{self.port}/"

    def new_url(self) -> str | None:
        """The page's address with a new one-time key (door.Passes); None while the door is closed."""
        return None if self.base is None else f"{self.base}?token={self.passes.issue()}"

    async def run(self, runtime_dir: Path, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        """The actor: holds the door's task while it is open. `runtime_dir` (the socket's directory, 0700)
        keeps the token."""
        self._runtime_dir = runtime_dir
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            if self.daemon.config.view.enabled:
                try:
                    await self.open()
                except OSError as e:
                    log.error("view: cannot listen on loopback port %d: %s; the daemon serves on without it",
                              self.daemon.config.view.port, e)
            await trio.sleep_forever()

    async def open(self) -> bool:
        """Open the door if it is closed; whether this call opened it. OSError when it cannot listen."""
        async with self._lock:
            if self.port is not None:
                return False
            assert self._nursery is not None and self._runtime_dir is not None, "View.run has not started"
            if self.token is None:
                self.token = Token(self._runtime_dir)
            await self._nursery.start(self._serve)
            return True

    def reconfigure(self, config: Config) -> None:
        """`view.enabled = false` on reload closes the door; `true` opens it (a new `view.port` waits for a
        restart, config.RESTART_KEYS)."""
        if not config.view.enabled and self._scope is not None:
            self._scope.cancel()
        elif config.view.enabled and self.port is None and self._nursery is not None:
            self._nursery.start_soon(self._open_quietly)

    async def _open_quietly(self) -> None:
        try:
            await self.open()
        except OSError as e:
            log.error("view: cannot listen: %s", e)

    async def _serve(self, *, task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
        assert self.token is not None
        wanted = await trio.to_thread.run_sync(own_address)  # a file in the state directory
        sockets = bind_loopback(self.daemon.config.view.port, wanted)
        host, port = sockets[0].getsockname()[:2]
        try:
            with trio.CancelScope() as scope:
                self._scope = scope
                async with AsyncExitStack() as stack:
                    routes = [route for page in PAGES for route in page(self.daemon)]
                    for mount in self.mounts:
                        routes += await stack.enter_async_context(mount(self.daemon))
                    app = Door(Starlette(routes=routes), self.token, self.passes, port)
                    self.host, self.port, self.addresses = host, port, [address(s) for s in sockets]
                    log.info("view: listening on %s", ", ".join(self.addresses))
                    # Starlette's ASGI types are looser than hypercorn's, the same protocol
                    try:
                        await worker_serve(wrap_app(cast(ASGIFramework, app), 0, "asgi"), _hypercorn_config(),
                                           sockets=Sockets([], sockets, []), task_status=task_status)
                    except Exception:  # a bug of the page must not end the daemon, whose nursery this is
                        log.exception("view: the front door failed and is closed; the daemon serves on "
                                      "(`webfetch view` opens it again)")
        finally:
            self.port, self.addresses, self._scope = None, [], None
            for s in sockets:
                s.close()
            log.info("view: closed")


def _hypercorn_config() -> HypercornConfig:
    config = HypercornConfig()
    config.accesslog = None  # a request's query may hold the token (the first one does): never logged
    config.errorlog = log
    config.include_server_header = False
    config.graceful_timeout = 1.0
    config.websocket_max_message_size = WEBSOCKET_MESSAGE_BYTES  # past it: closed with 1009
    config.h11_max_incomplete_size = HEAD_BYTES
    config.h2_max_header_list_size = HEAD_BYTES
    config.h2_max_concurrent_streams = 16
    return config
