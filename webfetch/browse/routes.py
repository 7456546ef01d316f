"""A browse session's routes: requests its pages make, answered by the daemon instead of the server (a
status, headers and a body) or failed as the network fails (`abort` with Chrome's error name), so an agent
can see its own app's error states on demand. `route` sets one, `unroute` takes them away, `routes` lists
them; they are the session's and go with it.

A route's pattern is matched against each request's whole URL: `*` is any run of characters (slashes too),
everything else is itself. It is text from a tool argument matched against every request of the session in
the event loop, so it is matched linearly (`urls.wildcard_match`), never as a regular expression. The newest
route whose pattern matches answers; a route for a pattern already routed replaces it; one given `times`
answers that many requests and is gone. At most `MAX_ROUTES` a session, and a body of at most
`MAX_BODY_BYTES` (text, or a file read under the upload rule, uploads.py, when the route is set).

The requests reach routes only once the session's host gate let them through (tab.py): a route answers
for an address the page may reach, it never makes a refused one reachable. A cross-origin request a route
answers gets the CORS headers that let the page read it (its `Origin` allowed, unless the route's own
headers say otherwise), and its preflight is answered 204 for it: the route's answer is what the page sees,
not a CORS failure."""

from __future__ import annotations

import base64
import itertools
import mimetypes
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import BadRequest
from ..protocol import BrowseRequest
from ..urls import wildcard_match

MAX_ROUTES = 50
MAX_BODY_BYTES = 1 << 20
MAX_PATTERN = 2048
MAX_HEADERS = 50
# an HTTP header's name (RFC 9110's token); its value: no line break or NUL, which would end the header
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}")
BAD_VALUE = re.compile(r"[\r\n\0]")


def header_lines(given: dict[str, str], what: str) -> list[tuple[str, str]]:
    """`given` as header lines, each name an HTTP token and each value one line: bad_request naming the first
    that is not (`what` says whose headers they are)."""
    if len(given) > MAX_HEADERS:
        raise BadRequest(f"{what}: at most {MAX_HEADERS} headers, not {len(given)}")
    for name, value in given.items():
        if not HEADER_NAME.fullmatch(name):
            raise BadRequest(f"{what}: {name[:60]!r} is not a header name (letters, digits and -_.!#$%&'*+^`|~)")
        if BAD_VALUE.search(value) or len(value) > 8192:
            raise BadRequest(f"{what}: the value of {name} must be one line of at most 8 192 characters")
    return list(given.items())


@dataclass
class Route:
    number: int                          # route 1, 2, … in the session
    pattern: str
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    abort: str | None = None             # Fetch.ErrorReason: the request fails with it
    times: int | None = None             # the requests it still answers (None: every one)
    used: int = 0

    def __post_init__(self) -> None:
        self.pieces = tuple(self.pattern.split("*"))

    def matches(self, url: str) -> bool:
        return wildcard_match(self.pieces, url, anchored=True)

    def outcome(self) -> str:
        """What it does, in a few words: `500, 23 B` or `abort InternetDisconnected`."""
        if self.abort is not None:
            return f"abort {self.abort}"
        kind = next((v for k, v in self.headers if k.lower() == "content-type"), "")
        return f"{self.status}, {len(self.body):,} B{f' {kind}' if kind else ''}"

    def line(self) -> str:
        left = "" if self.times is None else f", {self.times} more time{'s' if self.times != 1 else ''}"
        return f"route {self.number}: {self.pattern} → {self.outcome()} (answered {self.used}{left})"

    def fulfil(self, request_id: str, request: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The CDP command that answers the paused request with this route."""
        if self.abort is not None:
            return "Fetch.failRequest", {"requestId": request_id, "errorReason": self.abort}
        headers = [{"name": k, "value": v} for k, v in self.headers]
        origin = _header(request.get("headers") or {}, "origin")
        if origin and not any(k.lower() == "access-control-allow-origin" for k, _ in self.headers):
            headers += [{"name": "Access-Control-Allow-Origin", "value": origin},
                        {"name": "Access-Control-Allow-Credentials", "value": "true"}]
        return "Fetch.fulfillRequest", {"requestId": request_id, "responseCode": self.status,
                                        "responseHeaders": headers, "body": base64.b64encode(self.body).decode()}


def preflight(request_id: str, request: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A CORS preflight for a request a route answers: allowed, so the route's answer reaches the page."""
    headers = request.get("headers") or {}
    allow = [("Access-Control-Allow-Origin", _header(headers, "origin")),
             ("Access-Control-Allow-Credentials", "true"),
             ("Access-Control-Allow-Methods", _header(headers, "access-control-request-method") or "GET"),
             ("Access-Control-Allow-Headers", _header(headers, "access-control-request-headers") or "*")]
    return "Fetch.fulfillRequest", {"requestId": request_id, "responseCode": 204,
                                    "responseHeaders": [{"name": k, "value": v} for k, v in allow if v]}


def is_preflight(request: dict[str, Any]) -> bool:
    return request.get("method") == "OPTIONS" and bool(_header(request.get("headers") or {},
                                                               "access-control-request-method"))


class RouteTable:
    """A session's routes, newest last."""

    def __init__(self) -> None:
        self._routes: list[Route] = []
        self._numbers = itertools.count(1)

    def __len__(self) -> int:
        return len(self._routes)

    def add(self, route: Route) -> Route:
        """Set `route` (numbered here), replacing one of the same pattern; bad_request past MAX_ROUTES."""
        kept = [r for r in self._routes if r.pattern != route.pattern]
        if len(kept) >= MAX_ROUTES:
            raise BadRequest(f"{MAX_ROUTES} routes are set in this session, the most it keeps; remove one "
                             f"(unroute with its pattern) or all (unroute)")
        route.number = next(self._numbers)
        self._routes = [*kept, route]
        return route

    def remove(self, pattern: str | None) -> list[Route]:
        """Take away the route of `pattern` (every route when None): those removed."""
        gone = [r for r in self._routes if pattern is None or r.pattern == pattern]
        self._routes = [r for r in self._routes if r not in gone]
        return gone

    def listed(self) -> list[Route]:
        return list(self._routes)

    def match(self, url: str, use: bool = True) -> Route | None:
        """The newest route for `url`; with `use`, it answers it: counted, and gone after its `times`."""
        for route in reversed(self._routes):
            if route.matches(url):
                if use:
                    route.used += 1
                    if route.times is not None:
                        route.times -= 1
                        if route.times <= 0:
                            self._routes.remove(route)
                return route
        return None


def requested(req: BrowseRequest, body_file: bytes | None) -> Route:
    """The route a `route` request asks for (`body_file`: the content of its `body_file`, read under the
    upload rule); bad_request for a pattern that cannot match or a response that is not one."""
    pattern = _pattern(req.url)
    _check_response(req)
    body = body_file if body_file is not None else (req.body or "").encode()
    if len(body) > MAX_BODY_BYTES:
        raise BadRequest(f"a route's body is at most {MAX_BODY_BYTES:,} bytes")
    headers = header_lines(req.headers or {}, "route headers")
    if req.abort is None and body and not any(k.lower() == "content-type" for k, _ in headers):
        headers.append(("Content-Type", _content_type(req.body_file)))
    return Route(0, pattern, req.status or 200, tuple(headers), body, req.abort, req.times)


def _pattern(pattern: str | None) -> str:
    if not pattern:
        raise BadRequest("route needs `url`: a pattern of the whole URL, `*` for any characters "
                         "(http://127.0.0.1:3000/api/* or */api/items*)")
    if len(pattern) > MAX_PATTERN:
        raise BadRequest(f"a route's pattern is at most {MAX_PATTERN} characters")
    if not pattern.startswith(("http://", "https://", "*")):
        raise BadRequest(f"a route's pattern matches the whole URL, scheme and host included: {pattern[:80]!r} "
                         f"never would; write */{pattern.lstrip('/*')[:80]}* or http://HOST/{pattern.lstrip('/*')[:80]}")
    return pattern


def _check_response(req: BrowseRequest) -> None:
    responds = req.status is not None or req.body is not None or req.body_file is not None or bool(req.headers)
    if req.abort is not None and responds:
        raise BadRequest("a route either answers (status, headers, body or body_file) or aborts, not both")
    if req.abort is None and not responds:
        raise BadRequest("route needs a response (status, headers, body or body_file) or `abort` with a network "
                         "error (InternetDisconnected, ConnectionRefused, TimedOut…)")
    if req.body is not None and req.body_file is not None:
        raise BadRequest("a route's body is `body` or `body_file`, not both")


def _content_type(body_file: str | None) -> str:
    """A body's type when the route's headers give none: by the file's name, else text."""
    if body_file is None:
        return "text/plain; charset=utf-8"
    return mimetypes.guess_type(Path(body_file).name)[0] or "application/octet-stream"


def _header(headers: dict[str, str], name: str) -> str:
    return next((str(v) for k, v in headers.items() if k.lower() == name), "")
