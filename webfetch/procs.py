"""Child processes that never outlive the daemon: Chrome and the sub-agent CLI."""

from __future__ import annotations

import ctypes
import fcntl
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable

import trio

_prctl: Callable[..., int] | None
try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up now: nothing may be loaded after fork
except (OSError, AttributeError):  # not Linux
    _prctl = None
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    # The child gets SIGKILL if the daemon dies in any way, even by SIGKILL.
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


# Chrome's --remote-debugging-pipe: it reads commands from fd 3 and writes to fd 4
DEVTOOLS_FDS = (3, 4)


def _place_devtools_fds(reads: int, writes: int) -> Callable[[], None]:
    """The child's setup when it gets the DevTools pipes: their ends `reads` and `writes` (both above 4, so
    that placing one cannot overwrite the other) duplicated onto fds 3 and 4. Popen's pass_fds keeps fds
    by their number and cannot move one; this runs after fork like _die_with_parent, and does no more than
    two dup2 calls (no allocation, no lock: the daemon has other threads), before Popen closes every fd
    but 0-2 and pass_fds. The copies dup2 makes are inheritable, the originals close at exec."""
    def setup() -> None:  # pragma: no cover - runs in the child between fork and exec
        _die_with_parent()
        os.dup2(reads, DEVTOOLS_FDS[0])
        os.dup2(writes, DEVTOOLS_FDS[1])
    return setup


def _devtools_pipes() -> tuple[list[int], tuple[int, int], tuple[int, int]]:
    """Two pipes for the DevTools: (every fd to close once the child has its copies, the child's ends (it
    reads, it writes), ours (we write, we read)). Every fd is close-on-exec. Fds 3 and 4 are open in the
    parent until the fork (ours if they were free): pass_fds makes them inheritable in the child, which
    fails on a closed fd, and Popen's own error pipe must not land on a number the child's setup
    overwrites."""
    to_child, from_child = os.pipe(), os.pipe()
    held = [to_child[0], from_child[1]]
    for fd in DEVTOOLS_FDS:
        try:
            fcntl.fcntl(fd, fcntl.F_GETFD)
        except OSError:  # still free (the pipes took lower numbers: stdio was closed): hold it with /dev/null
            null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
            if null != fd:
                os.dup2(null, fd, inheritable=False)
                os.close(null)
            held.append(fd)
    reads = fcntl.fcntl(to_child[0], fcntl.F_DUPFD_CLOEXEC, max(DEVTOOLS_FDS) + 1)
    writes = fcntl.fcntl(from_child[1], fcntl.F_DUPFD_CLOEXEC, max(DEVTOOLS_FDS) + 1)
    return [*held, reads, writes], (reads, writes), (to_child[1], from_child[0])


class ChildProcess:
    """A child in a process group of its own, forked from the daemon's main thread.

    trio.lowlevel.open_process forks from a worker thread, and the parent-death signal fires when the
    forking *thread* exits: trio retires idle worker threads after a few seconds, which killed Chrome
    mid-request. So we fork here, in the thread that lives as long as the daemon, and wait on a pidfd.
    With `pipes`, stdin and stdout are trio streams (`stdin`, `stdout`); with `stderr_pipe`, stderr too.
    With `devtools_pipe`, the child gets a pipe to read as its fd 3 and one to write as its fd 4 (Chrome's
    --remote-debugging-pipe), whose other ends are `devtools_in` (we write) and `devtools_out` (we read)."""

    def __init__(self, args: list[str], *, stderr: int = subprocess.DEVNULL, pipes: bool = False,
                 stderr_pipe: bool = False, devtools_pipe: bool = False, cwd: str | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.stdin: trio.lowlevel.FdStream | None = None
        self.stdout: trio.lowlevel.FdStream | None = None
        self.stderr: trio.lowlevel.FdStream | None = None
        self.devtools_in: trio.lowlevel.FdStream | None = None
        self.devtools_out: trio.lowlevel.FdStream | None = None
        theirs: dict[str, int] = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": stderr}
        ours: dict[str, int] = {}
        to_close: list[int] = []
        for name in (("stdin", "stdout") if pipes else ()) + (("stderr",) if stderr_pipe else ()):
            read, write = os.pipe()
            theirs[name], ours[name] = (read, write) if name == "stdin" else (write, read)
            to_close.append(theirs[name])
        setup: Callable[[], None] = _die_with_parent
        pass_fds: tuple[int, ...] = ()
        if devtools_pipe:
            held, child_ends, (ours["devtools_in"], ours["devtools_out"]) = _devtools_pipes()
            to_close += held
            setup, pass_fds = _place_devtools_fds(*child_ends), DEVTOOLS_FDS
        try:
            self.popen = subprocess.Popen(args, stdin=theirs["stdin"], stdout=theirs["stdout"],
                                          stderr=theirs["stderr"], cwd=cwd, env=env, start_new_session=True,
                                          preexec_fn=setup, pass_fds=pass_fds)
        except BaseException:
            for fd in ours.values():
                os.close(fd)
            raise
        finally:
            for fd in to_close:
                os.close(fd)  # the child's ends: it has its own copies now
        for name, fd in ours.items():
            setattr(self, name, trio.lowlevel.FdStream(fd))
        self.pid = self.popen.pid
        self._pidfd = os.pidfd_open(self.pid)
        self._lock = trio.Lock()

    @property
    def returncode(self) -> int | None:
        code: int | None = self.popen.returncode
        return code

    def poll(self) -> int | None:
        code: int | None = self.popen.poll()
        return code

    async def wait(self) -> int:
        async with self._lock:  # one task at a time may wait on the pidfd
            while (code := self.poll()) is None:
                await trio.lowlevel.wait_readable(self._pidfd)
        return code

    async def kill_group(self, grace_s: float = 2.0) -> None:
        """SIGTERM the process group, SIGKILL what is left after `grace_s`, and reap the leader.
        Shielded: it runs to the end even in a cancelled scope."""
        with trio.CancelScope(shield=True):
            for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(self.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
                with trio.move_on_after(wait):
                    await self.wait()
                    # the leader is gone; make sure helpers in its group are too
                    try:
                        os.killpg(self.pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                    return

    async def aclose(self, grace_s: float = 2.0) -> None:
        """Kill the group and release the pipes and the pidfd."""
        await self.kill_group(grace_s)
        for stream in (self.stdin, self.stdout, self.stderr, self.devtools_in, self.devtools_out):
            if stream is not None:
                with trio.CancelScope(shield=True):
                    await stream.aclose()
        if self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1


def private_tempdir(kind: str) -> str:
    """A new temporary directory `webfetch-<kind>-<our pid>-…`. Those left by a webfetch process that is
    gone (a daemon killed with SIGKILL cleans nothing up) are removed first."""
    base = tempfile.gettempdir()
    pattern = re.compile(rf"webfetch-{re.escape(kind)}-(\d+)-")
    for name in os.listdir(base):
        m = pattern.match(name)
        if m and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1))):
            shutil.rmtree(os.path.join(base, name), ignore_errors=True)
    return tempfile.mkdtemp(prefix=f"webfetch-{kind}-{os.getpid()}-")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
