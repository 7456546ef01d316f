"""Which files an `upload` may read: the one place that decides it (a security rule: a page, or an agent a
page talks to, must not make the daemon hand it the user's keys).

A file may be uploaded when, once symlinks and `..` are resolved, it is a regular file under one of the
roots: the client's working directory (sent with the request: its project) and `browse.upload_roots`; and no
part of its path below that root starts with a dot (`.env`, `.ssh/id_ed25519`) unless
`browse.upload_dotfiles`. A client's working directory that is `/` or the home directory is no root (an MCP
host that starts its servers there would open every file of the user's to a model a page talks to): only
`browse.upload_roots`, which the user writes, may be that broad.

Chrome is not handed the checked path: a file swapped there between the check and the form's submit (a
symlink to ~/.ssh put in its place) would be what it sends. It gets a private copy (`private_copy`), read
from a descriptor opened on the checked path without following a symlink, whose device and inode must be
the ones checked, into a 0700 directory of the session's own, removed when the session closes."""

from __future__ import annotations

import errno
import itertools
import os
import shutil
import stat
from pathlib import Path
from typing import BinaryIO

from ..config import BrowseConfig
from ..errors import BadRequest, FileNotFound, UploadRefused

ROOTS_KEY = "browse.upload_roots"
DOTFILES_KEY = "browse.upload_dotfiles"


def upload_path(given: str, cwd: str | None, config: BrowseConfig) -> str:
    """The real path of the file `given` names (relative to `cwd`), when an upload may read it; else
    upload_refused (outside the roots, a dotfile, not a regular file) or file_not_found."""
    return checked_upload(given, cwd, config)[0]


def checked_upload(given: str, cwd: str | None, config: BrowseConfig) -> tuple[str, os.stat_result]:
    """`upload_path`, and the file's status as it was checked (what `private_copy` must find again)."""
    if "\0" in given or (cwd is not None and "\0" in cwd):
        raise BadRequest("a file path or the working directory holds a NUL character; give real paths")
    roots = _roots(cwd, config)
    if not roots:
        why = ("the client sent no working directory" if cwd is None else
               f"the client's working directory ({cwd}) is / or your home directory, too broad to open to a page")
        raise UploadRefused(f"no directory is open to uploads: {why}, and {ROOTS_KEY} is empty; start the agent in "
                            f"the project's directory, or add the directory to {ROOTS_KEY} in the config")
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
    return str(real), _check_file(real, given)


def _check_file(real: Path, given: str) -> os.stat_result:
    """A regular file of its own that the daemon's user can read (its status); upload_refused or
    file_not_found else."""
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
    return st


class PrivateCopies:
    """A session's copies of the files it uploaded: `<directory>/<n>/<the file's own name>` (the page sees
    the name), 0600 in 0700 directories; `remove` when the session ends."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._numbers = itertools.count(1)

    def private_copy(self, path: str, checked: os.stat_result) -> str:
        """A copy of the file checked at `path`, read from a descriptor that does not follow a symlink and
        is the same file (device, inode) as checked: upload_refused when it is not (swapped since), or
        file_not_found when it is gone."""
        with _open_checked(path, checked) as source:
            folder = self.directory / str(next(self._numbers))
            folder.mkdir(mode=0o700, parents=True)
            os.chmod(self.directory, 0o700)
            copy = folder / Path(path).name
            out = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with os.fdopen(out, "wb") as target:
                shutil.copyfileobj(source, target, 1 << 20)
        return str(copy)

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def read_checked(path: str, checked: os.stat_result, max_bytes: int) -> bytes:
    """The content of the file checked at `path` (`checked_upload`), read as `private_copy` reads it (the
    very file checked, never through a symlink), at most `max_bytes`: bad_request when it is longer. A
    browse route's body from a file goes through here, under the upload rule. Blocking: run in a thread."""
    with _open_checked(path, checked) as source:
        data = source.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise BadRequest(f"{path} is larger than {max_bytes:,} bytes; give a smaller file")
    return data


def _open_checked(path: str, checked: os.stat_result) -> BinaryIO:
    """The file checked at `path`, opened without following a symlink: upload_refused when it is not the
    same file (device, inode) as checked (swapped since), file_not_found when it is gone."""
    replaced = UploadRefused(f"{path} was replaced by another file after it was checked; nothing was "
                             f"read: give it again")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as e:
        if e.errno == errno.ELOOP:  # a symlink now: never followed
            raise replaced from None
        raise FileNotFound(f"cannot read {path}: {e.strerror}; it changed after it was checked") from None
    source = os.fdopen(fd, "rb")
    st = os.fstat(source.fileno())
    if (st.st_dev, st.st_ino) != (checked.st_dev, checked.st_ino) or not stat.S_ISREG(st.st_mode) \
            or st.st_nlink > 1:
        source.close()
        raise replaced
    return source


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
    roots = [] if cwd is None or _too_broad(cwd) else [Path(cwd).resolve()]
    for r in config.upload_roots:
        path = os.path.expanduser(r)
        if os.path.isabs(path):  # a relative root would mean the daemon's own directory: never
            roots.append(Path(path).resolve())
    return roots


def _too_broad(cwd: str) -> bool:
    """A client's working directory that would open too much as a root: a relative one (the daemon's own
    directory), `/`, or the home directory (or above it)."""
    if not os.path.isabs(cwd):
        return True
    real = Path(cwd).resolve()
    return Path.home().resolve().is_relative_to(real)
