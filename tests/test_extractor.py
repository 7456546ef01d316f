"""Layer 1: extraction to markdown."""

import pytest

from webfetch.errors import ExtractionFailed
from webfetch.extractor import extract_html, extract_raw

from .site import ARTICLE_TEXT, NOISY_ARTICLE


def test_article_keeps_text_headings_lists_and_links():
    out = extract_html(NOISY_ARTICLE, "http://site.test/article")
    assert out.extractor == "trafilatura"
    assert out.markdown.startswith("# Otters return to the valley")
    assert "## A long road back" in out.markdown
    assert "- Cleaner water" in out.markdown
    assert "[full survey report](http://site.test/report.html)" in out.markdown
    assert all(s in out.markdown for s in ARTICLE_TEXT)
    assert "BUY CHEAP" not in out.markdown and "Cookie settings" not in out.markdown


def test_a_page_without_main_content_falls_back_to_the_whole_page():
    links = "".join(f'<li><a href="/doc/{i}">Reference page number {i} of the manual</a></li>' for i in range(80))
    html = (f"<html><body><h1>Manual index</h1><table><tr><th>Option</th><th>Meaning</th></tr>"
            f"<tr><td>--fast</td><td>skip checks</td></tr></table><ul>{links}</ul>"
            f"<pre><code>webfetch fetch URL</code></pre></body></html>")
    out = extract_html(html, "http://site.test/")
    assert out.extractor == "fallback"
    assert "# Manual index" in out.markdown
    assert "[Reference page number 79 of the manual](/doc/79)" in out.markdown
    assert "| --fast | skip checks |" in out.markdown
    assert "```\nwebfetch fetch URL\n```" in out.markdown


def test_nothing_to_extract():
    with pytest.raises(ExtractionFailed):
        extract_html("<html><body><script>var x = 1;</script><img src=a.png></body></html>", None)


def test_raw_bodies():
    assert extract_raw(b'{"a": [1]}', "application/json", None).markdown == '{\n  "a": [\n    1\n  ]\n}'
    assert extract_raw(b'{"cut": [1, 2', "application/json", None).markdown == '{"cut": [1, 2'
    assert extract_raw("naïve café".encode("latin-1"), "text/plain", "iso-8859-1").markdown == "naïve café"
    assert extract_raw(b"<rss><item>x</item></rss>", "application/rss+xml", None).markdown.startswith("<rss>")
    with pytest.raises(ExtractionFailed):
        extract_raw(b"  \n", "text/plain", None)
