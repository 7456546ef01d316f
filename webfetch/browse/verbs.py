"""Every browse verb: one entry in `VERBS` (how the sessions actor runs it) and its handler here.

A handler takes the `Call` (the request, its session, the tab it acts on, the actor's config and
services). A step (`Verb.step`) does the verb to the tab and returns `Acted`, what the result adds; the
actor then waits for what it set off (settle.py) and answers with what changed (reply.py). The others
(`Verb.answer`) answer on their own. What a verb does inside the page is actions.py's.

A new verb is an entry in `VERBS` and its handler here, and its name and parameters in
pi_extension/tools.json (what every front end offers a model) and protocol.py (BrowseAction and the
BrowseRequest fields: the wire's check, in a module that may not import browse/). The names are written
there apart only because JSON and the wire need them: tests/test_tool_contract.py fails when either list
differs from this table."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING, Any

import trio

from ..errors import BadRequest, BlockedUrl, UnknownRequest, WebfetchError
from ..paging import paginate
from ..protocol import BrowseRequest, BrowseResult, PageInfo, ReportProgress, TabInfo
from ..urls import AddressPolicy, HostGate, parse_url, prepare_url
from . import actions, routes, saving
from . import har as har_file
from . import network as network_log
from . import reply as results
from .device import requested, wants_device
from .emulation import requested as requested_emulation
from .emulation import wants_emulation
from .reply import Reply
from .settle import Marks, settle
from .tab import BrowseTab
from .uploads import checked_upload, read_checked

if TYPE_CHECKING:
    from .sessions import Browse, Session

REFUSED_SCHEMES = ("file", "chrome", "javascript", "data", "about", "view-source", "blob", "filesystem",
                   "chrome-extension", "devtools")


@dataclass
class Acted:
    """What a step leaves for its result: fields to report, and whether the snapshot is shown whole (a
    navigation)."""

    fields: dict[str, Any] = field(default_factory=dict)
    full: bool = False
    stated: str | None = None  # the ref whose new value `fields` state: its line is not repeated for it


@dataclass
class Call:
    """One action being served: what a verb's handler works with."""

    actor: Browse               # the sessions actor: its config, address policy, extractor and profiles
    session: Session
    req: BrowseRequest
    reply: Reply
    progress: ReportProgress
    on: tuple[BrowseTab, Marks] | None = None  # a verb that needs a tab: that tab, marked as the action began

    @property
    def tab(self) -> BrowseTab:
        assert self.on is not None, "only a verb that needs a tab is given one"
        return self.on[0]

    @property
    def marks(self) -> Marks:
        assert self.on is not None, "only a verb that needs a tab is given one"
        return self.on[1]


Step = Callable[[Call], Awaitable[Acted]]
Answer = Callable[[Call], Awaitable[BrowseResult]]


class SessionUse(Enum):
    """What a verb asks of its session."""

    NEEDS = "needs"     # an open one: else no_page (no browser context is made for an action that cannot run)
    STARTS = "starts"   # starts it when it is not open
    ENDS = "ends"       # ends it, at once: not queued behind the action it may be running


@dataclass(frozen=True)
class Verb:
    """How the actor runs one verb: a `step` or an `answer` (one of the two), and around it what the
    other fields say."""

    step: Step | None = None
    answer: Answer | None = None
    needs_tab: bool = True      # acts on a tab (the request's `tab`, else the active one), marked as it begins
    settles: bool = True        # a step's result waits for what it set off first
    past_dialog: bool = False   # runs while a confirm or prompt is open on its tab (else dialog_open)
    session: SessionUse = SessionUse.NEEDS

    def __post_init__(self) -> None:
        assert (self.step is None) != (self.answer is None), "a verb is a step or an answer"


# --- the steps: the actor settles and shows what changed ------------------------------------------------

async def nav(c: Call) -> Acted:
    if c.req.to is None:
        raise BadRequest("nav needs `to`: back, forward or reload")
    await _history(c.tab, c.req.to)
    return Acted(full=True)


async def click(c: Call) -> Acted:
    await actions.click(c.tab, need(c.req.ref, "click", "ref"), c.req.button, c.req.double)
    return Acted()


async def fill(c: Call) -> Acted:
    value = await actions.fill(c.tab, need(c.req.ref, "fill", "ref"), need(c.req.text, "fill", "text"))
    if c.req.submit:
        await actions.press(c.tab, "Enter")
    return Acted(fields={"value": value}, stated=c.req.ref)


async def type_(c: Call) -> Acted:
    if c.req.ref is not None:
        await actions.focus(c.tab, c.req.ref)
    await actions.type_text(c.tab, need(c.req.text, "type", "text"))
    return Acted()


async def press(c: Call) -> Acted:
    if c.req.ref is not None:
        await actions.focus(c.tab, c.req.ref)
    await actions.press(c.tab, need(c.req.key, "press", "key"))
    return Acted()


async def select(c: Call) -> Acted:
    value = await actions.select(c.tab, need(c.req.ref, "select", "ref"), need(c.req.values, "select", "values"))
    return Acted(fields={"value": value}, stated=c.req.ref)


async def check(c: Call) -> Acted:
    value = await actions.check(c.tab, need(c.req.ref, "check", "ref"), need(c.req.checked, "check", "checked"))
    return Acted(fields={"value": value}, stated=c.req.ref)


async def hover(c: Call) -> Acted:
    await actions.hover(c.tab, need(c.req.ref, "hover", "ref"))
    return Acted()


async def scroll(c: Call) -> Acted:
    await actions.scroll(c.tab, c.req.ref, c.req.direction, c.req.px)
    return Acted()


async def wait(c: Call) -> Acted:
    req = c.req
    waited_for = await actions.wait(c.tab, req.text, req.text_gone, req.url, req.ms, req.timeout_s or 10.0)
    return Acted(fields={"waited_for": waited_for})


async def dialog(c: Call) -> Acted:
    tab = c.tab
    if tab.dialog is None:
        raise BadRequest(f"no dialog is open on {tab.name}")
    params: dict[str, Any] = {"accept": need(c.req.accept, "dialog", "accept")}
    if c.req.prompt_text is not None:
        params["promptText"] = c.req.prompt_text
    await tab.call("Page.handleJavaScriptDialog", params)
    await tab.wait_for(lambda: tab.dialog is None)
    return Acted()


async def viewport(c: Call) -> Acted:
    """The session's device changed: sizes apply at once (the page gets a resize); a switch between
    mobile and desktop reloads the tab, since touch and the user agent are a document's from its start."""
    session, tab = c.session, c.tab
    before = session.device
    device = requested(before, c.req)
    await session.set_device(device)
    if device.mobile == before.mobile:
        return Acted(fields={"viewport": device.describe()})
    await tab.call("Page.reload")
    await tab.wait_for(lambda: tab.navigating() or tab.dialog is not None)
    return Acted(fields={"viewport": device.describe()}, full=True)


async def offline(c: Call) -> Acted:
    """The session's network off (or on again): every tab now and those it opens later; the page's reaction
    (its offline banner, a failed request's error state) is what the result shows."""
    emulation = replace(c.session.forced.emulation, offline=c.req.enabled is not False)
    await c.session.set_emulation(emulation)
    return Acted(fields={"value": "offline" if emulation.offline else "online"})


async def emulate(c: Call) -> BrowseResult:
    """What the session's pages believe (emulation.py): changed as asked, or shown as it is."""
    session = c.session
    if wants_emulation(c.req):
        shown = session.tabs.get(session.active or "")
        page_url = shown.url if shown is not None and not shown.closed else None
        await session.set_emulation(requested_emulation(session.forced.emulation, c.req, page_url))
    described = session.forced.emulation.described()
    if not described:
        return c.reply.result(None, content="nothing emulated: the pages see the browser as it is")
    note = ("\n(a page reads some of these as it loads, navigator.language and the user agent among them: "
            "nav reload shows them in the page open now)" if wants_emulation(c.req) and session.tabs else "")
    return c.reply.result(None, content="emulating:\n" + described + note)


async def upload(c: Call) -> Acted:
    """Every path through the upload rule first (uploads.py), so a refused one sets nothing; Chrome gets
    private copies of the files checked, so a file swapped before the form is sent is not what it sends."""
    files = need(c.req.files, "upload", "files")
    if not files:
        raise BadRequest("upload needs at least one path in `files`")
    checked = [checked_upload(f, c.req.cwd, c.actor.config) for f in files]
    copies = await trio.to_thread.run_sync(c.session.private_copies, checked)
    names = await actions.upload(c.tab, need(c.req.ref, "upload", "ref"), copies)
    return Acted(fields={"files": names})


# --- the verbs that answer on their own -----------------------------------------------------------------

async def open_(c: Call) -> BrowseResult:
    session, req, actor = c.session, c.req, c.actor
    url = await checked_url(need(req.url, "open", "url"), actor.policy.current, session.gate if session.user else None)
    if req.profile is not None and req.profile != session.profile:
        raise BadRequest(f"browse session {session.name!r} was started "
                         f"{f'with profile {session.profile!r}' if session.profile else 'without a profile'}; "
                         f"a session keeps the profile it started with: close it first, or use another session")
    if session.profile is not None:  # the host list as it is now (the user may have widened it)
        await actor.profiles.load(session.profile, parse_url(url)[1])
    if req.new_tab or not session.tabs:
        tab = await session.new_tab()
    else:
        tab = session.tab(req.tab)
        if tab.dialog is not None:
            raise tab.dialog_open()
    fields: dict[str, Any] = {}
    if wants_device(req):  # before the document starts: touch and the user agent are its from the start
        await session.set_device(requested(session.device, req))
        fields["viewport"] = session.device.describe()
    session.opened = []
    marks = Marks.of(tab)
    c.progress("browse", f"loading {url} in {tab.name}")
    await actions.navigate(tab, url)
    notes = await settle(tab, marks, actor.config.nav_timeout_s, actor.config.settle_s)
    if tab.status is not None and tab.status >= 400:
        notes.append(f"the page answered HTTP {tab.status}; the tab shows the server's error page")
    return await actor.answer(session, tab, c.reply, marks, full=True, notes=notes or None, status=tab.status,
                              **fields)


async def snapshot(c: Call) -> BrowseResult:
    return await results.snapshot(c.reply, c.tab, c.req, c.actor.config.snapshot_chars)


async def read(c: Call) -> BrowseResult:
    tab, req, actor = c.tab, c.req, c.actor
    html = await actions.shown_html(tab, req.ref)
    extracted = await actor.extractor.html(html, tab.url)
    content, next_offset = paginate(extracted.markdown, req.offset, req.max_chars or actor.fetch_config.page_chars,
                                    actor.fetch_config.page_lines)
    title = await tab.title()
    return c.reply.result(PageInfo(tab=tab.name, url=tab.url, title=title), tab, content=content,
                          next_offset=next_offset)


async def console(c: Call) -> BrowseResult:
    return await results.console(c.reply, c.tab, c.req.max_chars or c.actor.config.snapshot_chars)


async def screenshot(c: Call) -> BrowseResult:
    image, width, height = await actions.screenshot(c.tab, c.req.ref, c.req.full_page)
    return await c.actor.answer(c.session, c.tab, c.reply, c.marks, snapshot=False,
                                image=image, width=width, height=height)


async def pdf(c: Call) -> BrowseResult:
    destination = saving.target(c.session.name, c.tab.name, c.req.path, ".pdf", c.req.overwrite)
    data = await actions.pdf(c.tab)
    await trio.to_thread.run_sync(saving.save, c.session.name, destination, data, c.req.overwrite)
    return await c.actor.answer(c.session, c.tab, c.reply, c.marks, snapshot=False, path=str(destination),
                                size=len(data))


async def tabs(c: Call) -> BrowseResult:
    session, req = c.session, c.req
    if req.do == "select":
        tab = session.tab(need(req.tab, "tabs select", "tab"))
        session.active = tab.name
        await tab.call("Page.bringToFront")
    elif req.do == "close":
        tab = session.tab(need(req.tab, "tabs close", "tab"))
        if len([t for t in session.tabs.values() if not t.closed]) == 1:
            raise BadRequest(f"{tab.name} is the session's last tab; close the session instead (action close)")
        await session.close_tab(tab)
    infos = []
    for t in list(session.tabs.values()):
        if t.closed:
            continue
        infos.append(TabInfo(tab=t.name, url=t.url, title=await t.title(), active=t.name == session.active))
    active = session.tabs.get(session.active or "")
    shown = PageInfo(tab=active.name, url=active.url, title=await active.title()) if active else None
    return c.reply.result(shown, active, tabs=infos)


async def save(c: Call) -> BrowseResult:
    session = c.session
    if session.profile is None:
        raise BadRequest(f"browse session {session.name!r} has no profile to save to: open it with a "
                         f"profile (open with profile NAME) to keep its logins")
    notes = await session.save()  # cookies refused for domains the profile is not bound to, if any
    return c.reply.result(None, notes=[f"saved the session's cookies to profile {session.profile!r}; a fetch "
                                       f"with that profile uses them now", *notes])


async def close(c: Call) -> BrowseResult:
    notes = await c.actor.close_session(c.session)  # the profile write-back's refusals, if any
    return c.reply.result(None, notes=notes or None)


# --- the network log's verbs (network.py, har.py): they read what the session recorded, change no page ---

def _log(session: Session) -> network_log.NetworkLog:
    if not session.network.enabled:
        raise BadRequest("this session keeps no network log (browse.network_log = false in the config when it "
                         "opened); set it to true, reload, and open a new session")
    return session.network


async def network(c: Call) -> BrowseResult:
    session, req, config = c.session, c.req, c.actor.config
    tab = session.tab(req.tab)
    log = _log(session)
    redacting = config.redact_secrets
    records = network_log.matching(log.entries(tab.name), req.find, req.status_class, req.resource_type, redacting)
    shown, text, next_offset = network_log.listing(records, req.offset, req.max_chars or config.snapshot_chars,
                                                   redacting)
    filters = ", ".join(f"{k} {v}" for k, v in (("URL containing", req.find), ("status", req.status_class),
                                                   ("type", req.resource_type)) if v)
    head = (f"network: {len(records)} request{'s' if len(records) != 1 else ''} of {tab.name}"
            f"{f' ({filters})' if filters else ''}, oldest first"
            + (f"; from #{req.offset + 1}" if req.offset else "")
            + (f"; the session's {log.dropped} oldest are no longer kept" if log.dropped else "")
            + ("; `request` with a request_id shows one's headers and bodies" if records else ""))
    page = PageInfo(tab=tab.name, url=network_log.shown_url(tab.url, redacting), title=await tab.title())
    return c.reply.result(page, tab, requests=[r.entry(redacting) for r in shown],
                          content=head + ("\n" + text if text else ""), next_offset=next_offset)


async def request(c: Call) -> BrowseResult:
    session, req, config = c.session, c.req, c.actor.config
    rid = need(req.request_id, "request", "request_id")
    record = _log(session).get(rid)
    if record is None:
        raise UnknownRequest(f"no request {rid} in browse session {session.name!r} (the log keeps its newest "
                             f"{network_log.RING}); the network action lists the ids there are")
    tab = session.tabs.get(record.tab)
    call = tab.call if tab is not None and not tab.closed else None
    detail = await network_log.detail(record, call, config.redact_secrets, req.max_chars or config.snapshot_chars)
    shown = (PageInfo(tab=tab.name, url=network_log.shown_url(tab.url, config.redact_secrets),
                      title=await tab.title()) if call is not None and tab else None)
    return c.reply.result(shown, tab if call is not None else None, request=detail,
                          content=network_log.detail_text(detail))


async def har(c: Call) -> BrowseResult:
    session, config = c.session, c.actor.config
    tab_name = session.active if session.active in session.tabs else "t0"
    path = saving.target(session.name, tab_name, c.req.path, ".har", c.req.overwrite)
    records = _log(session).entries()
    open_tabs = {t.name: t for t in session.tabs.values() if not t.closed}
    titles = {name: await t.title() for name, t in open_tabs.items()}
    document = await har_file.build(records, {name: t.call for name, t in open_tabs.items()}, titles,
                                    config.redact_secrets)
    size = await har_file.write(session.name, path, document, c.req.overwrite)
    secrets = "with secrets redacted (credential headers, and secret URL parameters and form fields)" \
        if config.redact_secrets else "with secrets IN CLEAR (browse.redact_secrets = false)"
    return c.reply.result(None, content=f"wrote {path} (HAR 1.2, {len(records)} requests of session "
                                        f"{session.name!r}, {size:,} bytes, mode 0600) {secrets}")


# --- routes (routes.py): the session's, they change no page until one of its requests meets them ---------

async def route(c: Call) -> BrowseResult:
    """Set a route: its body from `body` or from a file the upload rule lets through, read now (a file
    changed later changes nothing)."""
    req, table = c.req, c.session.forced.routes
    body = None
    if req.body_file is not None:
        path, st = checked_upload(req.body_file, req.cwd, c.actor.config)
        body = await trio.to_thread.run_sync(read_checked, path, st, routes.MAX_BODY_BYTES)
    added = table.add(routes.requested(req, body))
    return c.reply.result(None, content=f"{added.line()}; it answers the session's requests from now on "
                                        f"({len(table)} route{'s' if len(table) != 1 else ''} set)")


async def unroute(c: Call) -> BrowseResult:
    table = c.session.forced.routes
    gone = table.remove(c.req.url)
    if not gone:
        return c.reply.result(None, content=f"no route has the pattern {c.req.url!r}: nothing removed "
                                            f"({len(table)} set; `routes` lists them)")
    lines = [f"removed {r.line()}" for r in gone]
    return c.reply.result(None, content="\n".join([*lines, f"{len(table)} route{'s' if len(table) != 1 else ''} "
                                                             f"left"]))


async def routes_(c: Call) -> BrowseResult:
    listed = c.session.forced.routes.listed()
    if not listed:
        return c.reply.result(None, content="no routes set: every request goes to its server")
    head = (f"{len(listed)} route{'s' if len(listed) != 1 else ''}, newest last (the newest matching one "
            f"answers):")
    return c.reply.result(None, content="\n".join([head, *(r.line() for r in listed)]))


# --- the table ---------------------------------------------------------------------------------------

# Every browse verb, in the order tools.json lists them to a model.
VERBS: dict[str, Verb] = {
    "open": Verb(answer=open_, needs_tab=False, session=SessionUse.STARTS),  # makes or picks its own tab
    "snapshot": Verb(answer=snapshot),
    "click": Verb(step=click),
    "fill": Verb(step=fill),
    "type": Verb(step=type_),
    "press": Verb(step=press),
    "select": Verb(step=select),
    "check": Verb(step=check),
    "hover": Verb(step=hover),
    "scroll": Verb(step=scroll),
    "wait": Verb(step=wait, settles=False),  # it waited already, for what the agent named
    "dialog": Verb(step=dialog, past_dialog=True),
    "tabs": Verb(answer=tabs, needs_tab=False, session=SessionUse.STARTS),
    "read": Verb(answer=read),
    "screenshot": Verb(answer=screenshot, past_dialog=True),
    "console": Verb(answer=console),
    # the network log's verbs read what the session recorded, a dialog open or not, and mark no tab
    "network": Verb(answer=network, needs_tab=False),
    "request": Verb(answer=request, needs_tab=False),
    "har": Verb(answer=har, needs_tab=False),
    "viewport": Verb(step=viewport),
    "offline": Verb(step=offline),
    # set before the first open too: the first page's requests meet them
    "route": Verb(answer=route, needs_tab=False, session=SessionUse.STARTS),
    "unroute": Verb(answer=unroute, needs_tab=False),
    "routes": Verb(answer=routes_, needs_tab=False),
    "emulate": Verb(answer=emulate, needs_tab=False, session=SessionUse.STARTS),  # before the first open too
    "pdf": Verb(answer=pdf),
    "upload": Verb(step=upload),
    "nav": Verb(step=nav),
    "save": Verb(answer=save, needs_tab=False),
    "close": Verb(answer=close, needs_tab=False, session=SessionUse.ENDS),
}


# --- helpers ---------------------------------------------------------------------------------------

async def _history(tab: BrowseTab, to: str) -> None:
    if to == "reload":
        await tab.call("Page.reload")
        await tab.wait_for(lambda: tab.navigating() or tab.dialog is not None)
        return
    history = await tab.call("Page.getNavigationHistory")
    index = history["currentIndex"] + (-1 if to == "back" else 1)
    entries = history["entries"]
    if not 0 <= index < len(entries):
        raise BadRequest(f"there is no page to go {to} to in {tab.name}'s history")
    await tab.call("Page.navigateToHistoryEntry", {"entryId": entries[index]["id"]})


def need(value: Any, action: str, name: str) -> Any:
    """`value`, which the action cannot do without: bad_request when the request left it out."""
    if value is None:
        raise BadRequest(f"{action} needs `{name}`")
    return value


async def checked_url(url: str, policy: AddressPolicy, gate: HostGate | None = None) -> str:
    """An address for open: http(s) only, through the address policy; the fragment is kept (single-page
    apps route by it). In the person's own browser, through its session's `gate` (user_browser.hosts)."""
    scheme = url.split(":", 1)[0].strip().lower() if ":" in url else ""
    if scheme in REFUSED_SCHEMES:
        raise BlockedUrl(f"{scheme}: URLs are not opened by browse; it opens http(s) pages only")
    base, _, fragment = url.partition("#")
    if gate is not None:
        parse_url(base)  # InvalidUrl for what is no http(s) URL
        why = await gate.check(base, navigation=True)
        if why is not None:
            raise BlockedUrl(why)
        return url
    try:
        checked = await prepare_url(base, policy)
    except WebfetchError:
        raise
    return checked + (f"#{fragment}" if fragment else "")
