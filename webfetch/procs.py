"""Child processes that never outlive the daemon: Chrome and the sub-agent CLI."""

from __future__ import annotations

import ctypes
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


class ChildProcess:
    """A child in a process group of its own, forked from the daemon's main thread.

    trio.lowlevel.open_process forks from a worker thread, and the parent-death signal fires when the
    forking *thread* exits: trio retires idle worker threads after a few seconds, which killed Chrome
    mid-request. So we fork here, in the thread that lives as long as the daemon, and wait on a pidfd.
    With `pipes`, stdin and stdout are trio streams (`stdin`, `stdout`); with `stderr_pipe`, stderr too."""

    def __init__(self, args: list[str], *, stderr: int = subprocess.DEVNULL, pipes: bool = False,
                 stderr_pipe: bool = False, cwd: str | None = None, env: dict[str, str] | None = None) -> None:
        self.stdin: trio.lowlevel.FdStream | None = None
        self.stdout: trio.lowlevel.FdStream | None = None
        self.stderr: trio.lowlevel.FdStream | None = None
        theirs: dict[str, int] = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": stderr}
        ours: dict[str, int] = {}
        for name in (("stdin", "stdout") if pipes else ()) + (("stderr",) if stderr_pipe else ()):
            read, write = os.pipe()
            theirs[name], ours[name] = (read, write) if name == "stdin" else (write, read)
        try:
            self.popen = subprocess.Popen(args, stdin=theirs["stdin"], stdout=theirs["stdout"],
                                          stderr=theirs["stderr"], cwd=cwd, env=env, start_new_session=True,
                                          preexec_fn=_die_with_parent)
        except BaseException:
            for fd in ours.values():
                os.close(fd)
            raise
        finally:
            for name in ours:
                os.close(theirs[name])  # the child's ends: it has its own copies now
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
        for stream in (self.stdin, self.stdout, self.stderr):
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
