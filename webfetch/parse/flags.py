"""No silent success: flags for a fetch whose content is not the page the caller wanted (an anti-bot
challenge, an empty JavaScript shell, a login or consent wall, a paywall, a "not found" page served with
status 200, a body cut at the size cap). Pure functions over what a load produced: the status, the title,
the page's HTML (the rendered DOM, or the server's HTML when Chrome did not render) and the extracted
markdown. Each flag is decided from evidence on the page itself, never from a list of sites, and only
when the content that came back is short enough to be the wall rather than an article beside it: a false
flag on an ordinary article costs as much as a missed one."""

from __future__ import annotations

import json
import re
import string
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

import lxml.etree
import lxml.html

FLAG_NAMES = ("challenge", "js_shell", "login_wall", "cookie_wall", "paywall", "soft_404", "truncated")

# Characters of text (white space not counted) below which a page may be a wall: challenge pages,
# sign-in pages and consent walls hold a few hundred; the shortest articles of the corpora hold more.
WALL_MAX_CHARS = 1000
# A challenge's words in the body text (not its title or markup) count only on a page this short: an
# ordinary short post may quote them.
CHALLENGE_TEXT_MAX_CHARS = 300
# A sign-in form is the page when almost no other text came through (forum threads with a sign-in box
# in the sidebar hold more).
LOGIN_MAX_CHARS = 400
# A JavaScript shell shows almost nothing until its scripts have built the page.
SHELL_MAX_CHARS = 200
# A page showing at least this much text is never judged a shell (js_shell's limit is at most half of it,
# and _short wants the visible text under twice that): the renderer counts this far in the page and skips
# the shell judgement (a parse of the page) for any page that reached it.
SHELL_VISIBLE_MAX_CHARS = 2 * (WALL_MAX_CHARS // 2)
BARE_ROOT_MAX_CHARS = 30
# A paywalled article keeps its first paragraphs: up to this much text when the markup says it is cut.
PAYWALL_MAX_CHARS = 2500
NOT_FOUND_MAX_CHARS = 1500
# A dialog is the page when this little text is visible outside it (a site's name, a skip link): consent
# walls that keep the app empty until the reader chooses, in any language.
OUTSIDE_MODAL_MAX_CHARS = 150
# ...and when it holds a consent dialog's words, not a privacy policy's pages.
MODAL_MAX_CHARS = 4000
# "Page not found", "404", "Oops! That page can't be found.": a title or heading that is the message
# itself, not an article's title that mentions 404 errors.
NOT_FOUND_MAX_WORDS = 7

_HIDDEN = "//*[@hidden or @aria-hidden='true' or contains(translate(@style,' ',''),'display:none')]"
_NOISE = "//script|//style|//noscript|//template|//svg|//head|//iframe|//object|//canvas"
# What says it is a dialog over the page: an open <dialog>, the ARIA dialog roles, aria-modal, or an inline
# style that pins an element over the page (a consent layer drawn by a script sets its style in place; the
# stylesheets a render refuses never apply anyway).
_MODAL = ("//dialog[@open]|//*[@role='dialog' or @role='alertdialog' or @aria-modal='true']|"
          "//*[contains(translate(@style,' ',''),'position:fixed') or "
          "contains(translate(@style,' ',''),'position:absolute')]")
_ACTIONS = ".//button|.//input[@type='submit' or @type='button']|.//*[@role='button']|.//a[@href]"
# Asides and comment sections: what they say (comments for subscribers only) is not about the article.
# The words are looked for in Python (_is_aside): in XPath, contains() of a translated concat for each word cost
# ten times the pass that finds the elements with a name at all.
_ASIDE_CANDIDATES = lxml.etree.XPath(
    "//aside|//*[self::section or self::div or self::footer or self::form or self::ul or self::ol][@id or @class]")
_ASIDE_WORDS = ("comment", "kommentar", "comentario", "commenti", "disqus")
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)  # as XPath's translate(): ASCII only


def _rx(*alternatives: str) -> re.Pattern[str]:
    return re.compile("|".join(alternatives), re.I)


# --- evidence, by kind ---------------------------------------------------------------------------------

# What interstitials say: Cloudflare, DataDome, PerimeterX/HUMAN, Imperva/Incapsula, Akamai, F5, Sucuri,
# AWS WAF, Google's "unusual traffic", Amazon's robot check, DDoS-Guard, and the generic captcha walls.
CHALLENGE_TEXT = _rx(
    r"just a moment\.\.\.|just a moment…", r"checking (your|if the site connection is) (browser|secure)",
    r"verif(y|ying) (your|the) browser", r"security checkpoint",
    r"verify(ing)? (that )?you are (a )?human", r"verify you('| a)re not a robot", r"are you a (robot|human)",
    r"robot or human", r"not a robot", r"press (&|and) hold", r"complete the security check",
    r"review the security of your connection", r"enable javascript and cookies to continue",
    r"access to this page has been denied", r"you (have been|are) blocked", r"why have i been blocked",
    r"unusual traffic from your computer", r"pardon our interruption", r"made us think you were a bot",
    r"request unsuccessful\. incapsula", r"incapsula incident id", r"attention required!? \| cloudflare",
    r"the requested url was rejected", r"your support id is", r"you don't have permission to access",
    r"ddos protection by", r"please (verify|confirm) (that )?you are (a )?human", r"human verification",
    r"type the characters you see", r"bot (protection|detection|check)", r"access denied",
    r"security service to protect itself", r"automated (access|requests|queries)")
# Markup only challenge pages carry (the vendors' bot sensors on ordinary pages look different), and the
# captcha widgets; lowercase literals, found with plain searches of the lowercased HTML (regular
# expressions with many alternatives cost a tenth of a second on a large page).
CHALLENGE_MARKUP = ("_cf_chl_opt", "/cdn-cgi/challenge-platform/h/", "cf-browser-verification", 'id="challenge-form"',
                    "cf-error-details", "captcha-delivery.com", 'id="px-captcha"', "_incapsula_resource?swudnsai",
                    "gokuprops", "awswafcookiedomainlist", "kpsdk.", "ddos-guard", "sucuri-cloudproxy",
                    "sucuri website firewall")
CAPTCHA_WIDGET = ("g-recaptcha", "h-captcha", "cf-turnstile", "frc-captcha", "/recaptcha/api.js",
                  "/recaptcha/enterprise.js", "hcaptcha.com/1/api.js", "challenges.cloudflare.com/turnstile",
                  "arkoselabs.com", "funcaptcha", "geetest")
ENABLE_JS = _rx(r"(enable|turn on|activate) javascript", r"javascript (is )?(required|disabled|must be enabled)",
                r"requires javascript", r"without javascript", r"javascript aktivieren")
# ...unless it is a widget's (Disqus: "Please enable JavaScript to view the comments powered by Disqus.")
WIDGET_ASK = _rx(r"\bcomments?\b")
APP_ROOT_IDS = ("root", "app", "__next", "__nuxt", "svelte", "main-app", "app-root", "application", "react-root")

LOGIN_TEXT = _rx(r"\b(sign|log)[ -]?in\b", r"\blogin\b", r"\bsign[ -]?up\b", r"\bregister\b",
                 r"create (an |your )?account", r"^join\b", r"\banmelden\b", r"\bconnexion\b", r"iniciar sesi[oó]n",
                 r"\baccedi\b")
LOGIN_REQUIRED = _rx(r"(sign|log)[ -]?in to (continue|view|see|read|access)", r"you must be (signed|logged) in",
                     r"(please|you need to) (sign|log)[ -]?in", r"login required", r"members only")
LOGIN_PATH = _rx(r"/(login|log-in|logon|signin|sign-in|sign_in|auth|authenticate|authwall|sso|session/new|oauth2?|idp|"
                 r"signup|sign-up|register|"
                 r"accounts?/login|users?/sign_in|cas/login)(/|$|\.|\?)")

CONSENT_TEXT = _rx(r"accept all", r"reject all", r"accept (all )?cookies", r"allow (all )?cookies",
                   r"we use cookies", r"uses cookies", r"cookie (settings|preferences|policy)",
                   r"manage (cookies|preferences|options|consent)", r"your privacy choices",
                   r"we and our (\d+ )?partners", r"store and/or access information on a device",
                   r"personali[sz]ed (ads|content)", r"agree and (continue|proceed|close)", r"\bconsent\b",
                   r"legitimate interest", r"alle akzeptieren", r"tout accepter", r"aceptar todo", r"accetta tutto",
                   r"alle ablehnen", r"zustimmen und weiter", r"tout refuser", r"accepter et (fermer|continuer)",
                   r"continuer sans accepter", r"rechazar todo", r"aceptar y (cerrar|continuar)", r"rifiuta tutto",
                   r"accetta e (chiudi|continua)")

CONSENT_WORDS = _rx(r"cookie", r"privacy", r"partners", r"personal data", r"preferences", r"einwilligung",
                    r"datenschutz", r"zustimmung", r"tracking", r"vie privée", r"confidentialité", r"consentement",
                    r"partenaires", r"traceurs", r"privacidad", r"consentimiento", r"riservatezza", r"consenso",
                    r"toestemming", r"personenbezogen")

PAYWALL_TEXT = _rx(r"subscribe (now )?to (continue|keep) reading", r"subscribe to (read|unlock)",
                   r"(for|available to) (paid )?subscribers only",
                   r"this (article|story|post|content) is (only )?(for|available to) (paid )?"
                   r"(subscribers|members|premium)",
                   r"continue reading (your|this) article with", r"free articles? (left|remaining)",
                   r"you('ve| have) reached your (monthly |free )?(article )?limit",
                   r"create a free account to (continue|keep) reading", r"unlock (this|the full) (article|story)",
                   r"become a (member|subscriber) to (read|continue)",
                   r"to continue reading,? (please )?(subscribe|log in|sign in)", r"already a (paid )?subscriber\?",
                   r"this content is reserved for (subscribers|members)",
                   r"nur für (zahlende )?abonnent(en|innen)", r"jetzt abonnieren und weiterlesen",
                   r"bereits abonnent(in)?\?", r"(la suite de cet article est |est )?réservée? aux abonnés",
                   r"déjà abonné\s?\?", r"(solo|exclusivo) para suscriptores", r"¿ya eres suscriptor\?",
                   r"riservat[oa] agli abbonati", r"sei già abbonato\?")
NOT_FREE_JSON = _rx(r"\"isAccessibleForFree\"\s*:\s*\"?false")
NOT_FREE_MICRODATA = _rx(r"itemprop=\"isAccessibleForFree\"\s+content=\"false\"",
                         r"content=\"false\"\s+itemprop=\"isAccessibleForFree\"")
LD_JSON = re.compile(r"<script[^>]*application/ld\+json[^>]*>(.*?)</script>", re.S | re.I)

NOT_FOUND = _rx(r"\b404\b", r"\bnot found\b", r"page (does not|doesn't|no longer) exists?",
                r"no longer (exists|available)", r"(could not|couldn't|can't|cannot) be found",
                r"(page|file|article|content).{0,20}(is )?(missing|gone)\b", r"nicht gefunden", r"introuvable",
                r"no encontrad[ao]", r"non trovat[ao]", r"niet gevonden",
                r"ページが見つかりません", r"页面不存在|找不到页面")

NOT_FOUND_OPENING = _rx(r"^\s*(sorry|oops|whoops|uh[ -]oh|error|hmm)\b")


@dataclass(frozen=True)
class Flag:
    name: str   # one of FLAG_NAMES
    note: str   # what the page is, the evidence, and what to do next


@dataclass(frozen=True)
class Evidence:
    """What a page's HTML says for its flags, read from its parsed tree: gathered in the worker process
    that extracted the page, on the same tree (`gather`), and judged in the daemon with what the load knows
    (`judge`), so a page's HTML is parsed once and crosses to a worker once."""

    title: str          # the document's <title>, white space collapsed
    markup: str | None  # the first of CHALLENGE_MARKUP in the HTML, if any
    captcha: str | None  # the first of CAPTCHA_WIDGET in the HTML, if any
    visible: str
    noscript: str
    headings: list[str]
    h1: str
    scripts: int
    script_chars: int
    empty_root: bool
    password: bool
    text_inputs: int
    prose: str
    modal: str
    modal_actions: int
    outside_modal_chars: int
    not_free: bool


@dataclass
class _Page:
    """The evidence a page offers, computed once."""

    status: int | None
    title: str
    markup: str | None  # the first of CHALLENGE_MARKUP in the HTML, if any
    captcha: str | None  # the first of CAPTCHA_WIDGET in the HTML, if any
    visible: str        # the body's visible text, white space collapsed
    noscript: str
    headings: list[str]  # h1 and h2 texts
    h1: str
    main_chars: int     # non-white-space characters of the extracted markdown
    markdown: str
    scripts: int
    script_chars: int
    empty_root: bool
    password: bool
    text_inputs: int
    url: str
    final_url: str
    prose: str = ""     # the visible text without asides and comment sections
    modal: str = ""     # the text of the dialogs over the page (_MODAL), white space collapsed
    modal_actions: int = 0
    outside_modal_chars: int = -1  # non-white-space characters visible outside them; -1: no dialog
    not_free: bool = field(default=False)  # the page's structured data marks the work itself not free

    @property
    def visible_chars(self) -> int:
        return len("".join(self.visible.split()))


def detect(*, status: int | None, title: str | None, html: str | bytes | None, markdown: str, url: str,
           final_url: str, truncated: bool = False, truncated_note: str | None = None) -> list[Flag]:
    """The flags for one loaded page, each with its note; empty for an ordinary page."""
    flags = detect_on_text(status=status, title=title, html=html, markdown=markdown, url=url, final_url=final_url,
                           truncated=truncated, truncated_note=truncated_note)
    if flags is not None:
        return flags
    return judge(_gather_html(html or ""), status=status, title=title, markdown=markdown, url=url,
                 final_url=final_url, truncated=truncated, truncated_note=truncated_note)


def judge(evidence: Evidence, *, status: int | None, title: str | None, markdown: str, url: str, final_url: str,
          truncated: bool = False, truncated_note: str | None = None) -> list[Flag]:
    """`detect`'s flags from the evidence `gather` read in the page's HTML: no parse."""
    flags = []
    page = _page(evidence, status, title, markdown, url, final_url)
    for check in (challenge, js_shell, login_wall, cookie_wall, paywall, soft_404):
        flag = check(page)
        if flag is not None:
            flags.append(flag)
        if flag is not None and flag.name == "challenge":
            break  # the rest of the page is the challenge's: nothing else on it means anything
    if any(f.name == "cookie_wall" for f in flags):
        # an app that waits for the reader's consent shows nothing else: the wall is the reason, not the app
        flags = [f for f in flags if f.name != "js_shell"]
    return flags + _truncated(truncated, truncated_note)


def detect_on_text(*, status: int | None, title: str | None, html: str | bytes | None, markdown: str, url: str,
                   final_url: str, truncated: bool = False, truncated_note: str | None = None) -> list[Flag] | None:
    """`detect`'s flags when they need no parse of the page's HTML (none to parse, or a long text not at a
    sign-in URL); None when they do."""
    if not html:
        return _truncated(truncated, truncated_note)
    if needs_markup(markdown, final_url):
        return None
    main_chars = _text_chars(markdown)
    # A long text is no wall, no shell and no error page; only a paywall's prompt at its end can still be
    # there. Skipping the parse keeps ordinary pages cheap.
    flag = paywall(_Page(status, title or "", None, None, "", "", [], "", main_chars, markdown, 0, 0, False, False,
                         0, url, final_url))
    return ([flag] if flag else []) + _truncated(truncated, truncated_note)


def needs_markup(markdown: str, final_url: str) -> bool:
    """Whether a page's flags need what its HTML says (`gather`): a short text (it may be a wall), or a
    page at a sign-in address."""
    return _text_chars(markdown) < PAYWALL_MAX_CHARS or bool(LOGIN_PATH.search(_path(final_url)))


def _truncated(truncated: bool, note: str | None) -> list[Flag]:
    if not truncated:
        return []
    return [Flag("truncated", note or "the response was larger than the size cap and was cut there; the end of "
                                      "the content is missing")]


def explain_error_page(status: int, body: bytes, final_url: str) -> str:
    """For a 4xx/5xx response whose body is an anti-bot challenge (Cloudflare answers its challenges with
    403 or 503): a sentence for the http_error's message saying so, else ''."""
    try:
        text = body.decode("utf-8", errors="replace")
        visible = " ".join(lxml.html.document_fromstring(text or "<html></html>").text_content().split())
    except (lxml.etree.ParserError, ValueError):
        return ""
    flag = challenge(_evidence(status, None, text, visible, final_url, final_url))
    if flag is None:
        return ""
    return "; " + flag.note.replace("challenge: this is", "the page is", 1)


def _evidence(status: int | None, title: str | None, html: str | bytes, markdown: str, url: str,
              final_url: str) -> _Page:
    return _page(_gather_html(html), status, title, markdown, url, final_url)


def _gather_html(html: str | bytes) -> Evidence:
    raw = html if isinstance(html, str) else html.decode("utf-8", errors="replace")
    return gather(_parse(html), raw)


def _page(e: Evidence, status: int | None, title: str | None, markdown: str, url: str, final_url: str) -> _Page:
    return _Page(status, title or e.title, e.markup, e.captcha, e.visible, e.noscript, e.headings, e.h1,
                 _text_chars(markdown), markdown, e.scripts, e.script_chars, e.empty_root, e.password, e.text_inputs,
                 url, final_url, prose=e.prose, modal=e.modal, modal_actions=e.modal_actions,
                 outside_modal_chars=e.outside_modal_chars, not_free=e.not_free)


def gather(doc: lxml.html.HtmlElement, html: str) -> Evidence:
    """What the page's tree `doc` (parsed from `html`) says for its flags. Takes the invisible parts and
    the asides out of `doc`: read it for anything else first."""
    scripts = doc.xpath("//script")
    script_chars = sum(len(s.text or "") for s in scripts)
    # a comment widget's noscript ("enable JavaScript to view the comments") says nothing about the page
    noscript = " ".join(t for t in (" ".join(n.text_content().split()) for n in doc.xpath("//noscript"))
                        if not WIDGET_ASK.search(t))
    page_title = " ".join((doc.findtext(".//title") or "").split())
    password = bool(doc.xpath("//input[translate(@type,'PASWORD','pasword')='password']"))
    text_inputs = len(doc.xpath("//input[not(@type) or @type='text' or @type='email' or @type='search' or "
                                "@type='tel' or @type='url' or @type='number']|//textarea"))
    empty_root = _empty_app_root(doc)
    _drop_invisible(doc)
    heads = doc.xpath("//h1|//h2")
    headings = [" ".join(h.text_content().split()) for h in heads]
    h1 = next((text for h, text in zip(heads, headings, strict=True) if h.tag == "h1"), "")
    body = doc.find("body")
    visible = " ".join((body if body is not None else doc).text_content().split())
    lowered = html.lower()
    modal, actions, outside = _modals(doc, visible)
    return Evidence(page_title, _first_in(CHALLENGE_MARKUP, lowered), _first_in(CAPTCHA_WIDGET, lowered), visible,
                    noscript, headings, h1, len(scripts), script_chars, empty_root, password, text_inputs,
                    _prose(doc, visible), modal, actions, outside, _marked_not_free(lowered))


def _modals(doc: lxml.html.HtmlElement, visible: str) -> tuple[str, int, int]:
    """The dialogs over the page (visible ones; outermost only): their text, the buttons and links in them,
    and the characters visible outside them (-1 when there is no dialog)."""
    found = [el for el in doc.xpath(_MODAL) if _over_the_page(el)]
    outer = [el for el in found if not any(a in found for a in el.iterancestors())]
    if not outer:
        return "", 0, -1
    text = " ".join(" ".join(el.text_content().split()) for el in outer)
    actions = sum(len(el.xpath(_ACTIONS)) for el in outer)
    return text, actions, max(0, len("".join(visible.split())) - len("".join(text.split())))


def _over_the_page(el: lxml.html.HtmlElement) -> bool:
    """A dialog by its element or role, or an element whose inline style pins it over the whole viewport."""
    if el.tag == "dialog" or el.get("role") in ("dialog", "alertdialog") or el.get("aria-modal") == "true":
        return True
    style = "".join((el.get("style") or "").lower().split())
    if "inset:0" in style:
        return True
    full = ("width:100%", "width:100vw", "right:0")
    tall = ("height:100%", "height:100vh", "bottom:0")
    return ("top:0" in style and "left:0" in style and any(x in style for x in full)
            and any(x in style for x in tall))


def _prose(doc: lxml.html.HtmlElement, visible: str) -> str:
    """The visible text without asides and comment sections, those that are not the page's main part
    (no h1, less than half of its text: a body classed "comments-open" is still the article). Drops them
    from `doc`, which is read before this."""
    total = len(visible)
    for el in _ASIDE_CANDIDATES(doc):
        if not _is_aside(el):
            continue
        if el.getparent() is None or el.xpath(".//h1"):
            continue
        if len(" ".join(el.text_content().split())) < 0.5 * total:
            el.drop_tree()
    body = doc.find("body")
    return " ".join((body if body is not None else doc).text_content().split())


def _is_aside(el: lxml.html.HtmlElement) -> bool:
    """An <aside>, or a section (div, footer, form, list) whose id or class names comments."""
    if el.tag == "aside":
        return True
    named = f"{el.get('id') or ''} {el.get('class') or ''}".translate(_ASCII_LOWER)
    return any(word in named for word in _ASIDE_WORDS)


def _marked_not_free(html: str) -> bool:
    """The page's structured data says the work itself is not free (schema.org isAccessibleForFree false on
    the work, not only on a part of it such as the comments: a `hasPart` marks what is paid)."""
    if "isaccessibleforfree" not in html:  # a plain find is 50x faster than the expressions below
        return False
    if NOT_FREE_MICRODATA.search(html):
        return True
    for block in LD_JSON.findall(html):
        if "isaccessibleforfree" not in block:
            continue
        try:
            data = json.loads(block)
        except ValueError:
            if NOT_FREE_JSON.search(block):
                return True  # broken JSON: the words alone, as before
            continue
        if any(str(work.get("isaccessibleforfree")).lower() == "false" for work in _works(data)):
            return True
    return False


def _works(data: object) -> Iterator[dict[str, object]]:
    """The JSON-LD objects of a block, through lists and @graph, not into hasPart."""
    if isinstance(data, list):
        for item in data:
            yield from _works(item)
    elif isinstance(data, dict):
        yield data
        for key, value in data.items():
            if key != "haspart" and isinstance(value, (dict, list)):
                yield from _works(value)


def _parse(html: str | bytes) -> lxml.html.HtmlElement:
    """The page's document; an empty one when lxml cannot parse it."""
    try:
        return lxml.html.document_fromstring(html or "<html></html>")
    except (lxml.etree.ParserError, ValueError):
        return lxml.html.document_fromstring("<html></html>")


def _empty_app_root(doc: lxml.html.HtmlElement) -> bool:
    """An app's mount point still empty, or holding only a "Loading…"."""
    return any(len("".join(el.text_content().split())) < BARE_ROOT_MAX_CHARS
               for el in doc.xpath("//body//*[@id]") if el.get("id", "").lower() in APP_ROOT_IDS)


def _drop_invisible(doc: lxml.html.HtmlElement) -> None:
    """Removes what a reader does not see: hidden elements, scripts, styles and other non-text."""
    for el in doc.xpath(_HIDDEN + "|" + _NOISE):
        if el.getparent() is not None:
            el.drop_tree()


def _text_chars(markdown: str) -> int:
    return len("".join(re.sub(r"\]\([^)]*\)", "]", markdown).split()))


def _first_in(literals: tuple[str, ...], text: str) -> str | None:
    """The first of `literals` that `text` contains, None when none is."""
    return next((x for x in literals if x in text), None)


def _quote(match: re.Match[str] | None) -> str:
    return f'"{match.group(0)}"' if match else ""


def _short(p: _Page, limit: int) -> bool:
    return p.main_chars < limit and p.visible_chars < 2 * limit


# --- the checks --------------------------------------------------------------------------------------


def challenge(p: _Page) -> Flag | None:
    """An anti-bot interstitial: a challenge's words or markup, or a captcha that is all the page holds."""
    if not _short(p, WALL_MAX_CHARS):
        return None
    said = _challenge_words(p)
    markup, captcha = p.markup, p.captcha
    alone = captcha is not None and p.main_chars < 400 and p.text_inputs <= 1 and not p.password
    if not (said or markup or alone):
        return None
    evidence = ", ".join(x for x in (_quote(said), markup and f'challenge markup "{markup}"',
                                     captcha and f"a captcha ({captcha})") if x)
    return Flag("challenge", f"challenge: this is an anti-bot check page ({evidence}), not the content; "
                             f"webfetch does not solve challenges. Do not treat this text as the page: get the "
                             f"information from another source (a search, another site, the site's API), or ask "
                             f"the user to open the URL in a browser")


def _challenge_words(p: _Page) -> re.Match[str] | None:
    """A challenge's words as the page's title, or in the body text of a page too short to be an article
    that quotes them."""
    said = CHALLENGE_TEXT.search(p.title)
    if said is not None and len(said.group(0)) < 0.5 * len(p.title):
        said = None  # an article's title quoting the words, not the challenge's own title
    if said is None and p.main_chars < CHALLENGE_TEXT_MAX_CHARS:
        said = CHALLENGE_TEXT.search(p.visible[:3000])
    return said


def js_shell(p: _Page) -> Flag | None:
    """A page built by scripts that showed (almost) nothing after rendering."""
    asks = ENABLE_JS.search(p.noscript) or ENABLE_JS.search(p.visible[:2000])
    limit = WALL_MAX_CHARS // 2 if asks else SHELL_MAX_CHARS
    if not (p.scripts and _short(p, limit)):
        return None
    if not (asks or p.empty_root or p.script_chars > 20 * max(p.visible_chars, 1)):
        return None
    evidence = _quote(asks) if asks else "an empty app root" if p.empty_root else "scripts but no text"
    return Flag("js_shell", f"js_shell: the page is a JavaScript application that showed almost no content after "
                            f"rendering ({evidence}, {p.main_chars} characters of text); its content probably "
                            f"needs a sign-in, an API call the page could not make, or user interaction. Look for "
                            f"the site's API, a server-rendered or printable version of the URL, or another source")


def still_a_shell(*, html: str, title: str | None, url: str) -> bool:
    """Whether a rendered DOM is, as it stands, what `js_shell` flags: the renderer keeps watching such a
    page for content that arrives late. Judged before any extraction, so the page's visible text stands for
    its markdown (the markdown is never longer)."""
    page = _evidence(None, title, html, "", url, url)
    page.main_chars = page.visible_chars
    return js_shell(page) is not None


def login_wall(p: _Page) -> Flag | None:
    """The fetch ended on a sign-in page, or a sign-in form stands where the content should be."""
    moved = _path(p.final_url) != _path(p.url) and LOGIN_PATH.search(_path(p.final_url))
    said = LOGIN_TEXT.search(p.title) or LOGIN_TEXT.search(p.h1)
    required = LOGIN_REQUIRED.search(p.visible[:3000])
    if moved and (p.password or said or required):
        evidence = f"redirected to {urlsplit(p.final_url).path}"
    elif p.main_chars < LOGIN_MAX_CHARS and p.visible_chars < 2 * WALL_MAX_CHARS and (
            (p.password and (said or required)) or required):
        evidence = "a sign-in form" + (f" under {_quote(said)}" if said else "")
    else:
        return None
    return Flag("login_wall", f"login_wall: the content is behind a sign-in ({evidence}). Find a public source for "
                              f"the information, or ask the user for the content")


def cookie_wall(p: _Page) -> Flag | None:
    """A consent wall that hides the content (a consent banner beside an article is no wall): by its words,
    or by its structure in any language (a dialog over the page, with buttons, about cookies or data, and
    nothing else to read)."""
    dialog = _consent_dialog(p)
    if dialog:
        return _cookie_flag(dialog)
    if not _short(p, WALL_MAX_CHARS):
        return None
    text = p.markdown if p.main_chars >= 100 else p.visible
    said = {m.group(0).lower() for m in CONSENT_TEXT.finditer(text)}
    if len(said) < 2:
        return None
    # the consent text must be most of what came back, not a banner's lines kept beside a short article
    blocks = [b for b in re.split(r"\n\s*\n", text) if b.strip()] if text is p.markdown else [text]
    consent = sum(len(b) for b in blocks if CONSENT_TEXT.search(b) or CONSENT_WORDS.search(b))
    if consent < 0.5 * sum(len(b) for b in blocks):
        return None
    return _cookie_flag(", ".join(sorted(said)[:3]))


def _consent_dialog(p: _Page) -> str:
    """The evidence of a consent dialog that is the whole page, or ''."""
    if not 0 <= p.outside_modal_chars < OUTSIDE_MODAL_MAX_CHARS or p.modal_actions < 2:
        return ""
    if p.main_chars >= MODAL_MAX_CHARS:
        return ""
    words = CONSENT_WORDS.search(p.modal) or CONSENT_TEXT.search(p.modal)
    if words is None:
        return ""
    return (f"a dialog over the page with {p.modal_actions} buttons and links, about {_quote(words)}, "
            f"and {p.outside_modal_chars} characters of text outside it")


def _cookie_flag(evidence: str) -> Flag:
    return Flag("cookie_wall", f"cookie_wall: a cookie consent wall hides the content ({evidence}); webfetch does "
                               f"not give consent on your behalf. Look for the information in another source, or ask "
                               f"the user to open the URL in a browser")


def paywall(p: _Page) -> Flag | None:
    """The article is cut by a subscription wall: the page's markup says so and little text came through,
    or a subscription prompt ends the text."""
    tail = PAYWALL_TEXT.search(p.markdown[-600:])
    said = None
    if tail:
        evidence = _quote(tail) + " at the end of the text"
    elif p.not_free and p.main_chars < PAYWALL_MAX_CHARS:
        evidence = f"marked isAccessibleForFree: false, {p.main_chars} characters of text"
    elif _short(p, WALL_MAX_CHARS) and (said := PAYWALL_TEXT.search(p.prose)):
        evidence = _quote(said)
    else:
        return None
    return Flag("paywall", f"paywall: the article is cut by a subscription wall ({evidence}); what came back is "
                           f"only the free part. Do not treat it as the whole article: look for the rest in another "
                           f"source")


def soft_404(p: _Page) -> Flag | None:
    """A page that says it was not found, served with a success status."""
    if p.status is not None and not 200 <= p.status < 300:
        return None
    if p.main_chars >= NOT_FOUND_MAX_CHARS:
        return None
    said = None
    for part in re.split(r" [|\-–—·:] ", p.title) + p.headings:
        match = NOT_FOUND.search(part)
        if match and (len(part.split()) <= NOT_FOUND_MAX_WORDS or NOT_FOUND_OPENING.match(part)):
            said = match
            break
    if said is None:
        return None
    # and the page says so a second time, in words other than its title (a film called "Not Found"
    # says it once)
    texts = {" ".join(t.lstrip("#").lower().split()) for t in [p.title, *p.headings, *re.split(r"\n\s*\n", p.markdown)]}
    if sum(1 for t in texts if NOT_FOUND.search(t)) < 2:
        return None
    return Flag("soft_404", f"soft_404: the server answered {p.status or 'with success'} but the page says it does "
                            f"not exist ({_quote(said)}); the URL is probably wrong or the page was removed. Search "
                            f"for its new address instead of using this text")


def _path(url: str) -> str:
    parts = urlsplit(url)
    return unquote(parts.path.rstrip("/")).lower() + ("?" + parts.query if parts.query else "")
