"""Chrome's DevTools reachable by the daemon alone (issue 34 item 1): the Chrome webfetch launches is
driven over --remote-debugging-pipe, so while a browse session holds a profile's cookies no other local
user finds a DevTools endpoint of ours on loopback. The scan runs as another uid (nobody, by setpriv),
as a local attacker would; the sockets it finds are matched to their owners as root, since other
Chromes on a shared machine (other people's, other tests') may well listen."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from .support import procs
from .support.daemon import make_config
from .support.login_app import LoginApp
from .test_browse import Browser
from .test_profile_use import save_profile

NOBODY = ["--reuid=65534", "--regid=65534", "--clear-groups"]

# What a local attacker runs: every TCP socket listening on loopback (or on every address) in this network
# namespace, from /proc/net/tcp and tcp6, asked for Chrome's GET /json/version. Standard library only: it
# runs under a Python that uid nobody may execute.
SCAN = r'''
import json, socket
from concurrent.futures import ThreadPoolExecutor

def listening():
    found = set()
    for name, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        with open(name) as f:
            for line in f.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                if state != "0A":  # LISTEN
                    continue
                addr, port = local.split(":")
                raw = bytes.fromhex(addr)
                if family == socket.AF_INET:
                    ip = socket.inet_ntop(family, raw[::-1])
                else:  # four 32-bit words, each in host (little-endian) order
                    ip = socket.inet_ntop(family, b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))
                if ip.startswith("127.") or ip in ("0.0.0.0", "::", "::1") or ip.startswith("::ffff:127."):
                    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(ip, ip.removeprefix("::ffff:"))
                    found.add((host, int(port, 16)))
    return sorted(found)

def ask(target):
    host, port = target
    data = b""
    try:
        with socket.create_connection((host, port), timeout=2) as s:
            s.sendall(f"GET /json/version HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
            # Chrome keeps the connection open after its answer: read until its answer shows, EOF or 2 s
            while len(data) < 65536 and b"webSocketDebuggerUrl" not in data and (chunk := s.recv(65536)):
                data += chunk
    except OSError:  # refused, reset, timed out: what was read so far is the answer
        pass
    return data.decode(errors="replace")[:2000] if b"webSocketDebuggerUrl" in data else None

targets = listening()
with ThreadPoolExecutor(16) as pool:
    answers = list(pool.map(ask, targets))
print(json.dumps({"listening": [port for _, port in targets],
                  "devtools": {str(port): a for (_, port), a in zip(targets, answers) if a}}))
'''


def python_for_nobody() -> str:
    """A Python that uid nobody may run: ours lives under /root when pyenv installed it."""
    for candidate in (os.path.realpath(sys.executable), "/usr/bin/python3"):
        if subprocess.run(["setpriv", *NOBODY, candidate, "-c", "pass"], capture_output=True).returncode == 0:
            return candidate
    raise AssertionError("no Python that uid nobody may execute (tried ours and /usr/bin/python3)")


def listening_inodes() -> dict[int, int]:
    """Socket inode → port of every TCP socket listening in this network namespace."""
    found = {}
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(name).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":
                found[int(fields[9])] = int(fields[1].split(":")[1], 16)
    return found


def ports_held_by(pids: list[int]) -> dict[int, int]:
    """Port → pid for the listening TCP sockets the processes hold open."""
    by_inode = listening_inodes()
    held = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue  # gone meanwhile (a renderer)
        for fd in fds:
            try:
                m = re.fullmatch(r"socket:\[(\d+)\]", os.readlink(f"/proc/{pid}/fd/{fd}"))
            except OSError:
                continue
            if m and int(m.group(1)) in by_inode:
                held[by_inode[int(m.group(1))]] = pid
    return held


@pytest.fixture
def app():
    a = LoginApp().start()
    yield a
    a.stop()


@pytest.fixture
def data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return tmp_path / "data" / "webfetch" / "profiles"


@pytest.mark.chromium
async def test_another_user_finds_no_devtools_of_ours_while_a_profile_is_in_a_browse_session(
        start_daemon, app, data_home):
    if os.geteuid() != 0:
        pytest.skip("the scan runs as another uid (setpriv to nobody), which only root may switch to")
    assert shutil.which("setpriv"), "setpriv (util-linux) is needed to scan as another uid"
    d = await start_daemon(make_config())
    save_profile("club", app.login("ann"))
    b = Browser(await d.client())
    await b.ok("open", url=app.url("/members"), profile="club")
    # the profile's cookie is in the session's browser context now
    assert "Signed in as ann" in (await b.ok("read"))["content"]

    browser = await d.daemon.chrome.wait_browser()
    assert browser.pid is not None
    tree = [browser.pid, *procs.descendants(browser.pid)]
    assert all(procs.is_chrome(p) for p in tree if procs.cmdline(p))
    for pid in tree:
        assert not [a for a in procs.cmdline(pid) if b"--remote-debugging-port" in a], (pid, procs.cmdline(pid))
    assert b"--remote-debugging-pipe" in procs.cmdline(browser.pid)

    python = await trio.to_thread.run_sync(python_for_nobody)
    done = await trio.to_thread.run_sync(lambda: subprocess.run(
        ["setpriv", *NOBODY, python, "-c", SCAN], capture_output=True, text=True, timeout=120, cwd="/"))
    assert done.returncode == 0, done.stderr
    scan = json.loads(done.stdout)
    proxy = d.daemon.chrome.proxy
    assert proxy is not None and proxy.port in scan["listening"], "the scan sees the daemon's loopback listeners"

    ours = ports_held_by([p for p in tree if procs.cmdline(p)])
    found_ours = {port: answer for port, answer in scan["devtools"].items() if int(port) in ours}
    assert found_ours == {}, f"uid nobody reached our Chrome's DevTools: {found_ours}"
    assert ours == {}, f"Chrome's processes listen on TCP: {ours}"
    assert "Signed in as ann" in (await b.ok("read"))["content"]  # and the session still runs
    await b.ok("close")
