"""Operating the daemon: how it stops (signals to its whole process group, `webfetch stop` and `restart`)
and what it says about itself. Real processes throughout: `webfetch serve` as a child in its own process
group, its Chrome and its parser workers read from /proc."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from webfetch import __version__
from webfetch.chrome.launch import find_chrome
from webfetch.config import log_path_for

from .support.client import run_cli
from .support.procs import children, descendants, gone, is_chrome, parser_workers
from .support.site import ARTICLE_TEXT
from .test_service import request, wait_until, write_config

# every test here runs `webfetch serve`, whose Chrome starts with it
pytestmark = pytest.mark.chromium


def serve_in_own_group(path: Path, cfg: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`webfetch serve` as a terminal or systemd runs it: the leader of a process group of its own. Its
    stderr goes to a file (`stderr_of`): a pipe nobody reads would fill up and stall the daemon."""
    with open(path.with_suffix(".stderr"), "w") as stderr:
        return subprocess.Popen([sys.executable, "-m", "webfetch", "serve", "--socket", str(path), "--config",
                                 str(cfg)], stdout=subprocess.DEVNULL, stderr=stderr, text=True,
                                start_new_session=True, env={**os.environ, **(env or {})})


def listening(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as s:
        return s.connect_ex(str(path)) == 0


def stderr_of(path: Path) -> str:
    return path.with_suffix(".stderr").read_text()


@pytest.mark.parametrize("how", ["op", "SIGTERM"])
def test_status_answers_while_chrome_starts_and_a_stop_leaves_nothing_behind(short_tmp, how):
    """Chrome's launch is most of a second, and `status` (a cache hit, a browse call's checks) needs no
    browser: the daemon answers while its Chrome still starts. A stop ends every process of its tree,
    removes its socket, and leaves nothing in the temporary directory (Chrome left its singleton directory,
    org.chromium.Chromium.*, there at every stop)."""
    path = short_tmp / "wf.sock"
    tmp = short_tmp / "tmp"
    tmp.mkdir()
    gate = short_tmp / "let-chrome-start"
    slow_chrome = short_tmp / "slow-chrome"  # Chrome, once the test lets it start
    slow_chrome.write_text(f'#!/bin/sh\nwhile [ ! -e "{gate}" ]; do sleep 0.05; done\nexec "{find_chrome()}" "$@"\n')
    slow_chrome.chmod(0o755)
    proc = serve_in_own_group(path, write_config(short_tmp, f'[browser]\nexecutable = "{slow_chrome}"\n'),
                              env={"TMPDIR": str(tmp)})
    try:
        # bound first, listening a moment later: a refused connection is tried again
        wait_until("the socket", lambda: path.exists() and listening(path))
        starting = request(path, {"op": "status"}, timeout=20)  # before: no answer until Chrome was up
        assert starting["browser"]["state"] == "starting" and starting["problems"] == [], starting
        gate.touch()
        wait_until("the browser", lambda: request(path, {"op": "status"})["browser"]["state"] == "ready")
        wait_until("the parser workers", lambda: len(parser_workers(proc.pid)) == 2)
        tree = descendants(proc.pid)
        assert any(is_chrome(p) for p in tree), tree
        if how == "op":
            assert request(path, {"op": "stop"})["pid"] == proc.pid
        else:
            proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, stderr_of(path)
        assert gone(tree), [p for p in tree if Path(f"/proc/{p}").exists()]
        assert not path.exists()
        assert sorted(p.name for p in tmp.iterdir()) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sigterm_to_the_whole_process_group_exits_0_without_a_traceback(short_tmp, site):
    """What `systemctl --user stop` (KillMode=control-group) and a terminal's Ctrl-C do: the signal reaches
    the parser workers too, and the daemon must still stop in order and exit 0."""
    path = short_tmp / "wf.sock"
    proc = serve_in_own_group(path, write_config(short_tmp))
    try:
        wait_until("the socket", path.exists)
        assert request(path, {"op": "fetch", "url": site.url("/article")})["type"] == "result"
        workers = wait_until("the parser workers", lambda: parser_workers(proc.pid))
        chrome = [p for p in children(proc.pid) if "chrom" in Path(f"/proc/{p}/exe").resolve().name]
        assert chrome
        for signum in (signal.SIGTERM, signal.SIGINT):
            os.killpg(proc.pid, signum)  # the second one, while it stops, changes nothing
        proc.wait(timeout=30)
        stderr = stderr_of(path)
        assert proc.returncode == 0, stderr
        assert "Traceback" not in stderr and "Error" not in stderr, stderr
        assert gone(workers) and gone(chrome)
        assert not path.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sighup_does_not_end_the_daemon(short_tmp, site):
    path = short_tmp / "wf.sock"
    proc = serve_in_own_group(path, write_config(short_tmp))
    try:
        wait_until("the socket", path.exists)
        assert request(path, {"op": "status"})["type"] == "result"
        wait_until("the parser workers", lambda: len(parser_workers(proc.pid)) == 2)
        os.killpg(proc.pid, signal.SIGHUP)
        assert request(path, {"op": "fetch", "url": site.url("/article")})["type"] == "result"
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    with socket.socket(socket.AF_UNIX) as s:
        assert s.connect_ex(str(path)) != 0


def test_stop_ends_requests_in_flight_and_browse_sessions_and_leaves_nothing(short_tmp, site):
    path = short_tmp / "wf.sock"
    proc = serve_in_own_group(path, write_config(short_tmp))
    try:
        wait_until("the socket", path.exists)
        opened = request(path, {"op": "browse", "session": "s1", "action": "open",
                                "url": site.url("/article")})
        assert opened["type"] == "result", opened
        chrome = [p for p in children(proc.pid) if "chrom" in Path(f"/proc/{p}/exe").resolve().name]
        workers = parser_workers(proc.pid)
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(30)
            s.connect(str(path))
            s.sendall(json.dumps({"id": "slow", "op": "fetch", "url": site.url("/hang")}).encode() + b"\n")
            wait_until("the page request", lambda: site.hits.get("/hang"))
            r = run_cli("stop", "--socket", str(path))
            frames = [json.loads(line) for line in s.makefile("rb")]
        assert r.returncode == 0, r.stderr
        assert r.stdout == (f"stopped the webfetch daemon (pid {proc.pid}) on {path}: 1 request(s) in flight ended "
                            f"with shutting_down; 1 browse session(s) closed\n")
        assert frames[-1]["code"] == "shutting_down", frames
        assert proc.wait(30) == 0
        assert gone(chrome) and gone(workers)
        assert not path.exists()
        again = run_cli("stop", "--socket", str(path))
        assert again.returncode == 0 and again.stderr == f"webfetch: no webfetch daemon is running on {path}\n"
    finally:
        site.stall.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_restart_applies_a_config_the_running_daemon_did_not_read(short_tmp, site):
    """The trap of issue 26: the first fetch starts a daemon with the config of that moment; the user
    fixes the config; only a daemon that reads it again sees the fix."""
    path = short_tmp / "wf.sock"
    cfg = short_tmp / "c.toml"
    cfg.write_text('[subagent]\ncommand = "/nonexistent/pi-for-tests"\n')
    env = {"WEBFETCH_SOCKET": str(path), "WEBFETCH_CONFIG": str(cfg)}
    try:
        blocked = run_cli("fetch", site.url("/article"), env=env)
        assert blocked.returncode == 1 and "blocked_url" in blocked.stderr, blocked.stderr
        first = json.loads(run_cli("status", "--json", env=env).stdout)["daemon"]
        assert first["config"] == str(cfg) and first["exit_when_idle"] and first["socket"] == str(path)
        assert first["log"] == str(log_path_for(path))
        cfg.write_text('[fetch]\nallow_private = true\n[subagent]\ncommand = "/nonexistent/pi-for-tests"\n')
        r = run_cli("restart", env=env)
        assert r.returncode == 0, r.stderr
        second = json.loads(run_cli("status", "--json", env=env).stdout)["daemon"]
        assert r.stdout.splitlines() == [
            f"stopped the webfetch daemon (pid {first['pid']}) on {path}",
            f"started the webfetch daemon (pid {second['pid']}) on {path}; it logs to {log_path_for(path)}"]
        assert second["pid"] != first["pid"] and second["config_digest"] != first["config_digest"]
        fetched = run_cli("fetch", site.url("/article"), env=env)
        assert fetched.returncode == 0 and ARTICLE_TEXT[0] in fetched.stdout, fetched.stderr
        status = run_cli("status", env=env).stdout
        assert f"\nconfig:   {cfg} (sha256 {second['config_digest']})\n" in status
        assert f"\nlog:      {log_path_for(path)}\n" in status
        logs = run_cli("logs", env=env)
        assert logs.returncode == 0 and f"listening on {path}" in logs.stdout
        assert "stop requested by a client; shutting down" in logs.stdout  # the first daemon's, same file
    finally:
        run_cli("stop", env=env)


def test_stop_under_socket_activation_leaves_the_socket_to_systemd_and_says_so(short_tmp, site):
    path = short_tmp / "act.sock"
    proc = subprocess.Popen(["systemd-socket-activate", "-l", str(path), sys.executable, "-m", "webfetch", "serve",
                             "--config", str(write_config(short_tmp))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    try:
        wait_until("the activator's socket", path.exists, 10)
        info = json.loads(run_cli("status", "--json", "--socket", str(path)).stdout)["daemon"]
        assert info["socket_activated"] and info["socket"] is None and info["log"] is None
        r = run_cli("stop", "--socket", str(path))
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines() == [
            f"stopped the webfetch daemon (pid {proc.pid}) on {path}",
            "systemd's webfetch.socket keeps listening: the next client starts the daemon again"]
        assert proc.wait(30) == 0
        assert path.exists(), "the socket file is systemd's"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_changed_config_restarts_an_idle_background_daemon_and_is_named_for_a_busy_one(short_tmp, site):
    """Issue 26's trap end to end: the first fetch starts a daemon with the defaults (127.0.0.1 refused);
    the user writes the config the error names; the next fetch gets a daemon that reads it."""
    path = short_tmp / "wf.sock"
    cfg = short_tmp / "xdg" / "webfetch" / "config.toml"
    env = {"WEBFETCH_SOCKET": str(path), "XDG_CONFIG_HOME": str(short_tmp / "xdg"), "WEBFETCH_CONFIG": ""}
    try:
        blocked = run_cli("fetch", site.url("/article"), env=env)
        assert blocked.returncode == 1 and "blocked_url" in blocked.stderr, blocked.stderr
        first = json.loads(run_cli("status", "--json", env=env).stdout)["daemon"]
        assert first["config"] is None
        cfg.parent.mkdir(parents=True)
        cfg.write_text('[fetch]\nallow_private = true\n[subagent]\ncommand = "/nonexistent/pi-for-tests"\n')
        fetched = run_cli("fetch", site.url("/article"), env=env)
        assert fetched.returncode == 0 and ARTICLE_TEXT[0] in fetched.stdout, fetched.stderr
        assert fetched.stderr == (f"webfetch: restarted the daemon (pid {first['pid']}), which read no config file "
                                  f"(all defaults), and this command reads {cfg}\n")
        second = json.loads(run_cli("status", "--json", env=env).stdout)["daemon"]
        # the same file changed on disk, while a browse session is open: named, not restarted
        opened = request(path, {"op": "browse", "session": "s1", "action": "open", "url": site.url("/article")})
        assert opened["type"] == "result", opened
        cfg.write_text(cfg.read_text() + "[cache]\nttl_s = 60\n")
        again = run_cli("fetch", site.url("/article"), env=env)
        assert again.returncode == 0 and ARTICLE_TEXT[0] in again.stdout
        assert again.stderr == (f"webfetch: the running daemon (pid {second['pid']}) read {cfg} before it last "
                                f"changed; `webfetch restart` gives you one that runs this command's\n")
        status = run_cli("status", env=env)
        assert (f"\nnote:     this daemon read {cfg} before it last changed; `webfetch restart` gives you one "
                f"that runs this command's\n") in status.stdout
        assert json.loads(run_cli("status", "--json", env=env).stdout)["daemon"]["pid"] == second["pid"]
    finally:
        run_cli("stop", env=env)


def test_a_daemon_of_another_version_is_named_with_the_command_that_fixes_it(short_tmp, site):
    """An upgrade leaves the old daemon serving: simulated by a real daemon that reports another version."""
    path = short_tmp / "wf.sock"
    cfg = write_config(short_tmp)
    old = ("import sys, webfetch; webfetch.__version__ = '0.0.1-old'; from webfetch.frontends.cli import main; "
           "sys.exit(main(sys.argv[1:]))")
    with open(short_tmp / "old.stderr", "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-c", old, "serve", "--socket", str(path), "--config", str(cfg)],
                                stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
    try:
        wait_until("the socket", path.exists)
        r = run_cli("fetch", "--socket", str(path), "--config", str(cfg), site.url("/article"))
        assert r.returncode == 0 and ARTICLE_TEXT[0] in r.stdout
        assert r.stderr == (f"webfetch: the running daemon (pid {proc.pid}) runs webfetch 0.0.1-old, and this is "
                            f"{__version__}; `webfetch restart` gives you one that runs this command's\n")
        assert proc.poll() is None, "a daemon in a terminal is not restarted behind its user's back"
    finally:
        proc.terminate()
        proc.wait(30)


def test_status_never_starts_a_daemon_start_does_and_says_where_it_logs(short_tmp):
    """`webfetch stop; webfetch status` used to look as if the stop had failed: the status started a
    daemon. Now it says none runs (exit 3, as `systemctl status`) and how to start one; `webfetch start`
    starts one as fetch does, and is a no-op that says so when one runs."""
    path = short_tmp / "wf.sock"
    env = {"WEBFETCH_SOCKET": str(path), "WEBFETCH_CONFIG": str(write_config(short_tmp))}
    none = (f"webfetch: no webfetch daemon is running on {path}; `webfetch start` starts one in the background "
            f"(fetch, search, browse, crawl, the pi extension and webfetch mcp start one when they need it)\n")
    status = run_cli("status", env=env)
    assert (status.returncode, status.stdout, status.stderr) == (3, "", none)
    assert run_cli("status", "--json", env=env).returncode == 3
    assert not path.exists() and not log_path_for(path).exists(), "nothing was started"
    try:
        started = run_cli("start", env=env)
        assert started.returncode == 0, started.stderr
        pid = json.loads(run_cli("status", "--json", env=env).stdout)["daemon"]["pid"]
        assert started.stdout == (f"started the webfetch daemon (pid {pid}) on {path}; it logs to "
                                  f"{log_path_for(path)} and exits after 900 s without clients\n")
        again = run_cli("start", env=env)
        assert (again.returncode, again.stdout) == (
            0, f"a webfetch daemon is already running (pid {pid}) on {path}: nothing to start\n")
        assert json.loads(run_cli("status", "--json", env=env).stdout)["daemon"]["pid"] == pid
    finally:
        stopped = run_cli("stop", env=env)
    assert stopped.returncode == 0 and stopped.stdout.startswith("stopped the webfetch daemon"), stopped.stderr
    after = run_cli("status", env=env)
    assert (after.returncode, after.stderr) == (3, none)
    assert not path.exists()


def test_a_broken_config_leaves_status_logs_stop_and_doctor_working_and_says_so(short_tmp):
    """Issue 36: a config file that does not load locked every command out, doctor included, while the
    daemon served the old config. Now status, logs, stop and doctor work and say where the file is wrong;
    a command that would start a daemon (fetch with none running) still refuses, naming the line."""
    path = short_tmp / "wf.sock"
    cfg = write_config(short_tmp)
    env = {"WEBFETCH_SOCKET": str(path), "WEBFETCH_CONFIG": str(cfg)}
    started = run_cli("start", env=env)
    assert started.returncode == 0, started.stderr
    try:
        pid = json.loads(run_cli("status", "--json", env=env).stdout)["daemon"]["pid"]
        cfg.write_text('[fetch]\nallow_hosts = "x"\n')
        error = f"{cfg}: line 2: key `fetch.allow_hosts`: Expected `array`, got `str`"
        note = (f"the config file does not load: {error}; a running daemon keeps the config it has until the file "
                f"is fixed and `webfetch reload` reads it, and none can start until then")
        status = run_cli("status", env=env)
        assert status.returncode == 1, status.stderr
        assert f"\ndaemon:   pid {pid}, " in status.stdout and "\nbrowse:   enabled, 0 sessions\n" in status.stdout
        assert status.stdout.endswith(f"\nproblem:  {note}\n"), status.stdout  # and no note on the config read
        as_json = run_cli("status", "--json", env=env)
        assert json.loads(as_json.stdout)["daemon"]["pid"] == pid and as_json.stderr == f"webfetch: {note}\n"
        logs = run_cli("logs", env=env)
        assert (logs.returncode, logs.stderr) == (0, f"webfetch: {note}\n") and "op=status" in logs.stdout
        doctor = run_cli("doctor", env=env, timeout=120)
        assert doctor.returncode == 1
        lines = doctor.stdout.splitlines()
        assert re.fullmatch(rf"FAIL  config +{re.escape(error)} \(the checks below use the defaults\)", lines[0])
        assert re.fullmatch(r" +fix: fix that line \(docs/CONFIG.md lists every key\), then run `webfetch reload`: a "
                            r"running daemon keeps the config it has until then, and none can start", lines[1])
        assert any(re.match(rf"ok    daemon +webfetch {re.escape(__version__)} on {re.escape(str(path))}", line)
                   for line in lines), doctor.stdout
    finally:
        stopped = run_cli("stop", env=env)
    assert (stopped.returncode, stopped.stdout, stopped.stderr) == (
        0, f"stopped the webfetch daemon (pid {pid}) on {path}\n", f"webfetch: {note}\n")
    fetch = run_cli("fetch", "http://127.0.0.1:9/", env=env)
    assert (fetch.returncode, fetch.stdout, fetch.stderr) == (2, "", f"webfetch: {error}\n")
    assert not path.exists(), "no daemon was started"


def test_a_broken_config_that_names_the_socket_is_still_asked_there(short_tmp):
    """The file's `server.socket` is where a daemon that read it listens: a wrong type elsewhere in the
    file leaves it readable, and status asks there rather than at the default path."""
    path = short_tmp / "named.sock"
    cfg = write_config(short_tmp, f'[server]\nsocket = "{path}"\n')
    proc = serve_in_own_group(path, cfg)
    try:
        wait_until("the socket", lambda: path.exists() and listening(path))
        cfg.write_text(f'[server]\nsocket = "{path}"\n[fetch]\nallow_hosts = "x"\n')
        status = run_cli("status", "--config", str(cfg), env={"WEBFETCH_SOCKET": ""})
        assert status.returncode == 1, status.stderr
        assert f"\ndaemon:   pid {proc.pid}, " in status.stdout
        assert f"\nproblem:  the config file does not load: {cfg}: line 4: key `fetch.allow_hosts`" in status.stdout
    finally:
        proc.terminate()
        proc.wait(30)


def test_the_log_names_every_op_by_its_wire_name(short_tmp, site):
    """One log line per request, its op as the client sent it: `op=reload` beside `op=status`, never the
    request's class name (`op=ReloadRequest`)."""
    import re

    from webfetch.protocol import OPS

    path = short_tmp / "wf.sock"
    cfg = write_config(short_tmp)
    proc = serve_in_own_group(path, cfg)
    try:
        wait_until("the socket", path.exists)
        for args in (["status"], ["reload"], ["cache", "clear"], ["fetch", site.url("/article")],
                     ["browse", "open", site.url("/article")], ["browse", "close"]):
            r = run_cli(*args, "--socket", str(path), "--config", str(cfg))
            assert r.returncode == 0, (args, r.stderr)
        assert run_cli("stop", "--socket", str(path), "--config", str(cfg)).returncode == 0
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    ops = re.findall(r" conn=\d+ id=\S+ op=(\S+)", stderr_of(path))
    assert {"status", "reload", "cache_clear", "fetch", "browse"} <= set(ops), ops
    assert set(ops) <= set(OPS), ops
