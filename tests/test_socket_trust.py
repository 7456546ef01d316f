"""Clients talk only to their own user's daemon (HONESTY.md; webfetch/trust/socket_trust.py and the pi extension's
checkSocket): the CLI, `webfetch mcp` and the pi extension's client, each a real process, against a real
Unix socket served by a recorder that keeps every byte it receives; the other user is `nobody`, for real
(setpriv). Without XDG_RUNTIME_DIR the socket falls back to /tmp/webfetch-<uid>/: those tests run the client
in a mount namespace of its own (unshare) whose /tmp and /run/user are the test's directories, so the real
fallback is what is judged and the machine's /tmp is not touched."""

from __future__ import annotations

import json
import os
import pwd
import select
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from mcp import Client, StdioServerParameters

from webfetch.daemon import DaemonError, bind_socket
from webfetch.trust import socket_trust

ROOT = Path(__file__).resolve().parent.parent
EXTENSION = ROOT / "webfetch" / "frontends" / "pi_extension" / "index.ts"
NOBODY = pwd.getpwnam("nobody")
ME = os.geteuid()
YOU = f"{pwd.getpwuid(ME).pw_name}, uid {ME}"
THEM = f"nobody, uid {NOBODY.pw_uid}"
NOTHING_SENT = ": it may not be your webfetch daemon, so nothing was sent to it. "

needs_root = pytest.mark.skipif(ME != 0, reason="another user's process (setpriv), files owned by it and a /tmp "
                                                "of the test's own (unshare) need root; CI runs as root")
CLIENTS = ["cli", "mcp", pytest.param("pi", marks=pytest.mark.pi)]  # pi: jiti from tests/node/node_modules

# A listener that keeps whatever it is sent and hangs up after a request line, as a stranger's "daemon"
# would that had read the request. The system's Python: the tests' own may live where `nobody` cannot read.
RECORDER = r"""
import os, socket, sys, threading
path, record, make_dir = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
if make_dir:
    os.mkdir(os.path.dirname(path), 0o700)
server = socket.socket(socket.AF_UNIX)
server.bind(path)
os.chmod(path, 0o777)
server.listen(16)
print("listening", flush=True)

def serve(conn):
    with conn, open(record, "ab", buffering=0) as out:
        conn.settimeout(30)
        try:
            while data := conn.recv(65536):
                out.write(data)
                if b"\n" in data:
                    return
        except OSError:
            pass

while True:
    conn, _ = server.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""


class Recorder:
    """RECORDER listening on `path`, as `nobody` when `foreign`, making the socket's directory itself when
    `make_dir`; `received()` is every byte any client sent it."""

    def __init__(self, path: Path, record: Path, *, foreign: bool, make_dir: bool = False) -> None:
        self.record = record
        record.touch()
        argv = ["/usr/bin/python3", "-c", RECORDER, str(path), str(record), "1" if make_dir else "0"]
        if foreign:
            os.chown(record, NOBODY.pw_uid, NOBODY.pw_gid)
            argv = ["setpriv", f"--reuid={NOBODY.pw_uid}", f"--regid={NOBODY.pw_gid}", "--clear-groups", *argv]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE)
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        assert ready and self.proc.stdout.readline() == b"listening\n", "the recorder did not start"

    def received(self) -> bytes:
        return self.record.read_bytes()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def recorders():
    started: list[Recorder] = []

    def start(*args, **kwargs) -> Recorder:
        started.append(Recorder(*args, **kwargs))
        return started[-1]

    yield start
    for r in started:
        r.stop()


# the checkout whose CLI, venv and extension the clients run
REPO = Path(__file__).resolve().parents[1]

@pytest.fixture
def world(short_tmp):
    """A directory for a private /tmp (sticky, world-writable, as /tmp is) and an empty /run/user, with a
    path `nobody` can reach."""
    short_tmp.chmod(0o755)
    (short_tmp / "tmp").mkdir(mode=0o1777)
    (short_tmp / "tmp").chmod(0o1777)
    (short_tmp / "run-user").mkdir()
    return short_tmp


def in_private_tmp(world: Path, argv: list[str]) -> list[str]:
    """`argv` in a mount namespace of its own whose /run/user is world/run-user (empty: no /run/user/<uid>)
    and whose /tmp is world/tmp, so that default_socket_path's fallback is world/tmp/webfetch-<uid>."""
    # /run/user first: world is under /tmp, hidden once /tmp is replaced. A checkout under /tmp (a CI clone) is
    # bound into the private /tmp at its own path first, or its venv and node modules would be hidden too.
    keep = ""
    if REPO.is_relative_to("/tmp"):
        inside = world / "tmp" / REPO.relative_to("/tmp")
        keep = f'mkdir -p "{inside}" && mount --bind "{REPO}" "{inside}" && '
    script = ('{ [ ! -d /run/user ] || mount --bind "$0/run-user" /run/user; } && ' + keep +
              'mount --rbind "$0/tmp" /tmp && exec "$@"')
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(world), *argv]


def client_env(**extra: str) -> dict[str, str]:
    """Our environment without the variables that name a socket, as an MCP client, cron or ssh start one;
    daemons started in the background would log under /tmp/state (the private /tmp's)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("XDG_RUNTIME_DIR", "WEBFETCH_SOCKET", "WEBFETCH_CONFIG", "XDG_STATE_HOME")}
    return {**env, "XDG_STATE_HOME": "/tmp/state", "XDG_CONFIG_HOME": "/nonexistent", **extra}


NODE_CLIENT = """
import { createJiti } from "jiti";
const ext = await createJiti(import.meta.url).import(process.argv[1]);
try {
    await ext.request({ op: "status" }, { settings: ext.settings(process.env, process.argv[2]) });
    console.log(JSON.stringify({ answered: true }));
} catch (e) {
    console.log(JSON.stringify({ error: e.message }));
}
"""


async def run_client(kind: str, env: dict[str, str], wrap=lambda argv: argv) -> str:
    """What the user of `kind` sees when it asks the daemon for something: the CLI's stderr, the MCP tool's
    error text, the pi extension's error."""
    with trio.fail_after(120):
        if kind == "cli":
            done = await trio.run_process(wrap([sys.executable, "-m", "webfetch", "fetch", "http://127.0.0.1:9/"]),
                                          env=env, cwd=ROOT, check=False, capture_stdout=True, capture_stderr=True)
            assert done.returncode == 1 and done.stdout == b""
            return done.stderr.decode()
        if kind == "mcp":
            argv = wrap([sys.executable, "-m", "webfetch", "mcp"])
            async with Client(StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(ROOT)),
                              mode="legacy") as client:
                r = await client.call_tool("web_fetch", {"url": "http://127.0.0.1:9/"})
            assert r.is_error is True and r.structured_content["code"] == "daemon_unreachable"
            return "".join(c.text for c in r.content if c.type == "text")
        node = shutil.which("node")
        assert node, "Node.js runs the pi extension's client"
        done = await trio.run_process(wrap([node, "--input-type=module", "-e", NODE_CLIENT, str(EXTENSION),
                                            str(EXTENSION.parent)]),
                                      env=env, cwd=ROOT / "tests" / "node", check=False, capture_stdout=True,
                                      capture_stderr=True)
        assert done.returncode == 0, done.stderr.decode()
        return json.loads(done.stdout)["error"]


def refused(kind: str, seen: str, problem: str) -> None:
    """`seen` is the refusal naming `problem` (the path, its owner, its mode), and what to do."""
    said = {"cli": "webfetch: ", "mcp": "daemon_unreachable: ", "pi": ""}[kind]
    assert seen.startswith(said + problem + NOTHING_SENT), seen
    assert "XDG_RUNTIME_DIR" in seen and ("--socket" in seen or "WEBFETCH_SOCKET" in seen)


@needs_root
@pytest.mark.parametrize("kind", CLIENTS)
async def test_a_fallback_directory_another_user_made_first_gets_not_one_byte(world, recorders, kind):
    """(a) `nobody` made /tmp/webfetch-<uid> and listens in it: each client, started without
    XDG_RUNTIME_DIR, refuses before it connects, and the stranger received nothing."""
    fallback = world / "tmp" / f"webfetch-{ME}"
    stranger = recorders(fallback / "webfetch.sock", world / "record", foreign=True, make_dir=True)
    assert fallback.stat().st_uid == NOBODY.pw_uid
    seen = await run_client(kind, client_env(), lambda argv: in_private_tmp(world, argv))
    refused(kind, seen, f"the socket directory /tmp/webfetch-{ME} belongs to another user ({THEM}), not to you "
                        f"({YOU}); its mode is 700")
    assert f"Have it removed (its owner or root can: `rm -r /tmp/webfetch-{ME}`)" in seen
    assert stranger.received() == b""


@pytest.mark.parametrize("kind", CLIENTS)
async def test_a_socket_directory_others_can_write_gets_not_one_byte_even_named_explicitly(short_tmp, recorders,
                                                                                            kind):
    """(b) Our own directory, mode 0777, named with WEBFETCH_SOCKET (an explicit path is held to the same
    rule: the daemon never binds there): refused, though what listens is ours."""
    loose = short_tmp / "loose"
    loose.mkdir()
    loose.chmod(0o777)
    listener = recorders(loose / "wf.sock", short_tmp / "record", foreign=False)
    seen = await run_client(kind, client_env(WEBFETCH_SOCKET=str(loose / "wf.sock")))
    refused(kind, seen, f"the socket directory {loose}, yours ({YOU}), can be written by other users (mode 777), "
                        f"so a socket in it may be theirs")
    assert f"Make it private (`chmod 700 {loose}`)" in seen
    assert listener.received() == b""


@needs_root
@pytest.mark.parametrize("kind", CLIENTS)
async def test_a_listener_of_another_user_in_our_own_directory_gets_not_one_byte(short_tmp, recorders, kind):
    """(c) Our 0700 directory, but the process listening on the socket in it runs as `nobody` (it bound the
    socket in a directory of its own; the file was moved into ours). The Python clients see it with
    SO_PEERCRED after connecting; the pi extension by the socket file's owner, before."""
    short_tmp.chmod(0o755)
    theirs, ours = short_tmp / "theirs", short_tmp / "ours"
    theirs.mkdir()
    os.chown(theirs, NOBODY.pw_uid, NOBODY.pw_gid)
    ours.mkdir(mode=0o700)
    stranger = recorders(theirs / "wf.sock", short_tmp / "record", foreign=True)
    (theirs / "wf.sock").rename(ours / "wf.sock")
    seen = await run_client(kind, client_env(WEBFETCH_SOCKET=str(ours / "wf.sock")))
    if kind == "pi":
        problem = f"the socket {ours / 'wf.sock'} belongs to another user ({THEM}), not to you ({YOU}); its mode is 777"
    else:
        problem = (f"the process listening on {ours / 'wf.sock'} (pid {stranger.proc.pid}) runs as another user "
                   f"({THEM}), not as you ({YOU})")
    refused(kind, seen, problem)
    assert stranger.received() == b""


@needs_root
@pytest.mark.parametrize("kind", CLIENTS)
async def test_another_users_link_to_a_directory_of_ours_is_refused(world, recorders, kind):
    """`nobody` made /tmp/webfetch-<uid> a symbolic link to a directory of ours where our own listener
    runs: following the link every check would pass, and the link's owner could point it elsewhere at any
    moment. The link's own owner (lstat) is judged: refused, nothing sent."""
    mine = world / "tmp" / "mine"
    mine.mkdir(mode=0o700)
    listener = recorders(mine / "webfetch.sock", world / "record", foreign=False)
    link = world / "tmp" / f"webfetch-{ME}"
    link.symlink_to("mine")
    os.lchown(link, NOBODY.pw_uid, NOBODY.pw_gid)
    seen = await run_client(kind, client_env(), lambda argv: in_private_tmp(world, argv))
    refused(kind, seen, f"the socket directory /tmp/webfetch-{ME} is a symbolic link that belongs to another user "
                        f"({THEM}), not to you ({YOU}); its mode is 777")
    assert listener.received() == b""


@needs_root
@pytest.mark.parametrize("kind", CLIENTS)
async def test_auto_start_never_starts_a_daemon_in_another_users_directory(world, kind):
    """(d) /tmp/webfetch-<uid> is `nobody`'s and nothing listens in it yet: the client that would start a
    daemon says why it will not, and starts none (no daemon log is even begun)."""
    fallback = world / "tmp" / f"webfetch-{ME}"
    fallback.mkdir(mode=0o755)
    os.chown(fallback, NOBODY.pw_uid, NOBODY.pw_gid)
    seen = await run_client(kind, client_env(), lambda argv: in_private_tmp(world, argv))
    refused(kind, seen, f"the socket directory /tmp/webfetch-{ME} belongs to another user ({THEM}), not to you "
                        f"({YOU}); its mode is 755")
    assert not (world / "tmp" / "state").exists(), "no daemon was started: it would have logged there"
    assert os.listdir(fallback) == []


@needs_root
def test_the_daemon_refuses_a_link_another_user_made_to_a_directory_of_ours(short_tmp):
    mine = short_tmp / "mine"
    mine.mkdir(mode=0o700)
    link = short_tmp / "link"
    link.symlink_to(mine)
    os.lchown(link, NOBODY.pw_uid, NOBODY.pw_gid)
    with pytest.raises(DaemonError) as e:
        bind_socket(link / "wf.sock")
    assert str(e.value) == (
        f"the socket directory {link} is a symbolic link that belongs to another user ({THEM}), not to you ({YOU}); "
        f"its mode is 777; webfetch will not put its socket there. Have it removed (its owner or root can: "
        f"`rm -r {link}`), or point webfetch at a directory of your own: set XDG_RUNTIME_DIR, or pass --socket (or "
        f"set WEBFETCH_SOCKET) with a path in one")
    assert os.listdir(mine) == []


# The policy proxy's clients are TCP connections on 127.0.0.1 (no SO_PEERCRED): whose they are is asked of
# the kernel by the exact connection (NETLINK_SOCK_DIAG), /proc/net/tcp's scan only where that cannot be.
HOLD_CONNECTION = r"""
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
print("connected", flush=True)
time.sleep(30)
"""


@needs_root
@pytest.mark.parametrize("lookup", [socket_trust.sock_diag_uid, socket_trust.proc_net_tcp_uid,
                                    socket_trust.tcp_peer_uid])
def test_a_tcp_clients_uid_is_the_user_that_connected(lookup):
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        theirs = subprocess.Popen(["setpriv", f"--reuid={NOBODY.pw_uid}", f"--regid={NOBODY.pw_gid}",
                                   "--clear-groups", "/usr/bin/python3", "-c", HOLD_CONNECTION, str(port)],
                                  stdout=subprocess.PIPE)
        try:
            server.settimeout(30)
            their_end, _ = server.accept()
            with their_end, socket.create_connection(("127.0.0.1", port)) as mine:
                my_end, _ = server.accept()
                with my_end:
                    assert lookup(their_end.getpeername(), their_end.getsockname()) == NOBODY.pw_uid
                    assert lookup(my_end.getpeername(), my_end.getsockname()) == ME
                    assert mine.getsockname() == my_end.getpeername()
                    # a connection that does not exist has no owner
                    assert lookup(("127.0.0.1", 1), my_end.getsockname()) is None
        finally:
            theirs.kill()
            theirs.wait()


@pytest.mark.parametrize("lookup", [socket_trust.sock_diag_uid, socket_trust.proc_net_tcp_uid])
def test_a_closed_clients_lingering_socket_is_nobodys(lookup):
    """Once the client closes, its socket lingers (FIN_WAIT2, then TIME_WAIT) with uid 0 and no inode: the
    owner is not known, and a daemon run as root must not take it for its own."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        mine, _ = server.accept()
        with mine:
            peer, local = mine.getpeername(), mine.getsockname()
            assert lookup(peer, local) == ME
            client.close()
            assert mine.recv(1) == b""  # its FIN has arrived: it is closed, not yet gone
            assert lookup(peer, local) is None


def test_a_moments_shortage_of_file_descriptors_refuses_one_connection_and_keeps_the_kernels_lookup():
    """Another user can push the daemon's descriptors near their limit: the netlink socket of the lookup then
    fails with EMFILE. That connection's owner is unknown (refused); the lookup is not given up for the slow
    /proc scan for the rest of the daemon's life (a re-review found one such error did that)."""
    script = """
import os, resource, socket
from webfetch.trust import socket_trust as st
listener = socket.create_server(("127.0.0.1", 0))
client = socket.create_connection(listener.getsockname())
served, _ = listener.accept()
peer, local = served.getpeername(), served.getsockname()
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
held = []
try:
    while True:
        held.append(os.open("/dev/null", os.O_RDONLY))
except OSError:
    pass
print(st.tcp_peer_uid(peer, local), st._sock_diag_missing)
for fd in held:
    os.close(fd)
print(st.tcp_peer_uid(peer, local) == os.geteuid(), st._sock_diag_missing)
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.stdout.split("\n")[:2] == ["None False", "True False"], (r.stdout, r.stderr)
