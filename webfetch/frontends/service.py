"""`webfetch service install|uninstall`: the systemd user units, written for this installation and enabled."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

from ..config import config_home, default_socket_path
from .installation import package_file, webfetch_command

UNITS = ("webfetch.socket", "webfetch.service")


def unit_dir() -> Path:
    return config_home() / "systemd" / "user"


def render(name: str) -> str:
    """A unit as shipped, with ExecStart pointing at this installation's webfetch."""
    text = package_file("units", name).read_text()
    if name == "webfetch.service":
        command = " ".join(shlex.quote(part) for part in webfetch_command())
        lines = [f"ExecStart={command} serve --exit-when-idle" if line.startswith("ExecStart=") else line
                 for line in text.splitlines()]
        text = "\n".join(lines) + "\n"
    return text


def _systemctl(*args: str) -> tuple[bool, str]:
    exe = shutil.which("systemctl")
    if exe is None:
        return False, "systemctl is not installed"
    try:
        done = subprocess.run([exe, "--user", *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, str(e)
    return done.returncode == 0, (done.stderr or done.stdout).strip()


def _manual_steps(directory: Path) -> str:
    return (f"the units are in {directory}; once a systemd user session is available, run:\n"
            f"  systemctl --user daemon-reload\n"
            f"  systemctl --user enable --now webfetch.socket\n"
            f"(on a machine without systemd, run `webfetch serve` yourself, or let `webfetch fetch` and the pi "
            f"extension start it on demand)")


def install() -> int:
    directory = unit_dir()
    directory.mkdir(parents=True, exist_ok=True)
    for name in UNITS:
        path = directory / name
        path.write_text(render(name))
        print(f"wrote {path}")
    ok, why = _systemctl("daemon-reload")
    if not ok:
        print(f"`systemctl --user` is not available here ({why})")
        print(_manual_steps(directory))
        return 1
    print("ran systemctl --user daemon-reload")
    ok, why = _systemctl("enable", "--now", "webfetch.socket")
    if not ok:
        print(f"`systemctl --user enable --now webfetch.socket` failed: {why}")
        return 1
    print("ran systemctl --user enable --now webfetch.socket: the daemon starts when the first client connects")
    print("logs: journalctl --user -u webfetch; state: webfetch status")
    return 0


def uninstall() -> int:
    directory = unit_dir()
    present = [directory / name for name in UNITS if (directory / name).exists()]
    if not present:
        print(f"no webfetch units in {directory}: nothing to remove")
        return 0
    ok, why = _systemctl("disable", "--now", "webfetch.socket", "webfetch.service")
    print("ran systemctl --user disable --now webfetch.socket webfetch.service" if ok
          else f"could not stop the units with systemctl --user ({why}); removing the files anyway")
    for path in present:
        path.unlink()
        print(f"removed {path}")
    if ok:
        _systemctl("daemon-reload")
        print("ran systemctl --user daemon-reload")
    return 0


def socket_unit_waiting(path: Path) -> bool:
    """Whether systemd's webfetch.socket listens on `path` and has started no daemon on it yet. Connecting
    there starts one (socket activation), so a command that must not start one (`status`, `stop`, `logs`,
    `doctor`) asks systemd instead. Only the installed unit's socket (the default path) is asked about."""
    if path != default_socket_path() or not (unit_dir() / "webfetch.socket").exists():
        return False
    exe = shutil.which("systemctl")
    if exe is None:
        return False
    try:
        done = subprocess.run([exe, "--user", "show", "--property=ActiveState", "--value", "webfetch.socket",
                               "webfetch.service"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    states = done.stdout.split()
    return done.returncode == 0 and len(states) == 2 and states[0] == "active" and states[1] in ("inactive", "failed")
