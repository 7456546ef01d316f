"""`webfetch status`: which daemon answers (pid, since when, socket, config, log), its browser, cache,
requests, search backends, browse sessions and local page (the view), and its problems (exit 1 when it has any)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .cli_words import cli_words
from .command import Invocation, Needs, broken_config, command_line, handles, say_broken_config

if TYPE_CHECKING:
    from .client import Client


NOT_RUNNING = 3  # as `systemctl status` and LSB init scripts say "not running"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
               common: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser("status", help="show the daemon's state (exit 3 when none runs; it never starts one)")
    common(p)
    p.add_argument("--json", action="store_true", help="print the status frame as JSON")
    handles(p, run, Needs.ANY)  # the daemon runs whatever it read: a broken file is one more line


def run(inv: Invocation) -> int:
    """The running daemon's status; exit 3 (nothing on stdout) when none runs: a status starts none, so
    that `webfetch stop; webfetch status` says what stop did."""
    from .client import Client, ClientError, NotListening
    from .service import socket_unit_waiting

    if socket_unit_waiting(inv.path):  # a connection would make systemd start one
        say_broken_config(inv)
        print(f"webfetch: no webfetch daemon is running on {inv.path}; systemd's webfetch.socket listens there "
              f"and starts one on the first request (`{command_line(inv, 'start')}` starts it now)", file=sys.stderr)
        return NOT_RUNNING
    try:
        client = Client(inv.path, autostart=False)
    except NotListening:
        say_broken_config(inv)
        print(f"webfetch: no webfetch daemon is running on {inv.path}; `{command_line(inv, 'start')}` starts one "
              f"in the background (fetch, search, browse, crawl, the pi extension and webfetch mcp start one "
              f"when they need it)", file=sys.stderr)
        return NOT_RUNNING
    except ClientError as e:
        print(f"webfetch: {e}", file=sys.stderr)
        return 1
    try:
        with client:
            return _status(client, inv)
    except ClientError as e:
        print(f"webfetch: {e}", file=sys.stderr)
        return 1


def _browse_state(status: dict[str, Any]) -> str:
    """The browse line of `webfetch status`: whether the op serves, then its open sessions one a line."""
    if not status.get("browse_enabled", True):  # a daemon older than the field serves browse
        return "disabled (browse.enabled = false in the config)"
    sessions = status.get("browse") or []
    local = status.get("browse_allow_local") or []
    reach = f", may reach {', '.join(local)} (browse.allow_local)" if local else ""
    return f"enabled{reach}, {len(sessions)} session{'' if len(sessions) == 1 else 's'}" + "".join(
        f"\n          {s['session']}: {s['tabs']} tab(s), {s['url']}, idle {s['idle_s']:.0f} s{_with_profile(s)}"
        for s in sessions)


def _yours(status: dict[str, Any]) -> str:
    """The line on the person's own browser ([user_browser]), after browse's; none from an older daemon."""
    mine = status.get("user_browser")
    return f"\nyours:    {mine['detail']}" if mine else ""


def _view_line(status: dict[str, Any]) -> str:
    """Where the daemon's local page is served, with no key (none from a daemon older than the view)."""
    if "view" not in status:
        return ""
    if status["view"] is None:
        return "\nview:     off (`webfetch view` opens it; `view.enabled = true` opens it at every start)"
    return f"\nview:     {status['view']} (`webfetch view` prints it with a one-time key that signs you in)"


def _with_profile(session: dict[str, Any]) -> str:
    if session.get("browser") == "user":
        return ", in your browser"
    return f", profile {session['profile']}" if session.get("profile") else ""


def _daemon_lines(d: dict[str, Any]) -> str:
    """Which daemon answered: pid, start, socket, config and log (issue 26's trap: an old config or version)."""
    socket = "systemd's socket (socket activation)" if d["socket_activated"] else d["socket"]
    config = f"{d['config']} (sha256 {d['config_digest']})" if d.get("config") else "none (all defaults)"
    log = d.get("log") or ("systemd's journal" if d["socket_activated"] else "stderr")
    started = "started by a client, exits when idle" if d["exit_when_idle"] else "runs until stopped"
    pending = d.get("needs_restart") or []
    restart = f"\nrestart:  the config changes {', '.join(pending)}: `webfetch restart` applies them" if pending else ""
    return (f"daemon:   pid {d['pid']}, since {d['started_at']}, {started}\n"
            f"socket:   {socket}\nconfig:   {config}{restart}\nlog:      {log}")


def _disk_line(cache: dict[str, Any]) -> str:
    """The disk cache's part of `webfetch status` (a daemon older than it sends none of these fields)."""
    if not cache.get("disk_dir"):
        return "no pages kept on disk (cache.disk_max_bytes = 0)"
    mib = 1024 * 1024
    return (f"{cache.get('disk_entries', 0)} pages, {cache.get('disk_bytes', 0) / mib:.1f} of "
            f"{cache.get('disk_max_bytes', 0) / mib:.0f} MiB, in {cache['disk_dir']}")


def _status(client: Client, inv: Invocation) -> int:
    from .skew import difference

    args = inv.args
    for frame in client.request("status"):
        if frame.get("type") == "error":
            print(f"webfetch: {frame.get('code')}: {cli_words(str(frame.get('message')))}", file=sys.stderr)
            return 1
        if frame.get("type") != "result":
            continue
        if args.json:
            print(json.dumps(frame, indent=2))
            say_broken_config(inv)
            return 0
        b, c, r = frame["browser"], frame["cache"], frame["requests"]
        print(f"webfetch {frame['version']} (protocol {frame['protocol']}), up {frame['uptime_s']:.0f} s")
        if frame.get("daemon"):
            print(_daemon_lines(frame["daemon"]))
        print(f"browser:  {b['state']}  {b.get('version') or ''}  {b.get('executable') or b.get('endpoint') or ''}")
        print(f"cache:    {c['entries']} pages, {c['bytes']} bytes, {c['hits']} hits, {c['misses']} misses")
        print(f"disk:     {_disk_line(c)}")
        print(f"requests: {r['in_flight']} in flight, {r['served']} served")
        print(f"search:   {', '.join(frame.get('search') or []) or 'no backend configured'}")
        print(f"browse:   {_browse_state(frame)}{_yours(frame)}{_view_line(frame)}")
        problems = [*frame.get("problems", []), *filter(None, [broken_config(inv)])]
        for problem in problems:
            print(f"problem:  {problem}")
        what = None if inv.broken else difference(frame, inv.source)  # what this command reads is unknown
        if what is not None:
            print(f"note:     this daemon {what}; `webfetch restart` gives you one that runs this command's")
        return 1 if problems else 0
    return 1
