"""bin/bench's crawl rows (issue 29): pages per second of `crawl` on the local docs site of the tests
(tests/support/docs_site.py, ~50 pages in scope at depth 3), every page loaded again (`fresh`), with the
per-host politeness as shipped (crawl.per_host = 4) and with it opened up (per_host = 16), the server answering
at once and with 50 ms per page (a real server's think time, where the bound costs most). Run alone:
`.venv/bin/python bin/bench_crawl.py`.

`--memory [N]` (issue 34, item 7): instead, a crawl of N pages (default 500) of 10 MB each from
tests/support/big_site.py, streamed as `webfetch crawl` streams them, on a `webfetch serve` of its own with the
default cache and crawl settings; its peak RSS (the kernel's high-water mark, VmHWM) above its RSS when
idle, its parser workers' peaks, and the peak of the daemon and its workers summed (sampled every 0.2 s).
`--tree DIR` runs the webfetch of another checkout (main's, say) on the same site for comparison. A long run:
about 3 s a page on a quiet 2-core machine."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import procs  # noqa: E402
from tests.support.big_site import BigSite  # noqa: E402
from tests.support.daemon import ROOT, ServedDaemon  # noqa: E402
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


MIB = 1024
# a 10 MB page takes seconds to extract, more on a loaded machine: the bench measures memory, not deadlines
MEMORY_CONFIG = "[fetch]\nallow_private = true\ntimeout_s = 600\n[crawl]\ntimeout_s = 36000\n"


def memory_row(tmp: Path, pages: int, tree: Path = ROOT) -> None:
    """One crawl of `pages` pages of 10 MB, streamed; the daemon's and its parser workers' peak RSS."""
    daemon = ServedDaemon(tmp, MEMORY_CONFIG, tree=tree)
    site = BigSite(pages).start()
    try:
        daemon.wait_ready(60, then_s=2.0)
        pid = daemon.proc.pid
        idle = procs.status_field(pid, "VmRSS")
        idle_tree = idle + sum(procs.status_field(w, "VmRSS") for w in procs.parser_workers(pid))
        peak_tree, done = [idle_tree], threading.Event()

        def sample() -> None:
            while not done.wait(0.2):
                peak_tree[0] = max(peak_tree[0], procs.status_field(pid, "VmRSS") + sum(
                    procs.status_field(w, "VmRSS") for w in procs.parser_workers(pid)))
        threading.Thread(target=sample, daemon=True).start()
        started, streamed, result = time.perf_counter(), 0, {}
        with Client(daemon.sock, autostart=False, timeout=36000) as c:
            for frame in c.request("crawl", url=site.url(0), limit=pages, depth=50, stream=True):
                if frame["type"] == "page":
                    streamed += 1
                elif frame["type"] != "progress":
                    result = frame
        seconds = time.perf_counter() - started
        done.set()
        peak = procs.status_field(pid, "VmHWM")
        workers = [procs.status_field(w, "VmHWM") // MIB for w in procs.parser_workers(pid)]
        print(f"\ncrawl of {pages} pages of {site.page_bytes / 1e6:.1f} MB (webfetch of {tree}), streamed\n"
              f"result: {result.get('type')} {result.get('stopped') or result.get('code')}, "
              f"{len(result.get('pages', []))} pages in it, {streamed} streamed whole, {seconds:.0f} s\n"
              f"daemon RSS idle {idle // MIB} MiB, peak {peak // MIB} MiB: +{(peak - idle) // MIB} MiB\n"
              f"parser workers' peaks {workers} MiB; daemon and workers summed: idle {idle_tree // MIB} MiB, "
              f"peak {peak_tree[0] // MIB} MiB (+{(peak_tree[0] - idle_tree) // MIB} MiB)", flush=True)
    finally:
        site.stop()
        daemon.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memory", type=int, nargs="?", const=500, metavar="N",
                        help="the memory row: a crawl of N pages of 10 MB (default 500)")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose webfetch the memory row runs")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="webfetch-bench-crawl-"))
    try:
        if args.memory:
            memory_row(tmp, args.memory, args.tree.resolve())
        else:
            crawl_rows(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
