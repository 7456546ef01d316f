"""Clients talk only to their own user's daemon (HONESTY.md), and the daemon puts its socket only where no
one else can: the one rule every Python client (the CLI, `webfetch mcp`) and the daemon apply.

The default socket falls back to /tmp/webfetch-<uid>/ when there is no XDG_RUNTIME_DIR (MCP clients, cron,
ssh, containers), a name any user can take first in /tmp. A client that connected there would send its
requests (URLs, prompts, profile names) to whoever listens and show their answers as pages. So before a
byte is sent:
- the socket's directory must be ours and writable by no one else. Its own entry is judged (lstat): a
  symbolic link is its owner's, so another user's link, even to a directory of ours, is refused; a link of
  ours must lead to a directory that passes too. In such a directory only we (and root) can put a socket.
- the process listening must run as our uid (SO_PEERCRED), whatever the files say.
The same directory rule holds for a path given with --socket, WEBFETCH_SOCKET or server.socket: the daemon
never binds in a directory that fails it, so a socket in one is not a daemon of ours. Only the socket's own
directory is judged, not those above it: the peer check covers what a loose parent could let happen.

The pi extension (client.ts, checkSocket) mirrors this: the same directory rule, and the socket file's owner
in place of the peer's uid, which Node cannot read."""

from __future__ import annotations

import errno
import logging
import os
import pwd
import socket
import stat
import struct
from pathlib import Path
from typing import Protocol

import trio

from .shell import command

# group and others write: either could put a socket of theirs in the directory, or replace ours
OTHERS_WRITE = 0o022
ADVICE = ("or point webfetch at a directory of your own: set XDG_RUNTIME_DIR, or pass --socket (or set "
          "WEBFETCH_SOCKET) with a path in one")


class UntrustedSocket(Exception):
    """The socket is not certainly our own user's daemon: `problem` says why (the path, its owner, its mode),
    `remedy` what to do. str() is the client's message; `for_daemon()` the daemon's."""

    def __init__(self, problem: str, remedy: str) -> None:
        self.problem = problem
        self.remedy = remedy
        super().__init__(f"{problem}: it may not be your webfetch daemon, so nothing was sent to it. {remedy}")

    def for_daemon(self) -> str:
        return f"{self.problem}; webfetch will not put its socket there. {self.remedy}"


def user(uid: int) -> str:
    """`name, uid N`, or `uid N` for a uid with no name."""
    try:
        return f"{pwd.getpwuid(uid).pw_name}, uid {uid}"
    except KeyError:
        return f"uid {uid}"


def check_directory(socket_path: Path) -> None:
    """Raise UntrustedSocket unless the directory of `socket_path` is ours and no one else can write it.
    FileNotFoundError when it does not exist (nothing listens there: a client may start a daemon);
    NotADirectoryError when it is our own file, not a directory."""
    directory = socket_path.parent
    me = os.geteuid()
    entry = os.lstat(directory)
    if entry.st_uid != me:
        kind = " is a symbolic link that" if stat.S_ISLNK(entry.st_mode) else ""
        raise UntrustedSocket(
            f"the socket directory {directory}{kind} belongs to another user ({user(entry.st_uid)}), not to you "
            f"({user(me)}); its mode is {stat.S_IMODE(entry.st_mode):o}",
            f"Have it removed (its owner or root can: `{command('rm', '-r', str(directory))}`), {ADVICE}")
    info = os.stat(directory) if stat.S_ISLNK(entry.st_mode) else entry
    if stat.S_ISLNK(entry.st_mode) and info.st_uid != me:
        raise UntrustedSocket(
            f"the socket directory {directory} is a link to {os.path.realpath(directory)}, which belongs to "
            f"another user ({user(info.st_uid)}), not to you ({user(me)}); its mode is {stat.S_IMODE(info.st_mode):o}",
            f"Remove the link (`{command('rm', str(directory))}`), {ADVICE}")
    if not stat.S_ISDIR(info.st_mode):
        raise NotADirectoryError(f"{directory} is not a directory; remove it or choose another --socket")
    if stat.S_IMODE(info.st_mode) & OTHERS_WRITE:
        raise UntrustedSocket(
            f"the socket directory {directory}, yours ({user(me)}), can be written by other users "
            f"(mode {stat.S_IMODE(info.st_mode):o}), so a socket in it may be theirs",
            f"Make it private (`{command('chmod', '700', str(directory))}`) or remove it, {ADVICE}")


def make_directory(socket_path: Path) -> None:
    """The directory of `socket_path`, made 0700 when missing; an existing one must pass check_directory
    (UntrustedSocket otherwise): a directory someone else made first is never used."""
    directory = socket_path.parent
    directory.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        pass
    else:
        os.chmod(directory, 0o700)  # mkdir's mode is filtered by the umask
    check_directory(socket_path)


class _HasSockopt(Protocol):
    def getsockopt(self, level: int, option: int, buflen: int) -> bytes: ...


def peer_credentials(sock: _HasSockopt) -> tuple[int, int] | None:
    """(pid, uid) of the process at the other end of a connected Unix socket (SO_PEERCRED: for a client,
    the one that called listen()); None where the platform cannot tell."""
    try:
        pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                             struct.calcsize("3i")))
    except (OSError, AttributeError):
        return None
    return int(pid), int(uid)


def check_peer(sock: _HasSockopt, socket_path: Path) -> None:
    """Raise UntrustedSocket unless the process listening on the connected `sock` runs as our uid."""
    me = os.geteuid()
    peer = peer_credentials(sock)
    if peer is None:
        raise UntrustedSocket(f"cannot tell which user listens on {socket_path} (no SO_PEERCRED here)",
                              "webfetch needs Linux's SO_PEERCRED to know its daemon")
    pid, uid = peer
    if uid != me:
        raise UntrustedSocket(
            f"the process listening on {socket_path} (pid {pid}) runs as another user ({user(uid)}), not as "
            f"you ({user(me)})", f"Stop it or remove the socket (its owner or root can), {ADVICE}")


def connect(socket_path: Path) -> socket.socket:
    """A connection to our own daemon on `socket_path`, nothing sent yet. UntrustedSocket when the
    directory or the listener is not ours; OSError as connect(2) gives it (ENOENT, ECONNREFUSED: none
    listens)."""
    check_directory(socket_path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(socket_path))
        check_peer(sock, socket_path)
    except BaseException:
        sock.close()
        raise
    return sock


async def open_stream(socket_path: Path) -> trio.SocketStream:
    """connect()'s trio twin, for `webfetch mcp`."""
    check_directory(socket_path)
    stream = await trio.open_unix_socket(str(socket_path))
    try:
        check_peer(stream.socket, socket_path)
    except BaseException:
        stream.socket.close()
        raise
    return stream


class NoSockDiag(Exception):
    """The kernel's NETLINK_SOCK_DIAG cannot be asked here (no netlink, no inet_diag, a sandbox refusing it)."""


# linux/netlink.h, linux/sock_diag.h, linux/inet_diag.h
NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 0x1
NLMSG_ERROR = 2
INET_DIAG_NOCOOKIE = 0xFFFFFFFF
ALL_STATES = 0xFFFFFFFF
# struct nlmsghdr { u32 nlmsg_len; u16 nlmsg_type; u16 nlmsg_flags; u32 nlmsg_seq; u32 nlmsg_pid; }
NLMSGHDR = struct.Struct("=IHHII")
# struct inet_diag_req_v2 { u8 sdiag_family; u8 sdiag_protocol; u8 idiag_ext; u8 pad; u32 idiag_states;
#                           struct inet_diag_sockid id; }
REQ_HEAD = struct.Struct("=BBBBI")
# struct inet_diag_sockid { __be16 idiag_sport; __be16 idiag_dport; __be32 idiag_src[4]; __be32 idiag_dst[4];
#                           u32 idiag_if; u32 idiag_cookie[2]; }  (ports and addresses in network order)
SOCKID = struct.Struct("!HH16s16s")
SOCKID_TAIL = struct.Struct("=III")
# struct inet_diag_msg { u8 idiag_family; u8 idiag_state; u8 idiag_timer; u8 idiag_retrans;
#                        struct inet_diag_sockid id; u32 idiag_expires; u32 idiag_rqueue; u32 idiag_wqueue;
#                        u32 idiag_uid; u32 idiag_inode; }
DIAG_MSG = struct.Struct("=BBBB" + "HH16s16sIII" + "IIIII")
# struct nlmsgerr { int error; ... }
NLMSGERR = struct.Struct("=i")
REPLY_BYTES = 8192

log = logging.getLogger("webfetch.socket_trust")
# Errors of a moment, not of a kernel that cannot be asked: they refuse one connection, and never send the
# proxy to the slow /proc scan for the rest of the daemon's life
PASSING_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM, errno.EAGAIN, errno.EINTR})
_sock_diag_missing = False  # set once the kernel refused: the /proc scan from then on, logged once


def _packed(host: str) -> tuple[int, bytes]:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return family, socket.inet_pton(family, host).ljust(16, b"\0")


def sock_diag_uid(peer: tuple[str, int], local: tuple[str, int]) -> int | None:
    """The uid owning the TCP socket at `peer` connected to our `local` one, asked of the kernel by its exact
    4-tuple (NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY without NLM_F_DUMP: the kernel looks that one socket up
    in its hash, constant time whatever else is open). The socket wanted is the CLIENT's, so its own source
    is `peer` and its destination `local`. None when it is not there or no process holds it any more (a
    closed socket lingering in FIN_WAIT/TIME_WAIT reports uid 0 and inode 0: its owner is not known, and
    root's daemon must not take it for its own). NoSockDiag when the kernel cannot be asked."""
    family, source = _packed(peer[0])
    _, destination = _packed(local[0])
    request = (REQ_HEAD.pack(family, socket.IPPROTO_TCP, 0, 0, ALL_STATES)
               + SOCKID.pack(peer[1], local[1], source, destination)
               + SOCKID_TAIL.pack(0, INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE))
    message = NLMSGHDR.pack(NLMSGHDR.size + len(request), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, 1, 0) + request
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as diag:
            diag.sendto(message, (0, 0))
            # the kernel answers inside sendto: the reply is queued already, so this never waits
            reply = diag.recv(REPLY_BYTES, socket.MSG_DONTWAIT)
    except OSError as e:
        if e.errno in PASSING_ERRORS:   # a moment's shortage (another user can push the daemon's fds near
            return None                 # their limit): this connection's owner is unknown, and it is refused
        raise NoSockDiag(str(e)) from e
    except AttributeError as e:  # no AF_NETLINK (not Linux)
        raise NoSockDiag(str(e)) from e
    if len(reply) < NLMSGHDR.size:
        raise NoSockDiag(f"a reply of {len(reply)} bytes")
    _length, kind, _flags, _seq, _pid = NLMSGHDR.unpack_from(reply)
    if kind == NLMSG_ERROR:
        (error,) = NLMSGERR.unpack_from(reply, NLMSGHDR.size)
        if -error == errno.ENOENT:  # no such connection (gone already)
            return None
        raise NoSockDiag(os.strerror(-error))
    if kind != SOCK_DIAG_BY_FAMILY or len(reply) < NLMSGHDR.size + DIAG_MSG.size:
        raise NoSockDiag(f"an answer of type {kind}")
    fields = DIAG_MSG.unpack_from(reply, NLMSGHDR.size)
    uid, inode = fields[-2], fields[-1]
    return None if inode == 0 else int(uid)


def tcp_peer_uid(peer: tuple[str, int], local: tuple[str, int]) -> int | None:
    """sock_diag_uid's answer; where the kernel cannot be asked, the same read from /proc/net/tcp, a scan of
    every TCP socket on the machine (slow, and slower the more any user opens: call it in a thread)."""
    global _sock_diag_missing
    if not _sock_diag_missing:
        try:
            return sock_diag_uid(peer, local)
        except NoSockDiag as e:
            _sock_diag_missing = True
            log.warning("NETLINK_SOCK_DIAG is not available (%s): the proxy's peer check scans /proc/net/tcp, "
                        "which another user's flood of connections can slow", e)
    return proc_net_tcp_uid(peer, local)


def proc_net_tcp_uid(peer: tuple[str, int], local: tuple[str, int]) -> int | None:
    """The uid owning the loopback TCP socket at `peer` connected to our `local` one (IPv4), read from the
    kernel's socket table (/proc/net/tcp: TCP has no SO_PEERCRED); None when it is not there (gone already,
    or no /proc) or no process holds it (inode 0, as sock_diag_uid). The fallback only: a linear scan."""
    def hexed(address: tuple[str, int]) -> str:
        return f"{int.from_bytes(socket.inet_aton(address[0]), 'little'):08X}:{address[1]:04X}"

    wanted = (hexed(peer), hexed(local))
    try:
        with open("/proc/net/tcp", encoding="ascii") as table:
            for row in table:
                fields = row.split()
                if len(fields) > 9 and (fields[1], fields[2]) == wanted:
                    return None if fields[9] == "0" else int(fields[7])
    except (OSError, ValueError):
        return None
    return None
