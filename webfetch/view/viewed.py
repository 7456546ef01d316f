"""What the view reads of the daemon: `Viewed`, the daemon as the view's pages see it. daemon.py imports the
view, so the view cannot import it back; the `Daemon` matches this protocol by its shape."""

from __future__ import annotations

from typing import Protocol

from ..browse import Browse
from ..chrome.browser import Chrome
from ..config import Config
from ..protocol import RequestId, StatusResult
from ..server import Server


class Watched(Protocol):
    """The view's front door as its pages see it: `watchers` counts the live feeds open now (a page adds
    itself while its websocket is open), so that a daemon started on demand does not exit while watched."""

    watchers: int


class Viewed(Protocol):
    """The daemon: its config in force, its actors, and its `status` as the socket answers it."""

    config: Config
    browse: Browse
    chrome: Chrome
    server: Server  # the socket server: `server.requests` is the request log (in flight, recent, times)

    @property
    def view(self) -> Watched: ...  # read-only here: the daemon's `View`

    def status(self, rid: RequestId) -> StatusResult: ...
