"""`webfetch start`, `stop`, `restart`, `reload`, `cache clear` and `logs`: operating the daemon a user has.

All but `start` and `restart` work with a config file that does not load (they need only the socket, and
say what is wrong with the file), and none of them starts a daemon by asking: a socket systemd listens on
with no daemon behind it yet is asked about through systemctl, not by connecting (service.py).

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
from .command import Invocation, Needs, command_line, handles, say_broken_config
from .service import socket_unit_waiting

STOP_WAIT_S = 20.0  # SIGTERM's path: 2 s of grace for requests, then Chrome and the workers end


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                common: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser("start", help="start a daemon in the background, as fetch does when none runs (it exits "
                                     "when idle); nothing when one runs")
    common(p)
    handles(p, start)  # the daemon it starts reads the config: a broken file stops it here (exit 2)
    p = sub.add_parser("stop", help="stop the running daemon (requests in flight end with shutting_down)")
    common(p)
    handles(p, _with_config_note(lambda inv: stop(inv.path)[0]), Needs.ANY)
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
    handles(p, _with_config_note(lambda inv: clear_cache(inv.path)), Needs.ANY)
    p = sub.add_parser("logs", help="show the log of the daemon (a file, or systemd's journal)")
    common(p)
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines until Ctrl-C")
    handles(p, _with_config_note(lambda inv: show_logs(inv.path, inv.args.follow)), Needs.ANY)


def _with_config_note(run: Callable[[Invocation], int]) -> Callable[[Invocation], int]:
    """`run`, after a line on stderr about a config file that does not load."""

    def noted(inv: Invocation) -> int:
        say_broken_config(inv)
        return run(inv)

    return noted


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
    if socket_unit_waiting(path):  # connecting would start one only to stop it
        _say(f"no webfetch daemon is running on {path}; systemd's webfetch.socket listens there and starts one "
             f"on the first request (`systemctl --user stop webfetch.socket` stops that)")
        return 0, None
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
    by_systemd = answer["socket_activated"] if answer is not None else socket_unit_waiting(path)
    try:
        if by_systemd:
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


def _ask(path: Path, op: str) -> dict[str, Any] | None:
    """The answer of the daemon on `path` to `op`; None when none runs there (nor behind a socket systemd
    listens on: asking would start one)."""
    if socket_unit_waiting(path):
        return None
    try:
        with Client(path, autostart=False, timeout=30) as client:
            return list(client.request(op))[-1]
    except ClientError:
        return None


def reload(path: Path) -> int:
    """Ask the daemon on `path` to read its config file again (the `reload` op) and say what it applied and
    what needs `webfetch restart`; 1 when the file does not parse (the daemon keeps the config it had)."""
    answer = _ask(path, "reload")
    if answer is None:
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
    answer = _ask(path, "cache_clear")
    if answer is None:
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


def start(inv: Invocation) -> int:
    """`webfetch start`: a daemon in the background, as a client starts one when none runs (it logs to a
    file and exits when idle); nothing when one runs already. Under socket activation systemd starts it,
    for the connection made here."""
    path = inv.path
    waiting = socket_unit_waiting(path)
    try:
        status = running_status(path)  # under socket activation, this connection starts the daemon
        if status is not None and not waiting:
            _already_running(inv, status)
            return 0
        if status is None:
            if waiting:
                _say(f"systemd did not start the daemon on {path}: see `{command_line(inv, 'logs')}`")
                return 1
            start_daemon(path, inv.args.config)
            status = running_status(path)
    except ClientError as e:
        _say(str(e))
        return 1
    except OSError as e:  # its socket directory or its log could not be made
        _say(f"cannot start a daemon on {path}: {e}")
        return 1
    pid = (status or {}).get("daemon", {}).get("pid", "?")
    if waiting:
        print(f"systemd started the webfetch daemon (pid {pid}) on {path} (webfetch.socket); it logs to "
              f"systemd's journal: `{command_line(inv, 'logs')}`")
        return 0
    idle = inv.config.server.idle_exit_s
    print(f"started the webfetch daemon (pid {pid}) on {path}; it logs to {log_path_for(path)}"
          + (f" and exits after {idle:.0f} s without clients" if idle else ""))
    return 0


def _already_running(inv: Invocation, status: dict[str, Any]) -> None:
    from .skew import difference

    pid = (status.get("daemon") or {}).get("pid", "?")
    print(f"a webfetch daemon is already running (pid {pid}) on {inv.path}: nothing to start")
    what = difference(status, inv.source)
    if what is not None:
        print(f"note: this daemon {what}; `{command_line(inv, 'restart')}` gives you one that runs this command's")


def show_logs(path: Path, follow: bool) -> int:
    if socket_unit_waiting(path):  # systemd's: asking the daemon where it logs would start it
        return logs.show_journal(follow)
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
