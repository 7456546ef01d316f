"""The view: the daemon's local web page (issue 37), an HTTP front door on loopback beside the socket.

`server.py` is the actor (`View`): hypercorn's trio worker serving a Starlette app on loopback, on the
install's own address (`address.py`), that `door.py` guards (the secrets, the Host and the Origin);
`dashboard.py` is the page at `/`; `session_page.py` a browse session's page (`/session/NAME`) and the
recordings (`/recordings`, replayed at `/recordings/NAME`); each page is a module whose `routes(daemon)`
server.py adds (its docstring says how); `viewed.py` is what the view reads of the daemon. MCP over HTTP
(`/mcp`) is a frontend (webfetch/frontends/mcp_http.py) the CLI's `serve` hands in.

May import: the core (protocol, errors, config, urls), `redact`, `recordings`, `_trio`, `server` (the socket
server's request log), `trust/`, and `browse` (the package, its one door: a browse session's page) and `chrome/`'s
handles. Must not import: `frontends/` (the daemon imports no frontend), `daemon.py` (it imports us: the
daemon reaches us through `Viewed`), `fetch/`, `crawl/` or `parse/`.
"""
