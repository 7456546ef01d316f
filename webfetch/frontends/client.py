"""The socket client the CLI uses: send one request, read its frames; start a daemon when none listens."""

from __future__ import annotations

import errno
import itertools
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from ..config import log_path_for
from ..protocol import decode_frame
from ..trust import socket_trust

START_TIMEOUT_S = 30.0
T = TypeVar("T")


class ClientError(Exception):
    """No daemon could be reached or started, or the connection to it failed; an error of the socket is one
    of these, never a bare OSError, so that an OSError of the caller's own (stdout closed under it: a
    BrokenPipeError) is not blamed on the daemon. An UntrustedSocket is not one: it must never be taken for
    "none runs"."""


class NotListening(ClientError):
    """Nothing listens on the socket (no file, or a file nobody accepts on), and the client was not to
    start a daemon: none runs."""


def connect(path: Path) -> socket.socket:
    """A connection to the user's own daemon on `path` (socket_trust.connect: UntrustedSocket, before a
    byte is sent, when the socket's directory or the process listening is not the user's)."""
    return socket_trust.connect(path)


def _not_listening(e: OSError) -> bool:
    return e.errno in (errno.ENOENT, errno.ECONNREFUSED)


def start_daemon(path: Path, config: str | None) -> None:
    """Start `webfetch serve` in the background (it exits by itself when idle) and wait until it answers.
    It logs to a file under the user's state directory (config.log_path_for). A socket directory someone
    else made first is refused (UntrustedSocket) before anything starts."""
    socket_trust.make_directory(path)
    log_path = log_path_for(path)
    log_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(log_path.parent, 0o700)  # the umask filters mkdir's mode; the log names the URLs people read
    cmd = [sys.executable, "-m", "webfetch", "serve", "--socket", str(path), "--exit-when-idle",
           "--log-file", str(log_path)]
    if config:
        cmd += ["--config", config]
    # stderr goes there too from the first moment: an error before logging is set up is not lost
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with open(fd, "ab") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            connect(path).close()
            return
        except OSError:  # UntrustedSocket is not one: it ends the wait at once
            pass
        if proc.poll() is not None:
            # Maybe another client's daemon won the race for the socket: that is fine too.
            try:
                connect(path).close()
                return
            except OSError:
                raise ClientError(f"the daemon exited at start (code {proc.returncode}); see {log_path}: "
                                  f"{_tail(log_path)}") from None
        time.sleep(0.05)
    raise ClientError(f"the daemon did not start listening on {path} within {START_TIMEOUT_S:.0f} s; "
                      f"see {log_path}")


def _tail(path: Path) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-3:])
    except OSError:
        return ""


class Client:
    _ids = itertools.count(1)

    def __init__(self, path: Path, *, autostart: bool = True, config: str | None = None,
                 timeout: float | None = None) -> None:
        """timeout: seconds any one wait on the socket may take (None: no limit)."""
        self.path = path
        try:
            self.sock = connect(path)
        except OSError as e:
            if not (autostart and _not_listening(e)):
                kind = NotListening if _not_listening(e) else ClientError
                raise kind(f"no webfetch daemon is listening on {path} ({e.strerror}); start one "
                           f"with `webfetch serve`") from None
            try:
                start_daemon(path, config)
            except OSError as e:  # its socket directory or its log cannot be made
                raise ClientError(f"cannot start a daemon on {path}: {e}") from None
            self.sock = self._talking(lambda: connect(path))
        self.sock.settimeout(timeout)
        self._file = self.sock.makefile("rb")

    def _talking(self, step: Callable[[], T]) -> T:
        """`step`, with an error of the socket said as a ClientError that names it."""
        try:
            return step()
        except OSError as e:
            raise ClientError(f"cannot talk to the daemon on {self.path}: {e}") from None

    def close(self) -> None:
        self._file.close()
        self.sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, op: str, **fields: Any) -> Iterator[dict[str, Any]]:
        """Send one request; yield its frames, the terminal `result` or `error` last."""
        rid = next(self._ids)
        body = {"id": rid, "op": op, **{k: v for k, v in fields.items() if v is not None}}
        self._talking(lambda: self.sock.sendall(json.dumps(body).encode() + b"\n"))
        while line := self._talking(self._file.readline):
            frame = decode_frame(line)
            if frame.get("id") != rid:
                continue
            yield frame
            if frame.get("type") in ("result", "error"):
                return
        raise ClientError("the daemon closed the connection before answering")
