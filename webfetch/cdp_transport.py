"""The two ways CDP messages travel between webfetch and a browser, behind one interface (`Transport`):

- `PipeTransport`: the Chrome webfetch launches, over the two pipes of `--remote-debugging-pipe` (Chrome
  reads commands from its fd 3 and writes replies and events to its fd 4, each message a JSON text ended by
  a NUL byte). Nothing listens on a port, so only the daemon's process can drive that browser: a DevTools
  port on loopback would let any local user or process read every profile's cookies and open file:// pages.
- `WebSocketTransport`: a browser someone else runs (`browser.endpoint`, a user's own browser to import
  from), at its DevTools websocket URL.

Both end the same way, `TransportClosed` with the reason, on EOF, a dropped socket or a message larger than
MAX_MESSAGE_BYTES; cdp.py turns that into CDPClosed for every caller."""

from __future__ import annotations

import math
from typing import Protocol

import trio
import trio_websocket

MAX_MESSAGE_BYTES = 512 * 1024 * 1024  # a DOM or a response body comes back as one message
CLOSE_HANDSHAKE_S = 2.0  # for the browser's reply to our close frame, when its reader still runs
READ_CHUNK = 64 * 1024  # what a Linux pipe holds: a read never returns more


class TransportClosed(Exception):
    """The way to the browser is gone; the message says why (EOF, a dropped socket, a message too large)."""


class Transport(Protocol):
    async def send(self, message: bytes) -> None:
        """One whole message (UTF-8 JSON) on its way; TransportClosed when the browser is gone. The caller
        sends one message at a time and never cancels a send half-way (cdp.py shields it)."""

    async def receive(self) -> bytes | bytearray | str:
        """The next whole message; TransportClosed when there will be none."""

    async def aclose(self) -> None:
        """Release the connection (idempotent); a receive waiting on it ends with TransportClosed."""


class PipeTransport:
    """CDP over `--remote-debugging-pipe`: `to_browser` is the write end of the pipe Chrome reads as its
    fd 3, `from_browser` the read end of the one it writes as its fd 4. Reads come in chunks of at most
    READ_CHUNK and a message is cut at its NUL; the buffer never holds more than `max_message` bytes of one
    message (a larger one ends the transport, as the websocket's size limit does: a reply lost would leave
    its caller waiting)."""

    def __init__(self, to_browser: trio.abc.SendStream, from_browser: trio.abc.ReceiveStream,
                 max_message: int = MAX_MESSAGE_BYTES) -> None:
        self._out = to_browser
        self._in = from_browser
        self._max = max_message
        self._buf = bytearray()
        self._scanned = 0  # bytes of _buf already searched for a NUL: a long message is not searched again
        self._send_lock = trio.StrictFIFOLock()  # two tasks writing at once would interleave their bytes

    async def send(self, message: bytes) -> None:
        async with self._send_lock:
            try:
                await self._out.send_all(message + b"\0")
            except (trio.BrokenResourceError, trio.ClosedResourceError) as e:
                raise TransportClosed(f"the browser's DevTools pipe is closed ({e or 'broken pipe'})") from None

    async def receive(self) -> bytearray:
        read = False
        while (end := self._buf.find(b"\0", self._scanned)) < 0:
            self._scanned = len(self._buf)
            if self._scanned > self._max:
                await self.aclose()
                raise TransportClosed(f"the browser sent a message over {self._max} bytes")
            try:
                chunk = await self._in.receive_some(READ_CHUNK)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                chunk = b""
            if not chunk:
                raise TransportClosed("the browser closed its DevTools pipe (it exited)")
            self._buf += chunk
            read = True
        if end > self._max:
            await self.aclose()
            raise TransportClosed(f"the browser sent a message over {self._max} bytes")
        message = self._buf[:end]  # the one copy (the JSON decoder takes a bytearray as it is)
        del self._buf[:end + 1]  # bytearray drops a prefix without moving the rest
        self._scanned = 0
        if not read:
            # One read can hold dozens of messages. Yield before each, as the websocket does: the reader
            # would otherwise route them all at once, ahead of the tasks that take them in order (a browse
            # action woken by one event acted on the tab's frames before the tab had applied the next, a
            # document restored from the back-forward cache, and evaluated in the wrong world).
            await trio.lowlevel.checkpoint()
        return message

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):
            await self._out.aclose()
            await self._in.aclose()


class WebSocketTransport:
    """CDP over a browser's DevTools websocket (trio-websocket, whose reader task runs in the nursery
    that connected it)."""

    def __init__(self, ws: trio_websocket.WebSocketConnection) -> None:
        self._ws = ws

    async def send(self, message: bytes) -> None:
        try:
            await self._ws.send_message(message.decode())
        except trio_websocket.ConnectionClosed as e:
            raise TransportClosed(f"websocket closed: {e.reason}") from None

    async def receive(self) -> str | bytes:
        try:
            return await self._ws.get_message()
        except trio_websocket.ConnectionClosed as e:
            raise TransportClosed(f"websocket closed: {e.reason}") from None

    async def aclose(self) -> None:
        # The closing handshake completes when trio-websocket's reader task reads the browser's reply, and
        # that task runs in open_cdp's nursery: when the block ends because it was cancelled (the daemon
        # stopping), the reader is cancelled too and the reply is never read. Waiting for it anyway cost
        # every stop of the daemon these 2 s. Then the socket is closed at once instead.
        wait_s = 0.0 if trio.current_effective_deadline() == -math.inf else CLOSE_HANDSHAKE_S
        with trio.CancelScope(shield=True), trio.move_on_after(wait_s):
            await self._ws.aclose()
