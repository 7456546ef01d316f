"""Test helpers: a line client over a real Unix socket, and a daemon harness."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import trio


class LineClient:
    """A raw protocol client: send JSON lines, read frames (dicts), one at a time."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self._buf = bytearray()

    @classmethod
    async def connect(cls, path: Path | str) -> LineClient:
        return cls(await trio.open_unix_socket(str(path)))

    async def send(self, obj: Any) -> None:
        data = obj if isinstance(obj, bytes) else json.dumps(obj).encode() + b"\n"
        await self.stream.send_all(data)

    async def receive(self) -> dict[str, Any] | None:
        """The next frame, or None at end of stream."""
        while b"\n" not in self._buf:
            data = await self.stream.receive_some(65536)
            if not data:
                return None
            self._buf += data
        line, _, rest = bytes(self._buf).partition(b"\n")
        self._buf = bytearray(rest)
        return json.loads(line)

    async def terminal(self, rid: Any, progress: list | None = None) -> dict[str, Any]:
        """Frames until the terminal one for `rid`; progress frames for it are appended to `progress`."""
        while True:
            frame = await self.receive()
            assert frame is not None, f"connection closed before the terminal frame of {rid!r}"
            if frame.get("id") != rid:
                continue
            if frame["type"] == "progress":
                if progress is not None:
                    progress.append(frame)
                continue
            return frame

    async def request(self, obj: dict[str, Any], progress: list | None = None) -> dict[str, Any]:
        await self.send(obj)
        return await self.terminal(obj.get("id"), progress)

    async def aclose(self) -> None:
        await self.stream.aclose()


def ppid(pid: int) -> int:
    """The parent of `pid`, -1 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def children(pid: int) -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and ppid(int(p)) == pid]


def renderers(pid: int) -> list[int]:
    """Chrome's renderer processes: those below its process `pid` started with --type=renderer."""
    found, todo = [], children(pid)
    while todo:
        p = todo.pop()
        todo += children(p)
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                if b"--type=renderer" in f.read():  # zygote children rewrite theirs as one string
                    found.append(p)
        except OSError:
            pass
    return found


def parser_workers(pid: int) -> list[int]:
    """The parser worker processes (webfetch/workers.py) of the daemon in process `pid`: its children
    started by multiprocessing's spawn."""
    found = []
    for child in children(pid):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as f:
                if b"spawn_main" in f.read():
                    found.append(child)
        except OSError:
            pass
    return found


def gone(pids: list[int], timeout: float = 10.0) -> bool:
    """True once none of `pids` is alive, False if one still is after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(pid_alive(p) for p in pids)


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 90) -> subprocess.CompletedProcess:
    """`python -m webfetch ARGS` as a real process; its environment is ours plus `env`."""
    return subprocess.run([sys.executable, "-m", "webfetch", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def pid_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
