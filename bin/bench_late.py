"""bin/bench's late-content rows (issue 28 item 5): fetch time, every page rendered (fetch.render = "always")
and fresh, of a page that settles with its content (a static article, and one a script fills within the
settle rule) beside a page whose script fills it 800 ms after load and a shell that never fills; with
`--against DIR` (a source tree of another commit, e.g. `git archive main webfetch | tar -x -C DIR`) the same
pages through that tree's daemon, its runs interleaved with this one's, side by side: the early pages must
not get slower, the late page must come back with its article instead of the shell.
Alone: `.venv/bin/python bin/bench_late.py [--against DIR] [--rounds N]`."""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.daemon import ServedDaemon  # noqa: E402
from tests.support.flag_pages import LATE_STORY, late_article  # noqa: E402
from tests.support.site import Site  # noqa: E402

PAGES = (("static article", "/article"), ("script fills it within the settle", "/js"),
         ("script fills it 800 ms after load", "/late/800"), ("shell that never fills", "/late/never"))


def late_rows(trees: list[tuple[str, Path]], rounds: int) -> None:
    site = Site().start()
    site.route("/late/story.json", lambda h: h.reply(200, "application/json", LATE_STORY))
    site.html("/late/800", late_article(800))
    site.html("/late/never", late_article(None))
    times: dict[tuple[str, str], list[float]] = {}
    flags: dict[tuple[str, str], set[str]] = {}
    with tempfile.TemporaryDirectory(prefix="webfetch-bench-late-") as tmp:
        daemons = {}
        try:
            for label, tree in trees:
                where = Path(tmp) / label
                where.mkdir()
                daemons[label] = ServedDaemon(where, '[fetch]\nallow_private = true\nrender = "always"\n', tree=tree)
            for d in daemons.values():
                d.wait_ready(30, then_s=1.0)
                d.fetch(site.url("/article"), fresh=True)  # warm: the first render starts the workers
            for n in range(rounds):
                # each tree goes first every other round: the one after the other's never-filling shell
                # would otherwise always be the one that meets a machine still busy with it
                for label, d in list(daemons.items())[::1 if n % 2 == 0 else -1]:
                    for _name, path in PAGES:
                        frame, took = d.fetch(site.url(path), fresh=True)
                        times.setdefault((label, path), []).append(took)
                        flags.setdefault((label, path), set()).add(",".join(frame.get("flags") or []) or
                                                                  ("-" if frame.get("type") == "result" else
                                                                   frame.get("code", "?")))
        finally:
            for d in daemons.values():
                d.stop()
            site.stop()
    print(f"\nlate content, every page rendered, fresh, {rounds} rounds: p50 ms (flags)")
    print(f"{'page':40}" + "".join(f"{label:>24}" for label, _ in trees))
    for name, path in PAGES:
        cells = [f"{statistics.median(times[label, path]) * 1000:8.0f} ({'/'.join(sorted(flags[label, path]))})"
                 for label, _ in trees]
        print(f"{name:40}" + "".join(f"{c:>24}" for c in cells))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--against", type=Path, help="another source tree to run beside this one")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    late_rows([("this", ROOT)] + ([(args.against.name, args.against.resolve())] if args.against else []),
              args.rounds)


if __name__ == "__main__":
    main()
