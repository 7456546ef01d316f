"""`webfetch pi install|uninstall`: put the web_fetch extension where pi discovers it, or take it away."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from .. import __version__
from ..config import Config
from ..subagent.agent import pi_agent_dir
from ..trust import shell
from .installation import package_file, webfetch_command

SOURCE = package_file("pi_extension")
FILES = ("index.ts", "tools.json", "package.json")  # tools.json: the tool contract index.ts reads
NAME = "webfetch"


def target_dir() -> Path:
    return pi_agent_dir() / "extensions" / NAME


def install(socket: str | None) -> tuple[Path, bool]:
    """Copy the extension into pi's extensions directory, replacing an older copy in one rename;
    (where, whether an older copy was replaced)."""
    target = target_dir()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{NAME}.new-{os.getpid()}"
    old = target.parent / f".{NAME}.old-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    for name in FILES:
        shutil.copyfile(SOURCE / name, staging / name)
    recorded = {"version": __version__, "command": webfetch_command(), "socket": socket}
    (staging / "webfetch.json").write_text(json.dumps(recorded, indent=2) + "\n")
    replaced = target.exists()
    if replaced:
        target.rename(old)
    staging.rename(target)
    if replaced:
        shutil.rmtree(old, ignore_errors=True)
    return target, replaced


def main(action: str, config: Config, socket: str | None = None) -> int:
    """socket: the --socket given to this command; recorded, like a socket set in the config, so that the
    extension talks to the same daemon (WEBFETCH_SOCKET still overrides it)."""
    if action == "install":
        target, replaced = install(socket or config.server.socket)
        print(f"{'replaced' if replaced else 'installed'} the web_fetch extension for pi in {target}")
        print(f"it starts the daemon, when none is running, with: {shell.command(*webfetch_command(), 'serve')}")
        print("start pi and ask it about a web page; `webfetch pi uninstall` removes the extension")
        print(f"(pi's own way, loading it in place: pi install {SOURCE})")
        return 0
    target = target_dir()
    if not target.exists():
        print(f"no webfetch extension in {target}: nothing to remove")
        return 0
    shutil.rmtree(target)
    print(f"removed the web_fetch extension from {target}")
    return 0
