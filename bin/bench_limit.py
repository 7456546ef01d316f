"""bin/bench's limits for issue 28 item 6, and the lean client its cache-hit rows are timed with.

The static limit as throughput: what 8 concurrent clients are compared with.
The static limit is a warm process doing a keep-alive HTTP GET of a page and webfetch's extraction of the
server's HTML in-process; run as one process per core over the same pages as the 8-client row, in the same
run, against the same page server (bin/bench.py's, in the bench's own process: its CPU falls on both alike).

Each worker process is started, imports everything and extracts its first pages once (warm, as the daemon is
by then), then waits for `go` on its stdin; the clock runs from `go` until the last worker is done. A worker
takes every Nth page, so the pages of each kind are spread across the processes.

The socket limit: what a cache hit is compared with. A bare trio server on a Unix socket answering every
request line with the same bytes the daemon answered (its result frame for the page), timed on a new
connection with the same lean client: the floor that trio, the kernel and this machine's load put under
any answer of the daemon's, whatever the daemon does."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
WARM_PAGES = 3  # pages each worker extracts before the clock starts (imports, the connection, first calls)


@dataclass
class Throughput:
    pages: int
    processes: int
    elapsed_s: float
    cpu_s: float  # the workers' own CPU seconds, the page server's not included
    times: list[float]  # each page's GET and extraction, in seconds

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.elapsed_s

    @property
    def cpu_per_page_s(self) -> float:
        return self.cpu_s / self.pages


def static_limit_throughput(urls: list[str], processes: int = 2) -> Throughput:
    """The static limit over `urls` in `processes` worker processes at once."""
    workers = [subprocess.Popen([sys.executable, __file__, "--worker"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, cwd=ROOT)
               for _ in range(processes)]
    try:
        for n, worker in enumerate(workers):
            assert worker.stdin is not None and worker.stdout is not None
            worker.stdin.write(json.dumps(urls[n::processes]) + "\n")
            worker.stdin.flush()
        for worker in workers:  # every worker warm before the clock starts
            assert worker.stdout is not None
            if worker.stdout.readline().strip() != "ready":
                raise SystemExit("a static-limit worker failed while warming up")
        started = time.perf_counter()
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        reports = []
        for worker in workers:
            assert worker.stdout is not None
            reports.append(json.loads(worker.stdout.readline()))
        elapsed = time.perf_counter() - started
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()
    return Throughput(sum(r["pages"] for r in reports), processes, elapsed, sum(r["cpu_s"] for r in reports),
                      [t for r in reports for t in r["times"]])


def lean_request(sock_path: Path | str, line: bytes) -> tuple[dict, float]:
    """One request on a new connection, timed from connect to its terminal frame decoded: as little client
    as a caller can have (no file object, no per-call setup beyond the socket), so that a cache hit's row
    measures the daemon. The terminal frame, and the seconds."""
    from webfetch.protocol import decode_frame

    started = time.perf_counter()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(sock_path))
        sock.sendall(line)
        buf = b""
        while True:
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise SystemExit(f"the server closed the connection before answering: {buf[:200]!r}")
            buf += chunk
            if buf.endswith(b"\n"):
                frame = decode_frame(buf[buf.rfind(b"\n", 0, len(buf) - 1) + 1:])
                if frame.get("type") in ("result", "error"):
                    return frame, time.perf_counter() - started
    finally:
        sock.close()


SOCKET_FLOOR_SERVER = """
import sys, trio
ANSWER = sys.stdin.buffer.read()

async def answer(stream):
    async with stream:
        buf = b""
        while not buf.endswith(b"\\n"):
            data = await stream.receive_some(65536)
            if not data:
                return
            buf += data
        await stream.send_all(ANSWER)
        while await stream.receive_some(65536):
            pass

async def main():
    listeners = await trio.open_unix_listener(sys.argv[1]) if hasattr(trio, "open_unix_listener") else None
    if listeners is None:
        import socket
        sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        await sock.bind(sys.argv[1])
        sock.listen(128)
        listeners = trio.SocketListener(sock)
    await trio.serve_listeners(answer, [listeners])

trio.run(main)
"""


class SocketFloor:
    """A bare trio server answering `answer` (one frame, newline included) to every request line, in a
    process of its own, while in its `with` block; `request(line)` times one request on a new connection
    with lean_request, so that its rows can alternate with the daemon's under the same load."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.where = Path(tempfile.mkdtemp(prefix="webfetch-floor-")) / "floor.sock"

    def __enter__(self) -> SocketFloor:
        self.server = subprocess.Popen([sys.executable, "-c", SOCKET_FLOOR_SERVER, str(self.where)],
                                       stdin=subprocess.PIPE)
        assert self.server.stdin is not None
        self.server.stdin.write(self.answer)
        self.server.stdin.close()
        deadline = time.monotonic() + 30
        while not self._listening():  # the file appears at bind, before listen: until then a connect is refused
            if time.monotonic() > deadline or self.server.poll() is not None:
                self.__exit__()
                raise SystemExit("the socket-floor server did not start")
            time.sleep(0.02)
        return self

    def _listening(self) -> bool:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(str(self.where))
            except (FileNotFoundError, ConnectionRefusedError):
                return False
        return True

    def request(self, line: bytes) -> float:
        return lean_request(self.where, line)[1]

    def __exit__(self, *exc: object) -> None:
        self.server.kill()
        self.server.wait()
        if self.where.exists():
            os.unlink(self.where)
        os.rmdir(self.where.parent)


def _worker() -> None:
    sys.path.insert(0, str(ROOT))
    from webfetch.errors import ExtractionFailed
    from webfetch.parse.extractor import extract_html

    urls = json.loads(sys.stdin.readline())
    where = urlsplit(urls[0])
    conn = http.client.HTTPConnection(where.hostname or "127.0.0.1", where.port)

    def one(url: str) -> float:
        started = time.perf_counter()
        conn.request("GET", urlsplit(url).path)
        body = conn.getresponse().read()
        try:
            extract_html(body, url, "utf-8")
        except ExtractionFailed:  # a page with no main text: the work was done all the same
            pass
        return time.perf_counter() - started

    for url in urls[:WARM_PAGES]:
        one(url)
    print("ready", flush=True)
    sys.stdin.readline()  # go
    cpu_started = time.process_time()
    times = [one(url) for url in urls]
    print(json.dumps({"pages": len(urls), "cpu_s": time.process_time() - cpu_started, "times": times}), flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        _worker()
    else:
        raise SystemExit("run by bin/bench.py (static_limit_throughput); `--worker` is its worker process")
