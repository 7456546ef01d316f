"""The CLI's progress line on a terminal: the request's latest stage, and the seconds it has taken."""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from typing import TextIO

TICK_S = 0.25  # how often the clock is looked at; the line is redrawn only when its second changes
SHOW_AFTER_S = 1.0  # a quick page shows no clock, a slow one shows that it is still going


class PersonWaits:
    """What a request waits on the person for (progress frames of stage `person`: allow the browser's
    connection, hand back the browser), said once on stderr, on a terminal or not: a script's log must show
    why it stands still, where the other progress stays quiet."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self.stream = stream
        self._said: set[str] = set()

    def see(self, frame: dict[str, object]) -> bool:
        """Say `frame` if it is a person's wait not said yet; whether it was one."""
        if frame.get("type") != "progress" or frame.get("stage") != "person":
            return False
        message = str(frame.get("message"))
        if message not in self._said:
            self._said.add(message)
            print(f"webfetch: waiting for you: {message}", file=self.stream, flush=True)
        return True


class ProgressLine:
    """One line on stderr, redrawn in place (`show`), gone before anything else is printed (`clear`). A slow
    server sends no progress frame for many seconds: a thread keeps the elapsed seconds counting meanwhile,
    so the line never looks stuck. Use it as a context manager: the thread ends and the line is cleared."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self.stream = stream
        self.started = time.monotonic()
        self._text: str | None = None
        self._drawn_s = -1
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="progress-line", daemon=True)

    def __enter__(self) -> ProgressLine:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.clear()

    def show(self, text: str) -> None:
        with self._lock:
            self._text = text
            self._draw()

    def clear(self) -> None:
        with self._lock:
            if self._text is not None:
                self._text = None
                self.stream.write("\r\x1b[K")
                self.stream.flush()

    def _tick(self) -> None:
        while not self._stop.wait(TICK_S):
            with self._lock:
                if self._text is not None and int(time.monotonic() - self.started) != self._drawn_s:
                    self._draw()

    def _draw(self) -> None:
        elapsed = time.monotonic() - self.started
        self._drawn_s = int(elapsed)
        clock = f" ({self._drawn_s} s)" if elapsed >= SHOW_AFTER_S else ""
        text = str(self._text)
        room = self._columns() - 1 - len(clock)  # a line that wraps cannot be redrawn in place
        if len(text) > room:
            text = text[:max(0, room - 1)] + "…"
        self.stream.write(f"\r\x1b[K{text}{clock}")
        self.stream.flush()

    def _columns(self) -> int:
        try:
            columns = os.get_terminal_size(self.stream.fileno()).columns
        except (OSError, ValueError, AttributeError):
            columns = 0
        return columns or shutil.get_terminal_size().columns  # a terminal that says 0: $COLUMNS, else 80
