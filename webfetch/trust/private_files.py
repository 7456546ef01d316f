"""Files written for the user that may hold what only they should read (a page saved while signed in, a
HAR, a screenshot, a profile's logins): whole or not at all, 0600, and never over a file that is there unless
told to. Browse writes them in the daemon (browse/saving.py), the CLI a screenshot; both use `write_file`.
`write_private` replaces a file whole: the profile store's files and an exported profile."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path


def write_private(path: Path, data: bytes) -> None:
    """Write `path` whole or not at all, 0600 (a temporary file in its directory, fsynced, renamed over
    it): files that hold logins. OSError when it cannot; no temporary file is left."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:  # mkstemp makes it 0600
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_file(destination: Path, data: bytes, overwrite: bool) -> None:
    """Write `data` to `destination` whole or not at all, 0600: a temporary file in its directory (O_EXCL),
    fsynced, then renamed over it when `overwrite`, else linked to its name, which fails when a file got
    there meanwhile (FileExistsError; the check before is for the message, this is the rule). OSError
    when it cannot; no temporary file is left."""
    if overwrite:
        write_private(destination, data)
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{destination.name}.", suffix=".tmp", dir=destination.parent)  # 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, destination)
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                raise
            _write_exclusive(destination, data)  # a file system without hard links
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _write_exclusive(destination: Path, data: bytes) -> None:
    """`destination` made with O_EXCL (never over a file that is there) and written; removed if that fails."""
    fd = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(destination)
        raise
