"""Running as a service: socket activation, sd_notify readiness, shutdown, the units, `service`, `doctor`.
Real processes throughout: systemd's own systemd-socket-activate and systemd-analyze, a datagram socket
standing where systemd's notify socket would be. Only `systemctl --user` is faked: there is no user
systemd manager on these machines to enable units in."""

import functools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from webfetch.frontends.client import Client
from webfetch.frontends.installation import webfetch_command
from webfetch.frontends.logs import TAIL_LINES

from .support.client import run_cli
from .support.procs import children, environ, gone, is_chrome
from .support.site import ARTICLE_TEXT

ROOT = Path(__file__).resolve().parent.parent


def write_config(d: Path, extra: str = "") -> Path:
    cfg = d / "c.toml"
    cfg.write_text(f'[fetch]\nallow_private = true\n[subagent]\ncommand = "/nonexistent/pi-for-tests"\n{extra}')
    return cfg


def request(path: Path, body: dict, timeout: float = 60) -> dict:
    """One request on a new connection, with the project's own client; the terminal frame."""
    with Client(path, autostart=False, timeout=timeout) as c:
        return list(c.request(**body))[-1]


def wait_until(what, predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def serve(path: Path, cfg: Path, env: dict | None = None, prefix: list[str] | None = None):
    return subprocess.Popen([*(prefix or []), sys.executable, "-m", "webfetch", "serve", "--socket", str(path),
                             "--config", str(cfg)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


@pytest.mark.chromium
def test_socket_activation_the_first_client_starts_the_daemon_and_gets_its_answer(short_tmp, site):
    path = short_tmp / "act.sock"
    proc = serve(path, write_config(short_tmp), prefix=["systemd-socket-activate", "-l", str(path)])
    try:
        wait_until("the activator's socket", path.exists, 10)
        assert children(proc.pid) == [], "nothing runs before the first connection"
        answer = request(path, {"op": "fetch", "url": site.url("/article")})
        assert answer["type"] == "result", answer
        assert ARTICLE_TEXT[0] in answer["content"]
        # systemd-socket-activate execs the daemon in its own process: the daemon is proc.pid
        chrome = [p for p in children(proc.pid) if is_chrome(p)]
        assert chrome, "the daemon's browser"
        env = environ(chrome[0])
        assert not {"LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "NOTIFY_SOCKET"} & env.keys()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, proc.stderr.read()
        assert gone(chrome)
        assert path.exists(), "the socket file belongs to whoever created it (systemd), not the daemon"
        assert "socket activation: serving the socket systemd passed" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.chromium
def test_status_stop_and_logs_under_socket_activation_start_nothing_and_start_does(short_tmp, site):
    """With webfetch.socket listening and no daemon behind it yet, a connection starts one: status, stop
    and logs ask systemd (systemctl) instead, and say so. Status exits 3, as `systemctl status
    webfetch.service` does: no daemon process answered, and the message says the first request starts one.
    The socket is systemd's own systemd-socket-activate at the default path; only systemctl is a fake,
    answering `show` with the states the test sets."""
    run = short_tmp / "run"
    (run / "webfetch").mkdir(parents=True, mode=0o700)
    path = run / "webfetch" / "webfetch.sock"
    units = short_tmp / "cfg" / "systemd" / "user"
    units.mkdir(parents=True)
    (units / "webfetch.socket").write_text("[Socket]\nListenStream=%t/webfetch/webfetch.sock\n")
    states = short_tmp / "states"
    states.write_text("active\ninactive\n")  # webfetch.socket, webfetch.service
    fake = short_tmp / "bin"
    fake.mkdir()
    (fake / "systemctl").write_text(f'#!/bin/sh\n[ "$2" = show ] && cat {states}\n')
    (fake / "systemctl").chmod(0o755)
    (fake / "journalctl").write_text('#!/bin/sh\necho "journal: $*"\n')
    (fake / "journalctl").chmod(0o755)
    cfg = write_config(short_tmp)
    env = {"XDG_RUNTIME_DIR": str(run), "XDG_CONFIG_HOME": str(short_tmp / "cfg"), "WEBFETCH_SOCKET": "",
           "WEBFETCH_CONFIG": str(cfg), "PATH": f"{fake}:{os.environ['PATH']}"}
    proc = serve(path, cfg, prefix=["systemd-socket-activate", "-l", str(path)])
    activator = Path(f"/proc/{proc.pid}/exe").resolve()
    try:
        wait_until("the activator's socket", path.exists, 10)
        status = run_cli("status", env=env)
        assert (status.returncode, status.stdout, status.stderr) == (3, "", (
            f"webfetch: no webfetch daemon is running on {path}; systemd's webfetch.socket listens there and "
            f"starts one on the first request (`webfetch start` starts it now)\n"))
        stop = run_cli("stop", env=env)
        assert (stop.returncode, stop.stderr) == (0, (
            f"webfetch: no webfetch daemon is running on {path}; systemd's webfetch.socket listens there and "
            f"starts one on the first request (`systemctl --user stop webfetch.socket` stops that)\n"))
        logs = run_cli("logs", env=env)
        assert (logs.returncode, logs.stdout) == (0, f"journal: --user -u webfetch -n {TAIL_LINES} --no-pager\n")
        assert Path(f"/proc/{proc.pid}/exe").resolve() == activator and children(proc.pid) == [], "nothing started"
        started = run_cli("start", env=env)
        assert (started.returncode, started.stdout) == (0, (
            f"systemd started the webfetch daemon (pid {proc.pid}) on {path} (webfetch.socket); it logs to "
            f"systemd's journal: `webfetch logs`\n")), started.stderr
        states.write_text("active\nactive\n")
        status = run_cli("status", env=env)
        assert status.returncode == 0, status.stderr
        assert f"daemon:   pid {proc.pid}, " in status.stdout
        assert "\nsocket:   systemd's socket (socket activation)\n" in status.stdout
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def notify_socket(short_tmp):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(short_tmp / "notify"))
    sock.settimeout(60)
    yield sock
    sock.close()


@pytest.mark.chromium
def test_ready_only_when_a_fetch_would_succeed_and_stopping_on_sigterm(short_tmp, site, notify_socket):
    path = short_tmp / "wf.sock"
    proc = serve(path, write_config(short_tmp), env={"NOTIFY_SOCKET": notify_socket.getsockname()})
    try:
        first = notify_socket.recv(4096).decode().split("\n")
        assert first[0] == "READY=1"
        assert first[1].startswith("STATUS=ready, 0 cached pages"), first
        status = request(path, {"op": "status"})
        assert status["browser"]["state"] == "ready" and status["problems"] == []
        assert request(path, {"op": "fetch", "url": site.url("/article")})["type"] == "result"
        chrome = [p for p in children(proc.pid) if is_chrome(p)]
        assert "NOTIFY_SOCKET" not in environ(chrome[0])
        # the status line follows the cache
        wait_until("STATUS with the cached page",
                   lambda: "STATUS=ready, 1 cached page," in notify_socket.recv(4096).decode(), 15)
        proc.send_signal(signal.SIGTERM)
        messages = []
        while not any("STOPPING=1" in m for m in messages):
            messages.append(notify_socket.recv(4096).decode())
        assert proc.wait(30) == 0
        assert gone(chrome)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.chromium
@pytest.mark.parametrize("target", ["/nonexistent/notify", "@webfetch-test-nobody-listens"])
def test_a_dead_notify_socket_is_ignored(short_tmp, site, target):
    path = short_tmp / "wf.sock"
    proc = serve(path, write_config(short_tmp), env={"NOTIFY_SOCKET": target})
    try:
        wait_until("the socket", path.exists)
        assert request(path, {"op": "fetch", "url": site.url("/article")})["type"] == "result"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.chromium
def test_sigterm_during_a_fetch_ends_it_with_shutting_down_and_leaves_nothing(short_tmp, site):
    path = short_tmp / "wf.sock"
    proc = serve(path, write_config(short_tmp))
    try:
        wait_until("the socket", path.exists)
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(30)
            s.connect(str(path))
            s.sendall(json.dumps({"id": "slow", "op": "fetch", "url": site.url("/hang")}).encode() + b"\n")
            wait_until("the page request", lambda: site.hits.get("/hang"))
            chrome = [p for p in children(proc.pid) if is_chrome(p)]
            assert chrome
            proc.send_signal(signal.SIGTERM)
            frames = [json.loads(line) for line in s.makefile("rb")]
        assert frames[-1]["type"] == "error" and frames[-1]["code"] == "shutting_down", frames
        assert proc.wait(30) == 0
        assert gone(chrome)
        assert not path.exists()
    finally:
        site.stall.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ---- the units and `webfetch service` ------------------------------------------------------------

run_cli = functools.partial(run_cli, timeout=120)  # doctor launches Chrome


def test_service_install_without_systemctl_writes_units_that_verify_and_says_what_to_run(short_tmp):
    empty_path = short_tmp / "bin"
    empty_path.mkdir()
    r = run_cli("service", "install", env={"XDG_CONFIG_HOME": str(short_tmp / "cfg"), "PATH": str(empty_path)})
    units = short_tmp / "cfg" / "systemd" / "user"
    assert r.returncode == 1
    assert r.stdout.splitlines()[:3] == [f"wrote {units / 'webfetch.socket'}", f"wrote {units / 'webfetch.service'}",
                                         "`systemctl --user` is not available here (systemctl is not installed)"]
    assert "systemctl --user enable --now webfetch.socket" in r.stdout
    service = (units / "webfetch.service").read_text()
    assert f"ExecStart={' '.join(webfetch_command())} serve --exit-when-idle\n" in service
    for line in ("Type=notify", "Restart=on-failure", "KillMode=mixed", "TimeoutStopSec=15"):
        assert f"\n{line}\n" in service
    socket_unit = (units / "webfetch.socket").read_text()
    assert "\nListenStream=%t/webfetch/webfetch.sock\n" in socket_unit and "\nSocketMode=0600\n" in socket_unit
    runtime = short_tmp / "run"
    runtime.mkdir()
    verify = subprocess.run(["systemd-analyze", "verify", "--user", str(units / "webfetch.socket"),
                             str(units / "webfetch.service")], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)})
    assert verify.returncode == 0 and verify.stdout == "" and verify.stderr == "", verify.stderr


def test_service_install_and_uninstall_drive_systemctl(short_tmp):
    fake = short_tmp / "bin"
    fake.mkdir()
    calls = short_tmp / "calls"
    (fake / "systemctl").write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    (fake / "systemctl").chmod(0o755)
    env = {"XDG_CONFIG_HOME": str(short_tmp / "cfg"), "PATH": f"{fake}:{os.environ['PATH']}"}
    r = run_cli("service", "install", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert calls.read_text().splitlines() == ["--user daemon-reload", "--user enable --now webfetch.socket"]
    assert "ran systemctl --user enable --now webfetch.socket" in r.stdout
    calls.unlink()
    r = run_cli("service", "uninstall", env=env)
    assert r.returncode == 0
    assert calls.read_text().splitlines() == ["--user disable --now webfetch.socket webfetch.service",
                                              "--user daemon-reload"]
    assert not any((short_tmp / "cfg" / "systemd" / "user").iterdir())
    assert "nothing to remove" in run_cli("service", "uninstall", env=env).stdout


# ---- doctor --------------------------------------------------------------------------------------

def test_doctor_names_a_broken_chrome_and_exits_non_zero(short_tmp):
    cfg = write_config(short_tmp, '[browser]\nexecutable = "/nonexistent/chrome"\n')
    r = run_cli("doctor", "--config", str(cfg), "--socket", str(short_tmp / "wf.sock"))
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    chrome = next(i for i, line in enumerate(lines) if line.startswith("FAIL  chrome"))
    assert "/nonexistent/chrome does not exist or is not executable" in lines[chrome]
    assert "fix: install Chromium" in lines[chrome + 1]
    assert any(line.startswith("ok    extractor") for line in lines)


@pytest.mark.chromium
@pytest.mark.pi
def test_doctor_all_good_then_reports_the_running_daemons_problems(short_tmp):
    pi = ROOT / "tests" / "node" / "node_modules" / ".bin" / "pi"
    cfg = write_config(short_tmp, "")
    cfg.write_text(cfg.read_text().replace("/nonexistent/pi-for-tests", str(pi)))
    path = short_tmp / "wf.sock"
    no_keys = {"KAGI_API_KEY": "", "BRAVE_API_KEY": "", "PI_CODING_AGENT_DIR": str(short_tmp)}
    r = run_cli("doctor", "--config", str(cfg), "--socket", str(path), env=no_keys)
    assert r.returncode == 0, r.stdout
    assert [line[:6] for line in r.stdout.splitlines() if line[:4] in ("ok  ", "warn", "FAIL")] == \
        ["ok    "] * 7 + ["warn  "] * 3
    assert re.search(r"^warn  sub-agent model +none configured: prompts that name no model \(every MCP client's",
                     r.stdout, re.M)
    cfg.write_text(cfg.read_text() + 'model = "fake/fake-1"\n')  # the last table is [subagent]
    assert "sub-agent" in r.stdout and "0.73.1" in r.stdout
    assert re.search(r"^warn  web search +no backend configured", r.stdout, re.M)
    assert re.search(r"^ok    address policy +every address that is not public allowed but cloud metadata "
                     r"\(fetch.allow_private\): to fetch, crawl and browse sessions alike, on every port; pages "
                     r"connect only through webfetch's proxy", r.stdout, re.M)
    r = run_cli("doctor", "--config", str(cfg), "--socket", str(path),
                env={**no_keys, "BRAVE_API_KEY": "k", "https_proxy": "http://127.0.0.1:9"})
    assert re.search(r"^ok    web search +Brave \(configured: Brave;", r.stdout, re.M)
    assert re.search(r"^ok    sub-agent model +fake/fake-1 from subagent.model", r.stdout, re.M)
    assert re.search(r"^warn  address policy +.*checked per request only, because \$https_proxy gives Chrome a "
                     r"proxy", r.stdout, re.M)
    # a daemon whose browser keeps failing: the doctor passes on its problem
    bad = short_tmp / "c2.toml"
    bad.write_text(cfg.read_text() + '[browser]\nexecutable = "/bin/false"\n')
    proc = serve(path, bad)
    try:
        def crash_loop():
            return request(path, {"op": "status"})["browser"]["state"] == "crash_loop"
        wait_until("the crash loop", lambda: path.exists() and crash_loop(), 60)
        r = run_cli("doctor", "--config", str(cfg), "--socket", str(path))
        assert r.returncode == 1
        assert "FAIL  daemon problem" in r.stdout and "Chrome keeps failing" in r.stdout
    finally:
        proc.terminate()
        proc.wait(30)


# ---- packaging -----------------------------------------------------------------------------------

def test_the_wheel_carries_the_extension_and_the_units(short_tmp):
    out = short_tmp / "dist"
    src = short_tmp / "src"  # a copy, so that the build leaves nothing in the checkout
    shutil.copytree(ROOT, src, symlinks=True,
                    ignore=shutil.ignore_patterns(".venv", "node_modules", ".git", "build", "*.egg-info"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    wheel = next(out.glob("webfetch-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        for f in ("webfetch/frontends/units/webfetch.socket", "webfetch/frontends/units/webfetch.service"):
            assert f in names, f
        # the pi extension, every file of it (index.ts imports the others: a missing one fails pi's load)
        extension = {f"webfetch/frontends/pi_extension/{p.name}" for p in (ROOT / "webfetch" / "frontends" /
                                                                         "pi_extension").iterdir()}
        assert {"webfetch/frontends/pi_extension/index.ts", "webfetch/frontends/pi_extension/protocol.ts",
                "webfetch/frontends/pi_extension/tools.json"} <= extension
        assert extension <= names, extension - names
        # the scripts that run in pages, every one of them (a missing one fails at import)
        scripts = {f"webfetch/js/{p.name}" for p in (ROOT / "webfetch" / "js").glob("*.js")}
        assert scripts and scripts <= names, scripts - names
        unit = z.read("webfetch/frontends/units/webfetch.service")
        assert unit == (ROOT / "systemd" / "webfetch.service").read_bytes()
        entry = next(n for n in names if n.endswith("entry_points.txt"))
        assert "webfetch = webfetch.frontends.cli:main" in z.read(entry).decode()
