"""The log of a daemon started in the background (frontends/logs.py): bounded, rotated, private, and
stderr (where Python writes a crash's traceback) always in the current file. A real process writes it."""

from __future__ import annotations

import stat
import subprocess
import sys

from webfetch.frontends.logs import LOG_BACKUPS, LOG_BYTES

WRITER = """
import logging, sys
from pathlib import Path
from webfetch.frontends.logs import log_to_file
log_to_file(Path(sys.argv[1]), "info")
for i in range(int(sys.argv[2])):
    logging.getLogger("webfetch.test").info("line %06d %s", i, "x" * 1000)
print("written to stderr after the last rotation", file=sys.stderr, flush=True)
"""


def test_the_log_is_rotated_at_its_bound_keeps_three_old_files_and_catches_stderr(tmp_path):
    log = tmp_path / "state" / "webfetch" / "webfetch.log"
    lines = 6 * LOG_BYTES // 1000  # six files' worth
    r = subprocess.run([sys.executable, "-c", WRITER, str(log), str(lines)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    files = sorted(p.name for p in log.parent.iterdir())
    assert files == ["webfetch.log", *(f"webfetch.log.{n}" for n in range(1, LOG_BACKUPS + 1))]
    for p in log.parent.iterdir():
        assert p.stat().st_size <= LOG_BYTES
        assert stat.S_IMODE(p.stat().st_mode) == 0o600
    assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    current = log.read_text()
    assert f"line {lines - 1:06d}" in current
    assert current.endswith("written to stderr after the last rotation\n")
