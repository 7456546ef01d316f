"""`webfetch profile login` where no window can open (no $DISPLAY nor $WAYLAND_DISPLAY: a dev box over ssh, a
container): the login runs in a headless tab of the daemon's own Chrome, a browse session with the profile,
and the person does it through the daemon's view (`webfetch view`), on the session's page: take over, sign
in, then "Done", which closes the session and writes its cookies to the profile as every browse session
with a profile does (browse/sessions.py). This command prints the page's address (with `ssh -L` for another
machine) and returns once the session has ended, saying what the profile holds."""

from __future__ import annotations

import sys
import time
from collections import deque
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..profiles.store import ProfileError, ProfileStore
from .view_cli import tunnel

WAIT_S = 1.0     # how often the session is looked for while the person logs in


def _last(frames: Any) -> dict[str, Any]:
    """A request's terminal frame (its progress frames before it are not shown here)."""
    kept = deque(frames, maxlen=1)
    return dict(kept[0]) if kept else {}


def view_login(socket: Path, name: str, url: str, store: ProfileStore) -> int:
    """Open the login in the daemon, print the view's page for it, wait for the person's Done."""
    from .client import Client

    session = f"login-{name}"
    with Client(socket) as c:
        opened = _last(c.request("browse", session=session, action="open", url=url, profile=name, create=True))
        if opened.get("type") != "result":
            raise ProfileError(f"could not open {url} for the login: {opened.get('code')}: {opened.get('message')}")
        view = _last(c.request("view"))
        if view.get("type") != "result":
            raise ProfileError(f"could not open the daemon's view: {view.get('code')}: {view.get('message')}")
        base, _, token = str(view["url"]).partition("/?token=")
        page = f"{base}/session/{quote(session)}?token={token}"
        print(page, flush=True)
        ssh, there = tunnel(page)
        print(f"webfetch: no display here, so the login runs in the daemon's headless Chrome: open the address above "
              f"in your browser (from another machine: {ssh} first, then open {there}), click 'Take over', sign "
              f"in on the page, then click 'Done: save the login'. Waiting…", file=sys.stderr, flush=True)
        while any(s.get("session") == session for s in (_last(c.request("status")).get("browse") or [])):
            time.sleep(WAIT_S)
    profile = store.load(name)
    if not profile.state.cookies:
        raise ProfileError(f"the login session ended with no cookies set, so there was no login to save; profile "
                           f"{name} holds none")
    print(f"saved profile {name}: {len(profile.state.cookies)} cookies, for {', '.join(profile.hosts)}")
    return 0
