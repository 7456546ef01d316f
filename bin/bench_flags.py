"""bin/bench's flag rows (issue 16, "no silent success"), through the daemon:
1. precision and recall of each flag on tests/support/flag_pages.py (interstitials as they really look, and
   ordinary near misses), served on 127.0.0.1;
2. flags on the shared corpora's ordinary pages: each flagged page is listed with its evidence; a page
   whose flag was checked by hand against the corpus's own ground truth and found right is counted apart,
   every other flag is a false flag (the goal: none).
Alone: `.venv/bin/python bin/bench_flags.py` (the test set through a daemon, about a minute) or with `--direct`
(webfetch/parse/flags.py on the pages, seconds)."""

from __future__ import annotations

import argparse
import gzip
import shutil
import statistics
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.flag_pages import CASES  # noqa: E402
from tests.support.site import Site  # noqa: E402
from webfetch.errors import ExtractionFailed  # noqa: E402
from webfetch.parse.extractor import extract_html  # noqa: E402
from webfetch.parse.flags import FLAG_NAMES, detect  # noqa: E402

# Corpus pages whose flag is right, checked by hand against the corpus's ground truth (the stored page
# IS the wall): not false flags, but listed so anyone can check again.
TRUE_IN_CORPUS = {
    "042bb7b5fedab6eac7db576522b89b93904c237d344bcbe14a6a5ab7f7335856":
        ("paywall", "wsj.com, isAccessibleForFree false; the stored page holds 369 characters of the article"),
    "7ab16ade32386ece353b8d31fc3bb7e660189efd5bf3c8549aaba101ad3f5ef5":
        ("paywall", "wsj.com, isAccessibleForFree false; the stored page holds 536 characters of the article"),
    "4352": ("challenge", "samsclub.com/are-you-human: a PerimeterX 'Let us know you're human' page"),
    "4897": ("paywall", "a product page whose text is 'This content is reserved for members only'"),
}


def flag_rows(daemon: Any, server: Any, corpus_root: Path | None, corpora: dict[str, list[dict]]) -> None:
    """corpus_root: add the corpus pages the F1 rows skip (None: only the pages in `corpora`)."""
    test_set(daemon)
    on_corpora(daemon, server, corpus_root, corpora)


def test_set(daemon: Any) -> None:
    """Precision and recall on tests/support/flag_pages.py through the daemon (Chromium, the socket)."""
    site = Site().start()
    try:
        for case in CASES:
            target = case.final_path.split("?")[0] if case.final_path else case.url_path
            site.html(target, case.html, status=case.status)
            if case.final_path:
                site.route(case.url_path, lambda h, to=case.final_path: h.redirect(302, to))

        def one(case):
            frame, t = daemon.fetch(site.url(case.url_path), fresh=True)
            return case, frame, t

        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(one, CASES))
    finally:
        site.stop()
    got = {}
    misses = []
    for case, frame, _ in results:
        got[case.name] = set(frame.get("flags", [])) if frame["type"] == "result" else set()
        if frame["type"] != "result":
            misses.append(f"{case.name}: error {frame['code']}: {frame['message'][:80]}")
    print(f"\nflags: tests/support/flag_pages.py through the daemon (median fetch "
          f"{statistics.median(t for *_, t in results) * 1000:.0f} ms)")
    score(got, misses)


def test_set_direct() -> None:
    """The same rows from webfetch/parse/flags.py's `detect` on each page's HTML (its DOM after scripts, when the
    case gives one), as tests/test_flags.py runs it: no daemon, no Chrome, a second or two."""
    got = {}
    for case in CASES:
        try:
            extracted = extract_html(case.dom, None)
            markdown, title = extracted.markdown, extracted.title
        except ExtractionFailed:
            markdown, title = "", None
        base = "http://127.0.0.1:8000"
        got[case.name] = {f.name for f in detect(status=case.status, title=title, html=case.dom, markdown=markdown,
                                                 url=base + case.url_path,
                                                 final_url=base + (case.final_path or case.url_path))}
    print("\nflags: tests/support/flag_pages.py, webfetch/parse/flags.py on each page directly")
    score(got, [])


def score(got: dict[str, set[str]], misses: list[str]) -> None:
    """Prints each flag's precision and recall over CASES, given the flags each page (by name) got."""
    tp, fp, fn = Counter(), Counter(), Counter()
    for case in CASES:
        want = {case.flag} if case.flag else set()
        for f in got[case.name] & want:
            tp[f] += 1
        for f in got[case.name] - want:
            fp[f] += 1
        for f in want - got[case.name]:
            fn[f] += 1
        if got[case.name] != want:
            misses.append(f"{case.name}: expected {sorted(want) or 'none'}, got {sorted(got[case.name]) or 'none'}")
    walls = sum(c.flag is not None for c in CASES)
    print(f"{walls} interstitials and {len(CASES) - walls} ordinary pages")
    print(f"{'flag':14} {'pages':>5} {'precision':>9} {'recall':>7}")
    for f in [*FLAG_NAMES[:-1], "all"]:
        t = sum(tp.values()) if f == "all" else tp[f]
        p_ = sum(fp.values()) if f == "all" else fp[f]
        n = sum(fn.values()) if f == "all" else fn[f]
        pages = walls if f == "all" else sum(c.flag == f for c in CASES)
        print(f"{f:14} {pages:5} {t / (t + p_) if t + p_ else 1.0:9.3f} {t / (t + n) if t + n else 1.0:7.3f}")
    for m in misses:
        print("  miss: " + m)


def on_corpora(daemon: Any, server: Any, corpus_root: Path | None, corpora: dict[str, list[dict]]) -> None:
    def one(page):
        url = page.get("url") or server.url(page)
        frame, _ = daemon.fetch(url)  # a cache hit when the quality rows ran first
        return page, frame

    print("\nflags on the shared corpora's ordinary pages, every stored page (goal: no false flag)")
    for name, scored in corpora.items():
        # the F1 rows skip pages without a ground-truth text; every page counts here
        known = {p["id"] for p in scored}
        pages = list(scored)
        for path in sorted((corpus_root / name / "html").glob("*.html.gz")) if corpus_root else []:
            pid = path.name.removesuffix(".html.gz")
            if pid not in known:
                url = server.add(f"{name}-{pid}", gzip.decompress(path.read_bytes()), "text/html; charset=utf-8")
                pages.append({"id": pid, "url": url})
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(one, pages))
        flagged = [(p, f) for p, f in results if f["type"] == "result" and f["flags"]]
        errors = dict(Counter(f["code"] for _, f in results if f["type"] != "result"))
        right = {p["id"] for p, f in flagged if TRUE_IN_CORPUS.get(p["id"], ("",))[0] in f["flags"]}
        print(f"{name:18} pages {len(pages):4}  flagged {len(flagged):3}  right (checked by hand) {len(right):3}  "
              f"false flags {len(flagged) - len(right):3}" + (f"  errors {errors}" if errors else ""))
        for p, f in flagged:
            verdict = "right: " + TRUE_IN_CORPUS[p["id"]][1] if p["id"] in right else "FALSE"
            note = next((n for n in f["notes"] if n.split(":", 1)[0] in FLAG_NAMES), "")
            print(f"  {p['id'][:16]} {','.join(f['flags'])}: {verdict}\n      {note[:160]}")


def main() -> None:
    ap = argparse.ArgumentParser(description="the flag rows on tests/support/flag_pages.py alone (bin/bench runs "
                                             "them with the corpora's)")
    ap.add_argument("--direct", action="store_true", help="webfetch/parse/flags.py on each page, no daemon, no Chrome")
    if ap.parse_args().direct:
        test_set_direct()
        return
    from bench_common import start_daemon  # bin/ is on sys.path when this file is run
    tmp = Path(tempfile.mkdtemp(prefix="webfetch-bench-flags-"))
    daemon = start_daemon(tmp)
    try:
        test_set(daemon)
    finally:
        daemon.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
