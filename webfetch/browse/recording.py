"""A browse session's recording (docs/BROWSE.md, "Recordings"; where and how it is kept: recordings.py):
the screencast's frames (at most one every `FRAME_EVERY_S`), each action with its result, and the console
and requests of its tabs, through redact.py's one rule whatever browse.redact_secrets says (a recording is
a file that outlives the session).

Frames are thinned to one every `FRAME_EVERY_S`, yet the newest one skipped is kept and written when that
interval ends, or at the end: a page's last change is in the file even when it came just after a frame (a
static page sends no more frames, so one skipped would be a final state never recorded).

Lines are queued in the event loop and written by a task of the session's in a worker thread, one whole
line at a time (O_APPEND), so a crash leaves a file that reads up to its last line. The file stops growing
at browse.record_max_bytes: a `truncated` line says so, and the session's next result carries a note. With
`on_error`, the file is removed when the session closes with no action having failed."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from .. import recordings, redact
from .watch import Frame, Step

if TYPE_CHECKING:
    from .network import NetworkLog
    from .tab import BrowseTab

log = logging.getLogger("webfetch.browse")

FRAME_EVERY_S = 0.5          # frames in a recording, at most two a second
QUEUE = 64                   # lines waiting for the writer (frames of ~100 KB); a frame is dropped when it is full
MAX_TEXT = 2000              # a console entry's text in a recording


class Recording:
    """One session's recording file, open from the session's start to its end."""

    def __init__(self, session: str, mode: str, max_bytes: int, max_total: int) -> None:
        self.session = session
        self.mode = mode                    # "always" or "on_error"
        self.max_bytes = max_bytes
        self.max_total = max_total
        self.started = time.time()
        self.name = recordings.file_name(session, self.started)
        self.path: Path | None = None
        self.size = 0
        self.truncated = False
        self.told = False                   # the session's result said it was truncated
        self.failed = False                 # an action failed (on_error keeps the file)
        self._last_frame = -FRAME_EVERY_S    # when the last frame was written (trio's clock)
        self._pending: Frame | None = None  # the newest frame skipped since
        self._pending_set = trio.Event()
        self._console: dict[str, int] = {}  # tab -> console entries recorded
        self._network = 0                   # requests recorded (by number)
        self._send, self._receive = trio.open_memory_channel[bytes](QUEUE)

    async def open(self) -> None:
        """Make the file (0600 in the 0700 directory), its start line written; OSError when it cannot."""
        def create() -> Path:
            d = recordings.private_directory()
            recordings.prune(self.max_total - self.max_bytes)
            for n in range(1, 100):
                name = self.name if n == 1 else self.name.replace(recordings.SUFFIX, f"-{n}{recordings.SUFFIX}")
                try:
                    fd = os.open(d / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
                except FileExistsError:
                    continue
                os.close(fd)
                self.name = name
                return d / name
            raise FileExistsError(f"{self.name} and 98 more names are taken")
        self.path = await trio.to_thread.run_sync(create)
        self._line({"type": "start", "version": 1, "session": self.session, "at": self.started, "mode": self.mode,
                    "max_bytes": self.max_bytes})

    async def run(self) -> None:
        """Write the queued lines until `close` (the session's task)."""
        assert self.path is not None
        fd = await trio.to_thread.run_sync(os.open, self.path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._write_skipped)
                async for line in self._receive:
                    await trio.to_thread.run_sync(os.write, fd, line)
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(os.close, fd)
                if not self.keep():  # on_error, and nothing failed
                    await trio.to_thread.run_sync(self.path.unlink, True)
                await trio.to_thread.run_sync(recordings.prune, self.max_total)

    # --- what the session feeds in ------------------------------------------------------------------

    def frame(self, frame: Frame) -> None:
        if trio.current_time() - self._last_frame < FRAME_EVERY_S:
            self._pending = frame
            self._pending_set.set()
            return
        self._write_frame(frame)

    def _write_frame(self, frame: Frame) -> None:
        self._last_frame = trio.current_time()
        self._pending = None
        self._line({"type": "frame", "at": frame.at, "tab": frame.tab, "width": frame.width, "height": frame.height,
                    "data": frame.data}, droppable=True)

    async def _write_skipped(self) -> None:
        """Write the newest skipped frame once its interval ends, unless a newer frame was written first."""
        while True:
            await self._pending_set.wait()
            self._pending_set = trio.Event()
            await trio.sleep_until(self._last_frame + FRAME_EVERY_S)
            if self._pending is not None:
                self._write_frame(self._pending)

    def step(self, step: Step) -> None:
        if not step.ok and step.by == "agent":
            self.failed = True
        self._line({"type": "action", **step.json()})

    def logs(self, tabs: list[BrowseTab], network: NetworkLog) -> None:
        """The console entries and requests not recorded yet (after each action, and at the end)."""
        now = time.time()
        for tab in tabs:
            seen = self._console.get(tab.name, 0)
            new = tab.console.count - seen
            if new > 0:
                for e in tab.console.newest(new):
                    self._line({"type": "console", "at": now, "tab": tab.name, "level": e.level,
                                "text": redact.text(e.text[:MAX_TEXT]), "url": redact.url(e.url or "")})
                self._console[tab.name] = tab.console.count
        for r in network.entries():
            number = int(r.id[1:])
            if number <= self._network:
                continue
            self._network = number
            self._line({"type": "request", "at": r.wall or now, "tab": r.tab, "id": r.id, "method": r.method,
                        "url": redact.url(r.url), "resource": r.type, "status": r.status, "failure": r.failure,
                        "blocked": r.blocked, "time_ms": r.time_ms()})

    def close(self) -> None:
        """The session ended: the frame skipped last if any, the end line, then the writer stops."""
        if self._pending is not None:
            self._write_frame(self._pending)
        self._line({"type": "end", "at": time.time(), "bytes": self.size, "truncated": self.truncated}, final=True)
        self._send.close()

    def keep(self) -> bool:
        return self.mode == "always" or self.failed

    def note(self) -> str | None:
        """What the session's next result says once the file reached its bound (once)."""
        if not self.truncated or self.told:
            return None
        self.told = True
        return (f"this session's recording {self.name} reached its size bound ({self.max_bytes:,} bytes, "
                f"browse.record_max_bytes) and records no more; it keeps what came before")

    def _line(self, obj: dict[str, Any], droppable: bool = False, final: bool = False) -> None:
        if self.truncated and not final:
            return
        line = (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        if not final and self.size + len(line) > self.max_bytes - 512:  # room kept for the truncated and end lines
            self.truncated = True
            line = (json.dumps({"type": "truncated", "at": time.time(), "bytes": self.size}) + "\n").encode()
        try:
            self._send.send_nowait(line)
        except trio.WouldBlock:
            if not droppable:
                log.info("browse session %r: its recording fell behind; a line was left out", self.session)
            return
        except trio.ClosedResourceError:
            return
        self.size += len(line)
