"""A site of big pages for the crawl's memory test and bin/bench_crawl: `/p/0` … `/p/{count-1}`, each about
`page_bytes` of HTML (paragraphs of text, so its markdown is almost as large) linking to the next LINKS pages.
A page is generated as it is sent, a block at a time: the server itself holds one block, never a page, so a
500-page run of 10 MB pages costs it nothing. No robots.txt and no sitemap (404): the links are the way
through, breadth first. `served` counts the pages sent whole."""

from __future__ import annotations

import http.server
import threading

from .site import QuietHTTPServer

LINKS = 16                      # each page links to the next 16: 500 pages within the deepest depth, 50
PARAGRAPH = ("The crawler keeps this long page in the cache and only its beginning in the result, so that a "
             "crawl of many such pages stays within its memory. ")
BLOCK_PARAGRAPHS = 4            # one block of a page: 4 paragraphs of ~20 KB of text
PARAGRAPH_REPEAT = 150          # a paragraph is its sentence this many times: few, long text nodes keep the
                                # parsing (three passes a page) to seconds, where 10 MB of short ones takes tens


class BigSite:
    def __init__(self, count: int, page_bytes: int = 9_900_000) -> None:
        """`page_bytes` just under fetch.max_bytes (10 MB) by default: a whole page, not one cut and flagged."""
        self.count = count
        self.page_bytes = page_bytes
        self.served = 0
        self._lock = threading.Lock()
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                n = site.number(self.path)
                if n is None:
                    self.send_response(404)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Content-Length", "9")
                    self.end_headers()
                    self.wfile.write(b"not found")
                    return
                head, block, tail = site.parts(n)
                blocks = max(1, (site.page_bytes - len(head) - len(tail)) // len(block))
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(head) + blocks * len(block) + len(tail)))
                self.end_headers()
                try:
                    self.wfile.write(head)
                    for _ in range(blocks):
                        self.wfile.write(block)
                    self.wfile.write(tail)
                except (BrokenPipeError, ConnectionResetError):
                    return
                with site._lock:
                    site.served += 1

        self.server = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def number(self, path: str) -> int | None:
        if not path.startswith("/p/") or not path[3:].isdigit():
            return None
        n = int(path[3:])
        return n if n < self.count else None

    def parts(self, n: int) -> tuple[bytes, bytes, bytes]:
        """Page n's start (title, links to the next pages), one block of its body, repeated, and its end."""
        links = "".join(f'<li><a href="/p/{m}">Page {m}</a></li>' for m in range(n + 1, min(n + 1 + LINKS,
                                                                                             self.count)))
        head = (f"<!doctype html><html><head><meta charset='utf-8'><title>Big page {n}</title></head><body>"
                f"<nav><ul>{links}</ul></nav><main><article><h1>Big page {n}</h1>").encode()
        block = "".join(f"<p>Page {n}, paragraph {i}: {PARAGRAPH * PARAGRAPH_REPEAT}</p>"
                        for i in range(BLOCK_PARAGRAPHS)).encode()
        return head, block, f"<ul>{links}</ul></article></main></body></html>".encode()

    def url(self, n: int = 0) -> str:
        return f"http://127.0.0.1:{self.port}/p/{n}"

    def start(self) -> BigSite:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
