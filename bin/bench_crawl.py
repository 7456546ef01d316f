"""bin/bench's crawl rows (issue 29): pages per second of `crawl` on the local docs site of the tests
(tests/support/docs_site.py, ~50 pages in scope at depth 3), every page loaded again (`fresh`), with the
per-host politeness as shipped (crawl.per_host = 4) and with it opened up (per_host = 16), the server answering
at once and with 50 ms per page (a real server's think time, where the bound costs most). Run alone:
`.venv/bin/python bin/bench_crawl.py`."""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.daemon import ServedDaemon  # noqa: E402
from tests.support.docs_site import DocsSite  # noqa: E402
from webfetch.frontends.client import Client  # noqa: E402

ROUNDS = 2


def _crawl(daemon: ServedDaemon, url: str) -> tuple[dict, float]:
    started = time.perf_counter()
    with Client(daemon.sock, autostart=False) as c:
        frame = list(c.request("crawl", url=url, limit=500, depth=3, fresh=True))[-1]
    return frame, time.perf_counter() - started


def crawl_rows(tmp: Path) -> None:
    print(f"\ncrawl of the local docs site, every page loaded (fresh), best of {ROUNDS}\n"
          f"{'politeness':34} {'server delay':>12} {'pages':>6} {'seconds':>8} {'pages/s':>8} {'peak/host':>9}")
    for label, per_host in (("on (crawl.per_host = 4)", 4), ("off for the bench (per_host = 16)", 16)):
        where = tmp / f"crawl-{per_host}"
        where.mkdir()
        daemon = ServedDaemon(where, f"[fetch]\nallow_private = true\n[crawl]\nper_host = {per_host}\n")
        try:
            daemon.wait_ready(30, then_s=1.0)
            for delay in (0.0, 0.05):
                site = DocsSite(delay_s=delay).start()
                try:
                    best = None
                    for _ in range(ROUNDS):
                        frame, seconds = _crawl(daemon, site.url("/docs/"))
                        assert frame["type"] == "result", frame
                        if best is None or seconds < best[1]:
                            best = (len(frame["pages"]), seconds)
                    pages, seconds = best
                    print(f"{label:34} {delay * 1000:10.0f} ms {pages:6} {seconds:8.2f} {pages / seconds:8.1f} "
                          f"{site.max_in_flight.get('127.0.0.1', 0):9}", flush=True)
                finally:
                    site.stop()
        finally:
            daemon.stop()


if __name__ == "__main__":
    tmp = Path(tempfile.mkdtemp(prefix="webfetch-bench-crawl-"))
    try:
        crawl_rows(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
