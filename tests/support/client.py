"""Speaking to webfetch as a client does: the raw line protocol over a real Unix socket (`LineClient`), and
the CLI as a real process (`run_cli`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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

    async def terminal(self, rid: Any, progress: list | None = None, pages: list | None = None) -> dict[str, Any]:
        """Frames until the terminal one for `rid`; progress frames for it are appended to `progress`, a
        batch's page frames to `pages`."""
        while True:
            frame = await self.receive()
            assert frame is not None, f"connection closed before the terminal frame of {rid!r}"
            if frame.get("id") != rid:
                continue
            if frame["type"] in ("progress", "page"):
                kept = progress if frame["type"] == "progress" else pages
                if kept is not None:
                    kept.append(frame)
                continue
            return frame

    async def request(self, obj: dict[str, Any], progress: list | None = None) -> dict[str, Any]:
        await self.send(obj)
        return await self.terminal(obj.get("id"), progress)

    async def aclose(self) -> None:
        await self.stream.aclose()


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 90) -> subprocess.CompletedProcess:
    """`python -m webfetch ARGS` as a real process; its environment is ours plus `env`."""
    return subprocess.run([sys.executable, "-m", "webfetch", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})
