"""Which files an `upload` may read: the one place that decides it (a security rule: a page, or an agent a
page talks to, must not make the daemon hand it the user's keys).

A file may be uploaded when, once symlinks and `..` are resolved, it is a regular file under one of the
roots: the client's working directory (sent with the request) and `browse.upload_roots`; and no part of
its path below that root starts with a dot (`.env`, `.ssh/id_ed25519`) unless `browse.upload_dotfiles`."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..config import BrowseConfig
from ..errors import BadRequest, FileNotFound, UploadRefused

ROOTS_KEY = "browse.upload_roots"
DOTFILES_KEY = "browse.upload_dotfiles"


def upload_path(given: str, cwd: str | None, config: BrowseConfig) -> str:
    """The real path of the file `given` names (relative to `cwd`), when an upload may read it; else
    upload_refused (outside the roots, a dotfile, not a regular file) or file_not_found."""
    if "\0" in given or (cwd is not None and "\0" in cwd):
        raise BadRequest("a file path or the working directory holds a NUL character; give real paths")
    roots = _roots(cwd, config)
    if not roots:
        raise UploadRefused(f"no directory is open to uploads: the client sent no working directory and "
                            f"{ROOTS_KEY} is empty; add the directory to {ROOTS_KEY} in the config")
    real = _real(given, cwd)
    root = next((r for r in roots if real.is_relative_to(r)), None)
    if root is None:
        raise UploadRefused(f"{given} ({real}) is outside the directories uploads may read: "
                            f"{', '.join(map(str, roots))}; to allow another directory, add it to {ROOTS_KEY} "
                            f"in the config")
    hidden = [part for part in real.relative_to(root).parts if part.startswith(".")]
    if hidden and not config.upload_dotfiles:
        raise UploadRefused(f"{given} is a dotfile or inside a dot-directory ({hidden[0]}), which uploads may not "
                            f"read; set {DOTFILES_KEY} = true in the config to allow it")
    _check_file(real, given)
    return str(real)


def _check_file(real: Path, given: str) -> None:
    """A regular file of its own that the daemon's user can read; upload_refused or file_not_found else."""
    try:
        st = real.stat()
    except OSError as e:
        raise FileNotFound(f"cannot read {given}: {e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise UploadRefused(f"{given} is not a regular file (a directory, a device or a pipe); upload files only")
    if st.st_nlink > 1:  # a hard link makes a file from anywhere look as if it were inside a root
        raise UploadRefused(f"{given} has other hard links, so it may be a file from outside the directories "
                            f"uploads may read; upload a copy of it")
    if not os.access(real, os.R_OK):
        raise UploadRefused(f"{given} is not readable by the daemon's user")


def _real(given: str, cwd: str | None) -> Path:
    """The file `given` names, every symlink and `..` resolved: the one Chrome will read, so neither leads out."""
    path = os.path.expanduser(given)
    if not os.path.isabs(path):
        if cwd is None:
            raise BadRequest(f"{given!r} is a relative path and the client sent no working directory (cwd); "
                             f"give an absolute path")
        path = os.path.join(cwd, path)
    try:
        return Path(path).resolve(strict=True)
    except FileNotFoundError:
        raise FileNotFound(f"no such file: {given} (looked for {os.path.normpath(path)})") from None
    except (OSError, RuntimeError) as e:  # a symlink loop, a permission denied on a parent
        raise FileNotFound(f"cannot read {given}: {e}") from None


def _roots(cwd: str | None, config: BrowseConfig) -> list[Path]:
    """The allowed directories, resolved as the files are (a root given through a symlink still matches)."""
    given = ([cwd] if cwd else []) + list(config.upload_roots)
    roots = []
    for r in given:
        path = os.path.expanduser(r)
        if os.path.isabs(path):  # a relative root would mean the daemon's own directory: never
            roots.append(Path(path).resolve())
    return roots
