"""The dashboard, the view's page at `/`: which daemon (version, config without secrets, uptime), Chrome and
the workers, the cache, the requests in flight (a crawl's with its latest progress) and the recent ones,
and a chart of the last hour's request times. Live: the page opens the websocket `/live`, which sends the
state (`snapshot`) once a second while it is open, and nothing when nobody watches.

The page is static (static/dashboard.html, .js, .css: no CDN, no build step); everything it shows comes
as JSON over the websocket (and the recordings' list from `/recordings.json`) and is put in the page as
text, never as HTML; a session and a recording are links to their pages. `static/common.js` is what every
page's script shares (served here, loaded first by each page).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import trio
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from .. import redact
from ..server import RequestRecord
from .viewed import Viewed

STATIC = Path(__file__).parent / "static"
LIVE_PERIOD_S = 1.0
# What our pages may load and reach: themselves alone (no inline script, no other origin, no framing).
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}
FILES = {"dashboard.js": "text/javascript", "common.js": "text/javascript", "view.css": "text/css"}


def routes(daemon: Viewed) -> list[BaseRoute]:
    async def page(request: Request) -> Response:
        return static_response("dashboard.html", "text/html")

    async def live(websocket: WebSocket) -> None:
        await websocket.accept()
        daemon.view.watchers += 1  # a watched daemon is not idle
        try:
            async with trio.open_nursery() as nursery:
                # the server drops what is sent to a closed websocket without a word: only a receive learns
                # that the page went, and then the feed ends
                nursery.start_soon(_until_closed, websocket, nursery.cancel_scope)
                while True:
                    await websocket.send_bytes(msgspec.json.encode(snapshot(daemon)))
                    await trio.sleep(LIVE_PERIOD_S)
        except (WebSocketDisconnect, trio.BrokenResourceError, trio.ClosedResourceError):
            return
        finally:
            daemon.view.watchers -= 1

    return [Route("/", page), Route("/static/{name}", static_files(FILES)), WebSocketRoute("/live", live)]


async def _until_closed(websocket: WebSocket, feed: trio.CancelScope) -> None:
    """Read the page's websocket (it sends nothing) until it closes; then end the feed."""
    while (await websocket.receive())["type"] != "websocket.disconnect":
        pass
    feed.cancel()


def static_files(files: dict[str, str]) -> Callable[[Request], Awaitable[Response]]:
    """The endpoint serving `files` (name: media type) by the route's `{name}`; any other name is a 404."""
    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in files:
            return Response("no such file\n", 404, media_type="text/plain")
        return static_response(name, files[name])
    return static


def static_response(name: str, media_type: str) -> Response:
    """One of our page files, with the headers that keep it to itself."""
    return Response((STATIC / name).read_bytes(), media_type=media_type, headers=SECURITY_HEADERS)


def config_summary(daemon: Viewed) -> dict[str, dict[str, Any]]:
    """The config in force by section, with every value whose name is a secret's masked and secrets in
    URLs and text masked (redact.py's one rule: status is shown, so it shows no key)."""
    summary: dict[str, dict[str, Any]] = {}
    for section, values in msgspec.to_builtins(daemon.config).items():
        summary[section] = {key: _shown(key, value) for key, value in values.items()}
    return summary


def _shown(key: str, value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value
    if redact.is_secret_name(key):
        return redact.MASK
    if isinstance(value, str):
        return redact.text(value)
    if isinstance(value, list):
        return [redact.text(str(v)) for v in value]
    return redact.text(str(value))


def _record(r: RequestRecord) -> dict[str, Any]:
    return {"op": r.op, "url": r.url, "started": r.started, "ms": r.ms, "outcome": r.outcome, "flags": r.flags,
            "cached": r.cached, "progress": r.progress}


def snapshot(daemon: Viewed) -> dict[str, Any]:
    """The state the dashboard shows, as JSON-ready values."""
    status = msgspec.to_builtins(daemon.status(None))
    log = daemon.server.requests
    return {
        "status": status,
        "config": config_summary(daemon),
        "workers": {"parsers": daemon.config.extract.worker_count(),
                    "subagents": daemon.config.subagent.max_concurrent},
        "in_flight": [_record(r) for r in log.in_flight.values()],
        "recent": [_record(r) for r in reversed(log.recent)],
        "times": [[round(t, 1), ms] for t, ms in log.times],
    }
