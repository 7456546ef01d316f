"""bin/bench's PDF rows (issue 16): webfetch's PDF extraction on generated PDFs of different kinds
(tests/support/pdfs.py) and on any PDFs given with --pdf, in process and through the daemon; and, when the other
candidate libraries are importable (`.venv/bin/pip install pdfminer.six pypdf pdfplumber`), the same PDFs
read by each of them side by side: the measurement behind the choice of pypdfium2 (pyproject.toml).
Quality: word-bag F1 and word-bigram F1 (reading order) against the generated PDFs' text; for a real PDF,
which has no ground truth, against PDFium's plain text."""

from __future__ import annotations

import io
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support import pdfs
from webfetch.parse.pdf import extract_pdf

WORD = re.compile(r"\w+")


def _f1(pred: list, gold: list) -> float:
    p, g = Counter(pred), Counter(gold)
    overlap = sum((p & g).values())
    if not overlap:
        return 0.0
    precision, recall = overlap / sum(p.values()), overlap / sum(g.values())
    return 2 * precision * recall / (precision + recall)


def _scores(text: str, truth: str) -> tuple[float, float]:
    w, g = WORD.findall(text.lower()), WORD.findall(truth.lower())
    return _f1(w, g), _f1(list(zip(w, w[1:], strict=False)), list(zip(g, g[1:], strict=False)))


def _webfetch(data: bytes) -> str:
    return re.sub(r"<!-- page \d+ -->|^#+ ", "", extract_pdf(data).markdown, flags=re.M)


def _pdfium_plain(data: bytes) -> str:
    import pypdfium2 as pdfium
    doc = pdfium.PdfDocument(data)
    try:
        return "\n".join(page.get_textpage().get_text_range() for page in doc)
    finally:
        doc.close()


def _candidates() -> list[tuple[str, Callable[[bytes], str]]]:
    libs: list[tuple[str, Callable[[bytes], str]]] = [("webfetch.parse.pdf (pypdfium2)", _webfetch),
                                                      ("pypdfium2 plain text", _pdfium_plain)]
    try:
        from pdfminer.high_level import extract_text
        libs.append(("pdfminer.six", lambda b: extract_text(io.BytesIO(b))))
    except ImportError:
        pass
    try:
        from pypdf import PdfReader
        libs.append(("pypdf", lambda b: "\n".join(p.extract_text() for p in PdfReader(io.BytesIO(b)).pages)))
    except ImportError:
        pass
    try:
        import pdfplumber

        def plumber(b: bytes) -> str:
            with pdfplumber.open(io.BytesIO(b)) as pdf:
                return "\n".join(p.extract_text() or "" for p in pdf.pages)
        libs.append(("pdfplumber", plumber))
    except ImportError:
        pass
    return libs


def pdf_rows(daemon: Any, site_url: Callable[[str, bytes], str], extra: list[str]) -> None:
    docs: list[tuple[str, bytes, str | None]] = [
        ("paper, 2 columns", *pdfs.paper()), ("paper, interleaved", *pdfs.paper_interleaved()),
        ("manual, 5 chapters", *pdfs.manual()), ("datasheet + table", *pdfs.datasheet()),
        ("manual, 60 chapters", *pdfs.large())]
    docs += [(Path(p).name, Path(p).read_bytes(), None) for p in extra]
    libs = _candidates()
    if len(libs) == 2:
        print("\n(pdfminer.six, pypdf and pdfplumber are not installed: only webfetch's own rows)")
    print(f"\nPDF text: time (best of 3) and quality; truth = the generated text, or PDFium's plain text for a "
          f"real PDF\n{'document':22} {'pages':>5} {'library':26} {'ms':>9} {'word F1':>8} {'order F1':>8}")
    for name, data, truth in docs:
        reference = truth if truth is not None else _pdfium_plain(data)
        pages = extract_pdf(data).pages
        for lib, fn in libs:
            times = []
            for _ in range(3):
                started = time.perf_counter()
                text = fn(data)
                times.append(time.perf_counter() - started)
            words, order = _scores(text, reference)
            print(f"{name:22} {pages:5} {lib:26} {min(times) * 1000:9.1f} {words:8.3f} {order:8.3f}", flush=True)
    # through the daemon: what a caller waits for, cold (cache bypassed)
    for name, data, _ in docs:
        url = site_url(re.sub(r"\W+", "-", name) + ".pdf", data)
        frame, t = daemon.fetch(url, fresh=True, raw=True)
        assert frame["type"] == "result" and frame["extractor"] == "pdf", frame
        print(f"{'daemon, cold: ' + name:49} {t * 1000:9.1f} ms  {frame['total_chars']} characters", flush=True)
