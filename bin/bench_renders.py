"""bin/bench's render rows (issue 28 item 4): which pages are rendered, under the old rule (render unless
trafilatura or readability find 1 000 characters in the server's HTML) and the new one
(webfetch/parse/render_need.py: render when the server's HTML shows signs of client rendering), side by side.

- The script-built test set (tests/support/script_pages.py), per kind: the share of pages each rule renders
  and the word F1 of what each rule returns against the page's ground truth.
- The shared corpora (../shared/corpus, static HTML): the share of pages each rule renders, and the word F1
  of each rule over every page, and over the pages whose decision differs.
A page not rendered gets the extraction of its server HTML (run here, as the daemon's worker does); a page
rendered gets what the daemon returns with `fetch.render = "always"` (real Chromium; the server's
extraction is read beside it, as in auto). Decisions are taken here on the same extraction the daemon
takes them on. Alone: `.venv/bin/python bin/bench_renders.py [--corpus DIR] [--corpus-pages N]`."""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bin"))

from bench_common import CorpusServer, f1, load_corpus, start_daemon  # noqa: E402

from tests.support.daemon import ServedDaemon  # noqa: E402
from tests.support.script_pages import SCRIPT_PAGES, serve  # noqa: E402
from tests.support.site import Site  # noqa: E402
from webfetch.parse.extractor import Extracted, ServerReading, read_server_html  # noqa: E402

OLD_ENOUGH_TEXT_CHARS = 1000  # the old rule's threshold (webfetch/fetch/pipeline.py before issue 28 item 4)


def old_rule_renders(extracted: Extracted | None) -> bool:
    return not (extracted is not None and extracted.extractor in ("trafilatura", "readability")
                and extracted.text_len >= OLD_ENOUGH_TEXT_CHARS)


def _rendered(daemon: ServedDaemon, url: str) -> str:
    frame, _ = daemon.fetch(url, fresh=True, raw=True, max_chars=10_000_000)
    return str(frame.get("content", "")) if frame.get("type") == "result" else ""


def _server_markdown(reading: ServerReading) -> str:
    return reading.extracted.markdown if reading.extracted is not None else ""


def test_set_rows(daemon: ServedDaemon) -> None:
    site = Site().start()
    serve(site)
    kinds: dict[str, list[tuple[bool, bool, float, float]]] = {}
    try:
        for page in SCRIPT_PAGES:
            reading = read_server_html(page.html.encode(), None, "utf-8")
            old, new = old_rule_renders(reading.extracted), reading.need.render
            rendered = _rendered(daemon, site.url(page.path)) if old or new else ""
            scores = [f1(rendered if r else _server_markdown(reading), page.truth_text) for r in (old, new)]
            kinds.setdefault(page.kind, []).append((old, new, scores[0], scores[1]))
    finally:
        site.stop()
    print("\nrenders, the script-built test set (tests/support/script_pages.py): pages rendered and word F1, "
          "old rule / new rule")
    print(f"{'kind':40}{'pages':>6}{'rendered old':>14}{'rendered new':>14}{'F1 old':>9}{'F1 new':>9}")
    every = [row for rows in kinds.values() for row in rows]
    for kind, rows in [*kinds.items(), ("all", every)]:
        print(f"{kind:40}{len(rows):6}{sum(r[0] for r in rows):14}{sum(r[1] for r in rows):14}"
              f"{statistics.mean(r[2] for r in rows):9.3f}{statistics.mean(r[3] for r in rows):9.3f}", flush=True)


def corpus_rows(daemon: ServedDaemon, server: CorpusServer, corpora: dict[str, list[dict]]) -> None:
    print("\nrenders, the shared corpora: pages rendered, word F1 (mean) of every page and of the pages whose "
          "decision differs, old rule / new rule")
    for name, pages in corpora.items():
        old_n = new_n = 0
        scores: list[tuple[float, float, bool]] = []
        reasons: Counter[str] = Counter()
        for page in pages:
            reading = read_server_html(page["html"], None)
            old, new = old_rule_renders(reading.extracted), reading.need.render
            old_n, new_n = old_n + old, new_n + new
            if reading.need.reason is not None:
                reasons[re.sub(r" \(.*", "", reading.need.reason)] += 1
            rendered = _rendered(daemon, server.url(page)) if old or new else ""
            server_md = _server_markdown(reading)
            scores.append((f1(rendered if old else server_md, page["truth"]),
                           f1(rendered if new else server_md, page["truth"]), old != new))
        changed = [s for s in scores if s[2]]
        print(f"{name:18} pages {len(pages):4}  rendered old {old_n:4} ({old_n / len(pages):5.1%}) new {new_n:4} "
              f"({new_n / len(pages):5.1%})  F1 old {statistics.mean(s[0] for s in scores):.4f} new "
              f"{statistics.mean(s[1] for s in scores):.4f}; the {len(changed)} pages decided otherwise: "
              + (_pair(changed) if changed else "-"), flush=True)
        for reason, count in reasons.most_common():
            print(f"    rendered, {count:4}: {reason}")


def _pair(scores: list[tuple[float, float, bool]]) -> str:
    return f"old {statistics.mean(s[0] for s in scores):.4f} new {statistics.mean(s[1] for s in scores):.4f}"


def render_rows(server: CorpusServer, corpora: dict[str, list[dict]], tmp: Path) -> None:
    """Both tables, with a daemon of its own that renders every page it is asked for; `server` serves
    the corpora's pages."""
    where = tmp / "renders"
    where.mkdir(exist_ok=True)
    daemon = start_daemon(where, "always")
    try:
        test_set_rows(daemon)
        corpus_rows(daemon, server, corpora)
    finally:
        daemon.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--corpus", default=os.environ.get("WEBFETCH_CORPUS", str(ROOT.parent / "shared" / "corpus")))
    ap.add_argument("--corpus-pages", type=int, default=0, help="pages per corpus (default 0 = all of them)")
    args = ap.parse_args()
    corpus = Path(args.corpus)
    corpora = {name: load_corpus(corpus, name) for name in ("scrapinghub-aeb", "wcxb-test")}
    if args.corpus_pages:
        corpora = {name: pages[:args.corpus_pages] for name, pages in corpora.items()}
    server = CorpusServer([p for pages in corpora.values() for p in pages])
    try:
        with tempfile.TemporaryDirectory(prefix="webfetch-bench-renders-") as tmp:
            render_rows(server, corpora, Path(tmp))
    finally:
        server.httpd.shutdown()


if __name__ == "__main__":
    main()
