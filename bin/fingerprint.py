"""bin/fingerprint: record curl_cffi (impersonating webfetch.fetch.over_http.IMPERSONATE) and the system Chromium
against tests/support/tls_recorder.py and print the fields side by side (tests/support/fingerprints.py), then
the JA4 of each over --connections fresh connections, to show it does not move while the extension order does.
Alone: `.venv/bin/python bin/fingerprint.py [--connections N]`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.fingerprints import MAY_DIFFER, differing, record_chromium, record_curl, side_by_side  # noqa: E402
from tests.support.tls_recorder import FingerprintRecorder  # noqa: E402
from webfetch.fetch.over_http import IMPERSONATE  # noqa: E402


async def main(connections: int) -> int:
    with FingerprintRecorder() as rec:
        curl = [await trio.to_thread.run_sync(record_curl, rec, f"/curl_cffi/{i}") for i in range(connections)]
        chromium, product = [], ""
        for i in range(connections):  # a Chromium each: a fresh one opens a fresh connection
            conn, product = await record_chromium(rec, f"/chromium/{i}")
            chromium.append(conn)
    label_curl = f"curl_cffi {IMPERSONATE}"
    print(side_by_side(curl[0], label_curl, chromium[0], product))
    print()
    for label, conns in ((label_curl, curl), (product, chromium)):
        ja4s = sorted({c.hello.ja4() for c in conns})
        orders = len({tuple(c.hello.extensions) for c in conns})
        print(f"{label}: {len(conns)} connections, JA4 {', '.join(ja4s)}; {orders} distinct extension orders")
    must = [name for name in differing(curl[0], chromium[0]) if name not in MAY_DIFFER]
    print("every field that must match matches" if not must else f"MUST MATCH but differ: {', '.join(must)}")
    return 1 if must else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=3, help="fresh connections per client (default 3)")
    sys.exit(trio.run(main, max(1, parser.parse_args().connections)))
