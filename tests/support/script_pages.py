"""The render test set (issue 28 item 4): pages built the ways the web builds them with scripts, each with the
text a reader of it sees (its ground truth) and whether the server's HTML already holds that text (then
webfetch must not render it). Single-page apps with an empty body (a React root, a Next.js-like
__NEXT_DATA__, a Vue app with hash routes), a server-drawn page whose text a script fetches, a state blob
holding the text, a "please enable JavaScript" page, text hidden until a script shows it; and pages whose
server HTML is complete but carries scripts (analytics, a framework hydrating its server-rendered markup,
a comment widget), short ones among them (a note, a product page). Used by tests/test_render_need.py (the
decision offline, and through the daemon with real Chromium) and bin/bench_renders.py."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ScriptPage:
    name: str
    kind: str            # the family the bench reports it under
    render: bool         # whether the server's HTML lacks what a reader sees (so webfetch must render it)
    html: str
    truth: tuple[str, ...]  # what a reader sees: every one must be in the markdown
    routes: dict[str, str] = field(default_factory=dict)  # further JSON the page's scripts fetch
    absent: tuple[str, ...] = ()  # what must not be in the markdown (a placeholder)

    @property
    def path(self) -> str:
        return f"/script/{self.name}"

    @property
    def truth_text(self) -> str:
        return "\n".join(self.truth)


HERONS = (
    "Grey herons nest in colonies called heronries, often high in the crowns of old trees near water.",
    "A single colony on the estuary held ninety nests last spring, the largest count in thirty years.",
    "The birds hunt alone at dawn, standing motionless in the shallows until a fish comes within reach.",
    "Volunteers ringed forty chicks and will follow their first flights along the coast this summer.",
)
LIGHTHOUSE = (
    "The lighthouse on the northern point was built in 1871 from granite quarried on the island itself.",
    "Its lamp was turned by clockwork that the keepers wound every four hours through the night.",
    "Automation came in 1989, and the keepers' cottages became a small museum of the island's trade.",
    "Visitors can climb the hundred and twelve steps to the gallery on summer weekends.",
)
BREAD = (
    "Sourdough starts with a culture of wild yeast and lactic bacteria kept alive in flour and water.",
    "Feed the starter twice a day for a week, until it doubles within six hours of each feeding.",
    "Mix the dough the evening before, fold it four times, and let it rise slowly in a cool kitchen.",
    "Bake in a covered pot at a high heat, then uncover it for the last twenty minutes to brown the crust.",
)
COMETS = (
    "Comets are loose bodies of ice and dust that grow tails when their orbits carry them near the sun.",
    "The tail always points away from the sun, pushed by the solar wind and the pressure of sunlight.",
    "Short-period comets return within two hundred years; others take thousands of years to come back.",
    "Observers in the southern hemisphere saw this year's visitor best in the hour before dawn.",
    "A pair of binoculars shows the coma as a soft grey glow; a small telescope can show the tail's streamers.",
    "Photographs taken a few nights apart show the comet moving against the fixed pattern of the stars.",
)
# A site's own blurb, drawn by the server on every page: enough text for a length rule to take it for the page.
ABOUT = (
    "Estuary Birds was founded in 1952 by a handful of wildfowlers who wanted to count what they saw.",
    "Today the society has eight hundred members, runs four hides on the marsh and keeps the county's records.",
    "Members survey the waders every month from September to March, and the breeding birds from April to July.",
    "The society publishes an annual report, a newsletter each season and a guide to the estuary's walks.",
    "New members are welcome at every level of experience; field meetings are held on the first Sunday of "
    "each month and beginners are paired with an experienced counter for their first season.",
    "Our work is funded by subscriptions, legacies and the sale of the annual report, and all of it is done "
    "by volunteers who give their weekends to the marsh.",
    "The records we keep go back seventy years and are shared with the national atlas, the county council and "
    "the harbour board, who consult us before any work on the sea wall or the channel.",
    "In winter the society runs talks in the village hall on the second Tuesday of the month, with tea, a raffle "
    "and a speaker from one of the observatories along the coast.",
    "Children under sixteen join free with a member of their family, and schools can book a guided walk on the "
    "marsh for a class at any time of the year.",
)
VIEWS = {
    "#/": ("Field guide", "The guide lists the mosses of the upland bogs and how to tell the common ones apart. "
           "Sphagnum holds twenty times its weight in water and builds the peat that keeps the bog alive."),
    "#/about": ("About", "This page is only shown at the about route."),
}

NAV = ('<header><a href="/">Estuary Birds</a><nav><ul>' + "".join(
    f'<li><a href="/{w.lower()}">{w}</a></li>' for w in (
        "News", "Species", "Colonies", "Ringing", "Surveys", "Volunteers", "Events", "Shop", "Membership",
        "Contact", "Archive", "Photography", "Reports", "Maps")) + "</ul></nav></header>")
FOOTER = ('<footer><p>Estuary Birds is a volunteer society. Registered charity 1234567. Privacy. Terms. '
          'Accessibility. Follow us for news from the colonies.</p></footer>')
ANALYTICS = ("<script async src=\"/script/gtag.js\"></script><script>window.dataLayer = window.dataLayer || [];"
             "function gtag(){dataLayer.push(arguments);} gtag('js', new Date()); gtag('config', 'G-TEST1234');"
             "</script>")


def _page(title: str, body: str, head: str = "") -> str:
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f'{head}</head><body>{body}</body></html>')


def _paras(paras: tuple[str, ...]) -> str:
    return "".join(f"<p>{p}</p>" for p in paras)


def _article(title: str, paras: tuple[str, ...]) -> str:
    return f"<article><h1>{title}</h1>{_paras(paras)}</article>"


# the script that draws {"title", "paragraphs"} into the element `into`, as any framework's render does
_DRAW = ("function draw(into, data) { document.title = data.title; into.innerHTML = '<article><h1>' + data.title "
         "+ '</h1>' + data.paragraphs.map(function (p) { return '<p>' + p + '</p>'; }).join('') + '</article>'; }")


def _story(title: str, paras: tuple[str, ...]) -> str:
    return json.dumps({"title": title, "paragraphs": list(paras)})


def _pages() -> list[ScriptPage]:
    pages = [
        ScriptPage("nav-fetch", "server nav, text fetched by script", True, _page("Estuary Birds", (
            f'{NAV}<main id="content"><p class="spinner">Loading…</p></main>{FOOTER}'
            f"<script>{_DRAW} fetch('/script/api/herons.json').then(function (r) {{ return r.json(); }})"
            ".then(function (d) { draw(document.getElementById('content'), d); });</script>")),
            ("# Herons of the estuary",) + HERONS, {"/script/api/herons.json": _story("Herons of the estuary", HERONS)},
            absent=("Loading…",)),
        ScriptPage("about-box-fetch", "server nav, text fetched by script", True, _page("Estuary Birds", (
            f'{NAV}<main id="content"><p>Loading…</p></main><section class="intro"><h2>About the society</h2>'
            f"{_paras(ABOUT)}</section>{FOOTER}"
            f"<script>{_DRAW} fetch('/script/api/lighthouse.json').then(function (r) {{ return r.json(); }})"
            ".then(function (d) { draw(document.getElementById('content'), d); });</script>")),
            ("# The northern light",) + LIGHTHOUSE,
            {"/script/api/lighthouse.json": _story("The northern light", LIGHTHOUSE)}, absent=("Loading…",)),
        ScriptPage("react-root", "single-page app, empty body", True, _page("Lighthouse", (
            '<div id="root"></div>'
            f"<script>{_DRAW} var data = {_story('The northern light', LIGHTHOUSE)};"
            "draw(document.getElementById('root'), data);</script>")),
            ("# The northern light",) + LIGHTHOUSE),
        ScriptPage("next-data", "single-page app, empty body", True, _page("Loading", (
            '<div id="__next"></div><script id="__NEXT_DATA__" type="application/json">'
            + json.dumps({"props": {"pageProps": {"title": "Baking sourdough", "paragraphs": list(BREAD)}},
                          "page": "/recipes/[slug]", "buildId": "b1"})
            + f"</script><script>{_DRAW} var next = JSON.parse(document.getElementById('__NEXT_DATA__')"
            ".textContent); draw(document.getElementById('__next'), next.props.pageProps);</script>")),
            ("# Baking sourdough",) + BREAD),
        ScriptPage("hash-routes", "single-page app, empty body", True, _page("Mosses", (
            '<div id="app"></div><script>var views = ' + json.dumps(VIEWS) + ";"
            "function route() { var v = views[location.hash || '#/'] || views['#/'];"
            "document.getElementById('app').innerHTML = '<main><h1>' + v[0] + '</h1><p>' + v[1] + '</p></main>'; }"
            "window.addEventListener('hashchange', route); route();</script>")),
            ("# Field guide", VIEWS["#/"][1]), absent=(VIEWS["#/about"][1],)),
        ScriptPage("state-blob", "text only in script data", True, _page("Comet watch", (
            '<div class="page"><header><a href="/">Sky Notes</a> · <a href="/comets">Comets</a> · '
            '<a href="/planets">Planets</a> · <a href="/events">Events</a></header><div class="body"></div>'
            '<div class="foot">Sky Notes, the amateur astronomers\' newsletter, since 1962.</div></div>'
            f"<script>window.__INITIAL_STATE__ = {{\"story\": {_story('A comet at dawn', COMETS)}}};"
            f"{_DRAW} draw(document.querySelector('.body'), window.__INITIAL_STATE__.story);</script>")),
            ("# A comet at dawn",) + COMETS),
        ScriptPage("enable-js", "asks for JavaScript", True, _page("Sky Notes", (
            '<div class="site"><header><a href="/">Sky Notes</a> · <a href="/comets">Comets</a> · '
            '<a href="/planets">Planets</a> · <a href="/events">Events</a> · <a href="/join">Join the society'
            '</a> · <a href="/contact">Contact the editors</a></header>'
            '<noscript><p>Please enable JavaScript to read Sky Notes.</p></noscript><section class="story">'
            '</section><footer>Sky Notes, the amateur astronomers\' newsletter, published every month since '
            "1962 by the society's volunteers. Letters and photographs are welcome.</footer></div>"
            f"<script>{_DRAW} fetch('/script/api/comets.json').then(function (r) {{ return r.json(); }})"
            ".then(function (d) { draw(document.querySelector('.story'), d); });</script>")),
            ("# Comets explained",) + COMETS, {"/script/api/comets.json": _story("Comets explained", COMETS)}),
        # hidden text is not read from the server's HTML (webfetch/parse/hidden.py): a person sees it once the
        # script ran, so the page is rendered to read it as they do
        ScriptPage("hidden-until-script", "text hidden until a script runs", True, _page("Herons", (
            f'{NAV}<div id="story" style="display:none">{_article("Herons of the estuary", HERONS)}</div>'
            '<script src="/script/reveal.js"></script>')),
            ("# Herons of the estuary",) + HERONS),
        ScriptPage("analytics", "complete HTML with scripts", False, _page(
            "The northern light", f"{NAV}<main>{_article('The northern light', LIGHTHOUSE)}</main>{FOOTER}",
            ANALYTICS), ("# The northern light",) + LIGHTHOUSE),
        ScriptPage("hydrating", "complete HTML with scripts", False, _page("Baking sourdough", (
            f'<div id="__next">{NAV}<main>{_article("Baking sourdough", BREAD)}</main></div>'
            '<script id="__NEXT_DATA__" type="application/json">'
            + json.dumps({"props": {"pageProps": {"title": "Baking sourdough", "paragraphs": list(BREAD)}}})
            + '</script><script src="/script/framework.js"></script>'
            f"<script>{_DRAW} /* hydrate: the same markup again */ var n = JSON.parse("
            "document.getElementById('__NEXT_DATA__').textContent); draw(document.querySelector('main'), "
            "n.props.pageProps);</script>")), ("# Baking sourdough",) + BREAD),
        ScriptPage("short-note", "short complete page", False, _page("Closed on Monday", (
            "<main><h1>Closed on Monday</h1><p>The reading room is closed on Monday for the bank holiday. "
            "Orders placed over the weekend will be ready on Tuesday morning, and the returns box by the door "
            "stays open. The exhibition of estuary maps reopens on Wednesday with two new charts.</p></main>"),
            ANALYTICS), ("# Closed on Monday", "The reading room is closed on Monday for the bank holiday. Orders "
                         "placed over the weekend will be ready on Tuesday morning, and the returns box by the door "
                         "stays open. The exhibition of estuary maps reopens on Wednesday with two new charts.")),
        ScriptPage("product", "short complete page", False, _page("Brass tide clock", (
            '<main><h1>Brass tide clock</h1><p class="price">£89.00</p><p>A ship\'s tide clock in solid brass, '
            "showing the hours to high and low water.</p><table><tr><th>Diameter</th><td>18 cm</td></tr>"
            "<tr><th>Weight</th><td>1.2 kg</td></tr><tr><th>Movement</th><td>quartz</td></tr></table>"
            '<button id="add">Add to basket</button></main>'
            "<script>document.getElementById('add').onclick = function () { fetch('/basket', "
            "{method: 'POST'}); };</script>"), ANALYTICS),
            ("# Brass tide clock", "£89.00", "A ship's tide clock in solid brass, showing the hours to high and low "
             "water.", "| Diameter | 18 cm |", "| Weight | 1.2 kg |", "| Movement | quartz |", "Add to basket")),
        ScriptPage("comment-widget", "short complete page", False, _page("A heron at the mill", (
            f"<main>{_article('A heron at the mill', HERONS[:2])}"
            '<div id="disqus_thread"></div><noscript>Please enable JavaScript to view the '
            '<a href="https://disqus.com/?ref_noscript">comments powered by Disqus.</a></noscript></main>'
            "<script>var d = document, s = d.createElement('script'); s.src = '/script/embed.js';"
            "d.body.appendChild(s);</script>")), ("# A heron at the mill",) + HERONS[:2]),
    ]
    return pages


SCRIPT_PAGES = _pages()


def serve(site) -> None:  # type: ignore[no-untyped-def]
    """Put the test set on a tests/support/site.py Site, with the JSON its scripts fetch."""
    for page in SCRIPT_PAGES:
        site.html(page.path, page.html)
        for path, body in page.routes.items():
            site.route(path, lambda h, b=body: h.reply(200, "application/json", b))
    for name, source in SCRIPTS.items():
        site.route(f"/script/{name}", lambda h, s=source: h.reply(200, "text/javascript", s))


# The scripts the pages load from the server: a page that is not rendered never asks for its own.
SCRIPTS = {"gtag.js": "window.gtagLoaded = true;", "embed.js": "window.embedLoaded = true;",
           "framework.js": "window.frameworkLoaded = true;",
           "reveal.js": "document.getElementById('story').style.display = 'block';"}


def scripts_of(page: ScriptPage) -> list[str]:
    """The paths of the scripts `page` loads from the server."""
    return [f"/script/{name}" for name in SCRIPTS if f"/script/{name}" in page.html]
