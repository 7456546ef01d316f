"""What each browse action does to a tab: clicks that are hit-tested first, fills that React sees, native
selects, keys, waits, the page as HTML. Results and snapshots are reply.py's; these functions only act and
read back."""

from __future__ import annotations

import base64
import struct
from functools import partial
from typing import Any

import trio

from .. import page_scripts
from ..chrome.cdp import CDPError
from ..errors import (
    BadRequest,
    BlockedUrl,
    Covered,
    Disabled,
    NetworkError,
    NoContent,
    NotEditable,
    NotFileInput,
    NotNativeSelect,
    NotVisible,
    Timeout,
)
from ..mime import NO_CONTENT
from ..urls import wildcard_match
from .tab import BrowseTab

# What the actions run on an element, `this` in each (webfetch/js/): POINT is one round trip for an element
# of the main frame (into view, the checks, the hit test at its centre); an iframe's element is found with
# the browser's geometry and PREPARE_CLICK.
PREPARE_CLICK = page_scripts.load("prepare_click")
PREPARE_FILL = page_scripts.load("prepare_fill")
READ_VALUE = page_scripts.load("read_value")
SELECT = page_scripts.load("select")
CHECKED_STATE = page_scripts.load("checked_state")
POINT = page_scripts.load("point")
HIT_OK = page_scripts.load("hit_ok")
DESCRIBE = page_scripts.load("describe")
FOCUS = page_scripts.load("focus")
# A ref's file input (itself, or the input its label names) and that input's state (webfetch/js/).
FILE_INPUT = page_scripts.load("file_input")
FILE_STATE = page_scripts.load("file_state")
# What the page shows, as HTML for the extractor (webfetch/js/shown.js): of the document, or of a ref's element.
SHOWN_HTML = page_scripts.load("shown")

MODIFIERS = {"Alt": 1, "Control": 2, "Ctrl": 2, "Meta": 4, "Cmd": 4, "Shift": 8}
# key -> (code, windowsVirtualKeyCode, text)
KEYS: dict[str, tuple[str, int, str]] = {
    "Enter": ("Enter", 13, "\r"), "Tab": ("Tab", 9, ""), "Escape": ("Escape", 27, ""),
    "Backspace": ("Backspace", 8, ""), "Delete": ("Delete", 46, ""), "Space": ("Space", 32, " "),
    "ArrowUp": ("ArrowUp", 38, ""), "ArrowDown": ("ArrowDown", 40, ""), "ArrowLeft": ("ArrowLeft", 37, ""),
    "ArrowRight": ("ArrowRight", 39, ""), "Home": ("Home", 36, ""), "End": ("End", 35, ""),
    "PageUp": ("PageUp", 33, ""), "PageDown": ("PageDown", 34, ""),
    **{f"F{n}": (f"F{n}", 111 + n, "") for n in range(1, 13)},
}


def key_event(combo: str) -> tuple[dict[str, Any], int]:
    """Input.dispatchKeyEvent fields for `Enter`, `a`, `Control+a`, `Shift+Tab`…, and the modifier bits."""
    *mods, key = combo.split("+") if combo != "+" else ["+"]
    bits = 0
    for m in mods:
        if m not in MODIFIERS:
            raise BadRequest(f"unknown modifier {m!r} in {combo!r}; use Control, Alt, Shift or Meta, e.g. Control+a")
        bits |= MODIFIERS[m]
    if key in KEYS:
        code, vk, text = KEYS[key]
    elif len(key) == 1:
        upper = key.upper()
        code = f"Key{upper}" if upper.isalpha() and upper.isascii() else (f"Digit{key}" if key.isdigit() else "")
        vk, text = ord(upper) if upper.isascii() else 0, key
    else:
        raise BadRequest(f"unknown key {key!r}; use a single character or one of {', '.join(list(KEYS)[:14])}")
    if bits & ~MODIFIERS["Shift"]:
        text = ""  # Control+a is a shortcut, not the letter a
    fields: dict[str, Any] = {"key": " " if key == "Space" else key, "code": code, "windowsVirtualKeyCode": vk,
                              "modifiers": bits}
    if text:
        fields["text"] = text
    return fields, bits


async def press(tab: BrowseTab, combo: str) -> None:
    fields, _ = key_event(combo)
    down = {"type": "keyDown" if "text" in fields else "rawKeyDown", **fields}
    await tab.unless_dialog(lambda: tab.call("Input.dispatchKeyEvent", down))
    await tab.unless_dialog(lambda: tab.call("Input.dispatchKeyEvent", {"type": "keyUp", **fields}))


async def type_text(tab: BrowseTab, text: str) -> None:
    """Key by key, so pages that listen to keys see each one (fill is the fast way to set a value)."""
    for ch in text:
        if ch == "\n":
            await press(tab, "Enter")
            continue
        fields = {"key": ch, "text": ch, "unmodifiedText": ch}
        await tab.unless_dialog(partial(tab.call, "Input.dispatchKeyEvent", {"type": "keyDown", **fields}))
        await tab.unless_dialog(partial(tab.call, "Input.dispatchKeyEvent", {"type": "keyUp", **fields}))


async def focus(tab: BrowseTab, ref: str) -> None:
    await tab.worlds.on_ref(ref, FOCUS)


async def _point(tab: BrowseTab, ref: str) -> dict[str, Any]:
    """Scroll the ref's element into view; its click point in the tab's viewport, its box, whether that
    point hits it (`ok`, else `by` names what covers it), `visible`, `disabled` and a description."""
    frame = tab.worlds.ref_frame(ref)
    if frame == tab.target_id:
        state: dict[str, Any] = await tab.worlds.on_ref(ref, POINT)
    else:
        state = await _point_in_frame(tab, ref)
    if not state["visible"]:
        raise NotVisible(f"{ref} ({state['what']}) is not visible (hidden, collapsed or zero-sized); open what "
                         f"contains it first, or take a snapshot to find the visible control")
    return state


async def _point_in_frame(tab: BrowseTab, ref: str) -> dict[str, Any]:
    """The same for an element in an iframe: the browser's own geometry and hit test, which see across
    frames (an overlay in the parent page covers a frame's button too)."""
    frame, obj = await tab.worlds.element(ref)
    try:
        await tab.call("DOM.scrollIntoViewIfNeeded", {"objectId": obj})
    except CDPError:
        pass  # not rendered: the check below says so
    state: dict[str, Any] = await tab.worlds.on_element(obj, PREPARE_CLICK)
    if not state["visible"]:
        return state
    try:
        quads = (await tab.call("DOM.getContentQuads", {"objectId": obj}))["quads"]
    except CDPError:
        quads = []
    for q in quads:
        xs, ys = q[0::2], q[1::2]
        if max(xs) - min(xs) >= 1 and max(ys) - min(ys) >= 1:
            x, y = sum(xs) / 4, sum(ys) / 4
            state |= {"x": x, "y": y, "box": [min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)]}
            state |= await _hit_test(tab, frame, obj, x, y)
            return state
    return state | {"visible": False}


async def _hit_test(tab: BrowseTab, frame: str, obj: str, x: float, y: float) -> dict[str, Any]:
    metrics = await tab.call("Page.getLayoutMetrics")
    vp = metrics.get("cssVisualViewport") or metrics.get("visualViewport") or {}
    try:
        # page coordinates, not viewport ones (BROWSE.md)
        hit = await tab.call("DOM.getNodeForLocation", {
            "x": int(x + vp.get("pageX", 0)), "y": int(y + vp.get("pageY", 0)),
            "includeUserAgentShadowDOM": False, "ignorePointerEventsNone": True})
    except CDPError:
        return {"ok": True}  # nothing answers at that point; let the click happen and the page decide
    hit_frame = hit.get("frameId") or tab.target_id
    if not tab.has_frame(hit_frame):
        return {"ok": True}
    ctx = await tab.worlds.world(hit_frame)
    hit_obj = (await tab.call("DOM.resolveNode", {"backendNodeId": hit["backendNodeId"],
                                                   "executionContextId": ctx}))["object"]["objectId"]
    if hit_frame == frame and await tab.worlds.on_element(obj, HIT_OK, objects=(hit_obj,)):
        return {"ok": True}
    return {"ok": False, "by": await tab.worlds.on_element(hit_obj, DESCRIBE)}


async def click(tab: BrowseTab, ref: str, button: str = "left", double: bool = False) -> None:
    state = await _point(tab, ref)
    what = state["what"]
    if state["disabled"]:
        raise Disabled(f"{ref} ({what}) is disabled; the page enables it when its conditions are met "
                       f"(fill the required fields first)")
    if not state["ok"]:
        by = state["by"]
        raise Covered(f"{ref} ({what}) is covered at its click point by {by}: close or dismiss that first (click "
                      f"it or its close button, or press Escape), then click {ref} again", covered_by=by)
    await mouse_click(tab, state["x"], state["y"], button, 2 if double else 1)


async def mouse_click(tab: BrowseTab, x: float, y: float, button: str, count: int) -> None:
    """Move, then press and release `count` times, sent back to back: the browser delivers them in order,
    and waiting for each one's reply only added round trips. A dialog the page opens meanwhile ends the
    wait (the events after it reach the page once the dialog is answered, as a person's would queue)."""
    base = {"x": x, "y": y, "button": button}
    events: list[tuple[str, dict[str, Any]]] = [("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})]
    for n in range(1, count + 1):
        events += [("Input.dispatchMouseEvent", {"type": "mousePressed", "clickCount": n, **base}),
                   ("Input.dispatchMouseEvent", {"type": "mouseReleased", "clickCount": n, **base})]
    await tab.unless_dialog(partial(tab.call_in_order, events))


async def hover(tab: BrowseTab, ref: str) -> None:
    state = await _point(tab, ref)
    await tab.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": state["x"], "y": state["y"]})


async def scroll(tab: BrowseTab, ref: str | None, direction: str | None, px: int | None) -> None:
    if ref is not None:
        await _point(tab, ref)
        return
    delta = px or 640
    await tab.unless_dialog(lambda: tab.call("Input.dispatchMouseEvent", {
        "type": "mouseWheel", "x": 640, "y": 400, "deltaX": 0, "deltaY": -delta if direction == "up" else delta}))


async def fill(tab: BrowseTab, ref: str, text: str) -> str:
    """Focus, select the old text, insert the new (as typing would, so controlled inputs see it); the value
    read back."""
    state = await tab.worlds.on_ref(ref, PREPARE_FILL)
    error = state.get("error")
    if error == "disabled":
        raise Disabled(f"{ref} ({state['what']}) is disabled")
    if error:
        raise NotEditable(f"{ref} ({state['what']}) is not a text field" + (
            " (it is read-only)" if error == "readonly" else
            "; use click, check or select for it, or fill a textbox ref"))
    if text:
        await tab.unless_dialog(lambda: tab.call("Input.insertText", {"text": text}))
    else:
        await press(tab, "Delete")
    return str(await tab.worlds.on_ref(ref, READ_VALUE))


async def select(tab: BrowseTab, ref: str, values: list[str]) -> str:
    got = await tab.worlds.on_ref(ref, SELECT, values)
    error = got.get("error")
    if error == "not_native":
        raise NotNativeSelect(f"{ref} ({got['what']}) is not a native <select>: click it to open its list, take a "
                              f"snapshot, then click the option's ref")
    if error == "disabled":
        raise Disabled(f"{ref} ({got['what']}) is disabled")
    if error == "no_option":
        raise BadRequest(f"{ref} has no option {got['value']!r}; its options are: {', '.join(got['options'])}")
    if error == "one":
        raise BadRequest(f"{ref} takes one value, not {len(values)}")
    return str(got["value"])


async def check(tab: BrowseTab, ref: str, checked: bool) -> str:
    state = await tab.worlds.on_ref(ref, CHECKED_STATE)
    if state["kind"] is None:
        raise NotEditable(f"{ref} ({state['what']}) is not a checkbox, radio button or switch; use click for it")
    if state["checked"] != checked:
        if state["kind"] == "radio" and not checked:
            raise BadRequest(f"{ref} is a radio button: check another one of its group to uncheck it")
        await click(tab, ref)
    return str(await tab.worlds.on_ref(ref, READ_VALUE))


async def upload(tab: BrowseTab, ref: str, paths: list[str]) -> list[str]:
    """Set the files (real paths the upload rule let through) on the ref's file input, as choosing them in
    the file chooser would (the page sees input and change events); the names the input holds then."""
    _, obj = await tab.worlds.element(ref)
    found = await tab.unless_dialog(lambda: tab.call("Runtime.callFunctionOn", {
        "objectId": obj, "functionDeclaration": FILE_INPUT.source, "returnByValue": False}))
    if found is None:
        raise tab.dialog_open()
    input_obj = (await tab.worlds.check(found))["result"].get("objectId")
    if input_obj is None:
        what = await tab.worlds.on_element(obj, DESCRIBE)
        raise NotFileInput(f"{ref} ({what}) is not a file input; upload needs the ref of an <input type=file> "
                           f"(a snapshot shows it as a button, often named \"Choose File\") or of its label")
    state = await tab.worlds.on_element(input_obj, FILE_STATE)
    if state["disabled"]:
        raise Disabled(f"{ref} ({state['what']}) is disabled")
    if len(paths) > 1 and not state["multiple"]:
        raise BadRequest(f"{ref} ({state['what']}) takes one file, not {len(paths)}")
    await tab.unless_dialog(lambda: tab.call("DOM.setFileInputFiles", {"files": paths, "objectId": input_obj}))
    return list((await tab.worlds.on_element(input_obj, FILE_STATE))["names"])


async def wait(tab: BrowseTab, text: str | None, text_gone: str | None, url: str | None, ms: int | None,
               timeout_s: float) -> str:
    if ms is not None:
        await trio.sleep(ms / 1000)  # asked for by name: a fixed pause is what the caller wants
        return f"{ms} ms"
    if url is not None:
        # `*` for any characters, as routes' patterns: matched by its pieces in linear time (urls.wildcard_match),
        # never as a regular expression: a model's glob compiled by fnmatch took 43 s in the event loop
        pieces = tuple(url.split("*"))
        with trio.move_on_after(timeout_s):
            await tab.wait_for(lambda: wildcard_match(pieces, tab.url, anchored=True))
            return f"url {tab.url}"
        raise Timeout(f"the tab's URL did not match {url!r} within {timeout_s:g} s (it is {tab.url})")
    needle, gone = (text, False) if text is not None else (text_gone, True)
    if needle is None:
        raise BadRequest("wait needs one of text, text_gone, url or ms")
    with trio.move_on_after(timeout_s + 1):
        if await tab.worlds.evaluate(tab.target_id, page_scripts.invoke("__wf.waitText", needle, gone,
                                                                        int(timeout_s * 1000))):
            return f"text {needle!r} {'gone' if gone else 'shown'}"
    raise Timeout(f"the text {needle!r} was {'still there' if gone else 'not shown'} after {timeout_s:g} s; "
                  f"take a snapshot to see what the page shows")


async def screenshot(tab: BrowseTab, ref: str | None, full_page: bool) -> tuple[str, int, int]:
    # a tab that is not in front never paints in headless Chrome, and the capture would hang
    await tab.call("Page.bringToFront")
    params: dict[str, Any] = {"format": "png"}
    if ref is not None:
        box = (await _point(tab, ref))["box"]
        vp = (await tab.call("Page.getLayoutMetrics"))["cssVisualViewport"]
        params["clip"] = {"x": box[0] + vp["pageX"], "y": box[1] + vp["pageY"], "width": max(1, box[2]),
                          "height": max(1, box[3]), "scale": 1}
    elif full_page:
        size = (await tab.call("Page.getLayoutMetrics"))["cssContentSize"]
        params |= {"captureBeyondViewport": True,
                   "clip": {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 16_000), "scale": 1}}
    data = (await tab.unless_dialog(lambda: tab.call("Page.captureScreenshot", params)) or {}).get("data")
    if data is None:
        raise tab.dialog_open()
    width, height = struct.unpack(">II", base64.b64decode(data[:32])[16:24])
    return data, width, height


async def pdf(tab: BrowseTab) -> bytes:
    """The page printed to PDF (its print stylesheet, backgrounds included), as Chrome's print preview does."""
    await tab.call("Page.bringToFront")
    reply = await tab.unless_dialog(lambda: tab.call("Page.printToPDF", {"printBackground": True}))
    if reply is None:
        raise tab.dialog_open()
    return base64.b64decode(reply["data"])


async def navigate(tab: BrowseTab, url: str) -> None:
    """Page.navigate, with Chrome's failures told apart: the address policy, a download, the network."""
    tab.start_navigation()
    downloads = tab.downloads.responses
    before = tab.doc_gen
    reply = await tab.call("Page.navigate", {"url": url})
    error = reply.get("errorText")
    if error:
        if tab.downloads.responses > downloads:  # the address was a download: saved, the tab stays
            return
        if tab.status in NO_CONTENT:  # Chrome aborts a navigation answered so: the tab shows what it showed
            raise NoContent(url, tab.status, f"; the tab still shows {tab.url or 'a blank page'}")
        if tab.blocked:
            raise BlockedUrl(tab.blocked)
        failure = tab.connect_failure(url) if "SOCKS" in error else None
        if failure is not None and failure.blocked:
            raise BlockedUrl(failure.message)
        raise NetworkError(f"{failure.message if failure else error} while loading {url}")
    if reply.get("loaderId"):
        await tab.wait_for(lambda: tab.doc_gen > before or tab.dialog is not None)


async def shown_html(tab: BrowseTab, ref: str | None) -> str:
    """What the tab shows, as HTML for the extractor: the page, a ref's element, or an iframe ref's document."""
    child = await tab.worlds.child_frame(tab.worlds.ref_frame(ref), ref) if ref is not None else None
    if child is not None and tab.has_frame(child):  # an iframe's ref: the frame's own document
        html = await tab.worlds.evaluate(child, SHOWN_HTML.call())
    elif ref is not None:
        html = await tab.worlds.on_ref(ref, SHOWN_HTML)
    else:
        html = await tab.worlds.evaluate(tab.target_id, SHOWN_HTML.call())
    return str(html or "")
