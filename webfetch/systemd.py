"""systemd integration without libsystemd: socket activation (LISTEN_FDS) and sd_notify (NOTIFY_SOCKET).

Both protocols are a few lines of documented environment and datagram handling (sd_listen_fds(3),
sd_notify(3)); a dependency would add a C extension for no gain. The variables are removed from our
environment once read, so Chrome and the sub-agent never see them.
"""

from __future__ import annotations

import logging
import os
import socket

log = logging.getLogger("webfetch.systemd")

LISTEN_FDS_START = 3


class ActivationError(Exception):
    pass


def listen_socket() -> socket.socket | None:
    """The listening Unix socket systemd passed us, or None when we were not socket-activated."""
    pid = os.environ.pop("LISTEN_PID", None)
    count = os.environ.pop("LISTEN_FDS", None)
    os.environ.pop("LISTEN_FDNAMES", None)
    if pid is None or count is None:
        return None
    if pid != str(os.getpid()):
        return None  # meant for another process (an ancestor that did not clean up)
    if count != "1":
        raise ActivationError(f"systemd passed {count} sockets; webfetch.socket should have exactly one "
                              f"ListenStream= line")
    fd = LISTEN_FDS_START
    os.set_inheritable(fd, False)
    sock = socket.socket(fileno=fd)
    if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
        sock.detach()
        raise ActivationError("the socket systemd passed is not a Unix stream socket; use ListenStream= "
                              "with a path in webfetch.socket")
    if not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
        sock.detach()
        raise ActivationError("the socket systemd passed is not listening (Accept=yes is not supported)")
    return sock


class Notifier:
    """sd_notify: READY=1, STOPPING=1, STATUS=…; does nothing without NOTIFY_SOCKET, and never raises."""

    def __init__(self) -> None:
        address = os.environ.pop("NOTIFY_SOCKET", None)
        self._sock: socket.socket | None = None
        self._address = ""
        self._last_status: str | None = None
        if not address or address[0] not in "/@":
            return
        self._address = "\0" + address[1:] if address[0] == "@" else address
        try:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        except OSError as e:
            log.warning("cannot notify systemd: %s", e)

    def send(self, *fields: str) -> None:
        if self._sock is None or not self._address:
            return
        try:
            self._sock.sendto("\n".join(fields).encode(), self._address)
        except OSError as e:  # systemd gone, a test's socket closed: readiness is advice, not a reason to die
            log.debug("sd_notify %s failed: %s", fields, e)

    def status(self, line: str) -> None:
        if line != self._last_status:
            self._last_status = line
            self.send(f"STATUS={line}")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
