"""A session as a person sees it in the view (webfetch/view/): the tab live, the timeline of actions, the
console and the requests.

The frames are CDP's screencast of the session's shown tab (JPEG, at most `FRAME_MAX_W` x `FRAME_MAX_H`,
quality `FRAME_QUALITY`), started only while someone wants them (a watcher, a recording) and stopped when
the last one leaves: without either, the page pays nothing. Chrome sends the next frame only after the last
one was acked; the ack waits out `FRAME_INTERVAL_S`, which bounds the rate, and a frame larger than
`FRAME_MAX_B64` is dropped (acked, not kept). A watcher reads the newest frame only: one that falls behind
skips frames rather than queueing them.

The timeline is a ring of the newest `TIMELINE` steps: each agent action with its result or error, and what
the person did (took over, handed back). The console and request panes read the tabs' own logs
(console.py, network.py); nothing is copied for them. URLs shown go through redact.py unless
browse.redact_secrets is false, as the network action's do."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from ..chrome.cdp import CDPClosed, CDPError
from .network import shown_url

if TYPE_CHECKING:
    from .network import NetworkLog
    from .tab import BrowseTab

FRAME_QUALITY = 60
FRAME_MAX_W, FRAME_MAX_H = 1280, 800
FRAME_INTERVAL_S = 0.2          # at most 5 frames a second
FRAME_MAX_B64 = 2 << 20         # a frame's base64, at most (a 1280x800 JPEG at quality 60 is ~100 KB)
TIMELINE = 200                  # steps kept per session
PANE_ROWS = 100                 # console entries and requests a watcher is sent, the newest
DETAIL_CHARS = 300              # an action's arguments as the timeline shows them
SEND_INTERVAL_S = 0.1           # a watcher's updates, at most 10 a second (a busy page sends thousands of events)


@dataclass(frozen=True)
class Frame:
    """One screencast frame: the JPEG as base64, and the viewport it shows (CSS pixels), to map a person's
    pointer back onto the page."""

    seq: int
    data: str
    tab: str
    width: float                # the viewport's CSS size (Page.screencastFrame's metadata)
    height: float
    offset_top: float
    at: float                   # seconds since the epoch

    def json(self) -> dict[str, Any]:
        return {"seq": self.seq, "data": self.data, "tab": self.tab, "width": self.width, "height": self.height,
                "at": self.at}


@dataclass
class Step:
    """One entry of the timeline: an agent's action and its outcome, or something the person did."""

    seq: int
    at: float                   # seconds since the epoch, as it began
    by: str                     # "agent", or the person's name in the view
    action: str
    detail: str = ""
    tab: str | None = None
    url: str = ""
    ok: bool = True
    error: str | None = None    # the error's code
    message: str = ""           # the error's message, or a note
    elapsed_ms: int | None = None

    def json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


class Screen:
    """The screencast of a session's shown tab, running while `wanted` (watchers and recordings) is above 0."""

    def __init__(self, notify: Callable[[], None]) -> None:
        self.wanted = 0
        self.on: BrowseTab | None = None        # the tab the screencast runs on, if it runs
        self.frame: Frame | None = None         # the newest frame
        self.listeners: list[Callable[[Frame], None]] = []   # recordings
        self._notify = notify
        self._seq = 0
        self._moving = trio.Lock()
        self._next_ack = 0.0

    async def follow(self, tab: BrowseTab | None) -> None:
        """Run the screencast on `tab` (the session's shown one) if it is wanted, else on none."""
        async with self._moving:
            target = tab if self.wanted > 0 and tab is not None and not tab.closed else None
            if target is self.on:
                return
            old, self.on = self.on, target
            if old is not None:
                old.hooks.on_frame = None
                await _quietly(old.call("Page.stopScreencast"))
            if target is not None:
                target.hooks.on_frame = self._received
                await _quietly(target.call("Page.startScreencast", {
                    "format": "jpeg", "quality": FRAME_QUALITY, "maxWidth": FRAME_MAX_W, "maxHeight": FRAME_MAX_H,
                    "everyNthFrame": 1}))

    def _received(self, tab: BrowseTab, p: dict[str, Any], nursery: trio.Nursery) -> None:
        data, meta = p.get("data"), p.get("metadata") or {}
        now = trio.current_time()
        delay = max(0.0, self._next_ack - now)
        self._next_ack = now + delay + FRAME_INTERVAL_S
        nursery.start_soon(self._ack, tab, p.get("sessionId"), delay)
        if tab is not self.on or not isinstance(data, str) or len(data) > FRAME_MAX_B64:
            return
        self._seq += 1
        self.frame = Frame(self._seq, data, tab.name, _number(meta.get("deviceWidth")),
                           _number(meta.get("deviceHeight")), _number(meta.get("offsetTop")), time.time())
        for listener in list(self.listeners):
            listener(self.frame)
        self._notify()

    @staticmethod
    async def _ack(tab: BrowseTab, screencast_session: Any, delay: float) -> None:
        await trio.sleep(delay)
        await _quietly(tab.call("Page.screencastFrameAck", {"sessionId": screencast_session}))


class Timeline:
    """The newest `TIMELINE` steps of a session, oldest first."""

    def __init__(self, notify: Callable[[], None]) -> None:
        self.steps: deque[Step] = deque(maxlen=TIMELINE)
        self.listeners: list[Callable[[Step], None]] = []   # recordings
        self._seq = 0
        self._notify = notify

    @property
    def count(self) -> int:
        return self._seq

    def add(self, by: str, action: str, **fields: Any) -> Step:
        self._seq += 1
        step = Step(self._seq, time.time(), by, action, **fields)
        self.steps.append(step)
        for listener in list(self.listeners):
            listener(step)
        self._notify()
        return step

    def since(self, seq: int) -> list[Step]:
        return [s for s in self.steps if s.seq > seq]


@dataclass
class SessionWatch:
    """What the view shows of one session: its screen, its timeline, and a pulse for every change (a frame,
    a step, a change of control, an event of one of its tabs)."""

    name: str
    network: NetworkLog
    redacting: Callable[[], bool]       # browse.redact_secrets, read at use
    shown: Callable[[], BrowseTab | None]   # the tab the session shows (its active one), if any
    holder: Callable[[], str | None]    # who holds the browser (control.py), if a person does
    screen: Screen = field(init=False)
    timeline: Timeline = field(init=False)
    closed: bool = False
    _changed: trio.Event = field(default_factory=trio.Event)

    def __post_init__(self) -> None:
        self.screen = Screen(self.notify)
        self.timeline = Timeline(self.notify)

    def notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def changed(self) -> None:
        await self._changed.wait()

    async def follow(self) -> None:
        """Keep the screencast on the shown tab (after an action, which may have opened or closed one)."""
        await self.screen.follow(None if self.closed else self.shown())

    @asynccontextmanager
    async def wanting_frames(self) -> AsyncIterator[None]:
        """The screencast runs while the block does (and while any other wants it)."""
        self.screen.wanted += 1
        try:
            await self.follow()
            yield
        finally:
            self.screen.wanted -= 1
            with trio.CancelScope(shield=True), trio.move_on_after(2):
                await self.follow()

    def end(self) -> None:
        """The session closed: watchers are told, the screencast is gone with its tabs."""
        self.closed = True
        self.screen.on = None
        self.notify()


class Watcher:
    """One person's view of a session: `next()` is what changed since the last one it returned."""

    def __init__(self, watch: SessionWatch) -> None:
        self.watch = watch
        self._frame = 0
        self._step = 0
        self._console: tuple[str | None, int] = (None, -1)
        self._network = -1
        self._holder: tuple[str | None] | None = None
        self._url: str | None = None
        self._sent = -SEND_INTERVAL_S

    async def next(self) -> dict[str, Any]:
        """The next update (JSON-ready): waits until something changed, and at least SEND_INTERVAL_S since
        the last one; `closed` once the session ended."""
        await trio.sleep_until(self._sent + SEND_INTERVAL_S)
        while True:
            update = self._update()
            if update:
                self._sent = trio.current_time()
                return update
            await self.watch.changed()

    def _update(self) -> dict[str, Any]:
        w = self.watch
        out: dict[str, Any] = {}
        if w.closed:
            return {"closed": True, "actions": [s.json() for s in w.timeline.since(self._step)]}
        frame = w.screen.frame
        if frame is not None and frame.seq != self._frame:
            self._frame = frame.seq
            out["frame"] = frame.json()
        steps = w.timeline.since(self._step)
        if steps:
            self._step = steps[-1].seq
            out["actions"] = [s.json() for s in steps]
        holder = w.holder()
        if self._holder != (holder,):
            self._holder = (holder,)
            out["control"] = {"holder": holder}
        tab = w.shown()
        redacting = w.redacting()
        if tab is not None:
            url = shown_url(tab.url, redacting)
            if url != self._url:
                self._url = out["url"] = url
            console = (tab.name, tab.console.count)
            if console != self._console:
                self._console = console
                out["console"] = [{"level": e.level, "text": e.text, "url": shown_url(e.url or "", redacting),
                                   "line": e.line} for e in tab.console.newest(PANE_ROWS)]
        if w.network.version != self._network:
            self._network = w.network.version
            out["requests"] = [_entry(r.entry(redacting)) for r in w.network.newest(PANE_ROWS)]
        return out


def _entry(entry: Any) -> dict[str, Any]:
    return {k: v for k, v in msgspec.structs.asdict(entry).items() if v is not None}


def _number(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and v == v and abs(v) < 1e6 else 0.0


async def _quietly(call: Any) -> None:
    """A screencast command to a tab that may be going away: its failure is the tab's closing, no one's error."""
    try:
        await call
    except (CDPError, CDPClosed):
        pass
