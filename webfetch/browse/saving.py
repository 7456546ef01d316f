"""Where a browse session writes the files it saves for the user (a page as PDF): the path the request names,
or a directory of the session's own under the user's cache directory; written whole or not at all, 0600
(a page saved while signed in can hold what only the user should read)."""

from __future__ import annotations

import hashlib
import os
import re
import time
from pathlib import Path

from ..config import cache_home
from ..errors import BadRequest
from ..profiles import write_private


def session_dir(session: str) -> Path:
    """The session's own directory, `$XDG_CACHE_HOME/webfetch/browse/<session>`: the name made safe for a
    path (any character may be in it), with a digest so two names made alike stay apart."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", session).lstrip(".")[:64] or "session"
    return cache_home() / "webfetch" / "browse" / f"{safe}-{hashlib.sha256(session.encode()).hexdigest()[:8]}"


def target(session: str, tab: str, path: str | None, suffix: str) -> Path:
    """The file to write: `path` when given (absolute, ending in `suffix`, in a directory that exists), else
    a new name in the session's directory. BadRequest saying what to pass instead."""
    if path is None:
        directory = session_dir(session)
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(directory, 0o700)  # mkdir's mode is filtered by the umask
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for n in range(1, 1000):
            candidate = directory / f"{tab}-{stamp}{f'-{n}' if n > 1 else ''}{suffix}"
            if not candidate.exists():
                return candidate
        raise BadRequest(f"too many files saved in {directory} this second; try again")
    where = f"leave `path` out to save it in {session_dir(session)}"
    p = Path(path)
    if not p.is_absolute():
        raise BadRequest(f"`path` must be absolute (the daemon does not know your working directory), got {path!r}; "
                         f"{where}")
    # the daemon writes where the user can: only files of this kind, so a path cannot clobber anything else
    if p.suffix.lower() != suffix:
        raise BadRequest(f"`path` must end in {suffix}, got {path!r}; {where}")
    if p.is_dir():
        raise BadRequest(f"{path} is a directory; name the file in it ({p / ('page' + suffix)}), or {where}")
    if not p.parent.is_dir():
        raise BadRequest(f"cannot write {path}: the directory {p.parent} does not exist; {where}")
    return p


def save(session: str, destination: Path, data: bytes) -> None:
    """Write `data` to `destination` whole or not at all; BadRequest (nothing left behind) when it cannot."""
    try:
        write_private(destination, data)
    except OSError as e:
        raise BadRequest(f"cannot write {destination}: {e.strerror or e}; give a path in a directory you can "
                         f"write, or leave `path` out to save it in {session_dir(session)}") from None
