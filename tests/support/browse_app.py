"""A small multi-page web app for the browse tests and bench, served on 127.0.0.1 (its iframe comes from
`localhost`, a second origin). What the browser did is checked on the server: `App.state` records every
form post, keyed by what was posted."""

from __future__ import annotations

import http.server
import json
import threading
import time
import urllib.parse
from typing import Any

from .site import QuietHTTPServer

CONSENT = """
<div id="consent" style="position:fixed;inset:0;background:rgba(0,0,0,.6);z-index:10">
  <div style="background:white;margin:120px auto;width:300px;padding:20px">
    <p>We use cookies.</p><button id="accept" onclick="document.cookie='consent=yes;path=/';
      document.getElementById('consent').remove()">Accept cookies</button>
  </div>
</div>
<script>if (document.cookie.includes('consent=yes')) document.getElementById('consent').remove();</script>
"""

LOGIN = """<!doctype html><html><head><title>Sign in</title></head><body>
<h1>Sign in</h1>
<form method="post" action="/login">
  <label for="user">Username</label> <input id="user" name="user" required>
  <input type="password" name="password" placeholder="Password">
  <button type="submit">Sign in</button>
</form>
<p id="error">%s</p>
""" + CONSENT + "</body></html>"

APP = """<!doctype html><html><head><title>Dashboard</title></head><body>
<h1>Dashboard</h1>
<p>Signed in as <b>%(user)s</b>.</p>
<nav><a href="#/orders" id="orders-link">Orders</a> <a href="/table">Big table</a>
  <a href="/popup" target="_blank">Help (new tab)</a>
  <button onclick="window.open('/popup?via=open')">Open window</button>
  <a href="/report.csv">Download report</a></nav>
<div id="route"></div>
<form id="profile" onsubmit="event.preventDefault(); save()">
  <label>Country <select name="country"><option value="">Choose…</option><option value="fr">France</option>
    <option value="de">Germany</option><option value="jp">Japan</option></select></label>
  <div id="size" role="combobox" aria-label="Size" aria-expanded="false" tabindex="0"
       onclick="toggleSize()" style="border:1px solid #888;width:120px;cursor:pointer">Medium</div>
  <div id="size-list" role="listbox" hidden>
    <div role="option" onclick="pickSize('Small')">Small</div>
    <div role="option" onclick="pickSize('Medium')">Medium</div>
    <div role="option" onclick="pickSize('Large')">Large</div>
  </div>
  <label><input type="checkbox" name="newsletter"> Newsletter</label>
  <label>Nickname <input id="nick" aria-label="Nickname"></label>
  <button type="submit">Save profile</button>
</form>
<p id="saved"></p>
<shop-widget></shop-widget>
<p><button onclick="alert('Saved drafts: 3')">Show drafts</button>
<button onclick="document.getElementById('answer').textContent = confirm('Delete everything?') ? 'deleted' : 'kept'">
  Delete all</button>
<button onclick="document.getElementById('answer').textContent = 'name=' + prompt('Your name?', 'anon')">
  Rename</button></p>
<p id="answer"></p>
<iframe src="%(frame)s" title="payment" width="400" height="150"></iframe>
<script>
// a controlled input, as React does it: the value shown is the state, set only from input events
const state = {nick: "", size: "Medium"};
const nick = document.getElementById("nick");
const desc = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, "value");
nick.addEventListener("input", (e) => { state.nick = e.target.value; render(); });
function render() { desc.set.call(nick, state.nick); }
function toggleSize() {
  const list = document.getElementById("size-list");
  list.hidden = !list.hidden;
  document.getElementById("size").setAttribute("aria-expanded", String(!list.hidden));
}
function pickSize(s) { state.size = s; document.getElementById("size").textContent = s; toggleSize(); }
async function save() {
  const f = document.getElementById("profile");
  const body = {country: f.country.value, newsletter: f.newsletter.checked, nick: state.nick, size: state.size};
  await fetch("/api/profile", {method: "POST", body: JSON.stringify(body)});
  document.getElementById("saved").textContent = "Profile saved";
}
customElements.define("shop-widget", class extends HTMLElement {
  constructor() {
    super();
    const root = this.attachShadow({mode: "open"});
    root.innerHTML = '<button>Add to basket</button><span></span>';
    root.querySelector("button").addEventListener("click", async () => {
      await fetch("/api/basket", {method: "POST", body: "{}"});
      root.querySelector("span").textContent = "In basket";
    });
  }
});
function route() {
  const r = document.getElementById("route");
  if (location.hash === "#/orders") {
    r.innerHTML = "<p>Loading orders…</p>";
    setTimeout(() => { r.innerHTML = "<h2>Orders</h2><p>Order 1042 shipped</p>"; }, 300);
  }
}
window.addEventListener("hashchange", route);
route();
</script>
</body></html>"""

FRAME = """<!doctype html><html><head><title>Pay</title></head><body>
<form method="post" action="/card"><input name="card" placeholder="Card number"><button>Pay</button></form>
</body></html>"""

POPUP = """<!doctype html><html><head><title>Help</title></head><body><h1>Help</h1>
<p>Ask the front desk.</p></body></html>"""


# every level of console message, the browser's own message about a failed fetch, and buttons that throw
# and reject with nothing to catch them
CONSOLE = """<!doctype html><html><head><title>Console</title></head><body><h1>Console</h1>
<button onclick="save()">Throw</button>
<button onclick="Promise.reject(new Error('quota exceeded'))">Reject</button>
<button onclick="console.log('clicked %s %d times', 'Log', 2)">Log</button><button onclick="fetch('http://%')">\
Fetch badly</button>
<script>
console.log("loaded", {user: "ann", items: 3});
console.info("info line");
console.warn("slow render");
console.error("bad thing", 42);
console.debug("debug line");
fetch("/api/missing").catch(() => 0);
function save() { const row = null; return row.id; }
</script>
</body></html>"""

# a page that logs three errors as it loads (console.error, an uncaught exception, a resource that fails), and
# another to go to: the first is kept in the back/forward cache (no unload handler, no no-store), so `nav back`
# restores it as it was, and its pageshow says so
HISTORY_A = """<!doctype html><html><head><title>Before</title></head><body><h1>Before</h1>
<a href="/history-b">Elsewhere</a><img src="/missing.png" alt="">
<script>console.error("first error");
addEventListener("pageshow", e => { if (e.persisted) console.log("shown again from the cache"); });</script>
<script>throw new Error("second error");</script>
</body></html>"""
HISTORY_B = """<!doctype html><html><head><title>Elsewhere</title></head><body><h1>Elsewhere</h1>
<script>console.log("on the other page");</script></body></html>"""
# a page whose button changes its title and nothing else (a tab's unread count)
INBOX = """<!doctype html><html><head><title>Inbox</title></head><body><h1>Inbox</h1>
<button onclick="document.title = 'Inbox (1)'">Fetch mail</button></body></html>"""

# an app whose Save posts to an API that answers 500 (with a cookie and a bearer token on the way out, and a
# cookie set on the way back), then reaches for an address the policy refuses (`to`) and for a port nothing
# listens on (`down`), and loads a binary;
# the secrets are in no body (the page builds the token), so a HAR without them has them redacted
NETWORK = """<!doctype html><html><head><title>Net</title></head><body><h1>Net</h1>
<button onclick="save()">Save</button><p id="out"></p>
<script>
async function save() {
  const r = await fetch("/api/fail?draft=1", {method: "POST", body: JSON.stringify({name: "ann"}),
    headers: {"Content-Type": "application/json", "Authorization": "Bearer " + ["token", "secret", "2"].join("-")}});
  await fetch("%(to)s/internal").catch(() => 0);
  await fetch("%(down)s/gone").catch(() => 0);
  await fetch("/api/logo.png").then(x => x.arrayBuffer());
  document.getElementById("out").textContent = "saved: " + r.status;
}
</script>
</body></html>"""
PNG = bytes.fromhex("89504e470d0a1a0a") + bytes(range(256))

# an app that sends every kind of secret (issue 34 item 8): its Send posts JSON with a password, an
# Authorization, an X-Api-Key and an X-CSRF-Token header, and an access_token in the URL beside q=ok; then
# a login form with a password; then goes where an OAuth server would send it, the tokens in the fragment.
# The cookie comes from the page's Set-Cookie, the API answers with another. Each secret's value is built
# by the script (`tok`), so that no body holds it and a view without them has them redacted.
SECRET_VALUES = ("qs-secret", "bearer-secret", "apikey-secret", "csrf-secret", "json-secret", "form-secret",
                 "frag-secret", "idtoken-secret", "cookie-secret-s", "setcookie-secret")
SECRETS_PAGE = """<!doctype html><html><head><title>Secrets</title></head><body><h1>Secrets</h1>
<button onclick="send()">Send</button><p id="out"></p>
<script>
const tok = (name) => [name, "secret"].join("-");
async function send() {
  await fetch("/api/echo?access_token=" + tok("qs") + "&q=ok", {method: "POST",
    headers: {"Content-Type": "application/json", "Authorization": "Bearer " + tok("bearer"),
              "X-Api-Key": tok("apikey"), "X-CSRF-Token": tok("csrf")},
    body: JSON.stringify({user: {name: "ann", password: tok("json")}})});
  await fetch("/api/echo?form=1", {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"},
    body: "user=ann&password=" + tok("form") + "&remember=yes"});
  location.assign("/landing?q=ok#access_token=" + tok("frag") + "&id_token=" + tok("idtoken") + "&state=ok");
}
</script>
</body></html>"""

# a click that starts a fetch whose no-store body the page never reads (issue 30: it held every click to
# the settle cap, since Chrome never finishes loading such a body)
NO_STORE = """<!doctype html><html><head><title>Unread</title></head><body>
<button onclick="fetch('/api/no-store?' + Date.now()); document.getElementById('out').textContent = 'started'">
  Start</button><p id="out"></p>
</body></html>"""

# what an action sets off that the settle waits for though no Network event says so in time: a body the page
# reads (its response's headers came long before it), and a change two animation frames later
LATER = """<!doctype html><html><head><title>Later</title></head><body>
<button onclick="load()">Load slowly</button><p id="got"></p>
<button onclick="requestAnimationFrame(() => requestAnimationFrame(() => {
  document.getElementById('drawn').textContent = 'drawn after two frames'; }))">Draw</button><p id="drawn"></p>
<a href="/slow-page">Away</a><form action="/slow-page"><button>Go away</button></form>
<form action="/nothing"><button>Go nowhere</button></form>
<script>
async function load() {
  const r = await fetch("/api/slow-body");
  document.getElementById("got").textContent = "got " + (await r.text());
}
</script>
</body></html>"""
SLOW_BODY_S = 0.4  # between /api/slow-body's headers and its body


def big_table(rows: int = 3000, controls: str = "") -> str:
    body = "".join(f"<tr><td>Item {i}</td><td><a href='/item/{i}'>details {i}</a></td>"
                   f"<td><button>Buy {i}</button></td></tr>" for i in range(rows))
    return (f"<!doctype html><html><head><title>Inventory</title></head><body><h1>Inventory</h1>{controls}"
            f"<table>{body}</table></body></html>")


# the table with buttons that change rows deep inside its collapsed run: one row (its text, its link
# gone), and forty rows' buttons disabled (more rows than a result lists one by one)
STOCK_CONTROLS = """<p><button onclick="const c = document.querySelectorAll('tr')[1500].cells[0];
  c.textContent += ' (sold out)'; c.nextElementSibling.firstChild.remove()">Sell out item 1500</button>
<button onclick="for (const r of [...document.querySelectorAll('tr')].slice(2000, 2040))
  r.cells[2].firstChild.disabled = true">Freeze 2000-2039</button></p>"""


class App:
    """The app's server. `state` holds what the browser posted: profile, basket, card, login."""

    def __init__(self) -> None:
        self.state: dict[str, Any] = {}
        self.cookies_seen: list[str] = []
        app = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def reply(self, status: int, body: str, ctype: str = "text/html; charset=utf-8",
                      headers: dict[str, str] | None = None) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def cookie(self, name: str) -> str | None:
                for part in (self.headers.get("Cookie") or "").split(";"):
                    k, _, v = part.strip().partition("=")
                    if k == name:
                        return v
                return None

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                app.cookies_seen.append(self.headers.get("Cookie") or "")
                if path in ("/", "/login"):
                    self.reply(200, LOGIN % "")
                elif path == "/app":
                    user = self.cookie("user")
                    if not user:
                        self.send_response(303)
                        self.send_header("Location", "/login")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    frame = f"http://localhost:{app.port}/frame"
                    self.reply(200, APP % {"user": user, "frame": frame})
                elif path == "/frame":
                    self.reply(200, FRAME)
                elif path == "/popup":
                    self.reply(200, POPUP)
                elif path == "/console":
                    self.reply(200, CONSOLE)
                elif path == "/history-a":
                    self.reply(200, HISTORY_A)
                elif path == "/history-b":
                    self.reply(200, HISTORY_B)
                elif path == "/inbox":
                    self.reply(200, INBOX)
                elif path == "/network":
                    query = urllib.parse.parse_qs(self.path.split("?", 1)[1])
                    to = query["to"][0]
                    page = NETWORK % {"to": to, "down": query.get("down", [to])[0]}
                    self.reply(200, page, headers={"Set-Cookie": "sid=cookie-secret-1; Path=/"})
                elif path == "/secrets":
                    self.reply(200, SECRETS_PAGE, headers={"Set-Cookie": "sess=cookie-secret-s; Path=/"})
                elif path == "/landing":
                    self.reply(200, "<html><head><title>Landed</title></head><body><h1>Landed</h1></body></html>")
                elif path == "/api/logo.png":
                    self.send_response(200)
                    self.send_header("Content-Type", "image/png")
                    self.send_header("Content-Length", str(len(PNG)))
                    self.end_headers()
                    self.wfile.write(PNG)
                elif path == "/unread":
                    self.reply(200, NO_STORE)
                elif path == "/api/no-store":
                    self.reply(200, json.dumps({"rows": ["x" * 100] * 2000}), "application/json",
                               {"Cache-Control": "no-store"})
                elif path == "/later":
                    self.reply(200, LATER)
                elif path == "/nothing":  # a navigation Chrome drops: the page stays
                    self.send_response(204)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif path == "/slow-page":
                    time.sleep(SLOW_BODY_S)
                    self.reply(200, "<html><head><title>Slow</title></head><body><h1>Arrived</h1></body></html>")
                elif path == "/api/slow-body":
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Content-Length", "13")
                    self.end_headers()
                    self.wfile.flush()
                    time.sleep(SLOW_BODY_S)
                    self.wfile.write(b"the slow body")
                elif path == "/table":
                    self.reply(200, big_table())
                elif path == "/stock":
                    self.reply(200, big_table(controls=STOCK_CONTROLS))
                elif path == "/report.csv":
                    self.reply(200, "a,b\n1,2\n", "text/csv",
                               {"Content-Disposition": 'attachment; filename="report.csv"'})
                elif path == "/whoami":
                    self.reply(200, f"<html><head><title>Who</title></head><body><p id=who>user={self.cookie('user')}"
                                    "</p></body></html>")
                elif path == "/reach":
                    # a page that reaches for another address in every way a page can
                    to = urllib.parse.parse_qs(self.path.split("?", 1)[1])["to"][0]
                    self.reply(200, f"<html><head><title>Reach</title><script src='{to}/script.js'></script>"
                                    f"</head>"
                                    f"<body><h1>Reach</h1><img src='{to}/img.png'><iframe src='{to}/frame'></iframe>"
                                    f"<a href='{to}/link'>Go there</a><script>fetch('{to}/fetch').catch(() => 0);"
                                    f"navigator.sendBeacon('{to}/beacon', 'x');</script></body></html>")
                elif path == "/card-done":
                    self.reply(200, "<html><head><title>Paid</title></head><body><h1>Payment received</h1>"
                                    "</body></html>")
                else:
                    self.reply(404, "<html><head><title>Not found</title></head><body><h1>Not found</h1></body></html>")

            def do_POST(self) -> None:
                path = self.path.split("?", 1)[0]
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                if path == "/login":
                    form = dict(urllib.parse.parse_qsl(raw))
                    app.state["login"] = form
                    if form.get("password") == "hunter2":
                        self.send_response(303)
                        self.send_header("Set-Cookie", f"user={form.get('user')}; Path=/")
                        self.send_header("Location", "/app")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                    else:
                        self.reply(200, LOGIN % "Wrong password")
                elif path == "/card":
                    app.state["card"] = dict(urllib.parse.parse_qsl(raw))
                    self.send_response(303)
                    self.send_header("Location", "/card-done")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif path == "/api/fail":
                    app.state["fail"] = raw
                    self.reply(500, json.dumps({"error": "database is down", "retry": False}), "application/json",
                               {"Set-Cookie": "sid=cookie-secret-3; Path=/"})
                elif path == "/api/echo":
                    app.state.setdefault("echo", []).append((self.headers.get("Authorization"), raw))
                    self.reply(200, '{"ok": true}', "application/json", {"Set-Cookie": "sid=setcookie-secret; Path=/"})
                elif path.startswith("/api/"):
                    app.state[path[5:]] = json.loads(raw or "{}")
                    self.reply(200, "{}", "application/json")
                else:
                    self.reply(404, "{}", "application/json")

        self.server = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
