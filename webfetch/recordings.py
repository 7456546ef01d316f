"""Browse sessions' recordings on disk (docs/BROWSE.md, "Recordings"): where they are, what they are called,
the bound on all of them together, and reading one back. browse/recording.py writes them; `webfetch browse
recordings` lists them and the view (webfetch/view/) replays them, neither of which may enter browse/.

One file per session, `$XDG_STATE_HOME/webfetch/recordings/<session>-<YYYYmmdd-HHMMSS>.jsonl`, 0600 in a 0700
directory (a recording shows the pages the session saw, signed in). JSON Lines, appended one whole line at a
time, so a daemon that dies mid-session leaves a file that reads up to its last line: a `start` line, then
`frame`, `action`, `console` and `request` lines in the order they happened, a `truncated` line when the file
reached its own bound, and an `end` line when the session closed."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import state_home

SUFFIX = ".jsonl"
READ_LINE_BYTES = 8 << 20       # a line read back, at most (a frame is bounded far below this)
_NAME = re.compile(r"^[A-Za-z0-9._-]{1,200}\.jsonl$")


def directory() -> Path:
    return state_home() / "webfetch" / "recordings"


def private_directory() -> Path:
    """The recordings' directory, made 0700 if it is not there (and made so if it is)."""
    d = directory()
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(d, 0o700)
    return d


def file_name(session: str, started: float) -> str:
    import time
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", session)[:100] or "session"
    return f"{safe}-{time.strftime('%Y%m%d-%H%M%S', time.localtime(started))}{SUFFIX}"


@dataclass(frozen=True)
class RecordingFile:
    name: str
    path: Path
    size: int
    modified: float


def listing() -> list[RecordingFile]:
    """The recordings there are, oldest first."""
    d = directory()
    try:
        entries = list(os.scandir(d))
    except FileNotFoundError:
        return []
    files = []
    for e in entries:
        if _NAME.match(e.name) and e.is_file(follow_symlinks=False):
            st = e.stat(follow_symlinks=False)
            files.append(RecordingFile(e.name, Path(e.path), st.st_size, st.st_mtime))
    return sorted(files, key=lambda f: (f.modified, f.name))


def prune(max_total: int, keep: str | None = None) -> list[str]:
    """Remove the oldest recordings until all of them together are within `max_total` bytes (never `keep`,
    the one being written); the names removed."""
    files = listing()
    total = sum(f.size for f in files)
    removed = []
    for f in files:
        if total <= max_total:
            break
        if f.name == keep:
            continue
        try:
            f.path.unlink()
        except FileNotFoundError:
            pass
        total -= f.size
        removed.append(f.name)
    return removed


def find(name: str) -> Path | None:
    """The recording called `name`, if there is one (a name from listing(), `.jsonl` or not: a person types
    what `webfetch browse recordings` shows; anything else is none)."""
    if not name.endswith(SUFFIX):
        name += SUFFIX
    if not _NAME.match(name):
        return None
    path = directory() / name
    return path if path.is_file() and not path.is_symlink() else None


def read(path: Path) -> list[dict[str, Any]]:
    """A recording's lines, in order; a last line cut short (the daemon died writing it) is left out."""
    out = []
    with open(path, "rb") as f:
        for raw in f:
            if len(raw) > READ_LINE_BYTES:
                continue
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict):
                out.append(line)
    return out
