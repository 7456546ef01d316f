"""`webfetch stop`, `restart`, `reload`, `cache clear` and `logs`: operating the daemon a user already has.

Stopping goes through the socket (the `stop` op), so it needs no pid file and works the same for a daemon
in a terminal, one a client started in the background, and one systemd started on its socket (which then
keeps listening: the next client starts the daemon again)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config import log_path_for
from ..disk_cache import DiskCache, default_directory
from . import logs
from .client import Client, ClientError, start_daemon
from .command import Invocation, Needs, handles

STOP_WAIT_S = 20.0  # SIGTERM's path: 2 s of grace for requests, then Chrome and the workers end


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                common: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser("stop", help="stop the running daemon (requests in flight end with shutting_down)")
    common(p)
    handles(p, lambda inv: stop(inv.path)[0])
    p = sub.add_parser("restart", help="stop the running daemon and start one with the current config")
    common(p)
    handles(p, lambda inv: restart(inv.path, inv.args.config))
    p = sub.add_parser("reload", help="make the running daemon read its config file again and apply what can "
                                      "change while it runs (as SIGHUP does); says what needs a restart")
    common(p)
    handles(p, lambda inv: reload(inv.path), Needs.ANY)  # the daemon reads the file itself and names what is wrong
    p = sub.add_parser("cache", help="empty the page cache, in the daemon's memory and on disk")
    common(p)
    p.add_argument("action", choices=["clear"], help="clear: forget every cached page (the next fetch of each "
                                                     "loads it again)")
    handles(p, lambda inv: clear_cache(inv.path))
    p = sub.add_parser("logs", help="show the log of the daemon (a file, or systemd's journal)")
    common(p)
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines until Ctrl-C")
    handles(p, _logs)


def _logs(inv: Invocation) -> int:
    return show_logs(inv.path, inv.args.follow)


def _say(message: str) -> None:
    print(f"webfetch: {message}", file=sys.stderr)


def running_status(path: Path) -> dict[str, Any] | None:
    """The status frame of the daemon on `path`, or None when none listens there."""
    try:
        with Client(path, autostart=False, timeout=30) as client:
            return next((f for f in client.request("status") if f.get("type") == "result"), None)
    except ClientError:
        return None


class NotRunning(Exception):
    pass


def stop_daemon(path: Path) -> dict[str, Any]:
    """Stop the daemon on `path` and wait until its process is gone; its `stop` answer. NotRunning when
    none listens there; ClientError when it refuses or does not end within STOP_WAIT_S."""
    try:
        client = Client(path, autostart=False, timeout=30)
    except ClientError:  # nothing to connect to: only this means no daemon runs
        raise NotRunning(f"no webfetch daemon is running on {path}") from None
    with client:
        # a daemon that closes the connection before answering is stopping (or broken): ClientError, so
        # `restart` does not start a second daemon beside one still stopping
        answer = list(client.request("stop"))[-1]
    if answer.get("type") != "result":
        raise ClientError(f"{answer.get('code')}: {answer.get('message')}")
    pid = int(answer["pid"])
    deadline = time.monotonic() + STOP_WAIT_S
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(pid):
        raise ClientError(f"the daemon (pid {pid}) is still stopping after {STOP_WAIT_S:.0f} s")
    return answer


def stop(path: Path) -> tuple[int, dict[str, Any] | None]:
    """`webfetch stop`: stop the daemon on `path` and say what stopped; (exit code, its stop answer)."""
    try:
        answer = stop_daemon(path)
    except NotRunning as e:
        _say(str(e))
        return 0, None
    except ClientError as e:
        _say(str(e))
        return 1, None
    ended = []
    if answer["in_flight"]:
        ended.append(f"{answer['in_flight']} request(s) in flight ended with shutting_down")
    if answer["browse_sessions"]:
        ended.append(f"{answer['browse_sessions']} browse session(s) closed")
    print(f"stopped the webfetch daemon (pid {answer['pid']}) on {path}" + (f": {'; '.join(ended)}" if ended else ""))
    if answer["socket_activated"]:
        print("systemd's webfetch.socket keeps listening: the next client starts the daemon again")
    return 0, answer


def restart(path: Path, config: str | None) -> int:
    """Stop the daemon, then start one with the current config (under socket activation, the first
    request does: one is sent)."""
    code, answer = stop(path)
    if code:
        return code
    try:
        if answer is not None and answer["socket_activated"]:
            status = running_status(path)  # systemd starts it for this connection
            if status is None:
                _say(f"systemd did not start the daemon again on {path}: see `webfetch logs`")
                return 1
        else:
            start_daemon(path, config)
            status = running_status(path)
    except ClientError as e:
        _say(str(e))
        return 1
    pid = (status or {}).get("daemon", {}).get("pid", "?")
    print(f"started the webfetch daemon (pid {pid}) on {path}; it logs to {log_path_for(path)}")
    return 0


def reload(path: Path) -> int:
    """Ask the daemon on `path` to read its config file again (the `reload` op) and say what it applied and
    what needs `webfetch restart`; 1 when the file does not parse (the daemon keeps the config it had)."""
    try:
        with Client(path, autostart=False, timeout=30) as client:
            answer = list(client.request("reload"))[-1]
    except ClientError:
        _say(f"no webfetch daemon is running on {path}; the next one started reads the config file")
        return 0
    if answer.get("type") != "result":
        _say(f"{answer.get('code')}: {answer.get('message')}")
        return 1
    source = answer["config"] or "no config file (all defaults)"
    if not answer["changed"]:
        print(f"reloaded {source}: nothing changed")
        return 0
    if answer["applied"]:
        print(f"reloaded {source}: applied {', '.join(answer['applied'])}")
    else:
        print(f"reloaded {source}: nothing that can change while running")
    if answer["needs_restart"]:
        print(f"needs `webfetch restart` to take effect: {', '.join(answer['needs_restart'])}")
    return 0


def clear_cache(path: Path) -> int:
    """`webfetch cache clear`: the daemon on `path` forgets every page, in memory and on disk (the
    `cache_clear` op); with no daemon running, the page files on disk are deleted here."""
    try:
        with Client(path, autostart=False, timeout=30) as client:
            answer = list(client.request("cache_clear"))[-1]
    except ClientError:
        files, size = DiskCache(default_directory(), 1).clear_now()
        print(f"no webfetch daemon is running on {path}; deleted {files} cached pages ({size} bytes) from "
              f"{default_directory()}")
        return 0
    if answer.get("type") != "result":
        _say(f"{answer.get('code')}: {answer.get('message')}")
        return 1
    print(f"cleared the cache: {answer['entries']} pages in memory, {answer['disk_entries']} on disk "
          f"({answer['disk_bytes']} bytes)")
    return 0


def show_logs(path: Path, follow: bool) -> int:
    status = running_status(path)
    info = (status or {}).get("daemon") or {}
    if info.get("socket_activated") and not info.get("log"):
        return logs.show_journal(follow)
    if status is not None and not info.get("log") and info:
        _say(f"the daemon on {path} (pid {info.get('pid')}) logs to the stderr of the terminal or service that "
             f"started it, not to a file")
        return 1
    return logs.show(Path(info["log"]) if info.get("log") else log_path_for(path), follow)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False
