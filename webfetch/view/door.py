"""Who may come in: the view's one security rule, an ASGI middleware in front of every route (HTTP and
websocket, the ones added later too), so that no page can forget it.

Three checks, in this order:
- the Host header must be a loopback name or address (`localhost`, `[::1]`, an address of 127.0.0.0/8 such
  as 127.0.0.1 or this install's own, address.py), with any port:
  a page on a foreign site whose name an attacker re-points at 127.0.0.1 (DNS rebinding) sends its own
  name, and is refused (403). The port is not checked: `ssh -L 8765:ADDRESS:PORT` makes the person's
  browser send its own end's port, and a browser sends the port of the URL it connects to, so a page of
  another local port never reaches ours with its own Host (the Origin check below holds it anyway);
- a secret. Three kinds, so that none that travels far is worth much (`Passes`):
  - the page's URL carries a one-time key (`?token=…`): each `view` op makes a new one, good for one
    exchange within `KEY_LIFE_S` of this daemon's life. A saved or bookmarked URL is dead after its first
    use and at a restart, so a process squatting the port while the daemon is down collects nothing that
    opens the page;
  - the exchange is answered with a redirect to the same path without the key and an HttpOnly,
    SameSite=Strict cookie (its name carries the port, so two daemons' views do not overwrite each other's),
    which holds a second secret: random, in memory only, new at each start of the daemon, never the bearer.
    Browsers do not scope cookies by port, so every other server on the same loopback address that the
    browser visits receives it: that server learns a secret that opens the page until the daemon restarts,
    and never `/mcp`. Every later request needs the cookie: none is 401, a wrong one 403;
  - `/mcp` takes the persistent token (`Token`, kept 0600 in the runtime directory) as
    `Authorization: Bearer` (an MCP client has no cookie jar and keeps it in its config); the cookie does
    not count there, and the token is never in a URL or a cookie;
- the Origin: every websocket and every request other than GET and HEAD must come from the page's own
  origin (`http://` + its Host), so another site open in the same browser, whose requests would carry the
  cookie if SameSite did not hold, cannot drive the daemon. On `/mcp` an absent Origin (an MCP client is
  no browser) passes with the bearer; a foreign one is refused.

A refusal is a short text/plain answer (or a websocket closed before it is accepted) that says what to do;
it never echoes the token.
"""

from __future__ import annotations

import hmac
import os
import secrets
import time
from collections.abc import Iterable
from http.cookies import CookieError, SimpleCookie
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

from starlette.types import ASGIApp, Receive, Scope, Send

from ..trust.private_files import write_private
from .address import loopback_literal

COOKIE = "webfetch_view_"  # + the port the door listens on
MCP_PATH = "/mcp"
TOKEN_FILE = "view-token"
TOKEN_BYTES = 32
KEY_LIFE_S = 3600.0          # a URL's one-time key, unused, dies after this (or at the daemon's stop)
KEYS_KEPT = 32               # unused keys remembered at once; the oldest is forgotten first
# The loopback names a browser may put in Host for our listeners, besides an IPv4 loopback address written
# out; any other name is DNS rebinding or a proxy we did not ask for.
LOOPBACK_HOSTS = ("localhost", "[::1]")


class Token:
    """The view's secret: read from `directory`/view-token when a daemon before us left one (a bearer in an
    MCP client's config keeps working across restarts, within the login session the runtime directory
    lives for), else made and written there 0600. `directory` is the socket's, which the daemon made 0700
    and checked (trust/socket_trust.py)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / TOKEN_FILE
        self.value = self._read() or self._make()

    def _read(self) -> str | None:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if st.st_uid != os.geteuid() or st.st_mode & 0o077:
                return None  # not ours alone: replaced below
            text = os.read(fd, 256).decode("ascii", "replace").strip()
        finally:
            os.close(fd)
        return text if len(text) >= 32 and text.isalnum() else None

    def _make(self) -> str:
        value = secrets.token_hex(TOKEN_BYTES)
        write_private(self.path, value.encode() + b"\n")
        return value

    def matches(self, candidate: str | None) -> bool:
        return candidate is not None and hmac.compare_digest(candidate.encode(), self.value.encode())


class Passes:
    """The page's own secrets, in memory only and new with each daemon start: the cookie's value, and the
    one-time keys the URLs `webfetch view` prints carry (`issue`, `redeem`)."""

    def __init__(self) -> None:
        self.cookie = secrets.token_hex(TOKEN_BYTES)
        self._keys: dict[str, float] = {}   # unused key -> when it dies (monotonic)

    def issue(self) -> str:
        now = time.monotonic()
        self._keys = {k: dies for k, dies in self._keys.items() if dies > now}
        while len(self._keys) >= KEYS_KEPT:
            del self._keys[next(iter(self._keys))]
        key = secrets.token_hex(TOKEN_BYTES)
        self._keys[key] = now + KEY_LIFE_S
        return key

    def redeem(self, key: str | None) -> bool:
        """Is `key` one we issued, unused and alive? It is used up either way."""
        if key is None:
            return False
        # compared to each in constant time: which key it is must not leak by timing
        found = next((k for k in self._keys if hmac.compare_digest(k.encode(), key.encode("utf-8", "replace"))),
                     None)
        if found is None:
            return False
        return self._keys.pop(found) > time.monotonic()

    def cookie_matches(self, candidate: str | None) -> bool:
        return candidate is not None and hmac.compare_digest(candidate.encode("utf-8", "replace"),
                                                             self.cookie.encode())


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name (a repeated one: its last value), latin-1 as HTTP's are."""
    return {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}


def loopback_host(host: str | None) -> bool:
    """Is `host` (a Host header) a loopback name, with a port or none (a forwarded port is the person's own)?"""
    if host is None:
        return False
    name, colon, port = host.lower().rpartition(":") if not host.endswith("]") else (host.lower(), "", "")
    if not colon:
        name = host.lower()
    elif not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        return False
    return name in LOOPBACK_HOSTS or loopback_literal(name)


def _cookie(header: str | None, name: str) -> str | None:
    if not header:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except CookieError:
        return None
    morsel = jar.get(name)
    return None if morsel is None else morsel.value


def _bearer(header: str | None) -> str | None:
    if header is None:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


class Door:
    """The middleware: `app` behind the three checks, for a front door listening on `port`."""

    def __init__(self, app: ASGIApp, token: Token, passes: Passes, port: int) -> None:
        self.app = app
        self.token = token
        self.passes = passes
        self.cookie_name = f"{COOKIE}{port}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)  # lifespan
            return
        headers = _headers(scope)
        host = headers.get("host")
        if not loopback_host(host):
            await _refuse(scope, receive, send, 403, "this page answers only on a loopback address (127.0.0.1, "
                          "localhost; from another machine: the ssh -L that `webfetch view` prints); open the URL "
                          "`webfetch view` prints")
            return
        own_origin = f"http://{host}"
        origin = headers.get("origin")
        path: str = scope["path"]
        if path == MCP_PATH or path.startswith(MCP_PATH + "/"):
            await self._mcp(scope, receive, send, headers, origin, own_origin)
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True))
        if scope["type"] == "http" and "token" in query:
            await self._exchange(scope, receive, send, query, _cookie(headers.get("cookie"), self.cookie_name))
            return
        cookie = _cookie(headers.get("cookie"), self.cookie_name)
        if cookie is None:
            await _refuse(scope, receive, send, 401, "not signed in: open the URL `webfetch view` prints (its "
                          "key works once, then a cookie does)")
            return
        if not self.passes.cookie_matches(cookie):
            await _refuse(scope, receive, send, 403, "signed in to an earlier start of the daemon, or a wrong "
                          "cookie: run `webfetch view` and open the URL it prints")
            return
        if (scope["type"] == "websocket" or scope["method"] not in ("GET", "HEAD")) and origin != own_origin:
            await _refuse(scope, receive, send, 403, f"cross-origin request refused: only pages of {own_origin} "
                          "may send this")
            return
        await self.app(scope, receive, send)

    async def _mcp(self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str],
                   origin: str | None, own_origin: str) -> None:
        bearer = _bearer(headers.get("authorization"))
        if bearer is None:
            await _refuse(scope, receive, send, 401, "MCP here needs `Authorization: Bearer <token>`; the token "
                          f"is in {self.token.path}")
            return
        if not self.token.matches(bearer):
            await _refuse(scope, receive, send, 403, f"wrong bearer token; the token is in {self.token.path}")
            return
        if origin is not None and origin != own_origin:
            await _refuse(scope, receive, send, 403, f"cross-origin request refused: only {own_origin} (or an "
                          "MCP client, which sends no Origin) may call /mcp")
            return
        await self.app(scope, receive, send)

    async def _exchange(self, scope: Scope, receive: Receive, send: Send, query: dict[str, str],
                        cookie: str | None) -> None:
        """`?token=KEY`: a live one-time key is traded for the cookie by a redirect to the same path without
        it; a browser already signed in (its cookie right) goes on there whatever the key, so a URL opened
        twice in the same browser still works."""
        redeemed = self.passes.redeem(query.get("token"))
        signed_in = self.passes.cookie_matches(cookie)
        if not (redeemed or signed_in):
            await _refuse(scope, receive, send, 403, "this link was used already, is older than the daemon's "
                          "last start, or is wrong: run `webfetch view` for a new one (each works once)")
            return
        rest = urlencode([(k, v) for k, v in query.items() if k != "token"])
        # one leading slash: `//site` or `/\site` in Location is another site to a browser (an open redirect)
        location = "/" + scope["path"].lstrip("/\\") + (f"?{rest}" if rest else "")
        headers = [(b"location", location.encode("latin-1", "replace")), (b"referrer-policy", b"no-referrer")]
        if redeemed:
            cookie_line = f"{self.cookie_name}={self.passes.cookie}; Path=/; HttpOnly; SameSite=Strict"
            headers.append((b"set-cookie", cookie_line.encode()))
        await _answer(send, 303, b"signed in; on to " + location.encode("latin-1", "replace") + b"\n", headers)


async def _answer(send: Send, status: int, body: bytes, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()), (b"cache-control", b"no-store"),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


async def _refuse(scope: Scope, receive: Receive, send: Send, status: int, message: str) -> None:
    """`status` with `message`; a websocket is closed before it is accepted (the browser sees the handshake
    fail with the status, by ASGI's websocket denial response where the server has it)."""
    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        body = message.encode() + b"\n"
        if "websocket.http.response" in scope.get("extensions", {}):
            await send({"type": "websocket.http.response.start", "status": status,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "websocket.http.response.body", "body": body})
        else:
            await send({"type": "websocket.close", "code": 1008})
        return
    await _answer(send, status, message.encode() + b"\n")
