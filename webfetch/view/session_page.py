"""A browse session's page in the view, `/session/NAME`, and a recording's replay, `/recordings/NAME`.

The session's page opens the websocket `/session/NAME/live`. The daemon sends what changed (JSON, at most
ten a second: browse/watch.py's `Watcher`): the newest frame of the screencast, which runs only while such a
page is open; the new steps of the timeline; the console and network panes; who holds the browser; and
`closed` when the session ends, after which the socket closes cleanly (code 1000). The page sends
`take_over`, `hand_back` and the person's `input` events (pointer positions as fractions of the frame;
browse/control.py checks each). Each websocket is one person: their control ends when it closes, so a page
closed while holding the browser hands it back.

`/recordings` lists the recordings (recordings.py), `/recordings/NAME` (`.jsonl` or not) replays one: the page
reads the file's lines from `/recordings/NAME/lines` and shows a scrubber over its frames with the actions beside them.

Pages are static files (static/session.*, static/replay.*: no CDN, no inline script); everything from the
session or a recording is put in the page as text, never as HTML. Every route is behind the front door."""

from __future__ import annotations

import json
import secrets
from typing import Any

import msgspec
import trio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from .. import recordings
from ..errors import WebfetchError
from .dashboard import SECURITY_HEADERS, static_files, static_response
from .viewed import Viewed

FILES = {"session.js": "text/javascript", "replay.js": "text/javascript", "session.css": "text/css"}
MESSAGE_CHARS = 4096        # one message from the page, at most (an input event is ~100 characters)


def routes(daemon: Viewed) -> list[BaseRoute]:
    async def session_page(request: Request) -> Response:
        return static_response("session.html", "text/html")

    async def live(websocket: WebSocket) -> None:
        await Live(daemon, websocket, websocket.path_params["name"]).run()

    async def recordings_list(request: Request) -> Response:
        files = await trio.to_thread.run_sync(recordings.listing)
        return JSONResponse([{"name": f.name, "size": f.size, "modified": f.modified} for f in reversed(files)],
                            headers=SECURITY_HEADERS)

    async def replay_page(request: Request) -> Response:
        return static_response("replay.html", "text/html")

    async def recording_lines(request: Request) -> Response:
        path = recordings.find(request.path_params["name"])
        if path is None:
            return Response("no such recording\n", 404, media_type="text/plain", headers=SECURITY_HEADERS)
        lines = await trio.to_thread.run_sync(recordings.read, path)
        return Response(msgspec.json.encode(lines), media_type="application/json", headers=SECURITY_HEADERS)

    return [Route("/session/{name}", session_page), Route("/session-files/{name}", static_files(FILES)),
            WebSocketRoute("/session/{name}/live", live),
            Route("/recordings", replay_page), Route("/recordings.json", recordings_list),
            Route("/recordings/{name}", replay_page), Route("/recordings/{name}/lines", recording_lines)]


class Live:
    """One person's websocket to one session's page."""

    def __init__(self, daemon: Viewed, websocket: WebSocket, session: str) -> None:
        self.browse = daemon.browse
        self.websocket = websocket
        self.session = session
        self.who = f"viewer {secrets.token_hex(2)}"  # who holds the browser, as the timeline and errors name them
        self._sending = trio.Lock()

    async def run(self) -> None:
        await self.websocket.accept()
        try:
            session = self.browse.sessions.get(self.session)
            await self.send({"you": self.who, "session": self.session,
                             "profile": None if session is None else session.profile})
            try:
                async with self.browse.watching(self.session) as watcher, trio.open_nursery() as nursery:
                    nursery.start_soon(self._receive, nursery.cancel_scope)
                    while True:
                        update = await watcher.next()
                        await self.send(update)
                        if update.get("closed"):
                            break
                    nursery.cancel_scope.cancel()
            except WebfetchError as e:  # no such session: closed before the page opened
                await self.send({"closed": True, "message": e.message})
            await self.websocket.close(1000)
        except (WebSocketDisconnect, trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self.browse.hand_back(self.session, self.who)

    async def send(self, message: dict[str, Any]) -> None:
        async with self._sending:
            await self.websocket.send_text(msgspec.json.encode(message).decode())

    async def _receive(self, done: trio.CancelScope) -> None:
        try:
            while True:
                text = await self.websocket.receive_text()
                await self._message(text)
        except (WebSocketDisconnect, trio.BrokenResourceError, trio.ClosedResourceError, KeyError):
            done.cancel()  # the page went: its watch ends (and its control, in run's finally)

    async def _message(self, text: str) -> None:
        try:
            if len(text) > MESSAGE_CHARS:
                raise ValueError("a message from the page is at most 4096 characters")
            message = json.loads(text)
            kind = message.get("type") if isinstance(message, dict) else None
            if kind == "take_over":
                self.browse.take_over(self.session, self.who)
            elif kind == "hand_back":
                self.browse.hand_back(self.session, self.who)
            elif kind == "done":  # the login is done: the session closes, its profile written back
                await self.browse.finish(self.session, self.who)
            elif kind == "input":
                await self.browse.user_input(self.session, self.who, message.get("event"))
            else:
                raise ValueError("a message is take_over, hand_back, input or done")
        except WebfetchError as e:
            await self.send({"error": e.message, "code": e.code})
        except ValueError as e:
            await self.send({"error": str(e), "code": "bad_request"})
