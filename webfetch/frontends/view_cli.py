"""`webfetch view`: the daemon's local web page. Asks the daemon (the `view` op, which opens the front door
when view.enabled is false, and starts a daemon when none runs) for the page's URL with a new one-time key
(view/door.py's `Passes`), prints it, and opens it in the user's browser when there is a display.

The browser is handed a file, not the URL: a command line is readable by every user of the machine
(/proc/PID/cmdline) and an unused key is a sign-in, so the URL goes in a 0600 file in the daemon's runtime
directory (`view-open.html`, which sends the browser on to the URL) and only that file's path is on the browser's
command line."""

from __future__ import annotations

import argparse
import html
import os
import sys
import webbrowser
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from ..trust.private_files import write_private
from ..trust.shell import command
from .command import Invocation, handles

OPENER = "view-open.html"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
               common: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser("view", help="the daemon's local web page (dashboard, browse sessions): print its URL "
                                    "with a one-time key, and open it when there is a display")
    common(p)
    p.add_argument("--no-open", action="store_true", help="print the URL only (as over ssh)")
    handles(p, run)


def run(inv: Invocation) -> int:
    from .client import Client, ClientError

    try:
        with Client(inv.path, config=inv.args.config, timeout=30) as client:
            answer = list(client.request("view"))[-1]
    except ClientError as e:
        print(f"webfetch: {e}", file=sys.stderr)
        return 1
    if answer.get("type") != "result":
        print(f"webfetch: {answer.get('code')}: {answer.get('message')}", file=sys.stderr)
        return 1
    url = answer["url"]
    print(url)
    if answer["started"]:
        print(f"(the front door was off: opened now on {', '.join(answer['addresses'])}; it stays open until the "
              f"daemon stops; `view.enabled = true` opens it at every start)", file=sys.stderr)
    ssh, there = tunnel(url)
    print(f"From another machine: {ssh}, then open {there} there. MCP over HTTP: {url.split('?')[0]}mcp with "
          f"`Authorization: Bearer $(cat {command(answer['token_file'])})`", file=sys.stderr)
    if not inv.args.no_open and (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        opener = Path(answer["token_file"]).parent / OPENER
        write_private(opener, redirect_page(url).encode())
        if not webbrowser.open(opener.as_uri()):
            print("(no browser found to open it: open the URL above)", file=sys.stderr)
    return 0


def tunnel(url: str) -> tuple[str, str]:
    """For a page `url` on this machine's loopback (its own address, view/address.py): the `ssh -L` that
    forwards its port from another machine (HOST: this one), and the URL to open there, where the tunnel's
    end is that machine's 127.0.0.1 (a browser there need not have the address)."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    return (command("ssh", "-L", f"{port}:{host}:{port}", "HOST"),
            urlunsplit(parts._replace(netloc=f"127.0.0.1:{port}")))


def redirect_page(url: str) -> str:
    """A page that sends the browser on to `url` at once."""
    quoted = html.escape(url, quote=True)
    return (f'<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0; url={quoted}">'
            f'<meta name="referrer" content="no-referrer"><a href="{quoted}">webfetch view</a>\n')
