"""The daemon's log file when a client starts it in the background, and `webfetch logs [-f]`.

A daemon in a terminal logs to stderr, and under systemd to the journal; one that a client starts (the
CLI, the MCP server, the pi extension) has no terminal, so it logs to a file under the user's state
directory (config.log_path_for), bounded: LOG_BYTES a file, LOG_BACKUPS old files kept.

Wherever it logs (`log_to_file`, `log_to_stderr`), each line, traceback included, goes through `Redacting`:
no secret a URL in it carries (an `access_token=`, a browser endpoint's password) reaches a log, whatever
browse.redact_secrets says."""

from __future__ import annotations

import io
import logging
import logging.handlers
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import BinaryIO

from .. import redact

LOG_BYTES = 1 << 20
LOG_BACKUPS = 3
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
TAIL_LINES = 200


class Redacting(logging.Formatter):
    """FORMAT, with the secrets of every URL in the line masked (redact.text)."""

    def __init__(self) -> None:
        super().__init__(FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        return redact.text(super().format(record))


def log_to_stderr(level: str) -> None:
    """The process's logging to stderr (a terminal, the journal under systemd, an MCP client's log)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(Redacting())
    logging.basicConfig(level=level.upper(), handlers=[handler])


class _RotatingLog(logging.handlers.RotatingFileHandler):
    """Rotates, and points the process's stderr at the new file each time: a traceback that Python writes
    to stderr at a crash lands in the current log, not in a rotated one."""

    def _open(self) -> io.TextIOWrapper:
        # every file it opens is born 0600 (the log names the URLs people read), rotated ones too
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        return open(fd, "a", encoding=self.encoding, errors=self.errors)

    def doRollover(self) -> None:  # noqa: N802 (logging's name)
        super().doRollover()
        if self.stream is not None:
            os.dup2(self.stream.fileno(), sys.stderr.fileno())


def log_to_file(path: Path, level: str) -> None:
    """Send the daemon's logging (and its stderr) to `path`, 0600 in a 0700 directory (URLs people read
    are in it), rotated at LOG_BYTES."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)  # mkdir's mode is filtered by the umask, and an older directory may be wider
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.close(fd)
    handler = _RotatingLog(path, maxBytes=LOG_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8")
    handler.setFormatter(Redacting())
    logging.basicConfig(level=level.upper(), handlers=[handler])
    if handler.stream is not None:
        os.dup2(handler.stream.fileno(), sys.stderr.fileno())


def show(path: Path, follow: bool) -> int:
    """The last TAIL_LINES lines of the log; with `follow`, then every new line until Ctrl-C."""
    if not path.exists():
        print(f"webfetch: no log at {path} yet: a daemon started in the background writes it", file=sys.stderr)
        return 1
    with open(path, "rb") as f:
        lines = f.read().splitlines(keepends=True)[-TAIL_LINES:]
        sys.stdout.buffer.write(b"".join(lines))
        sys.stdout.flush()
        if not follow:
            return 0
        try:
            _follow(path, f)
        except KeyboardInterrupt:
            pass
    return 0


def _follow(path: Path, f: BinaryIO) -> None:
    while True:
        chunk = f.read()
        if chunk:
            sys.stdout.buffer.write(chunk)
            sys.stdout.flush()
        elif _rotated(path, f):  # read the new file from its start
            f.close()
            f = open(path, "rb")  # noqa: SIM115 (kept open while following)
        else:
            time.sleep(0.2)


def _rotated(path: Path, f: BinaryIO) -> bool:
    try:
        return os.stat(path).st_ino != os.fstat(f.fileno()).st_ino
    except FileNotFoundError:
        return False


def show_journal(follow: bool) -> int:
    """Under systemd the daemon logs to the journal: its lines, through journalctl."""
    if shutil.which("journalctl") is None:
        print("webfetch: the daemon runs under systemd and logs to its journal, but journalctl is not "
              "installed here", file=sys.stderr)
        return 1
    cmd = ["journalctl", "--user", "-u", "webfetch", "-n", str(TAIL_LINES), "--no-pager"]
    return subprocess.call([*cmd, "-f"] if follow else cmd)
