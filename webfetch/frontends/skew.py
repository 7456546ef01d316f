"""A running daemon that is not the one this client would start: another config file, the same file
changed since the daemon read it, or another webfetch version (after an upgrade).

Clients used to talk to whatever daemon listened, so a fixed config or an upgrade did nothing until the
old daemon idled out, and nothing said so (issue 26). Now a client compares the daemon's `status` with
what it would start. A daemon a client started in the background (it exits when idle anyway) and that is
idle is restarted at once; any other (a `webfetch serve` in a terminal, the systemd service, one with
requests or browse sessions) is left alone, and the client says in one line what differs and what fixes it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import __version__
from ..config import ConfigSource
from ..socket_trust import UntrustedSocket
from .client import Client, ClientError


def difference(status: dict[str, Any], source: ConfigSource) -> str | None:
    """What differs between the daemon that answered `status` and the one this client would start, in
    words; None when nothing does."""
    diffs = []
    if status.get("version") != __version__:
        diffs.append(f"runs webfetch {status.get('version')}, and this is {__version__}")
    info = status.get("daemon")
    if info is not None:  # a daemon older than the field: its version already differs
        if info.get("config") != source.path:
            diffs.append(f"read {_name(info.get('config'))}, and this command reads {_name(source.path)}")
        elif info.get("config_digest") != source.digest:
            diffs.append(f"read {source.path} before it last changed")
    return "; ".join(diffs) or None


def _name(config: str | None) -> str:
    return config or "no config file (all defaults)"


def _idle(status: dict[str, Any]) -> bool:
    # `status` does not count itself in in_flight
    return not status["requests"]["in_flight"] and not status.get("browse")


def reconcile(path: Path, source: ConfigSource) -> str | None:
    """Before a client uses the daemon on `path`: stop it when it differs and may be restarted (the client
    then starts one with this config), else leave it; the one line that says which, or None when nothing
    differs or no daemon runs."""
    from .operate import NotRunning, stop_daemon

    try:
        with Client(path, autostart=False, timeout=30) as client:
            status = next((f for f in client.request("status") if f.get("type") == "result"), None)
    except (ClientError, OSError, UntrustedSocket):  # the request that follows says why
        return None
    if status is None:
        return None
    what = difference(status, source)
    if what is None:
        return None
    info = status.get("daemon") or {}
    pid = info.get("pid", "?")
    if info.get("exit_when_idle") and _idle(status):
        try:
            stop_daemon(path)
        except NotRunning:
            pass
        except ClientError as e:
            return f"the running daemon (pid {pid}) {what}, and could not be restarted: {e}"
        return f"restarted the daemon (pid {pid}), which {what}"
    return f"the running daemon (pid {pid}) {what}; `webfetch restart` gives you one that runs this command's"
