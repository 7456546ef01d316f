"""`webfetch browse ACTION [...] --session NAME`: the browse op by hand, for people debugging a page."""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from typing import Any

ACTIONS = ("open", "nav", "snapshot", "click", "fill", "type", "press", "select", "check", "hover", "scroll",
           "wait", "dialog", "tabs", "read", "screenshot", "close")
USAGE = """actions:
  open URL [--new-tab]          snapshot [--full] [--find TEXT] [--ref eN] [--offset N]
  click eN [--double]           fill eN TEXT [--submit]        type TEXT [--ref eN]
  press KEY [--ref eN]          select eN VALUE...             check eN [--off]
  hover eN                      scroll [eN] [--up] [--px N]    nav back|forward|reload
  wait --text T | --gone T | --url GLOB | --ms N [--timeout S]
  dialog accept|dismiss [--text T]                            tabs [list|select|close] [tN]
  read [eN]                     screenshot [eN] [--full-page] [-o FILE]    close"""


def add_parser(sub: Any, common: Any) -> None:
    p = sub.add_parser("browse", help="drive a browser tab by hand (the browse op)", epilog=USAGE,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    common(p)
    p.add_argument("action", choices=ACTIONS)
    p.add_argument("args", nargs="*", help="the action's arguments (see below)")
    p.add_argument("--session", default=os.environ.get("WEBFETCH_SESSION", "cli"),
                   help="the session's name (default: $WEBFETCH_SESSION or 'cli'); it lives in the daemon")
    p.add_argument("--tab", help="act on this tab (tN) instead of the active one")
    p.add_argument("--ref", help="a ref: the subtree to snapshot, or the field to type or press in")
    p.add_argument("--new-tab", action="store_true")
    p.add_argument("--full", action="store_true", help="snapshot: every line, not only the controls")
    p.add_argument("--find", help="snapshot: only lines containing this text (and what holds them)")
    p.add_argument("--offset", type=int, help="snapshot or read: continue from this character")
    p.add_argument("--double", action="store_true")
    p.add_argument("--submit", action="store_true", help="fill: press Enter after")
    p.add_argument("--off", action="store_true", help="check: uncheck")
    p.add_argument("--up", action="store_true")
    p.add_argument("--px", type=int)
    p.add_argument("--text", help="wait: until this text shows; dialog: the prompt's answer")
    p.add_argument("--gone", help="wait: until this text is gone")
    p.add_argument("--url", help="wait: until the tab's URL matches this glob")
    p.add_argument("--ms", type=int)
    p.add_argument("--timeout", type=float)
    p.add_argument("--full-page", action="store_true")
    p.add_argument("-o", "--output", help="screenshot: the PNG file to write (default browse-<tab>.png)")
    p.add_argument("--json", action="store_true", help="print the protocol's frames as JSON lines")


def request_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The browse request for the command line; ValueError with a usage hint when arguments are missing."""
    a, rest = args.action, list(args.args)

    def take(what: str) -> str:
        if not rest:
            raise ValueError(f"browse {a} needs {what}")
        return str(rest.pop(0))

    f: dict[str, Any] = {"session": args.session, "action": a, "tab": args.tab}
    if a == "open":
        f |= {"url": take("a URL"), "new_tab": args.new_tab or None}
    elif a == "nav":
        f["to"] = take("back, forward or reload")
    elif a == "snapshot":
        f |= {"mode": "full" if args.full else None, "find": args.find, "ref": args.ref, "offset": args.offset}
    elif a in ("click", "hover"):
        f |= {"ref": take("a ref (eN)"), "double": args.double or None}
    elif a == "fill":
        f |= {"ref": take("a ref (eN)"), "text": take("the text"), "submit": args.submit or None}
    elif a == "type":
        f |= {"text": take("the text"), "ref": args.ref}
    elif a == "press":
        f |= {"key": take("a key (Enter, Tab, Control+a…)"), "ref": args.ref}
    elif a == "select":
        f["ref"] = take("a ref (eN)")
        if not rest:
            raise ValueError("browse select needs one or more values (labels or values)")
        f["values"], rest = rest, []
    elif a == "check":
        f |= {"ref": take("a ref (eN)"), "checked": not args.off}
    elif a == "scroll":
        f |= {"ref": rest.pop(0) if rest else None, "direction": "up" if args.up else "down", "px": args.px}
    elif a == "wait":
        f |= {"text": args.text, "text_gone": args.gone, "url": args.url, "ms": args.ms, "timeout_s": args.timeout}
    elif a == "dialog":
        answer = take("accept or dismiss")
        f |= {"accept": answer == "accept", "prompt_text": args.text}
    elif a == "tabs":
        f["do"] = rest.pop(0) if rest else "list"
        f["tab"] = rest.pop(0) if rest else args.tab
    elif a in ("read", "screenshot"):
        f |= {"ref": rest.pop(0) if rest else args.ref, "offset": args.offset if a == "read" else None,
              "full_page": args.full_page or None}
    if rest:
        raise ValueError(f"browse {a}: unexpected {' '.join(rest)}")
    return {k: v for k, v in f.items() if v is not None}


def run(client: Any, args: argparse.Namespace) -> int:
    try:
        fields = request_fields(args)
    except ValueError as e:
        print(f"webfetch: {e}\n{USAGE}", file=sys.stderr)
        return 2
    fields.pop("action")
    for frame in client.request("browse", action=args.action, **fields):
        if args.json:
            print(json.dumps(frame, ensure_ascii=False), flush=True)
        kind = frame.get("type")
        if kind == "error":
            if not args.json:
                print(f"webfetch: {frame.get('code')}: {frame.get('message')}", file=sys.stderr)
            return 1
        if kind != "result" or args.json:
            continue
        _print_result(frame, args)
    return 0


def _print_result(r: dict[str, Any], args: argparse.Namespace) -> None:
    if r.get("image"):
        path = args.output or f"browse-{(r.get('page') or {}).get('tab', 't')}.png"
        with open(path, "wb") as f:
            f.write(base64.b64decode(r["image"]))
        print(f"{path}: {r['width']}x{r['height']} PNG")
    for d in r.get("downloads") or []:
        print(f"download refused: {d['url']} ({d['filename']}); fetch the URL instead", file=sys.stderr)
    if r.get("dialog"):
        d = r["dialog"]
        open_now = d["type"] in ("confirm", "prompt") and r.get("snapshot_kind") == "none"
        print(f"dialog ({d['type']}): {d['message']}" + ("  — answer it: webfetch browse dialog accept|dismiss"
                                                         if open_now else " (accepted)"))
    for t in r.get("new_tabs") or []:
        print(f"new tab {t['tab']}: {t['url']}")
    if r.get("tabs"):
        for t in r["tabs"]:
            print(f"{'*' if t['active'] else ' '} {t['tab']}  {t['title']} — {t['url']}")
    if r.get("value") is not None:
        print(f"value: {r['value']}")
    if r.get("waited_for"):
        print(f"waited for {r['waited_for']}")
    if r.get("content"):
        print(r["content"])
    elif r.get("snapshot"):
        print(r["snapshot"])
    elif r.get("action") not in ("tabs", "screenshot", "close") and r.get("page"):
        print(f"[{r['page']['tab']}] no change — {r['page']['url']}")
    if r.get("action") == "close":
        print(f"session {r['session']} closed")
    for note in r.get("notes") or []:
        print(f"webfetch: note: {note}", file=sys.stderr)
    if r.get("next_offset") is not None:
        print(f"webfetch: more: continue with --offset {r['next_offset']}", file=sys.stderr)
