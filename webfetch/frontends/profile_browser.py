"""A profile's state read out of a running Chrome over CDP: its cookies (Storage.getCookies, every cookie
of the browser's default context, session cookies included) and the localStorage of the origins its open
tabs show. `webfetch profile import --from-browser` reads a Chrome the user runs; `webfetch profile login`
reads the window it opened (profile_login.py).

localStorage can only be read for an origin a tab has open (DOMStorage answers for the frames of the page
it is asked in), so an import copies it for the listed hosts' tabs that are open, and says so.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import trio

from ..chrome.browser import Browser
from ..chrome.cdp import CDPError
from ..profiles.store import LocalStorageItem, OriginState, ProfileError, StorageState, from_cdp

VERSION_TIMEOUT_S = 5.0
START_HINT = ("start Chrome with remote debugging and a profile directory of its own, for example "
              "`chromium --remote-debugging-port=9222 --user-data-dir=$HOME/.config/chromium-webfetch` "
              "(Chrome 136 and later ignore --remote-debugging-port on the default profile directory, so "
              "--user-data-dir is needed), log in there, then run this again")


def _version_url(endpoint: str) -> str:
    """`http://host:port[/…]`, `host:port` or a bare port as the URL of its /json/version."""
    if re.fullmatch(r"\d{1,5}", endpoint):
        endpoint = f"127.0.0.1:{endpoint}"
    if not re.match(r"https?://", endpoint):
        endpoint = "http://" + endpoint
    parts = urlsplit(endpoint)
    if not parts.hostname or not parts.port:
        raise ProfileError(f"{endpoint!r} is not a DevTools endpoint: give http://127.0.0.1:9222 (the port of "
                           f"--remote-debugging-port) or the browser's ws://… URL")
    return f"{parts.scheme}://{parts.netloc}/json/version"


def _read_version(url: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(url, timeout=VERSION_TIMEOUT_S) as r:  # noqa: S310 (http only, above)
            body = r.read(65536)
    except urllib.error.HTTPError as e:
        raise ProfileError(f"{url} answered HTTP {e.code}: that is not a Chrome DevTools endpoint; "
                           f"{START_HINT}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", None) or e
        raise ProfileError(f"cannot reach a browser's DevTools at {url.removesuffix('/json/version')} "
                           f"({getattr(reason, 'strerror', None) or reason}); {START_HINT}") from None
    try:
        found = json.loads(body)
    except ValueError:
        found = None
    if not isinstance(found, dict) or not str(found.get("webSocketDebuggerUrl", "")).startswith("ws"):
        raise ProfileError(f"{url} answered, but not as Chrome's DevTools do (no webSocketDebuggerUrl); "
                           f"{START_HINT}")
    return found


async def browser_ws_url(endpoint: str) -> str:
    """The browser's DevTools websocket URL: a ws:// endpoint as it is, else the one /json/version gives."""
    if re.match(r"wss?://", endpoint):
        return endpoint
    version = await trio.to_thread.run_sync(_read_version, _version_url(endpoint))
    return str(version["webSocketDebuggerUrl"])


async def read_state(browser: Browser, wanted_host: Callable[[str], bool]) -> StorageState:
    """Every cookie of the browser's default context, and the localStorage of the open tabs' origins
    whose host is wanted."""
    cookies = [from_cdp(c) for c in await browser.cookies()]
    return StorageState(cookies=cookies, origins=await _local_storage(browser, wanted_host))


async def _local_storage(browser: Browser, wanted_host: Callable[[str], bool]) -> list[OriginState]:
    origins: dict[str, OriginState] = {}
    for page in await browser.pages():
        parts = urlsplit(page.url)
        origin = f"{parts.scheme}://{parts.netloc}"
        if (parts.scheme not in ("http", "https") or not parts.hostname or origin in origins
                or not wanted_host(parts.hostname)):
            continue
        items = await _items(browser, page.target_id, origin)
        if items:
            origins[origin] = OriginState(origin=origin, localStorage=items)
    return list(origins.values())


async def _items(browser: Browser, target_id: str, origin: str) -> list[LocalStorageItem]:
    """The localStorage of `origin` as the tab `target_id` sees it; none when the tab went away or the
    browser will not say (an older Chrome, a page that navigated meanwhile)."""
    try:
        async with browser.attach(target_id) as page:
            got = await page.call("DOMStorage.getDOMStorageItems",
                                  {"storageId": {"securityOrigin": origin, "isLocalStorage": True}})
            return [LocalStorageItem(str(k), str(v)) for k, v in got.get("entries", [])]
    except CDPError:
        return []
