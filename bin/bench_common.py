"""What the benchmarks share: the corpora and their halves, the word-bag F1, a loopback server of corpus pages
and a daemon of the bench's config. Its own module so that bench.py and the row files it runs
(bench_flags.py, bench_renders.py, …) import it rather than one another."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import json
import re
import sys
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.daemon import DEVTOOLS_PORT_ARG, ServedDaemon  # noqa: E402
from tests.support.site import QuietHTTPServer  # noqa: E402

RESOLVER = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"
WORD = re.compile(r"\w+")
LINK_TARGET = re.compile(r"\]\([^)]*\)")


def load_corpus(root: Path, name: str) -> list[dict]:
    truth = json.loads((root / name / "ground-truth.json").read_text())
    pages = []
    for pid, info in sorted(truth.items()):
        path = root / name / "html" / f"{pid}.html.gz"
        if path.exists() and info.get("articleBody", "").strip():
            pages.append({"id": pid, "corpus": name, "html": gzip.decompress(path.read_bytes()),
                          "truth": info["articleBody"], "type": info.get("page_type", "article")})
    return pages


def half(page: dict) -> str:
    """The page's half of its corpus by a fixed rule blind to its content: extraction rules are chosen on
    the "choose" half and judged on the "held-out" half, so that a rule tuned to the corpus shows."""
    return "choose" if hashlib.sha256(f"{page['corpus']}/{page['id']}".encode()).digest()[0] % 2 == 0 else "held-out"


def f1(predicted: str, truth: str) -> float:
    pred = Counter(WORD.findall(LINK_TARGET.sub("]", predicted).lower()))
    gold = Counter(WORD.findall(truth.lower()))
    overlap = sum((pred & gold).values())
    if not overlap:
        return 0.0
    p, r = overlap / sum(pred.values()), overlap / sum(gold.values())
    return 2 * p * r / (p + r)


class CorpusServer:
    def __init__(self, pages: list[dict]) -> None:
        by_path = {f"/{p['corpus']}/{p['id']}": p["html"] for p in pages}
        types: dict[str, str] = {}
        self.by_path, self.types = by_path, types
        self.delay_s = 0.0  # each answer held this long: a remote server's round trip and think time
        corpus = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                time.sleep(corpus.delay_s)
                body = by_path.get(self.path)
                if body is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", types.get(self.path, "text/html; charset=utf-8"))
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = QuietHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def url(self, page: dict) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{page['corpus']}/{page['id']}"

    def add(self, name: str, body: bytes, ctype: str = "application/pdf") -> str:
        """Serve `body` at /extra/NAME; its URL."""
        self.by_path[f"/extra/{name}"], self.types[f"/extra/{name}"] = body, ctype
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/extra/{name}"


PI = ROOT / "tests" / "node" / "node_modules" / ".bin" / "pi"
# the newest pi that installs here, and the Node (>= 22.19) it runs on: bin/_setup.sh installs both
CURRENT_PI_BIN = ROOT / "tests" / "node" / "pi-current" / "node_modules" / ".bin"


DAEMON_TREE = ROOT  # whose webfetch the daemons run: --daemon-tree sets another (e.g. main's, for a before/after)


def start_daemon(tmp: Path, render: str = "auto", block: list[str] | None = None, *, pi: Path = PI,
                 subagent_mode: str = "rpc", env: dict[str, str] | None = None,
                 devtools_port: bool = False) -> ServedDaemon:
    """A ready daemon of the bench's config (no DNS but 127.0.0.1, a cache that holds every page), its tab
    pool filled. With `devtools_port`, its Chrome opens a DevTools port too, for a reading from outside
    (procs.devtools_url: the memory rows count Chrome's own targets)."""
    blocked = json.dumps(["Image", "Media", "Font", "Stylesheet", *(block or [])])
    chrome_args = json.dumps([RESOLVER, *([DEVTOOLS_PORT_ARG] if devtools_port else [])])
    daemon = ServedDaemon(tmp, f'[fetch]\nallow_private = true\nrender = "{render}"\n'
                               f'[browser]\nargs = {chrome_args}\nblock_resources = {blocked}\n'
                               f'[cache]\nmax_bytes = 1073741824\n[subagent]\ncommand = {json.dumps(str(pi))}\n'
                               f'mode = "{subagent_mode}"\n', env, tree=DAEMON_TREE)
    daemon.wait_ready(30, then_s=1.0)  # then let the tab pool fill
    return daemon
