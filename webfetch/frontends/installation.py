"""Where this installation of webfetch lives: what the pi extension and the systemd unit should run."""

from __future__ import annotations

import os
import sys
from importlib import resources
from pathlib import Path


def webfetch_command() -> list[str]:
    """This installation's `webfetch`: the console script beside our Python (venv, pipx, uv tool), else
    `python -m webfetch` with this very Python."""
    script = Path(sys.executable).parent / "webfetch"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "webfetch"]


def package_file(*parts: str) -> Path:
    """A file shipped inside webfetch.frontends (the pi extension, the systemd units)."""
    return Path(str(resources.files("webfetch.frontends").joinpath(*parts)))
