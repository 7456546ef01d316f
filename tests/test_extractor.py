"""Layer 1: extraction to markdown."""

import pytest

from webfetch.errors import ExtractionFailed
from webfetch.parse.extractor import extract_html, extract_raw

from .support.site import ARTICLE_TEXT, NOISY_ARTICLE


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


# Page types beyond the article (issue 16): each page says what it is in its own markup, and the extractor
# keeps what a reader of that type of page came for.

DOCS_NAV = "".join(f'<li><a href="/docs/{i}">Guide chapter {i}: configuring the frobnicator</a></li>'
                   for i in range(150))
DOCS_PAGE = f"""<!doctype html><html><head><title>Configuration - Frob docs</title></head><body>
<header><a href="/">Frob</a> <a href="/blog">Blog</a> <a href="/download">Download</a></header>
<div class="layout"><nav class="sidebar"><ul>{DOCS_NAV}</ul></nav>
<main><h1>Configuration</h1>
<p>Frob reads its settings from a TOML file in the user's configuration directory when it starts.</p>
<h2>Options</h2>
<table><tr><th>Option</th><th>Default</th><th>Meaning</th></tr>
<tr><td>threads</td><td>4</td><td>worker threads that frobnicate at once</td></tr>
<tr><td>cache_dir</td><td>~/.cache/frob</td><td>where frobnicated widgets are kept</td></tr></table>
<p>Changes take effect the next time frob starts.</p>
</main></div>
<footer>Copyright 2026 Frob project. Edit this page on the forge.</footer></body></html>"""


def test_a_docs_page_keeps_its_main_element_and_not_its_navigation():
    """The sidebar holds 20 times the text of the page itself: what trafilatura keeps is a small share of the
    page, so the extractor falls back, but to the page's marked `main`, not to the whole page."""
    out = extract_html(DOCS_PAGE, "http://site.test/docs/config")
    assert out.markdown.startswith("# Configuration")
    assert "## Options" in out.markdown
    assert "| threads | 4 | worker threads that frobnicate at once |" in out.markdown
    assert "Changes take effect the next time frob starts." in out.markdown
    assert "Guide chapter" not in out.markdown and "Edit this page" not in out.markdown


QUESTION = "How do I stop my sourdough starter from smelling of nail polish remover after two days?"
ANSWERS = [
    "That acetone smell means the yeast and bacteria have run out of food: feed it twice a day for a week.",
    "Keep the starter somewhat cooler, around twenty degrees, which slows the bacteria more than the yeast.",
    "Use a little whole rye flour in each feeding; the extra nutrients settled the smell for my starter.",
]


def _post(body: str, who: str, n: int) -> str:
    return (f'<div class="post-layout"><div class="votecell">{n}</div><div class="postcell">'
            f'<div class="s-prose js-post-body">{body}</div><div class="user-info">{who}</div></div>'
            f'<div id="comments-{n}" class="comments"><ul class="comments-list">'
            f'<li class="comment">Thanks, that helped. – reader{n}</li></ul></div></div>')


QA_LD = ('{"@context": "https://schema.org", "@type": "QAPage", "mainEntity": {"@type": "Question", '
         '"name": "Sourdough starter smells of acetone", "answerCount": 3}}')
QA_THREAD = f"""<!doctype html><html><head><title>Sourdough starter smells of acetone - Baking Q&amp;A</title>
<script type="application/ld+json">{QA_LD}</script></head><body>
<header><a href="/">Baking Q&amp;A</a> <a href="/questions">Questions</a> <a href="/tags">Tags</a></header>
<div id="mainbar"><div id="question-header"><h1>Sourdough starter smells of acetone</h1></div>
<div id="question" class="question">{_post(f"<p>{QUESTION}</p>", "asked by crumbfan", 1)}</div>
<div id="answers"><h2>3 Answers</h2>
{"".join(f'<div class="answer">{_post(f"<p>{a}</p>", f"answered by baker{i}", 10 + i)}</div>'
         for i, a in enumerate(ANSWERS))}</div></div>
<div class="sidebar"><h3>Hot network questions</h3><ul><li><a href="/q/1">Why is my bread dense?</a></li>
<li><a href="/q/2">Can I freeze croissant dough?</a></li></ul></div>
<footer>Site design and logo are under licence. Cookie settings.</footer></body></html>"""


def test_a_question_and_answer_thread_keeps_every_answer():
    """A schema.org QAPage: the answers are the content (readability keeps them beside the question, where
    trafilatura tends to drop them as comments); the question's heading stays on top."""
    out = extract_html(QA_THREAD, "http://site.test/q/42")
    assert out.extractor == "readability"
    assert out.markdown.startswith("# Sourdough starter smells of acetone")
    assert QUESTION in out.markdown
    assert all(a in out.markdown for a in ANSWERS)
    assert "Hot network questions" not in out.markdown and "Cookie settings" not in out.markdown


SPECS = [("Weight", "1.2 kg"), ("Battery", "5000 mAh, about 12 hours of use"), ("Display", "14 inch, 1920 x 1200"),
         ("Ports", "2 x USB-C, HDMI, headphone jack")]
PRODUCT_PAGE = f"""<!doctype html><html><head><title>Lumen 14 laptop - Shop</title>
<meta property="og:type" content="product"></head><body>
<nav><a href="/">Shop</a> <a href="/laptops">Laptops</a> <a href="/cart">Cart (0)</a></nav>
<div class="product"><h1>Lumen 14 laptop</h1><p class="price">$649.00</p>
<p>A light fourteen-inch laptop with a full day of battery and a keyboard that is quiet to type on.</p>
<button>Add to cart</button>
<h2>Specifications</h2><table class="specs">
{"".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in SPECS)}</table></div>
<div class="related"><h3>Customers also bought</h3><ul><li><a href="/p/1">Laptop sleeve</a></li>
<li><a href="/p/2">USB-C charger</a></li></ul></div>
<footer>Free shipping on orders over $50. Returns within 30 days.</footer></body></html>"""


def test_a_product_page_keeps_its_name_price_and_spec_table():
    """Not an article: trafilatura's recall mode keeps the product's name and the specifications heading that
    its default cut drops, and the spec table as a markdown table."""
    out = extract_html(PRODUCT_PAGE, "http://site.test/p/lumen-14")
    assert out.extractor == "trafilatura"
    assert out.markdown.startswith("# Lumen 14 laptop")
    assert "$649.00" in out.markdown and "## Specifications" in out.markdown
    assert all(f"| {k} | {v} |" in out.markdown for k, v in SPECS)
    assert "Customers also bought" not in out.markdown and "Free shipping" not in out.markdown


def test_a_product_page_that_a_theme_marks_as_an_article_is_still_read_as_a_product():
    """og:type "article" on an undated page is a site-wide default, not a statement: the page is read as a
    page of its own type (recall mode), its name and spec heading kept. Dated, it would be an article, and
    the article's cut would drop both."""
    page = PRODUCT_PAGE.replace('content="product"', 'content="article"')
    assert extract_html(page, "http://site.test/p/lumen-14").markdown == \
        extract_html(PRODUCT_PAGE, "http://site.test/p/lumen-14").markdown
    dated = page.replace("</head>", '<meta property="article:published_time" content="2026-01-05"></head>')
    assert "# Lumen 14 laptop" not in extract_html(dated, "http://site.test/p/lumen-14").markdown


def test_an_article_gets_the_precise_cut():
    """og:type article on a dated page: trafilatura's precise mode drops the related-links block its default
    keeps."""
    related = "".join(f"<li><a href='/more/{i}'>Another story about rivers and their wildlife, part {i}</a></li>"
                      for i in range(6))
    html = NOISY_ARTICLE.replace('<meta charset="utf-8">', '<meta charset="utf-8"><meta property="og:type" '
                                 'content="article"><meta property="article:published_time" '
                                 'content="2026-01-05T08:00:00Z">').replace(
        "</article>", f"<div class='related-stories'><h3>Read next</h3><ul>{related}</ul></div></article>")
    out = extract_html(html, "http://site.test/article")
    assert all(s in out.markdown for s in ARTICLE_TEXT)
    assert "Another story about rivers" not in out.markdown



def test_the_precise_cut_may_take_away_more_than_it_keeps():
    """A short dated article with more teaser headlines under it than article: the precise cut drops them,
    half the text and more; the reader gets the article alone."""
    teasers = "".join(f"<p><a href='/story/{i}'>Otters, beavers and kingfishers: story {i} from the valley's "
                      f"rivers</a></p>" for i in range(8))
    html = NOISY_ARTICLE.replace('<meta charset="utf-8">', '<meta charset="utf-8"><meta property="og:type" '
                                 'content="article"><meta property="article:published_time" '
                                 'content="2026-01-05T08:00:00Z">').replace(
        "</article>", f"<div class='more'><h3>More from the valley</h3>{teasers}</div></article>")
    out = extract_html(html, "http://site.test/article")
    assert out.markdown.startswith("# Otters return to the valley")
    assert all(s in out.markdown for s in ARTICLE_TEXT)
    assert "from the valley's rivers" not in out.markdown and "More from the valley" not in out.markdown


def _dated_article(extra: str = "") -> str:
    return NOISY_ARTICLE.replace('<meta charset="utf-8">', '<meta charset="utf-8"><meta property="og:type" '
                                 'content="article"><meta property="article:published_time" '
                                 'content="2026-01-05T08:00:00Z">').replace("</article>", f"{extra}</article>")


def trafilatura_modes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The modes trafilatura runs in from now on, recorded as the real extract is called (appended in order)."""
    import trafilatura
    modes: list[str] = []
    real = trafilatura.extract

    def counted(*args: object, **kwargs: bool) -> str | None:
        modes.append("precise" if kwargs["favor_precision"] else "recall" if kwargs["favor_recall"] else "default")
        return real(*args, **kwargs)  # type: ignore[arg-type]
    monkeypatch.setattr(trafilatura, "extract", counted)
    return modes


def test_one_trafilatura_pass_a_page_in_the_mode_its_cues_call_for(monkeypatch: pytest.MonkeyPatch):
    """Issue 28: trafilatura runs once a page, in the mode the page's cues call for (precise on an article,
    recall on a product), where it used to run its default mode beside that one on every page (readability,
    a different library, still checks an article's cut: it agrees here, so no second pass). A second
    pass, the default mode, only where the mode's cut kept a sliver of the page: the docs page's main
    element under a 150-link navigation."""
    modes = trafilatura_modes(monkeypatch)

    article = extract_html(_dated_article(), "http://site.test/article")
    assert modes == ["precise"] and all(s in article.markdown for s in ARTICLE_TEXT)
    modes.clear()
    product = extract_html(PRODUCT_PAGE, "http://site.test/p/lumen-14")
    assert modes == ["recall"] and all(f"| {k} | {v} |" in product.markdown for k, v in SPECS)
    modes.clear()
    docs = extract_html(DOCS_PAGE, "http://site.test/docs/configuration")
    assert modes == ["recall", "default"]
    assert docs.markdown.startswith("# Configuration") and "Guide chapter 7" not in docs.markdown



WEEKLY_COUNTS = "<h2>Weekly counts</h2>" + "".join(
    f"<div class='inline-note'><div>Week {i}: volunteers counted {i + 3} otters along the lower river, near the "
    f"old mill and the ford.</div></div>" for i in range(5))


def test_an_article_whose_precise_cut_readability_doubts_gets_the_default_cut(monkeypatch: pytest.MonkeyPatch):
    """Issue 28: the precise mode drops part of an article with its boilerplate (here a section of notes in
    bare divs); readability, the check, disagrees with that cut, so trafilatura's default mode runs as a
    second pass and its cut, which readability agrees with, is taken: the reader gets the weekly counts."""
    modes = trafilatura_modes(monkeypatch)

    out = extract_html(_dated_article(WEEKLY_COUNTS), "http://site.test/article")
    assert modes == ["precise", "default"] and out.extractor == "trafilatura"
    assert all(f"Week {i}: volunteers counted {i + 3} otters" in out.markdown for i in range(5))
    assert all(s in out.markdown for s in ARTICLE_TEXT) and "Cookie settings" not in out.markdown


GUIDE_SECTIONS = [
    ("install", "Installing", "Frob installs from the package index with pip, into a virtual environment of its own "
                              "so that its dependencies never clash with the system's packages."),
    ("configure", "Configuring", "Frob reads its settings from a TOML file in the user's configuration directory when "
                                 "it starts; the environment overrides any of them."),
    ("run", "Running", "Start frob with the name of the widget to frobnicate: it writes its progress to standard "
                       "error and the frobnicated widget to standard output.")]


def _guide(head: str) -> str:
    body = "".join(f'<h2 id="{anchor}"><a href="#{anchor}">{title}</a><a class="headerlink" href="#{anchor}">¶</a>'
                   f"</h2><p>{text}</p>" for anchor, title, text in GUIDE_SECTIONS)
    return (f"<!doctype html><html><head><title>Frob guide</title>{head}</head><body>"
            f'<nav><a href="/">Home</a> <a href="/docs">Docs</a></nav>'
            f"<article><h1>The frob guide</h1>{body}</article><footer>Frob project</footer></body></html>")


@pytest.mark.parametrize("head", ["", '<meta property="og:type" content="article">'
                                      '<meta property="article:published_time" content="2026-01-05">'])
def test_headings_that_link_to_their_own_section_keep_their_title_as_text(head: str):
    """Documentation makes every heading a link to itself, with a "¶" permalink beside it: trafilatura took
    such headings for links (the precise cut dropped them as navigation); the reader gets the titles."""
    out = extract_html(_guide(head), "http://site.test/guide")
    assert out.markdown.startswith("# The frob guide")
    for _, title, text in GUIDE_SECTIONS:
        assert f"## {title}\n\n{text}" in out.markdown
    assert "¶" not in out.markdown and "#install" not in out.markdown
