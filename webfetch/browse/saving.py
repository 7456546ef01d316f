"""Where a browse session writes the files it saves for the user (a page as PDF, a HAR; the CLI a screenshot):
the path the request names, or a directory of the session's own under the user's cache directory; written
whole or not at all, 0600 (a page saved while signed in can hold what only the user should read), and never
over a file that is there unless the request says `overwrite` (a model told to save somewhere must not
replace the user's file with page text, nor race one made meanwhile)."""

from __future__ import annotations

import hashlib
import os
import re
import time
from pathlib import Path

from ..config import cache_home
from ..errors import BadRequest, FileExists
from ..private_files import write_file


def session_dir(session: str) -> Path:
    """The session's own directory, `$XDG_CACHE_HOME/webfetch/browse/<session>`: the name made safe for a
    path (any character may be in it), with a digest so two names made alike stay apart."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", session).lstrip(".")[:64] or "session"
    return cache_home() / "webfetch" / "browse" / f"{safe}-{hashlib.sha256(session.encode()).hexdigest()[:8]}"


def target(session: str, tab: str, path: str | None, suffix: str, overwrite: bool = False) -> Path:
    """The file to write: `path` when given (absolute, ending in `suffix`, in a directory that exists, not
    there yet unless `overwrite`), else a new name in the session's directory. BadRequest (FileExists)
    saying what to pass instead."""
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
    if not overwrite and os.path.lexists(p):
        raise exists(p, where)
    return p


def exists(path: Path, where: str) -> FileExists:
    return FileExists(f"{path} exists already; pass `overwrite: true` to replace it (CLI: --overwrite), or give "
                      f"another path, or {where}")


def save(session: str, destination: Path, data: bytes, overwrite: bool = False) -> None:
    """Write `data` to `destination` whole or not at all (`write_file`); FileExists, or BadRequest (nothing
    left behind) when it cannot."""
    where = f"leave `path` out to save it in {session_dir(session)}"
    try:
        write_file(destination, data, overwrite)
    except FileExistsError:
        raise exists(destination, where) from None
    except OSError as e:
        raise BadRequest(f"cannot write {destination}: {e.strerror or e}; give a path in a directory you can "
                         f"write, or {where}") from None
