"""Connections, framing and dispatch: line-delimited JSON over a Unix socket (PROTOCOL.md).

One nursery per connection, one writer task per connection, one task per request; each request runs
under its own cancel scope, so `cancel`, a vanished client and shutdown all end it the same way.
"""

from __future__ import annotations

import itertools
import logging
import os
import select
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import trio

from . import redact
from ._trio import pop_lines, single_error
from .errors import BadRequest, Cancelled, Forbidden, Internal, LineTooLong, ShuttingDown, WebfetchError
from .protocol import (
    CancelRequest,
    CancelResult,
    ErrorFrame,
    Frame,
    ProgressFrame,
    ReportProgress,
    Request,
    RequestId,
    SendFrame,
    Stage,
    decode_request,
    encode_frame,
    error_frame,
)
from .trust.socket_trust import peer_credentials

log = logging.getLogger("webfetch.server")

READ_CHUNK = 64 * 1024
FRAME_BUFFER = 64           # frames waiting for a slow client before its own requests wait
HANGUP_POLL_S = 0.25        # how often a half-closed connection is checked for a full hang-up

Handler = Callable[[Request, RequestId, ReportProgress, SendFrame], Awaitable[Frame]]


class _Active:
    """A request in flight: the scope that ends it, and why it was ended (None: the client went away)."""

    __slots__ = ("scope", "ended_by")

    def __init__(self) -> None:
        self.scope = trio.CancelScope()
        self.ended_by: WebfetchError | None = None


RECENT_REQUESTS = 200          # the request log's ended requests, newest kept
TIMES_WINDOW_S = 3600.0        # ... and the times of the last hour's, for the view's chart
TIMES_MAX = 20_000             # ... at most this many (a busy hour keeps its latest)
URL_CHARS = 300                # a logged URL is cut here: the log is shown, not replayed


@dataclass
class RequestRecord:
    """One request as the view shows it: its op, its URL (secrets masked: redact.url), when it started
    (Unix time), and once ended how long it took and its outcome (`ok`, an error code, `cancelled`,
    `client-gone`); `progress` is its latest progress message while it runs."""

    op: str
    url: str | None
    started: float
    ms: float | None = None
    outcome: str | None = None
    flags: list[str] = field(default_factory=list)
    cached: bool = False
    progress: str = ""


def _request_url(req: Request) -> str | None:
    url = getattr(req, "url", None)
    urls = getattr(req, "urls", None)
    if url is None and urls:
        url = f"{urls[0]} (+{len(urls) - 1} more)" if len(urls) > 1 else urls[0]
    if not isinstance(url, str):
        return None
    shown = redact.url(url)
    return shown if len(shown) <= URL_CHARS else shown[:URL_CHARS] + "…"


class RequestLog:
    """The requests in flight and the recent ones, bounded, for the view's dashboard (it holds what the
    daemon's log line holds: no bodies, URLs masked)."""

    def __init__(self) -> None:
        self.in_flight: dict[int, RequestRecord] = {}
        self.recent: deque[RequestRecord] = deque(maxlen=RECENT_REQUESTS)
        self.times: deque[tuple[float, float]] = deque(maxlen=TIMES_MAX)  # (ended, ms)
        self._keys = itertools.count()

    def started(self, req: Request) -> tuple[int, RequestRecord]:
        record = RequestRecord(op=str(req.__struct_config__.tag), url=_request_url(req), started=time.time())
        key = next(self._keys)
        self.in_flight[key] = record
        return key, record

    def ended(self, key: int, frame: Frame | None, gone: bool) -> None:
        record = self.in_flight.pop(key, None)
        if record is None:
            return
        now = time.time()
        record.ms = round((now - record.started) * 1000, 1)
        record.outcome = _outcome(frame, gone)
        flags = getattr(frame, "flags", None)
        record.flags = list(flags) if isinstance(flags, list) else []
        record.cached = bool(getattr(frame, "cached", False))
        record.progress = ""
        self.recent.append(record)
        self.times.append((now, record.ms))
        while self.times and self.times[0][0] < now - TIMES_WINDOW_S:
            self.times.popleft()


def _outcome(frame: Frame | None, gone: bool) -> str:
    if isinstance(frame, ErrorFrame):
        return frame.code
    if frame is None:
        return "client-gone" if gone else "cancelled"
    return "ok"


class Connection:
    _numbers = itertools.count(1)

    def __init__(self, server: Server, stream: trio.SocketStream) -> None:
        self.server = server
        self.stream = stream
        self.number = next(self._numbers)
        self.requests: dict[RequestId, _Active] = {}
        self._auto_ids = itertools.count(1)
        # encoded frames; None closes the connection; an Event is set once everything before it is written
        self._send, self._recv = trio.open_memory_channel[bytes | trio.Event | None](FRAME_BUFFER)
        self._idle = trio.Event()
        self._read_all = False  # the reader is done and nothing is in flight: the writer's end is the close
        self.gone = False

    async def run(self) -> None:
        try:
            with single_error():
                async with trio.open_nursery() as nursery:
                    self.nursery = nursery
                    nursery.start_soon(self._writer)
                    await self._reader(nursery)
                    # Half-closed (or done): answer what is in flight, then close.
                    if self.requests:
                        nursery.start_soon(self._watch_hangup)
                    await self._drain()
                    self._read_all = True
                    await self._send.send(None)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await self.stream.aclose()

    async def _drain(self) -> None:
        while self.requests:
            self._idle = trio.Event()
            await self._idle.wait()

    async def _reader(self, nursery: trio.Nursery) -> None:
        buf = bytearray()
        limit = self.server.max_line_bytes
        while True:
            try:
                data = await self.stream.receive_some(READ_CHUNK)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._hang_up()
                return
            if not data:
                return
            buf += data
            for line in pop_lines(buf):
                if len(line) > limit:
                    await self._too_long(limit)
                    return
                self._handle_line(line, nursery)
            if len(buf) > limit:
                await self._too_long(limit)
                return

    async def _too_long(self, limit: int) -> None:
        err = LineTooLong(f"request line longer than {limit} bytes; send one JSON object per line, "
                          f"at most {limit} bytes (server.max_line_bytes)")
        await self._emit(error_frame(None, err))
        # PROTOCOL.md: the connection closes after this frame; in-flight requests are abandoned.
        await self._send.send(None)
        self._cancel_all(None)
        await trio.sleep_forever()

    def _handle_line(self, line: bytes, nursery: trio.Nursery) -> None:
        if not line.strip():
            return
        try:
            env = decode_request(line)
        except BadRequest as e:
            self._emit_nowait(error_frame(e.request_id, e))
            return
        rid, req = env.id, env.request
        if rid is None:
            rid = f"auto-{next(self._auto_ids)}"
        if rid in self.requests:
            self._emit_nowait(error_frame(rid, BadRequest(
                f"id {rid!r} is already in flight on this connection; use a new id for each request")))
            return
        if isinstance(req, CancelRequest):
            target = self.requests.get(req.target)
            if target is not None and target.ended_by is None:
                target.ended_by = Cancelled(f"request {req.target!r} was cancelled")
                target.scope.cancel()
            self._emit_nowait(CancelResult(id=rid, target=req.target, found=target is not None))
            return
        active = _Active()
        self.requests[rid] = active
        nursery.start_soon(self._run_request, rid, req, active)

    async def _run_request(self, rid: RequestId, req: Request, active: _Active) -> None:
        frame: Frame | None = None
        self.server.request_started()
        started = time.monotonic()
        key, record = self.server.requests.started(req)

        def progress(stage: Stage, message: str) -> None:
            record.progress = redact.text(message)[:URL_CHARS]
            self._emit_nowait(ProgressFrame(id=rid, stage=stage, message=message,
                                       elapsed_ms=int((time.monotonic() - started) * 1000)), drop=True)

        async def send(early: Frame) -> None:  # a frame before the terminal one (a batch's or a crawl's page)
            if not self.gone:
                await self._emit(early)
                await self.wait_flushed()  # written before the request goes on: no pile of pages in memory

        try:
            with active.scope:
                try:
                    frame = await self.server.handler(req, rid, progress, send)
                except WebfetchError as e:
                    frame = error_frame(rid, e)
                except Exception as e:
                    log.exception("conn=%d id=%r: internal error", self.number, rid)
                    err = Internal(f"internal error ({type(e).__name__}: {e}); this is a bug in webfetch, "
                                   f"the daemon's log has the traceback")
                    frame = error_frame(rid, err)
            if frame is None and active.ended_by is not None:
                frame = error_frame(rid, active.ended_by)
            if frame is not None and not self.gone:
                await self._emit(frame)
        finally:
            self.server.request_ended()
            self.server.requests.ended(key, frame, self.gone)
            self.requests.pop(rid, None)
            if not self.requests:
                self._idle.set()
            _log_request(self.number, rid, req, frame, started, self.gone)

    def _cancel_all(self, reason: WebfetchError | None) -> None:
        for active in self.requests.values():
            if active.ended_by is None:
                active.ended_by = reason
            active.scope.cancel()

    def shutdown(self) -> None:
        self._cancel_all(ShuttingDown("the daemon is shutting down; retry in a moment"))

    def _hang_up(self) -> None:
        if not self.gone:
            self.gone = True
            self._cancel_all(None)

    async def _watch_hangup(self) -> None:
        # A client that half-closed (nc -N) still gets its results; one that closed entirely has its
        # requests cancelled. On a Unix socket only the latter raises POLLHUP.
        poller = select.poll()
        poller.register(self.stream.socket.fileno(), select.POLLHUP)
        while self.requests:
            for _, events in poller.poll(0):
                if events & (select.POLLHUP | select.POLLERR):
                    self._hang_up()
                    return
            await trio.sleep(HANGUP_POLL_S)

    def _emit_nowait(self, frame: Frame, drop: bool = False) -> None:
        try:
            self._send.send_nowait(encode_frame(frame))
        except trio.WouldBlock:
            if not drop:
                self.nursery.start_soon(self._emit, frame)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    async def _emit(self, frame: Frame) -> None:
        try:
            await self._send.send(encode_frame(frame))
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    async def wait_flushed(self) -> None:
        """Until the frames queued so far have been written to the client (or it is gone)."""
        written = trio.Event()
        try:
            await self._send.send(written)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            return
        await written.wait()

    async def _writer(self) -> None:
        async with self._recv:
            async for data in self._recv:
                if data is None:
                    break
                if isinstance(data, trio.Event):
                    data.set()
                    continue
                try:
                    await self.stream.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self._hang_up()
                    break
        self._send.close()
        if not self._read_all:  # a hang-up, or a line too long: the reader must stop too
            self.nursery.cancel_scope.cancel()


def _log_request(conn: int, rid: RequestId, req: Request, frame: Frame | None, started: float,
                 gone: bool) -> None:
    if not log.isEnabledFor(logging.INFO):  # the line is built only for a log that keeps it
        return
    ms = (time.monotonic() - started) * 1000
    url = getattr(req, "url", None)
    op = req.__struct_config__.tag  # the op's wire name, as the client sent it (PROTOCOL.md)
    if isinstance(frame, ErrorFrame):
        outcome = f"error={frame.code}"
    elif frame is None:
        outcome = "client-gone" if gone else "cancelled"
    else:
        outcome = "ok"
        kind = getattr(frame, "kind", None)
        if kind:
            outcome += f" kind={kind} cached={str(getattr(frame, 'cached', False)).lower()}"
    log.info("conn=%d id=%r op=%s%s %s %.0fms", conn, rid, op, f" url={url}" if url else "", outcome, ms)


class Server:
    def __init__(self, handler: Handler, max_line_bytes: int) -> None:
        self.handler = handler
        self.max_line_bytes = max_line_bytes
        self.connections: set[Connection] = set()
        self.in_flight = 0
        self.served = 0
        self.requests = RequestLog()  # what the view's dashboard shows
        self._no_requests = trio.Event()
        self._no_requests.set()
        self._some_requests = trio.Event()
        self.last_activity = trio.current_time()
        self.last_request_end = trio.current_time()

    async def serve(self, listener: trio.SocketListener, *,
                    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            task_status.started()
            while True:
                try:
                    stream = await listener.accept()
                except (trio.ClosedResourceError, trio.BrokenResourceError):
                    return
                except OSError as e:  # EMFILE and friends: back off rather than spin
                    log.warning("accept failed: %s", e)
                    await trio.sleep(0.1)
                    continue
                nursery.start_soon(self._run_connection, stream)

    async def _run_connection(self, stream: trio.SocketStream) -> None:
        peer = peer_credentials(stream.socket)
        uid = None if peer is None else peer[1]
        if uid is not None and uid != os.geteuid():
            # The socket's 0600 mode already keeps other users out; this holds even if someone loosens it.
            log.warning("refused a connection from uid %d (this daemon serves uid %d)", uid, os.geteuid())
            frame = error_frame(None, Forbidden(
                f"this webfetch daemon serves only its own user (uid {os.geteuid()}); start your own with "
                f"`webfetch serve`"))
            with trio.move_on_after(1):
                try:
                    await stream.send_all(encode_frame(frame))
                    await stream.send_eof()
                    while await stream.receive_some(65536):  # closing with unread input would reset the
                        pass                                  # connection before the client reads why
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    pass
            await stream.aclose()
            return
        conn = Connection(self, stream)
        self.connections.add(conn)
        try:
            await conn.run()
        finally:
            self.connections.discard(conn)
            self.last_activity = trio.current_time()

    def shutdown(self) -> None:
        """End every in-flight request with `shutting_down`."""
        for conn in list(self.connections):
            conn.shutdown()

    def request_started(self) -> None:
        if self.in_flight == 0:
            self._no_requests = trio.Event()
            self._some_requests.set()
        self.in_flight += 1

    def request_ended(self) -> None:
        self.in_flight -= 1
        self.served += 1
        self.last_request_end = trio.current_time()
        if self.in_flight == 0:
            self._some_requests = trio.Event()
            self._no_requests.set()

    async def wait_no_requests(self) -> None:
        """Until no request is in flight (bound it with a deadline)."""
        await self._no_requests.wait()

    async def wait_some_requests(self) -> None:
        """Until a request is in flight."""
        await self._some_requests.wait()

    async def wait_flushed(self) -> None:
        """Until every connection's queued frames have been written (bound it with a deadline)."""
        async with trio.open_nursery() as nursery:
            for conn in list(self.connections):
                nursery.start_soon(conn.wait_flushed)
