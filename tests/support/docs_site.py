"""A local documentation site of about 60 pages for the crawl and map tests and bin/bench: a robots.txt that
disallows a section, a sitemap index pointing at two sitemaps, pages reached only by links, a link loop, a
calendar that never ends (`/docs/cal?month=N` links to N+1), a section whose pages all fail, and one page that
answers 429 with Retry-After once. The server keeps its own log (every request: host, path, when) and counts
the requests in flight to each host, so a test reads politeness and robots off the server, not the crawler.

127.0.0.1 is the good site. `localhost` (the same server) serves the same pages under a robots.txt naming
broken sitemaps: indexes that point at each other, a malformed one, one with a DTD (billion laughs)."""

from __future__ import annotations

import gzip
import http.server
import threading
import time
from dataclasses import dataclass

from .site import QuietHTTPServer

GUIDE = 20
API = 20
EXTRA = 8
PRIVATE = 5
BROKEN = 10

WORDS = ("The crawler reads this page of the documentation and keeps it as markdown for an agent. "
         "Each section explains one part of the widget toolkit, with examples and the reasons behind them. ")


def _page(title: str, links: list[str], nav: list[str]) -> str:
    body = "".join(f"<p>{title}: {WORDS * 2}Paragraph {i}.</p>" for i in range(4))
    items = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    menu = "".join(f'<li><a href="{href}">{href}</a></li>' for href in nav)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head><body>"
            f"<nav><ul>{menu}</ul></nav><main><article><h1>{title}</h1>{body}<ul>{items}</ul></article></main>"
            f"</body></html>")


def _urlset(port: int, host: str, paths: list[str]) -> str:
    locs = "".join(f"<url><loc>http://{host}:{port}{p}</loc></url>" for p in paths)
    return f'<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locs}</urlset>'


def _index(port: int, host: str, paths: list[str]) -> str:
    locs = "".join(f"<sitemap><loc>http://{host}:{port}{p}</loc></sitemap>" for p in paths)
    return (f'<?xml version="1.0" encoding="UTF-8"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"{locs}</sitemapindex>")


LAUGHS = ('<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;">'
          '<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;">]><urlset><url><loc>&lol3;</loc></url></urlset>')


@dataclass
class Hit:
    host: str
    path: str
    at: float        # time.monotonic() when the request arrived
    status: int = 0


class DocsSite:
    """The site; `delay_s` holds every page that long (so requests overlap and a crawl can be caught mid-way)."""

    def __init__(self, delay_s: float = 0.05) -> None:
        self.delay_s = delay_s
        self.log: list[Hit] = []
        self.in_flight: dict[str, int] = {}
        self.max_in_flight: dict[str, int] = {}
        self.throttled: set[str] = set()   # paths that answered their one 429
        self._lock = threading.Lock()
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                host = (self.headers.get("Host") or "").rsplit(":", 1)[0]
                hit = Hit(host, self.path, time.monotonic())
                with site._lock:
                    site.log.append(hit)
                    site.in_flight[host] = site.in_flight.get(host, 0) + 1
                    site.max_in_flight[host] = max(site.max_in_flight.get(host, 0), site.in_flight[host])
                try:
                    status, ctype, body, headers = site.answer(host, self.path)
                    hit.status = status
                    data = body.encode() if isinstance(body, str) else body
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    with site._lock:
                        site.in_flight[host] -= 1

        self.server = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def paths(self, host: str = "127.0.0.1") -> list[str]:
        with self._lock:
            return [h.path for h in self.log if h.host == host]

    # --- the pages -------------------------------------------------------------------------------------

    NAV = ["/docs/", "/docs/guide/1", "/docs/api/1"]

    def answer(self, host: str, path: str) -> tuple[int, str, str | bytes, dict[str, str]]:
        if path == "/robots.txt":
            return 200, "text/plain", self.robots(host), {}
        if path.endswith((".xml", ".xml.gz")):
            return self.sitemap(host, path)
        page = self.page(path)
        if page is None:
            return 404, "text/html", "<html><body><h1>Not found</h1></body></html>", {}
        time.sleep(self.delay_s)
        if path == "/docs/guide/7" and path not in self.throttled:
            self.throttled.add(path)
            return 429, "text/html", "<html><body>Slow down</body></html>", {"Retry-After": "1"}
        if path.startswith("/docs/broken/") and path != "/docs/broken/":
            return 500, "text/html", "<html><body><h1>Internal error</h1></body></html>", {}
        return 200, "text/html; charset=utf-8", page, {}

    def robots(self, host: str) -> str:
        if host == "localhost":
            return (f"User-agent: *\nDisallow:\nSitemap: {self.url('/idx-a.xml', host)}\n"
                    f"Sitemap: {self.url('/bad.xml', host)}\nSitemap: {self.url('/laughs.xml', host)}\n"
                    f"Sitemap: {self.url('/good.xml.gz', host)}\n")
        return ("# the docs site\nUser-agent: *\nDisallow: /docs/private/\n\nUser-agent: OtherBot\nDisallow: /\n\n"
                f"Sitemap: {self.url('/sitemap-index.xml')}\n")

    def sitemap(self, host: str, path: str) -> tuple[int, str, str | bytes, dict[str, str]]:
        p, xml = self.port, "application/xml"
        guide = [f"/docs/guide/{i}" for i in range(1, GUIDE + 1)]
        api = [f"/docs/api/{i}" for i in range(1, API + 1)]
        files: dict[str, str | bytes] = {
            "/sitemap-index.xml": _index(p, host, ["/sitemaps/guide.xml", "/sitemaps/api.xml"]),
            "/sitemaps/guide.xml": _urlset(p, host, ["/docs/", *guide]),
            "/sitemaps/api.xml": _urlset(p, host, [*api, "/docs/private/1"]),
            "/idx-a.xml": _index(p, host, ["/idx-b.xml", "/idx-a.xml"]),
            # and one index entry on another host, which a crawl of this one does not read
            "/idx-b.xml": _index(p, host, ["/idx-a.xml", "/sitemaps/api.xml"]).replace(
                "</sitemapindex>", f"<sitemap><loc>http://127.0.0.2:{p}/sitemaps/guide.xml</loc></sitemap></sitemapindex>"),
            "/bad.xml": '<?xml version="1.0"?><urlset><url><loc>http://x/</loc></url',
            "/laughs.xml": LAUGHS,
            "/good.xml.gz": gzip.compress(_urlset(p, host, guide[:5]).encode()),
        }
        if path not in files:
            return 404, "text/html", "not found", {}
        return 200, "application/gzip" if path.endswith(".gz") else xml, files[path], {}

    def page(self, path: str) -> str | None:
        path, _, query = path.partition("?")
        nav = self.NAV
        if path == "/docs/":
            return _page("Docs home", ["/docs/guide/1", "/docs/api/1", "/docs/extra/1", "/docs/loop/a#top",
                                       "/docs/cal?month=1", "/docs/private/1", "https://elsewhere.invalid/x"], nav)
        section, _, number = path.removeprefix("/docs/").partition("/")
        counts = {"guide": GUIDE, "api": API, "extra": EXTRA, "private": PRIVATE, "broken": BROKEN}
        if section in counts and number.isdigit() and 1 <= int(number) <= counts[section]:
            n = int(number)
            links = [f"/docs/{section}/{n + 1}" if n < counts[section] else "/docs/",
                     f"/docs/private/{n % PRIVATE + 1}", "mailto:docs@example.com"]
            return _page(f"{section.title()} {n}", links, nav)
        if path == "/docs/broken/":
            return _page("Broken section", [f"/docs/broken/{i}" for i in range(1, BROKEN + 1)], [])
        if path == "/docs/loop/a":
            return _page("Loop A", ["/docs/loop/b", "./a", "/docs/loop/a#again", f"http://127.0.0.1:{self.port}"
                                                                                   "/docs/loop/b"], nav)
        if path == "/docs/loop/b":
            return _page("Loop B", ["/docs/loop/a", "b"], nav)
        if path == "/docs/cal" and query.startswith("month=") and query[6:].isdigit():
            month = int(query[6:])
            return _page(f"Calendar month {month}", [f"/docs/cal?month={month + 1}"], nav)
        return None

    def start(self) -> DocsSite:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
