"""A small site with a cookie login, for the profile tests: a sign-in form that sets an HttpOnly session
cookie, a members-only page, and a page that re-issues the cookie with a new value (as sites refresh a
session). One handler serves 127.0.0.1 and 127.0.0.2 on one port, and `localhost` reaches the first, so a
test has three hosts whose cookies a browser keeps apart.

What the server saw is the test's to check: `sessions` (live session token → user), `hits` (each request's
host, path and the session token it carried, or None).

Routes (any host):
  GET  /login            the sign-in page (title "Sign in", a password form): webfetch flags it login_wall
  POST /login            user=…&password=hunter2 → Set-Cookie sid (HttpOnly, SameSite=Lax), 303 to `next`
                         or /members; a wrong password gets the form again with "Wrong password"
  GET  /members          member content with a live session; the sign-in page in place (status 200) without
  GET  /account          member content with a live session; a 303 to /login?next=/account without
  GET  /refresh          with a live session: a new token in a new sid cookie, the old token dead
  GET  /logout           the session ended, the cookie cleared
  GET  /whoami           text/plain: the user, or "anonymous"
  GET  /store            a page whose script keeps `greeting` in localStorage and shows what it found there
  GET  /app              a page its script builds from the login it keeps in localStorage (`token`), as
                         single-page apps do: the member text for a token, a sign-in prompt without;
                         `?beacon=HOST:PORT` has it ask HOST:PORT for /beacon first, and build the page
                         once that answered or failed
  GET  /embeds?from=HOST  a page whose script comes from HOST (this server's port): what a page's third-party
                         script host receives is in `hits` (names like app.corp.test need a resolver that maps
                         them here)
  GET  /set-cookies?domain=D  a page that sets `theme` for domain D (Domain=D) and a host-only `lang`
"""

from __future__ import annotations

import html
import http.server
import secrets
import threading
import urllib.parse
from typing import Any

from .site import QuietHTTPServer

PASSWORD = "hunter2"
MEMBER_TEXT = "Members area: the harbour lights are switched on at nine; bring the blue lantern."

SIGN_IN = """<!doctype html><html><head><title>Sign in</title></head><body>
<h1>Sign in</h1>
<p>Please sign in to continue.</p>
<form method="post" action="/login">
  <input type="hidden" name="next" value="%(next)s">
  <label for="user">Username</label> <input id="user" name="user" autocomplete="username">
  <label for="password">Password</label> <input id="password" type="password" name="password">
  <button id="sign-in" type="submit">Sign in</button>
</form>
<p id="error">%(error)s</p>
</body></html>"""

MEMBERS = """<!doctype html><html><head><title>Members</title></head><body>
<main><article>
<h1>Members</h1>
<p id="who">Signed in as %(user)s.</p>
<p>%(text)s</p>
<p>The members' page goes on with the notes of the last meeting: the boat house roof is mended, the
winter timetable starts on the first Monday of November, and the library keeps the new charts at the
desk. Ask the harbour master for the key to the chart room; it is kept in the red box by the door.</p>
</article></main>
</body></html>"""

STORE = """<!doctype html><html><head><title>Store</title></head><body><h1>Store</h1>
<p id="found">found: <span id="value"></span></p>
<script>
document.getElementById("value").textContent = localStorage.getItem("greeting") || "nothing";
localStorage.setItem("greeting", "hello from " + location.host);
</script></body></html>"""

APP = """<!doctype html><html><head><title>App</title></head><body><div id="root"></div><script>
const who = localStorage.getItem("token");
function build() {
  document.getElementById("root").innerHTML = who
    ? "<main><article><h1>Dashboard</h1><p>Signed in as " + who + ".</p><p>%(text)s</p><p>The dashboard goes " +
      "on with the notes of the last meeting: the boat house roof is mended, the winter timetable starts on " +
      "the first Monday of November, and the library keeps the new charts at the desk.</p></article></main>"
    : "<h1>Sign in</h1><p>Please sign in to continue.</p>";
}
const beacon = new URLSearchParams(location.search).get("beacon");
if (beacon) {  // built once the other host's script came (or was refused): its request is made first
  const script = document.createElement("script");
  script.src = "http://" + beacon + "/beacon";
  script.onload = script.onerror = build;
  document.head.appendChild(script);
} else {
  build();
}
</script></body></html>"""

EMBEDS = """<!doctype html><html><head><title>Embeds</title><script src="%(src)s"></script></head><body>
<main><h1>Embeds</h1><p>A page with a script from another host of the same site.</p></main></body></html>"""


class LoginApp:
    """The site's server; `start()` binds it (and returns it), `stop()` ends it."""

    def __init__(self) -> None:
        self.sessions: dict[str, str] = {}          # live session token → user
        self.hits: list[tuple[str, str, str | None]] = []  # (host, path, session token sent or None)
        self.port = 0
        self._servers: list[QuietHTTPServer] = []
        self._lock = threading.Lock()

    def start(self) -> LoginApp:
        handler = self._handler()
        for _ in range(20):  # 127.0.0.2 must get the port 127.0.0.1 got; another process may hold it there
            first = QuietHTTPServer(("127.0.0.1", 0), handler)
            port = first.server_address[1]
            try:
                second = QuietHTTPServer(("127.0.0.2", port), handler)
            except OSError:
                first.server_close()
                continue
            self.port, self._servers = port, [first, second]
            for server in self._servers:
                threading.Thread(target=server.serve_forever, daemon=True).start()
            return self
        raise RuntimeError("no port free on both 127.0.0.1 and 127.0.0.2")

    def url(self, path: str = "/members", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
        self._servers = []

    def login(self, user: str) -> str:
        """A new session for `user`, as a POST /login makes; its token."""
        token = secrets.token_hex(16)
        with self._lock:
            self.sessions[token] = user
        return token

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        app = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def send(self, status: int, body: str = "", ctype: str = "text/html; charset=utf-8",
                     headers: list[tuple[str, str]] | None = None) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Cache-Control", "no-store")
                for k, v in headers or []:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def token(self) -> str | None:
                for part in (self.headers.get("Cookie") or "").split(";"):
                    k, _, v = part.strip().partition("=")
                    if k == "sid":
                        return v
                return None

            def user(self) -> str | None:
                token = self.token()
                with app._lock:
                    return app.sessions.get(token) if token else None

            def record(self, path: str) -> None:
                host = (self.headers.get("Host") or "").rsplit(":", 1)[0]
                with app._lock:
                    app.hits.append((host, path, self.token()))

            def sign_in(self, error: str = "", next_path: str = "/members") -> None:
                self.send(200, SIGN_IN % {"next": html.escape(next_path), "error": error})

            def members(self, user: str, headers: list[tuple[str, str]] | None = None) -> None:
                self.send(200, MEMBERS % {"user": html.escape(user), "text": MEMBER_TEXT}, headers=headers)

            def do_GET(self) -> None:  # noqa: N802
                path, _, query = self.path.partition("?")
                self.record(path)
                user = self.user()
                if path == "/login":
                    self.sign_in(next_path=dict(urllib.parse.parse_qsl(query)).get("next", "/members"))
                elif path == "/members":
                    self.members(user) if user else self.sign_in(next_path="/members")
                elif path == "/account":
                    if user:
                        self.members(user)
                    else:
                        self.send(303, headers=[("Location", "/login?next=/account")])
                elif path == "/refresh" and user:
                    with app._lock:
                        app.sessions.pop(self.token() or "", None)
                    fresh = app.login(user)
                    self.members(user, [("Set-Cookie", _session_cookie(fresh))])
                elif path == "/refresh":
                    self.sign_in(next_path="/refresh")
                elif path == "/logout":
                    with app._lock:
                        app.sessions.pop(self.token() or "", None)
                    self.send(303, headers=[("Location", "/login"), ("Set-Cookie", "sid=; Path=/; Max-Age=0")])
                elif path == "/whoami":
                    self.send(200, user or "anonymous", "text/plain; charset=utf-8")
                elif path == "/store":
                    self.send(200, STORE)
                elif path == "/app":
                    self.send(200, APP % {"text": MEMBER_TEXT})
                elif path == "/embeds":
                    source = dict(urllib.parse.parse_qsl(query)).get("from", "")
                    self.send(200, EMBEDS % {"src": html.escape(f"http://{source}:{app.port}/whoami")})
                elif path == "/set-cookies":
                    domain = dict(urllib.parse.parse_qsl(query)).get("domain", "")
                    self.send(200, "<html><head><title>Cookies</title></head><body><h1>Cookies set</h1></body></html>",
                              headers=[("Set-Cookie", f"theme=dark; Domain={domain}; Path=/"),
                                       ("Set-Cookie", "lang=en; Path=/")])
                else:
                    self.send(404, "<html><head><title>Not found</title></head><body><h1>Not found</h1></body></html>")

            def do_POST(self) -> None:  # noqa: N802
                path = self.path.partition("?")[0]
                self.record(path)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                form: dict[str, Any] = dict(urllib.parse.parse_qsl(raw))
                if path != "/login":
                    self.send(404, "")
                    return
                next_path = form.get("next") or "/members"
                if not next_path.startswith("/") or next_path.startswith("//"):
                    next_path = "/members"
                if form.get("password") != PASSWORD or not form.get("user"):
                    self.sign_in("Wrong password", next_path)
                    return
                token = app.login(form["user"])
                self.send(303, headers=[("Location", next_path), ("Set-Cookie", _session_cookie(token))])

        return Handler


def _session_cookie(token: str) -> str:
    return f"sid={token}; Path=/; HttpOnly; SameSite=Lax"
