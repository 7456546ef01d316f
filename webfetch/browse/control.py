"""Who drives a session's browser: the agent, or a person who took it over in the view (a CAPTCHA, a second
factor, a login).

While a person holds it, an agent's action waits (its client is sent a progress frame saying the user has
the browser) for them to hand it back, at most browse.user_wait_s, then fails with `user_has_control`; a
second person asking is refused with who holds it. The person's pointer, wheel and keys on the live frame
reach the shown tab through CDP's Input domain: their position, sent as fractions of the frame, is mapped
onto the viewport the frame shows (its CSS size, from the frame's metadata). Events come from a web page,
so each is checked field by field before it reaches the tab; one that does not fit is refused whole."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

import trio

from ..errors import BadRequest, UserHasControl
from ..protocol import ReportProgress
from .actions import MODIFIERS, key_event

if TYPE_CHECKING:
    from .tab import BrowseTab
    from .watch import Frame, Timeline

MOUSE_EVENTS = {"down": "mousePressed", "up": "mouseReleased", "move": "mouseMoved", "wheel": "mouseWheel"}
BUTTONS = ("none", "left", "middle", "right")
MAX_WHEEL = 10_000.0
ALL_MODIFIERS = 1 | 2 | 4 | 8
KEY_CHARS = 32          # a DOM key name ("ArrowLeft", "a", "é") is short; anything longer is not a key


class Control:
    """A session's control: who holds its browser, if a person does."""

    def __init__(self, session: str, timeline: Timeline) -> None:
        self.session = session
        self.holder: str | None = None
        self.since = 0.0
        self._timeline = timeline
        self._free = trio.Event()
        self._free.set()

    def take_over(self, who: str) -> None:
        """`who` holds the browser from now on; UserHasControl if someone else does."""
        if self.holder == who:
            return
        if self.holder is not None:
            raise UserHasControl(f"{self.holder} has held session {self.session!r}'s browser since "
                                 f"{time.strftime('%H:%M:%S', time.localtime(self.since))}; wait for them to hand "
                                 f"it back")
        self.holder, self.since = who, time.time()
        self._free = trio.Event()
        self._timeline.add(who, "take over", message="the person has the browser; agent actions wait")

    def hand_back(self, who: str) -> bool:
        """`who` gives the browser back to the agent (their page closed, or they said so); whether they held it."""
        if self.holder != who:
            return False
        self.holder = None
        self._free.set()
        self._timeline.add(who, "hand back", message="the agent has the browser again")
        return True

    async def agent_turn(self, progress: ReportProgress, wait_s: float) -> None:
        """Return once no person holds the browser; while one does, tell the agent's client, and past
        `wait_s` fail with user_has_control."""
        if self.holder is None:
            return
        progress("person", f"the user has the browser (session {self.session!r}, taken over by {self.holder} in "
                           f"the view); this action waits up to {wait_s:g} s for them to hand it back")
        with trio.move_on_after(wait_s):
            await self._free.wait()
        if self.holder is not None:
            raise UserHasControl(f"the user has the browser: {self.holder} took session {self.session!r} over in "
                                 f"the view and has not handed it back after {wait_s:g} s; ask them to finish "
                                 f"and click 'hand back', then try again")

    def check_holder(self, who: str) -> None:
        if self.holder != who:
            raise BadRequest("take the browser over first: only the person holding it sends input")


async def dispatch(tab: BrowseTab, frame: Frame | None, event: Any) -> None:
    """One input event of the person's, from the view's page, to `tab`: BadRequest when it is not one."""
    if not isinstance(event, dict):
        raise BadRequest("an input event is an object")
    kind = event.get("type")
    if kind in MOUSE_EVENTS:
        await tab.call("Input.dispatchMouseEvent", mouse(frame, event))
    elif kind in ("keydown", "keyup"):
        await tab.call("Input.dispatchKeyEvent", key(event))
    else:
        raise BadRequest(f"unknown input event type {str(kind)[:20]!r}")


def mouse(frame: Frame | None, event: dict[str, Any]) -> dict[str, Any]:
    """Input.dispatchMouseEvent's fields for a pointer event at (`x`, `y`), fractions of the frame shown."""
    if frame is None or frame.width <= 0 or frame.height <= 0:
        raise BadRequest("no frame is shown yet to point at")
    fx, fy = _fraction(event.get("x")), _fraction(event.get("y"))
    button = event.get("button", "none")
    if button not in BUTTONS:
        raise BadRequest("button is one of none, left, middle, right")
    out: dict[str, Any] = {"type": MOUSE_EVENTS[event["type"]], "x": fx * frame.width,
                           "y": fy * frame.height, "modifiers": _modifiers(event.get("modifiers", 0))}
    if event["type"] in ("down", "up"):
        out["button"] = button
        out["clickCount"] = _int(event.get("clicks", 1), 1, 3)
    if event["type"] == "wheel":
        out["deltaX"] = _bounded(event.get("dx", 0), MAX_WHEEL)
        out["deltaY"] = _bounded(event.get("dy", 0), MAX_WHEEL)
    return out


def key(event: dict[str, Any]) -> dict[str, Any]:
    """Input.dispatchKeyEvent's fields for a DOM KeyboardEvent's `key` and modifier bits."""
    name = event.get("key")
    if not isinstance(name, str) or not 0 < len(name) <= KEY_CHARS:
        raise BadRequest("a key event needs its `key`")
    bits = _modifiers(event.get("modifiers", 0))
    try:
        fields, _ = key_event("Space" if name == " " else name)
    except BadRequest:
        fields = {"key": name, "code": "", "windowsVirtualKeyCode": 0}  # Shift, Control, Dead…: no text
    fields["modifiers"] = bits
    if bits & ~MODIFIERS["Shift"]:
        fields.pop("text", None)
    if event["type"] == "keyup":
        fields.pop("text", None)
        return {"type": "keyUp", **fields}
    return {"type": "keyDown" if "text" in fields else "rawKeyDown", **fields}


def _fraction(v: Any) -> float:
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 <= v <= 1:
        raise BadRequest("a pointer's x and y are fractions of the frame, 0 to 1")
    return float(v)


def _bounded(v: Any, limit: float) -> float:
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or abs(v) > limit:
        raise BadRequest(f"a wheel delta is a number within ±{limit:g}")
    return float(v)


def _int(v: Any, low: int, high: int) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or not low <= v <= high:
        raise BadRequest(f"expected a whole number from {low} to {high}")
    return v


def _modifiers(v: Any) -> int:
    return _int(v, 0, ALL_MODIFIERS)
