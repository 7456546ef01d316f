"""PDFs: the markdown webfetch/parse/pdf.py makes of generated papers, manuals and datasheets
(tests/support/pdfs.py), the clear errors for encrypted, scanned, broken and cut ones, and the whole path
through the real daemon: a page of kind `page` with extractor `pdf`, paging, the size cap, untyped `.pdf`
bodies, a PDF the browser navigates to, and a prompt answered by pi from the PDF's text."""

from __future__ import annotations

import re

import pytest

from webfetch.config import FetchConfig
from webfetch.errors import ExtractionFailed
from webfetch.parse.pdf import extract_pdf

from .support import pdfs
from .support.daemon import TRANSPORT_NOTES, make_config
from .support.site import PDF_BYTES
from .test_subagent import pi_home, sub_config  # noqa: F401 (fixtures)

PDF = "application/pdf"


def paragraphs(markdown: str) -> list[str]:
    return [b for b in markdown.split("\n\n") if b and not b.startswith("<!--")]


def test_a_two_column_paper_reads_in_order_with_headings_and_pages_marked():
    data, truth = pdfs.paper()
    r = extract_pdf(data)
    assert r.title == "Otter Habitat Recovery in Restored Rivers"
    assert r.pages == 3 and r.notes == []
    assert [m for m in re.findall(r"<!-- page (\d+) -->", r.markdown)] == ["1", "2", "3"]
    words = " ".join(p.lstrip("# ") for p in paragraphs(r.markdown)).split()
    assert words == truth.split()  # every word, in reading order, the page numbers dropped
    assert "# Otter Habitat Recovery in Restored Rivers" in r.markdown.splitlines()
    assert re.search(r"^## 1 \w+", r.markdown, re.M)


def test_interleaved_columns_are_read_column_by_column():
    # the file writes line 1 of the left column, line 1 of the right, line 2 of the left, ...
    data, truth = pdfs.paper_interleaved()
    title, left, right = truth.split("\n\n")
    r = extract_pdf(data)
    text = " ".join(paragraphs(r.markdown))
    assert f"# {title}" in r.markdown
    assert left in text and right in text and text.index(left) < text.index(right)


def test_a_manual_gets_heading_levels_from_its_fonts():
    data, truth = pdfs.manual(chapters=2)
    r = extract_pdf(data)
    headings = [line for line in r.markdown.splitlines() if line.startswith("#")]
    assert headings[0] == "# Widget Controller User Manual"
    assert [h.split(" ", 1)[0] for h in headings[1:4]] == ["##", "###", "###"]
    assert headings[1].startswith("## 1. ") and headings[2].startswith("### 1.1 ")


def test_a_datasheet_keeps_each_table_row_on_a_line():
    data, _ = pdfs.datasheet()
    r = extract_pdf(data)
    assert "Supply voltage VDD 1.8 3.3 3.6 V" in r.markdown.splitlines()
    assert "## Electrical Characteristics" in r.markdown


def test_owner_restrictions_do_not_stop_reading():
    data, text = pdfs.owner_locked()
    assert text in extract_pdf(data).markdown


@pytest.mark.parametrize("data,message", [
    (pdfs.encrypted(), "the PDF is encrypted with a password"),
    (pdfs.scanned(), "the PDF has no text layer (2 pages of scanned images"),
    (pdfs.broken(), "the PDF is damaged and cannot be read"),
    (b"<html>not a pdf</html>", "the response claims to be a PDF but is not one"),
])
def test_unreadable_pdfs_say_why(data, message):
    with pytest.raises(ExtractionFailed) as e:
        extract_pdf(data)
    assert e.value.message.startswith(message)


def test_a_cut_pdf_says_to_raise_the_cap():
    data, _ = pdfs.manual()
    with pytest.raises(ExtractionFailed) as e:
        extract_pdf(data[: len(data) // 2], cut=True)
    assert "raise fetch.max_bytes" in e.value.message


def test_pages_without_text_get_a_note():
    r = extract_pdf(pdfs.scanned(pages=3, text_first=True))
    assert "This first page has a text layer" in r.markdown
    assert r.notes == ["3 pages of 4 (2–4) have no text layer (scanned images?); their content is missing here"]


# --- through the daemon ------------------------------------------------------------------------------


def serve(site, path: str, data: bytes, ctype: str = PDF) -> str:
    site.route(path, lambda h: h.reply(200, ctype, data))
    return site.url(path)


async def test_a_pdf_is_a_page_with_extractor_pdf(daemon, site):
    data, truth = pdfs.paper()
    r = await daemon.fetch(serve(site, "/papers/otters.pdf", data))
    assert r["type"] == "result", r
    assert (r["kind"], r["extractor"], r["content_type"], r["status"]) == ("page", "pdf", PDF, 200)
    assert r["title"] == "Otter Habitat Recovery in Restored Rivers"
    assert r["content"] == extract_pdf(data).markdown and r["flags"] == [] and r["notes"] == TRANSPORT_NOTES
    again = await daemon.fetch(site.url("/papers/otters.pdf"))
    assert again["cached"] and again["content"] == r["content"]
    assert site.hits["/papers/otters.pdf"] == 1


async def test_a_large_pdf_pages_like_html(daemon, site):
    data, _ = pdfs.large()
    url = serve(site, "/manual.pdf", data)
    first = await daemon.fetch(url, raw=True)
    assert first["kind"] == "page" and first["extractor"] == "pdf"
    assert first["total_chars"] > 150_000 and first["next_offset"] is not None
    second = await daemon.fetch(url, offset=first["next_offset"])
    assert second["offset"] == first["next_offset"] and second["content"]
    # without raw, a summary; with no sub-agent installed none is tried: the first page, and no note about pi
    unasked = await daemon.fetch(url)
    assert unasked["kind"] == "page" and unasked["content"] == first["content"]
    assert unasked["notes"] == first["notes"] and unasked["next_offset"] == first["next_offset"]


async def test_a_pdf_over_the_size_cap_is_a_clear_error(start_daemon, site):
    daemon = await start_daemon(make_config(fetch=FetchConfig(allow_private=True, max_bytes=50_000)))
    data, _ = pdfs.large()
    r = await daemon.fetch(serve(site, "/big.pdf", data))
    assert r["type"] == "error" and r["code"] == "extraction_failed", r
    assert "larger than fetch.max_bytes" in r["message"] and "raise fetch.max_bytes" in r["message"]


@pytest.mark.parametrize("name,data,message", [
    ("encrypted", pdfs.encrypted(), "encrypted with a password"),
    ("scanned", pdfs.scanned(), "no text layer"),
    ("broken", PDF_BYTES, "damaged"),
])
async def test_unreadable_pdfs_are_clear_errors(daemon, site, name, data, message):
    r = await daemon.fetch(serve(site, f"/{name}.pdf", data))
    assert r["type"] == "error" and r["code"] == "extraction_failed", r
    assert message in r["message"]


async def test_an_untyped_pdf_is_read_and_an_untyped_binary_is_not(daemon, site):
    data, _ = pdfs.datasheet()
    r = await daemon.fetch(serve(site, "/files/tx42.pdf", data, "application/octet-stream"))
    assert r["type"] == "result" and r["extractor"] == "pdf", r
    assert "Supply voltage VDD 1.8 3.3 3.6 V" in r["content"]
    r = await daemon.fetch(serve(site, "/files/setup.pdf", b"MZ\x90\x00binary", "application/octet-stream"))
    assert r["type"] == "error" and r["code"] == "unsupported_content_type", r


async def test_a_pdf_the_browser_navigates_to_takes_the_pdf_path(daemon, site):
    data, _ = pdfs.datasheet()
    serve(site, "/datasheet.pdf", data)
    site.html("/datasheet", '<html><head><meta http-equiv="refresh" content="0; url=/datasheet.pdf"></head>'
                            "<body>Opening the datasheet…</body></html>")
    r = await daemon.fetch(site.url("/datasheet"))
    assert r["type"] == "result", r
    assert r["extractor"] == "pdf" and r["final_url"] == site.url("/datasheet.pdf")
    assert "Supply voltage VDD 1.8 3.3 3.6 V" in r["content"]


async def test_a_prompt_about_a_pdf_is_answered_from_its_text(start_daemon, site, llm, pi_home):  # noqa: F811
    llm.reply = lambda body: "The supply voltage is 1.8 to 3.6 V."
    daemon = await start_daemon(sub_config())
    data, _ = pdfs.datasheet()
    r = await daemon.fetch(serve(site, "/tx42.pdf", data), prompt="What supply voltage?", model="fake/fake-1")
    assert r["kind"] == "answer" and r["content"] == "The supply voltage is 1.8 to 3.6 V.", r
    assert r["extractor"] == "pdf"
    assert "Supply voltage VDD 1.8 3.3 3.6 V" in llm.user_text()


async def test_a_large_pdf_is_summarized_by_pi(start_daemon, site, llm, pi_home):  # noqa: F811
    llm.reply = lambda body: "A widget controller manual: sixty chapters of set-up and operation."
    daemon = await start_daemon(sub_config())
    data, _ = pdfs.large()
    r = await daemon.fetch(serve(site, "/manual.pdf", data), model="fake/fake-1")
    assert r["kind"] == "summary" and r["extractor"] == "pdf", r
    assert r["content"].startswith("A widget controller manual: sixty chapters")
    assert f"The page holds {r['total_chars']} characters of markdown" in r["content"]
    assert "<!-- page 49 -->" in llm.user_text()
