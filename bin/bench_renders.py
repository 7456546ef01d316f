"""bin/bench's render rows (issue 28 item 4): which pages are rendered, under the old rule (render unless
trafilatura or readability find 1 000 characters in the server's HTML) and the new one
(webfetch/render_need.py: render when the server's HTML shows signs of client rendering), side by side.

- The script-built test set (tests/support/script_pages.py), per kind: the share of pages each rule renders
  and the word F1 of what each rule returns against the page's ground truth: a rendered page's markdown is
  what the daemon returns with `fetch.render = "always"` (real Chromium), a page not rendered gets the
  extraction of the server's HTML.
- The shared corpora (../shared/corpus, static HTML): the share of pages each rule would render, decided
  offline on the stored HTML (its extraction is the same under both rules, so is its F1), and the pages
  whose decision changes.
Alone: `.venv/bin/python bin/bench_renders.py [--corpus DIR] [--corpus-only]`."""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.daemon import ServedDaemon  # noqa: E402
from tests.support.script_pages import SCRIPT_PAGES, serve  # noqa: E402
from tests.support.site import Site  # noqa: E402
from webfetch.extractor import Extracted, ServerReading, read_server_html  # noqa: E402

OLD_ENOUGH_TEXT_CHARS = 1000  # the old rule's threshold (webfetch/pipeline.py before issue 28 item 4)
WORD = re.compile(r"\w+")
LINK_TARGET = re.compile(r"\]\([^)]*\)")


def old_rule_renders(extracted: Extracted | None) -> bool:
    return not (extracted is not None and extracted.extractor in ("trafilatura", "readability")
                and extracted.text_len >= OLD_ENOUGH_TEXT_CHARS)


def f1(predicted: str, truth: str) -> float:
    pred = Counter(WORD.findall(LINK_TARGET.sub("]", predicted).lower()))
    gold = Counter(WORD.findall(truth.lower()))
    overlap = sum((pred & gold).values())
    if not overlap:
        return 0.0
    p, r = overlap / sum(pred.values()), overlap / sum(gold.values())
    return 2 * p * r / (p + r)


def _rendered_markdown(site: Site) -> dict[str, str]:
    """Each test page's markdown as the daemon returns it when Chrome renders every page."""
    out: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="webfetch-bench-renders-") as tmp:
        d = ServedDaemon(Path(tmp), '[fetch]\nallow_private = true\nrender = "always"\n')
        try:
            d.wait_ready(30, then_s=0.5)
            for page in SCRIPT_PAGES:
                frame, _ = d.fetch(site.url(page.path), fresh=True, raw=True)
                out[page.name] = frame.get("content", "") if frame.get("type") == "result" else ""
        finally:
            d.stop()
    return out


def test_set_rows() -> None:
    site = Site().start()
    serve(site)
    try:
        rendered = _rendered_markdown(site)
    finally:
        site.stop()
    print("\nrenders, the script-built test set: pages rendered and word F1 (mean), old rule / new rule")
    print(f"{'kind':40}{'pages':>6}{'rendered old':>14}{'rendered new':>14}{'F1 old':>9}{'F1 new':>9}")
    kinds: dict[str, list[tuple[bool, bool, float, float]]] = {}
    for page in SCRIPT_PAGES:
        reading = read_server_html(page.html.encode(), None, "utf-8")
        server_md = reading.extracted.markdown if reading.extracted is not None else ""
        old, new = old_rule_renders(reading.extracted), reading.need.render
        scores = [f1(rendered[page.name] if r else server_md, page.truth_text) for r in (old, new)]
        kinds.setdefault(page.kind, []).append((old, new, scores[0], scores[1]))
    every = [row for rows in kinds.values() for row in rows]
    for kind, rows in [*kinds.items(), ("all", every)]:
        print(f"{kind:40}{len(rows):6}{sum(r[0] for r in rows):14}{sum(r[1] for r in rows):14}"
              f"{statistics.mean(r[2] for r in rows):9.3f}{statistics.mean(r[3] for r in rows):9.3f}")


def _corpus(root: Path, name: str) -> list[tuple[str, bytes]]:
    truth = json.loads((root / name / "ground-truth.json").read_text())
    pages = []
    for pid in sorted(truth):
        path = root / name / "html" / f"{pid}.html.gz"
        if path.exists():
            pages.append((pid, gzip.decompress(path.read_bytes())))
    return pages


def corpus_rows(root: Path) -> None:
    print("\nrenders, the shared corpora (static HTML, decided offline): share of pages rendered, old rule / new")
    for name in ("scrapinghub-aeb", "wcxb-test"):
        pages = _corpus(root, name)
        old = new = 0
        reasons: Counter[str] = Counter()
        for _pid, html in pages:
            reading: ServerReading = read_server_html(html, None)
            old += old_rule_renders(reading.extracted)
            new += reading.need.render
            if reading.need.reason is not None:
                reasons[re.sub(r"\(.*", "", reading.need.reason).strip()] += 1
        print(f"{name:18} pages {len(pages):4}  rendered old {old:4} ({old / len(pages):5.1%})  "
              f"new {new:4} ({new / len(pages):5.1%})")
        for reason, count in reasons.most_common():
            print(f"    {count:4}  {reason}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--corpus", default=os.environ.get("WEBFETCH_CORPUS", str(ROOT.parent / "shared" / "corpus")))
    ap.add_argument("--corpus-only", action="store_true", help="only the corpus rows (offline, no Chrome)")
    args = ap.parse_args()
    if not args.corpus_only:
        test_set_rows()
    corpus_rows(Path(args.corpus))


if __name__ == "__main__":
    main()
