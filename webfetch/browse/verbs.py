"""Each browse verb's step, one function per verb taking the tab and the request: what the verb does to
the tab, and the fields it leaves for its result. `STEPS` is the table the sessions actor dispatches on;
settling and the result that follows a step are the actor's (sessions.py) and reply.py's. The verbs
that answer on their own (open, tabs, snapshot, read, screenshot, console, network, request, har) are
dispatched by the actor itself."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import BadRequest, BlockedUrl, WebfetchError
from ..protocol import BrowseRequest
from ..urls import AddressPolicy, prepare_url
from . import actions
from .tab import BrowseTab

REFUSED_SCHEMES = ("file", "chrome", "javascript", "data", "about", "view-source", "blob", "filesystem",
                   "chrome-extension", "devtools")


@dataclass
class Acted:
    """What an action's step leaves for its result: fields to report, whether the snapshot is shown whole
    (a navigation), and whether to wait for the page to settle (a wait has waited already)."""

    fields: dict[str, Any] = field(default_factory=dict)
    full: bool = False
    settle: bool = True


async def nav(tab: BrowseTab, req: BrowseRequest) -> Acted:
    if req.to is None:
        raise BadRequest("nav needs `to`: back, forward or reload")
    await _history(tab, req.to)
    return Acted(full=True)


async def click(tab: BrowseTab, req: BrowseRequest) -> Acted:
    await actions.click(tab, need(req.ref, "click", "ref"), req.button, req.double)
    return Acted()


async def fill(tab: BrowseTab, req: BrowseRequest) -> Acted:
    value = await actions.fill(tab, need(req.ref, "fill", "ref"), need(req.text, "fill", "text"))
    if req.submit:
        await actions.press(tab, "Enter")
    return Acted(fields={"value": value})


async def type_(tab: BrowseTab, req: BrowseRequest) -> Acted:
    if req.ref is not None:
        await actions.focus(tab, req.ref)
    await actions.type_text(tab, need(req.text, "type", "text"))
    return Acted()


async def press(tab: BrowseTab, req: BrowseRequest) -> Acted:
    if req.ref is not None:
        await actions.focus(tab, req.ref)
    await actions.press(tab, need(req.key, "press", "key"))
    return Acted()


async def select(tab: BrowseTab, req: BrowseRequest) -> Acted:
    value = await actions.select(tab, need(req.ref, "select", "ref"), need(req.values, "select", "values"))
    return Acted(fields={"value": value})


async def check(tab: BrowseTab, req: BrowseRequest) -> Acted:
    value = await actions.check(tab, need(req.ref, "check", "ref"), need(req.checked, "check", "checked"))
    return Acted(fields={"value": value})


async def hover(tab: BrowseTab, req: BrowseRequest) -> Acted:
    await actions.hover(tab, need(req.ref, "hover", "ref"))
    return Acted()


async def scroll(tab: BrowseTab, req: BrowseRequest) -> Acted:
    await actions.scroll(tab, req.ref, req.direction, req.px)
    return Acted()


async def wait(tab: BrowseTab, req: BrowseRequest) -> Acted:
    waited_for = await actions.wait(tab, req.text, req.text_gone, req.url, req.ms, req.timeout_s or 10.0)
    return Acted(fields={"waited_for": waited_for}, settle=False)


async def dialog(tab: BrowseTab, req: BrowseRequest) -> Acted:
    if tab.dialog is None:
        raise BadRequest(f"no dialog is open on {tab.name}")
    params: dict[str, Any] = {"accept": need(req.accept, "dialog", "accept")}
    if req.prompt_text is not None:
        params["promptText"] = req.prompt_text
    await tab.call("Page.handleJavaScriptDialog", params)
    await tab.wait_for(lambda: tab.dialog is None)
    return Acted()


# Each action's step by name; snapshot, read, screenshot, tabs and open are answered by the actor.
STEPS: dict[str, Callable[[BrowseTab, BrowseRequest], Awaitable[Acted]]] = {
    "nav": nav, "click": click, "fill": fill, "type": type_, "press": press, "select": select,
    "check": check, "hover": hover, "scroll": scroll, "wait": wait, "dialog": dialog,
}


async def _history(tab: BrowseTab, to: str) -> None:
    if to == "reload":
        await tab.call("Page.reload")
        await tab.wait_for(lambda: tab.main_loading or tab.dialog is not None)
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


async def checked_url(url: str, policy: AddressPolicy) -> str:
    """An address for open: http(s) only, through the address policy; the fragment is kept (single-page
    apps route by it)."""
    scheme = url.split(":", 1)[0].strip().lower() if ":" in url else ""
    if scheme in REFUSED_SCHEMES:
        raise BlockedUrl(f"{scheme}: URLs are not opened by browse; it opens http(s) pages only")
    base, _, fragment = url.partition("#")
    try:
        checked = await prepare_url(base, policy)
    except WebfetchError:
        raise
    return checked + (f"#{fragment}" if fragment else "")
