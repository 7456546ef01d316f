"""A small Chrome DevTools Protocol client with no Chrome knowledge.

One connection (a transport, cdp_transport.py: the pipes of a Chrome we launched, or a websocket to one we
attach to), one reader task. Replies are routed by `id` to the waiting caller, events by `sessionId` to
subscribers. Sessions are flat (`Target.attachToTarget` with `flatten: true`), so every tab shares the one
connection. A cancelled call forgets its pending entry; a closed connection fails every pending call at
once, so nothing waits forever on a browser that went away.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import msgspec
import trio
import trio_websocket

from . import redact
from ._trio import single_error
from .cdp_transport import MAX_MESSAGE_BYTES, PipeTransport, Transport, TransportClosed, WebSocketTransport

log = logging.getLogger("webfetch.cdp")

SEND_TIMEOUT_S = 10.0

_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


class CDPError(Exception):
    """The browser answered a call with an error."""

    def __init__(self, method: str, code: int, message: str) -> None:
        super().__init__(f"{method}: {message} ({code})")
        self.method = method
        self.code = code
        self.message = message


class CDPClosed(Exception):
    """The connection to the browser is gone (the browser died, or the connection dropped)."""


class _Slot:
    __slots__ = ("method", "event", "result", "error")

    def __init__(self, method: str) -> None:
        self.method = method
        self.event = trio.Event()
        self.result: dict[str, Any] | None = None
        self.error: BaseException | None = None


class Subscription:
    """Events of one session, in order. A subscriber too slow to keep up is closed with an error
    rather than blocking the reader (which would stall every tab) or silently losing events."""

    def __init__(self, session_id: str | None, buffer: int) -> None:
        self.session_id = session_id
        self._send, self._recv = trio.open_memory_channel[dict[str, Any]](buffer)
        self.error: BaseException | None = None

    def _deliver(self, event: dict[str, Any]) -> None:
        try:
            self._send.send_nowait(event)
        except trio.WouldBlock:
            self._fail(CDPClosed(f"event subscriber for session {self.session_id} fell behind"))
        except trio.ClosedResourceError:
            pass

    def _fail(self, error: BaseException) -> None:
        if self.error is None:
            self.error = error
        self._send.close()

    async def receive(self) -> dict[str, Any]:
        """The next event ({"method", "params"}); raises CDPClosed when the connection or subscription ended."""
        try:
            return await self._recv.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise CDPClosed(str(self.error or "connection closed")) from self.error


class CDPConnection:
    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        self._ids = itertools.count(1)
        self._pending: dict[int, _Slot] = {}
        self._subs: dict[str | None, set[Subscription]] = {}
        self._closed: BaseException | None = None
        self.closed = trio.Event()

    @property
    def is_closed(self) -> bool:
        return self._closed is not None

    async def call(self, method: str, params: dict[str, Any] | None = None,
                   session_id: str | None = None) -> dict[str, Any]:
        """Send one command and wait for its reply."""
        return (await self.call_in_order([(method, params or {})], session_id))[0]

    async def call_in_order(self, commands: Sequence[tuple[str, dict[str, Any]]],
                            session_id: str | None = None) -> list[dict[str, Any]]:
        """Send the commands one after the other without waiting for each reply, then wait for them all:
        one round trip for steps the browser must take in order anyway (a mouse's move, press and release)."""
        if self._closed is not None:
            raise CDPClosed(str(self._closed))
        slots: dict[int, _Slot] = {}
        try:
            for method, params in commands:
                msg_id = next(self._ids)
                msg: dict[str, Any] = {"id": msg_id, "method": method, "params": params}
                if session_id is not None:
                    msg["sessionId"] = session_id
                slots[msg_id] = self._pending[msg_id] = _Slot(method)
                await self._send(_encode(msg))
            for slot in slots.values():
                await slot.event.wait()
        finally:
            for msg_id in slots:
                self._pending.pop(msg_id, None)
        results = []
        for slot in slots.values():
            if slot.error is not None:
                if isinstance(slot.error, CDPClosed):
                    raise CDPClosed(str(slot.error))
                raise slot.error
            assert slot.result is not None
            results.append(slot.result)
        return results

    async def _send(self, message: bytes) -> None:
        # A send cancelled half-way would corrupt the connection for every tab: finish it shielded, but
        # never wait forever on a browser that stopped reading.
        with trio.CancelScope(shield=True):
            with trio.move_on_after(SEND_TIMEOUT_S) as timeout:
                try:
                    await self._transport.send(message)
                except TransportClosed as e:
                    self._close(CDPClosed(str(e)))
                    raise CDPClosed(str(self._closed)) from None
        if timeout.cancelled_caught:
            self._close(CDPClosed("the browser stopped reading its DevTools connection"))
            await self._transport.aclose()
            raise CDPClosed(str(self._closed))

    @contextmanager
    def subscribe(self, session_id: str | None, buffer: int = 1024) -> Iterator[Subscription]:
        """Receive the events of one session (None: browser-level events) while the block runs."""
        sub = Subscription(session_id, buffer)
        if self._closed is not None:
            sub._fail(self._closed)
        self._subs.setdefault(session_id, set()).add(sub)
        try:
            yield sub
        finally:
            subs = self._subs.get(session_id)
            if subs is not None:
                subs.discard(sub)
                if not subs:
                    del self._subs[session_id]
            sub._send.close()

    async def run_reader(self) -> None:
        """Route every incoming message until the connection closes; then fail everything pending."""
        reason: BaseException = CDPClosed("connection closed")
        try:
            while True:
                try:
                    message = await self._transport.receive()
                except TransportClosed as e:
                    reason = CDPClosed(str(e))
                    return
                self._route(_decode(message))
        finally:
            self._close(reason)

    def _route(self, msg: dict[str, Any]) -> None:
        msg_id = msg.get("id")
        if msg_id is not None:
            slot = self._pending.get(msg_id)
            if slot is None:  # the caller was cancelled; its reply is of no use to anyone
                return
            if "error" in msg:
                err = msg["error"]
                slot.error = CDPError(slot.method, err.get("code", 0), err.get("message", ""))
            else:
                slot.result = msg.get("result", {})
            slot.event.set()
            return
        for sub in list(self._subs.get(msg.get("sessionId"), ())):
            sub._deliver(msg)

    def abort(self, reason: str) -> None:
        """End the connection from outside (the browser process is gone): every pending call and
        subscriber fails with CDPClosed(reason) at once."""
        self._close(CDPClosed(reason))

    def _close(self, reason: BaseException) -> None:
        if self._closed is not None:
            return
        self._closed = reason
        for slot in self._pending.values():
            slot.error = reason
            slot.event.set()
        for subs in self._subs.values():
            for sub in subs:
                sub._fail(reason)
        self.closed.set()

    async def aclose(self) -> None:
        self._close(CDPClosed("connection closed by webfetch"))
        await self._transport.aclose()


@asynccontextmanager
async def open_cdp(ws_url: str, connect_timeout: float = 10.0) -> AsyncIterator[CDPConnection]:
    """Connect to a browser's DevTools websocket; the reader runs until the block ends or the socket drops.
    An error names the URL with its token or password masked (a hosted browser's `?token=`)."""
    try:
        with single_error():  # a refused handshake is raised by trio-websocket's reader task, out of the nursery
            async with trio.open_nursery() as nursery:
                try:
                    with trio.fail_after(connect_timeout):
                        ws = await trio_websocket.connect_websocket_url(
                            nursery, ws_url, max_message_size=MAX_MESSAGE_BYTES, message_queue_size=0)
                except (OSError, trio_websocket.HandshakeError, trio.TooSlowError) as e:
                    raise CDPClosed(f"cannot connect to {redact.url(ws_url)}: {redact.text(str(e)) or 'timed out'}") \
                        from None
                async with _reading(nursery, WebSocketTransport(ws)) as conn:
                    yield conn
    except trio_websocket.ConnectionRejected as e:
        raise CDPClosed(f"cannot connect to {redact.url(ws_url)}: the server answered HTTP {e.status_code} to the "
                        f"websocket handshake") from None


@asynccontextmanager
async def open_cdp_pipe(pipe: PipeTransport) -> AsyncIterator[CDPConnection]:
    """Speak CDP over the DevTools pipe of a Chrome we started (launch.py); the reader runs until the block
    ends or Chrome closes its end (it exited). The pipe is closed when the block ends."""
    with single_error():
        async with trio.open_nursery() as nursery:
            async with _reading(nursery, pipe) as conn:
                yield conn


@asynccontextmanager
async def _reading(nursery: trio.Nursery, transport: Transport) -> AsyncIterator[CDPConnection]:
    conn = CDPConnection(transport)
    nursery.start_soon(conn.run_reader)
    try:
        yield conn
    finally:
        await conn.aclose()
        nursery.cancel_scope.cancel()
