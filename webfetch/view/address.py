"""The view's own loopback address: 127.A.B.C, chosen at random once per install and kept in
`$XDG_STATE_HOME/webfetch/view-address`, so that the page is a host of its own for the person's browser.

Why: browsers scope cookies by host and not by port, so a page on 127.0.0.1 shares its cookies with every
other server on 127.0.0.1 that the browser visits (another local user's, a dev server running hostile
code). On an address of its own, the view's cookie goes to the view alone (and to whatever else listens
on that same address: nothing, unless someone chose it on purpose; door.py's docstring says what such a
server could do). The whole of 127.0.0.0/8 is loopback on Linux; where only 127.0.0.1 is (macOS, the BSDs)
the bind fails and server.py falls back to 127.0.0.1. Kept across restarts, so that an `ssh -L` tunnel to
it and a bookmark stay good; delete the file for another.
"""

from __future__ import annotations

import ipaddress
import secrets

from ..config import state_home
from ..trust.private_files import write_private

FILE = "view-address"
FALLBACK = "127.0.0.1"
_LOOPBACK = ipaddress.ip_network("127.0.0.0/8")


def own_address() -> str:
    """This install's address for the view (made and kept the first time)."""
    path = state_home() / "webfetch" / FILE
    try:
        kept = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        kept = ""
    if chosen(kept):
        return kept
    # 127.0.x.x is left alone: 127.0.0.1 is everyone's, and distributions give 127.0.1.1 to the host name
    address = f"127.{1 + secrets.randbelow(254)}.{secrets.randbelow(256)}.{1 + secrets.randbelow(254)}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_private(path, address.encode() + b"\n")
    except OSError:
        pass  # not kept: a new one at the next start, which only a tunnel to the old one notices
    return address


def chosen(text: str) -> bool:
    """Is `text` an address this module could have chosen (a loopback one other than 127.0.x.x)?"""
    try:
        address = ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return address in _LOOPBACK and address.packed[1] != 0 and address.packed[3] not in (0, 255)


def loopback_literal(name: str) -> bool:
    """Is `name` (a Host header's name) an IPv4 loopback address written out, 127.0.0.1 or any of 127/8?"""
    try:
        return ipaddress.IPv4Address(name) in _LOOPBACK
    except ValueError:
        return False
