"""An app whose states the browse tests force (routes, offline, emulation), served on loopback. Its page
loads `/api/items` and shows them, an error state for an HTTP error ("Error: the server answered 500") or an
offline banner when the request fails without an answer; it asks a second origin (`peer`, another
`StatesApp`) for `/api/ping`. Its `/where` page shows what the page's own script reads: the position,
the time zone, the language and Intl's locale, the color scheme and reduced motion. Every request the server
gets is logged with its headers (`requests`), so a test sees what reached the server and what did not."""

from __future__ import annotations

import http.server
import threading
from typing import Any

from .site import QuietHTTPServer

APP = """<!doctype html><html><head><title>Items</title></head><body>
<h1>Items</h1>
<p id="banner" role="alert" hidden>You are offline</p>
<p id="state">loading</p>
<ul id="items"></ul>
<p id="peer">peer: not asked</p>
<button onclick="load()">Reload items</button>
<button onclick="ping()">Ask the peer</button>
<script>
const banner = document.getElementById("banner"), state = document.getElementById("state");
addEventListener("offline", () => { banner.hidden = false; });
addEventListener("online", () => { banner.hidden = true; });
async function load() {
  state.textContent = "loading";
  let r;
  try {
    r = await fetch("/api/items");
  } catch (e) {
    banner.hidden = false;
    state.textContent = "no answer";
    return;
  }
  banner.hidden = true;
  if (!r.ok) { state.textContent = "Error: the server answered " + r.status; return; }
  const items = await r.json();
  document.getElementById("items").innerHTML = items.map(i => "<li>" + i + "</li>").join("");
  state.textContent = items.length + " items";
}
async function ping() {
  try {
    const r = await fetch("%(peer)s/api/ping");
    document.getElementById("peer").textContent = "peer: " + await r.text();
  } catch (e) {
    document.getElementById("peer").textContent = "peer: failed";
  }
}
load();
</script></body></html>"""

WHERE = """<!doctype html><html><head><title>Where</title></head><body>
<h1>Where</h1>
<div id="facts"></div>
<p id="position">position: not asked</p>
<button onclick="locate()">Locate me</button>
<script>
document.getElementById("facts").innerHTML = [
  "zone=" + Intl.DateTimeFormat().resolvedOptions().timeZone,
  "language=" + navigator.language,
  "languages=" + navigator.languages.join(","),
  "intl=" + Intl.NumberFormat().resolvedOptions().locale,
  "number=" + (1234.5).toLocaleString().replace(/\\s/g, "x"),
  "dark=" + matchMedia("(prefers-color-scheme: dark)").matches,
  "reduced=" + matchMedia("(prefers-reduced-motion: reduce)").matches,
  "agent=" + navigator.userAgent,
].map(f => "<p>" + f + "</p>").join("");
function locate() {
  navigator.geolocation.getCurrentPosition(
    p => { document.getElementById("position").textContent =
             "position: " + p.coords.latitude + "," + p.coords.longitude; },
    e => { document.getElementById("position").textContent = "position: refused (" + e.message + ")"; });
}
</script></body></html>"""

ITEMS = '["apple", "pear", "plum"]'


class StatesApp:
    """The app's server on `host`. `requests` holds (path, headers) of every request it got, in order."""

    def __init__(self, host: str = "127.0.0.1", peer: str = "") -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.peer = peer
        self._lock = threading.Lock()
        app = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def reply(self, status: int, body: str, ctype: str = "text/html; charset=utf-8") -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Access-Control-Allow-Origin", "*")
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                with app._lock:
                    app.requests.append((path, {k.lower(): v for k, v in self.headers.items()}))
                if path == "/":
                    self.reply(200, APP % {"peer": app.peer})
                elif path == "/where":
                    self.reply(200, WHERE)
                elif path == "/api/items":
                    self.reply(200, ITEMS, "application/json")
                elif path == "/api/ping":
                    self.reply(200, "pong", "text/plain")
                else:
                    self.reply(404, "<html><head><title>Not found</title></head><body>Not found</body></html>")

        self.server = QuietHTTPServer((host, 0), Handler)
        self.host = host
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.port}{path}"

    def hits(self, path: str) -> list[dict[str, str]]:
        """The headers of each request the server got for `path`."""
        with self._lock:
            return [headers for p, headers in self.requests if p == path]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> StatesApp:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
