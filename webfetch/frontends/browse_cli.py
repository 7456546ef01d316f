"""`webfetch browse ACTION [...] --session NAME`: the browse op by hand, for people debugging a page."""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .cli_words import cli_words
from .command import Invocation, handles, with_daemon
from .contract import BROWSER_ACTIONS
from .progress_line import PersonWaits
from .tool_text import console_lines, download_line, files_line

USAGE = """actions:
  open URL [--new-tab] [--profile NAME [--new-profile]] [--user-browser]     save (the session's logins to its profile)
  snapshot [--full] [--find TEXT] [--ref eN] [--offset N]
  click eN [--double]           fill eN TEXT [--submit]        type TEXT [--ref eN]
  press KEY [--ref eN]          select eN VALUE...             check eN [--off]
  hover eN                      scroll [eN] [--up] [--px N]    nav back|forward|reload
  wait --text T | --gone T | --url PATTERN | --ms N [--timeout S]
  dialog accept|dismiss [--text T]                            tabs [list|select|close] [tN]
  read [eN]                     screenshot [eN] [--full-page] [-o FILE] [--overwrite]    console
  network [--find URLPART] [--status 2xx|3xx|4xx|5xx|failed] [--type fetch] [--offset N]
  request rN                    har FILE [--overwrite] (the session's traffic, HAR 1.2)
  viewport [WIDTHxHEIGHT] [--mobile | --desktop] [--scale N]  pdf [-o FILE.pdf] [--overwrite]
  upload eN FILE...  (files under the working directory or browse.upload_roots)
  offline [on|off]   (every tab of the session: requests fail, navigator.onLine is false)
  route URLGLOB [STATUS] [--body TEXT | --body-file FILE] [--header 'Name: value']... [--times N]
  route URLGLOB --abort InternetDisconnected|ConnectionRefused|TimedOut|...    unroute [URLGLOB]    routes
  emulate [--geo LAT,LON] [--locale fr-FR] [--timezone Asia/Tokyo] [--color-scheme dark] [--reduced-motion]
          [--user-agent UA] [--header 'Name: value']... [--header-origin ORIGIN|*]... [--reset]
          (no flag: what is set)
  close                         recordings (the sessions' recordings on disk; no daemon needed)
open takes the viewport's --size WIDTHxHEIGHT, --mobile and --scale too, and --record / --no-record."""


def add_parser(sub: Any, common: Any) -> None:
    p = sub.add_parser("browse", help="drive a browser tab by hand (the browse op)", epilog=USAGE,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    common(p)
    # the browser tool's actions, and `recordings` (files on disk: no daemon is asked)
    p.add_argument("action", choices=[*BROWSER_ACTIONS, "recordings"], metavar="{" + ",".join(BROWSER_ACTIONS) + "}")
    p.add_argument("args", nargs="*", help="the action's arguments (see below)")
    p.add_argument("--session", default=os.environ.get("WEBFETCH_SESSION", "cli"),
                   help="the session's name (default: $WEBFETCH_SESSION or 'cli'); it lives in the daemon")
    p.add_argument("--tab", help="act on this tab (tN) instead of the active one")
    p.add_argument("--ref", help="a ref: the subtree to snapshot, or the field to type or press in")
    p.add_argument("--new-tab", action="store_true")
    p.add_argument("--profile", metavar="NAME", help="open: start the session with this profile's logins; "
                                                     "they are saved back to it on close and save")
    p.add_argument("--new-profile", action="store_true", help="open: make the --profile if none has that name "
                                                              "(empty, for the URL's host); else a name no profile "
                                                              "has is refused")
    p.add_argument("--user-browser", action="store_true", help="open: run the session in your own browser, "
                                                               "signed in as you, on user_browser.hosts only")
    p.add_argument("--full", action="store_true", help="snapshot: every line, not only the controls")
    p.add_argument("--find", help="snapshot: only lines containing this text (and what holds them)")
    p.add_argument("--offset", type=int, help="snapshot or read: continue from this character; network: request")
    p.add_argument("--status", choices=["2xx", "3xx", "4xx", "5xx", "failed"], help="network: this status class")
    p.add_argument("--type", dest="resource_type", help="network: this resource type (fetch, xhr, script…)")
    p.add_argument("--double", action="store_true")
    p.add_argument("--submit", action="store_true", help="fill: press Enter after")
    p.add_argument("--off", action="store_true", help="check: uncheck")
    p.add_argument("--up", action="store_true")
    p.add_argument("--px", type=int)
    p.add_argument("--text", help="wait: until this text shows; dialog: the prompt's answer")
    p.add_argument("--gone", help="wait: until this text is gone")
    p.add_argument("--url", help="wait: until the tab's whole URL matches this pattern (`*` for any characters)")
    p.add_argument("--ms", type=int)
    p.add_argument("--timeout", type=float)
    p.add_argument("--full-page", action="store_true")
    p.add_argument("-o", "--output", help="screenshot: the PNG file to write (default browse-<tab>.png); pdf: the "
                                          "PDF file the daemon writes (default: in the session's directory)")
    p.add_argument("--overwrite", action="store_true", help="screenshot -o, pdf -o, har: replace the file if it is "
                                                            "there (else it is refused: file_exists)")
    p.add_argument("--size", metavar="WIDTHxHEIGHT", help="open: the viewport's size in CSS pixels")
    p.add_argument("--mobile", action="store_const", const=True, help="open, viewport: emulate a phone")
    p.add_argument("--desktop", dest="mobile", action="store_const", const=False, help="viewport: back to a desktop")
    p.add_argument("--scale", type=float, help="open, viewport: device pixels per CSS pixel")
    p.add_argument("--body", help="route: the response's body")
    p.add_argument("--body-file", metavar="FILE", help="route: the response's body from this file (the upload rule)")
    p.add_argument("--header", action="append", metavar="'NAME: VALUE'", help="route: a response header; "
                                                                               "emulate: an extra request header "
                                                                               "(repeatable)")
    p.add_argument("--abort", metavar="ERROR", help="route: fail the requests with this network error "
                                                    "(InternetDisconnected, ConnectionRefused, TimedOut…)")
    p.add_argument("--times", type=int, help="route: answer only this many requests")
    p.add_argument("--geo", metavar="LAT,LON", help="emulate: the position (the permission granted)")
    p.add_argument("--locale", help="emulate: a language tag (fr-FR): navigator.language, Intl, Accept-Language")
    p.add_argument("--timezone", help="emulate: an IANA time zone (Asia/Tokyo)")
    p.add_argument("--color-scheme", choices=["light", "dark", "no-preference"], help="emulate: the color scheme")
    p.add_argument("--reduced-motion", action="store_const", const=True, help="emulate: prefers-reduced-motion")
    p.add_argument("--user-agent", metavar="UA", help="emulate: the user agent")
    p.add_argument("--header-origin", action="append", metavar="ORIGIN", help="emulate: an origin the --header "
                                                                             "lines go to (* every one; default "
                                                                             "the page's own)")
    p.add_argument("--reset", action="store_true", help="emulate: clear what emulate set first")
    p.add_argument("--record", action="store_const", const=True, help="open: record the session it starts "
                                                                      "(frames, actions, console, requests)")
    p.add_argument("--no-record", dest="record", action="store_const", const=False,
                   help="open: do not record it, whatever browse.record says")
    p.add_argument("--json", action="store_true", help="print the protocol's frames as JSON lines")
    handles(p, _command)


def _command(inv: Invocation) -> int:
    if inv.args.action == "recordings":
        return list_recordings()
    return with_daemon(run)(inv)


def list_recordings() -> int:
    """`webfetch browse recordings`: the recordings on disk, oldest first (read from the state directory)."""
    import time

    from .. import recordings

    files = recordings.listing()
    for f in files:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(f.modified))
        print(f"{f.name}  {f.size:,} bytes  {when}")
    total = sum(f.size for f in files)
    print(f"{len(files)} recording{'s' if len(files) != 1 else ''}, {total:,} bytes, in {recordings.directory()}"
          + ("; `webfetch view` replays them" if files else ""), file=sys.stderr)
    return 0


class _Words:
    """The action's positional arguments, taken in order; a missing one is a ValueError with a usage hint."""

    def __init__(self, action: str, words: list[str]) -> None:
        self.action = action
        self.rest = list(words)

    def take(self, what: str) -> str:
        if not self.rest:
            raise ValueError(f"browse {self.action} needs {what}")
        return str(self.rest.pop(0))

    def optional(self, default: Any = None) -> Any:
        return self.rest.pop(0) if self.rest else default

    def all(self) -> list[str]:
        words, self.rest = self.rest, []
        return words


# --- one builder per action: its request fields from its words and flags ---------------------------

def _open_fields(w: _Words, args: argparse.Namespace) -> dict[str, Any]:
    if args.new_profile and args.profile is None:
        raise ValueError("browse open --new-profile makes the profile --profile NAME names; give both")
    return {"url": w.take("a URL"), "new_tab": args.new_tab or None, "profile": args.profile,
            "create": args.new_profile or None, "record": args.record, "browser": "user" if args.user_browser else None,
            **_device(args.size, args)}


def _device(size: str | None, args: argparse.Namespace) -> dict[str, Any]:
    width = height = None
    if size is not None:
        try:
            width, height = (int(n) for n in size.lower().split("x"))
        except ValueError:
            raise ValueError(f"the size is WIDTHxHEIGHT in CSS pixels (390x844), not {size!r}") from None
    return {"width": width, "height": height, "mobile": args.mobile, "scale": args.scale}


def _viewport_fields(w: _Words, args: argparse.Namespace) -> dict[str, Any]:
    return _device(w.optional(args.size), args)


def _pdf_fields(w: _Words, args: argparse.Namespace) -> dict[str, Any]:
    # the daemon does not know this command's working directory
    return {"path": os.path.abspath(args.output) if args.output else None, "overwrite": args.overwrite or None}


def _nav_fields(w: _Words, args: argparse.Namespace) -> dict[str, Any]:
    return {"to": w.take("back, forward or reload")}


def _snapshot_fields(w: _Words, args: argparse.Namespace) -> dict[str, Any]:
    return {"mode": "full" if args.full else None, "find": args.find, "ref": args.ref, "offset": args.offset}


def _click_fields(w: _Words, args: argparse.Namespace) -> dict[str, Any]:
    return {"ref": w.take("a ref (eN)"), "double": args.double or None}


def _fill_fields(w: _Words, args: argparse.Namespace) -> dict[str, Any]:
    return {"ref": w.take("a ref (eN)"), "text": w.take("the text"), "submit": args.submit or None}


def _type_fields(w: _Words, args: argparse.Namespace) -> dict[str, Any]:
    return {"text": w.take("the text"), "ref": args.ref}


def _press_fields(w: _Words, args: argparse.Namespace) -> dict[str, Any]:
    return {"key": w.take("a key (Enter, Tab, Control+a…)"), "ref": args.ref}


def _select_fields(w: _Words, args: argparse.Namespace) -> dict[str, Any]:
    ref = w.take("a ref (eN)")
    if not w.rest:
        raise ValueError("browse select needs one or more values (labels or values)")
    return {"ref": ref, "values": w.all()}


def _check_fields(w: _Words, args: argparse.Namespace) -> dict[str, Any]:
    return {"ref": w.take("a ref (eN)"), "checked": not args.off}


def _scroll_fields(w: _Words, args: argparse.Namespace) -> dict[str, Any]:
    return {"ref": w.optional(), "direction": "up" if args.up else "down", "px": args.px}


def _wait_fields(w: _Words, args: argparse.Namespace) -> dict[str, Any]:
    return {"text": args.text, "text_gone": args.gone, "url": args.url, "ms": args.ms, "timeout_s": args.timeout}


def _dialog_fields(w: _Words, args: argparse.Namespace) -> dict[str, Any]:
    return {"accept": w.take("accept or dismiss") == "accept", "prompt_text": args.text}


def _tabs_fields(w: _Words, args: argparse.Namespace) -> dict[str, Any]:
    return {"do": w.optional("list"), "tab": w.optional(args.tab)}


def _offline_fields(w: _Words, args: argparse.Namespace) -> dict[str, Any]:
    word = w.optional("on")
    if word not in ("on", "off"):
        raise ValueError(f"browse offline takes on or off, not {word!r}")
    return {"enabled": word == "on"}


def _route_fields(w: _Words, args: argparse.Namespace) -> dict[str, Any]:
    pattern = w.take("a URL pattern (*/api/items*)")
    status = w.optional()
    if status is not None and not status.isdigit():
        raise ValueError(f"browse route's status is a number (500), not {status!r}")
    return {"url": pattern, "status": int(status) if status else None, "body": args.body,
            "body_file": args.body_file, "headers": _headers(args.header) if args.header else None,
            "abort": args.abort, "times": args.times}


def _headers(lines: list[str]) -> dict[str, str]:
    headers = {}
    for line in lines:
        name, colon, value = line.partition(":")
        if not colon:
            raise ValueError(f"a header is 'Name: value', not {line!r}")
        headers[name.strip()] = value.strip()
    return headers


def _emulate_fields(w: _Words, args: argparse.Namespace) -> dict[str, Any]:
    lat = lon = None
    if args.geo is not None:
        try:
            lat, lon = (float(n) for n in args.geo.split(","))
        except ValueError:
            raise ValueError(f"--geo is LATITUDE,LONGITUDE (48.8566,2.3522), not {args.geo!r}") from None
    return {"latitude": lat, "longitude": lon, "locale": args.locale, "timezone": args.timezone,
            "color_scheme": args.color_scheme, "reduced_motion": args.reduced_motion,
            "user_agent": args.user_agent, "headers": _headers(args.header) if args.header else None,
            "header_origins": args.header_origin, "reset": args.reset or None}


def _unroute_fields(w: _Words, args: argparse.Namespace) -> dict[str, Any]:
    return {"url": w.optional()}


def _upload_fields(w: _Words, args: argparse.Namespace) -> dict[str, Any]:
    ref = w.take("a ref (eN) of a file input")
    if not w.rest:
        raise ValueError("browse upload needs one or more files")
    return {"ref": ref, "files": w.all()}


def _read_fields(w: _Words, args: argparse.Namespace) -> dict[str, Any]:
    # screenshot shares it: a ref to read or shoot, the page when none
    return {"ref": w.optional(args.ref), "offset": args.offset if w.action == "read" else None,
            "full_page": args.full_page or None}


def _network_fields(w: _Words, args: argparse.Namespace) -> dict[str, Any]:
    return {"find": args.find, "status_class": args.status, "resource_type": args.resource_type,
            "offset": args.offset}


def _request_fields(w: _Words, args: argparse.Namespace) -> dict[str, Any]:
    return {"request_id": w.take("a request id (rN, from network)")}


def _har_fields(w: _Words, args: argparse.Namespace) -> dict[str, Any]:
    # the daemon does not run in this directory: it is given the absolute path
    return {"path": os.path.abspath(os.path.expanduser(w.take("the HAR file to write"))),
            "overwrite": args.overwrite or None}


_FIELDS: dict[str, Callable[[_Words, argparse.Namespace], dict[str, Any]]] = {
    "open": _open_fields, "nav": _nav_fields, "snapshot": _snapshot_fields, "click": _click_fields,
    "hover": _click_fields, "fill": _fill_fields, "type": _type_fields, "press": _press_fields,
    "select": _select_fields, "check": _check_fields, "scroll": _scroll_fields, "wait": _wait_fields,
    "dialog": _dialog_fields, "tabs": _tabs_fields, "read": _read_fields, "screenshot": _read_fields,
    "viewport": _viewport_fields, "pdf": _pdf_fields,
    "network": _network_fields, "request": _request_fields, "har": _har_fields,
    "upload": _upload_fields, "offline": _offline_fields, "route": _route_fields, "unroute": _unroute_fields,
    "emulate": _emulate_fields,
}


def request_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The browse request for the command line; ValueError with a usage hint when arguments are missing."""
    w = _Words(args.action, args.args)
    # the working directory: an upload's relative paths start there, and it is the directory uploads may read
    f: dict[str, Any] = {"session": args.session, "action": args.action, "tab": args.tab, "cwd": os.getcwd()}
    build = _FIELDS.get(args.action)
    if build is not None:
        f |= build(w, args)
    if w.rest:
        raise ValueError(f"browse {args.action}: unexpected {' '.join(w.rest)}")
    return {k: v for k, v in f.items() if v is not None}


def run(client: Any, args: argparse.Namespace) -> int:
    try:
        fields = request_fields(args)
    except ValueError as e:
        print(f"webfetch: {e}\n{USAGE}", file=sys.stderr)
        return 2
    if args.action == "screenshot" and args.output and not args.overwrite and os.path.lexists(args.output):
        # before the page is shot: the same refusal as pdf's and har's, and nothing is asked of the daemon
        print(f"webfetch: file_exists: {_exists(args.output)}", file=sys.stderr)
        return 1
    fields.pop("action")
    waits = PersonWaits()
    for frame in client.request("browse", action=args.action, **fields):
        if args.json:
            print(json.dumps(frame, ensure_ascii=False), flush=True)
        elif waits.see(frame):
            continue
        kind = frame.get("type")
        if kind == "error":
            if not args.json:
                print(f"webfetch: {frame.get('code')}: {cli_words(str(frame.get('message')))}", file=sys.stderr)
            return 1
        if kind != "result" or args.json:
            continue
        return _print_result(frame, args)
    return 0


def _print_result(r: dict[str, Any], args: argparse.Namespace) -> int:
    if r.get("image") and not _save_image(r, args):
        return 1
    _print_events(r)
    _print_outcome(r)
    for note in r.get("notes") or []:
        print(f"webfetch: note: {cli_words(note)}", file=sys.stderr)
    if r.get("next_offset") is not None:
        print(f"webfetch: more: continue with --offset {r['next_offset']}", file=sys.stderr)
    return 0


def _exists(path: str) -> str:
    return f"{path} exists already; pass --overwrite to replace it, or give another file"


def _save_image(r: dict[str, Any], args: argparse.Namespace) -> bool:
    """The screenshot to -o FILE (never over a file there unless --overwrite), or to a new browse-<tab>.png
    (browse-<tab>-2.png… when taken): whole or not at all, 0600 like a PDF or a HAR (a page shown signed in
    is the user's alone). False, said on stderr, when it cannot be written."""
    from ..trust.private_files import write_file

    data = base64.b64decode(r["image"])
    tab = (r.get("page") or {}).get("tab", "t")
    names = [args.output] if args.output else [f"browse-{tab}{f'-{n}' if n > 1 else ''}.png" for n in range(1, 1000)]
    for name in names:
        try:
            write_file(Path(os.path.abspath(name)), data, overwrite=bool(args.output and args.overwrite))
        except FileExistsError:
            if args.output:
                print(f"webfetch: file_exists: {_exists(name)}", file=sys.stderr)
                return False
            continue
        except OSError as e:
            print(f"webfetch: cannot write {name}: {e.strerror or e}", file=sys.stderr)
            return False
        print(f"{name}: {r['width']}x{r['height']} PNG")
        return True
    print("webfetch: browse-<tab>.png and its 998 numbered variants are taken here; give a file with -o",
          file=sys.stderr)
    return False


def _print_events(r: dict[str, Any]) -> None:
    """What happened besides the page: downloads, files uploaded, a dialog, tabs opened, the tab list."""
    for d in r.get("downloads") or []:
        print(download_line(d), file=sys.stderr if d.get("state") != "saved" else sys.stdout)
    for line in files_line(r):
        print(line)
    if r.get("dialog"):
        d = r["dialog"]
        open_now = d["type"] in ("confirm", "prompt") and r.get("snapshot_kind") == "none"
        print(f"dialog ({d['type']}): {d['message']}" + ("  — answer it: webfetch browse dialog accept|dismiss"
                                                         if open_now else " (accepted)"))
    for t in r.get("new_tabs") or []:
        print(f"new tab {t['tab']}: {t['url']}")
    for t in r.get("tabs") or []:
        print(f"{'*' if t['active'] else ' '} {t['tab']}  {t['title']} — {t['url']}")
    if r.get("console_errors"):
        print(f"{r['console_errors']} new console errors (webfetch browse console shows them)", file=sys.stderr)


def _print_outcome(r: dict[str, Any]) -> None:
    """What the action gave: a value, the wait's end, the page's content or snapshot (or that nothing changed)."""
    if r.get("value") is not None:
        print(f"value: {r['value']}")
    if r.get("waited_for"):
        print(f"waited for {r['waited_for']}")
    if r.get("viewport"):
        v = r["viewport"]
        print(f"viewport: {v['width']}x{v['height']} at {v['scale']:g}x, {'mobile' if v['mobile'] else 'desktop'}")
    if r.get("path") is not None:
        print(f"{r['path']}: {r['size']} bytes PDF")
    if r.get("console") is not None:
        print("\n".join(console_lines(r)))
    elif r.get("content"):
        print(r["content"])
    elif r.get("snapshot"):
        print(r["snapshot"])
    elif r.get("action") not in ("tabs", "screenshot", "pdf", "close") and r.get("page"):
        print(f"[{r['page']['tab']}] no change — {r['page']['url']}")
    if r.get("action") == "close":
        print(f"session {r['session']} closed")
