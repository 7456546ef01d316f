"""The daemon's socket file rules and the CLI, run as real processes."""

import json
import os
import re
import shlex
import signal
import socket
import stat
import subprocess
import sys
import time

import pytest

from webfetch.config import log_path_for
from webfetch.daemon import DaemonError, bind_socket

from .support.client import run_cli
from .support.procs import children, gone, pid_alive
from .support.site import ARTICLE_TEXT, free_port


def test_socket_and_directory_permissions(short_tmp):
    path = short_tmp / "run" / "webfetch.sock"
    sock = bind_socket(path)
    try:
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    finally:
        sock.close()


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o770])
def test_a_socket_directory_others_can_write_is_refused(short_tmp, mode):
    run = short_tmp / "run"
    run.mkdir()
    run.chmod(mode)
    with pytest.raises(DaemonError, match=f"can be written by other users \\(mode {mode:o}\\)"):
        bind_socket(run / "wf.sock")
    assert stat.S_IMODE(run.stat().st_mode) == mode, "someone else's shared directory is not changed"
    assert not (run / "wf.sock").exists()


def test_a_readable_directory_is_left_as_it_is_the_socket_is_0600(short_tmp):
    run = short_tmp / "home"
    run.mkdir()
    run.chmod(0o755)
    bind_socket(run / "wf.sock").close()
    assert stat.S_IMODE(run.stat().st_mode) == 0o755
    assert stat.S_IMODE((run / "wf.sock").stat().st_mode) == 0o600


def test_a_socket_directory_of_another_user_is_refused(short_tmp):
    theirs = short_tmp / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, os.geteuid() + 1, os.getegid() + 1)  # the tests run as root in CI; or as anyone
    try:
        with pytest.raises(DaemonError, match="belongs to another user"):
            bind_socket(theirs / "wf.sock")
    finally:
        os.chown(theirs, os.geteuid(), os.getegid())


def test_stale_socket_is_replaced_live_one_is_not(short_tmp):
    path = short_tmp / "wf.sock"
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(path))
    dead.close()  # the file stays, nobody listens: a crashed daemon's leftover
    live = bind_socket(path)
    try:
        with pytest.raises(DaemonError, match="another webfetch daemon is already listening"):
            bind_socket(path)
    finally:
        live.close()


def test_second_daemon_exits_with_a_clear_message(short_tmp):
    path = short_tmp / "wf.sock"
    live = bind_socket(path)
    try:
        r = run_cli("serve", "--socket", str(path), timeout=30)
    finally:
        live.close()
    assert r.returncode == 1
    assert "another webfetch daemon is already listening on" in r.stderr


def test_bad_config_stops_the_cli_naming_the_key(short_tmp):
    cfg = short_tmp / "c.toml"
    cfg.write_text("[fetch]\ntimeout = 3\n")
    r = run_cli("serve", "--config", str(cfg), "--socket", str(short_tmp / "x.sock"))
    assert r.returncode == 2
    assert "unknown key `fetch.timeout`" in r.stderr


@pytest.mark.chromium
def test_fetch_starts_a_daemon_which_exits_when_idle(short_tmp, site):
    cfg = short_tmp / "c.toml"
    cfg.write_text("[fetch]\nallow_private = true\n[server]\nidle_exit_s = 2\n")
    path = short_tmp / "wf.sock"
    env = {"WEBFETCH_SOCKET": str(path)}
    r = run_cli("fetch", "--config", str(cfg), site.url("/article"), env=env)
    assert r.returncode == 0, r.stderr
    assert ARTICLE_TEXT[0] in r.stdout and "Copyright" not in r.stdout
    status = run_cli("status", "--config", str(cfg), env=env)
    assert status.returncode == 0, status.stderr
    assert "browser:  ready" in status.stdout and "cache:    1 pages" in status.stdout
    assert "\nbrowse:   enabled, 0 sessions\n" in status.stdout
    err = run_cli("fetch", "--config", str(cfg), site.url("/missing-page"), env=env)
    assert err.returncode == 1 and err.stdout == ""
    assert err.stderr.startswith("webfetch: http_error: ")
    deadline = time.monotonic() + 30
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not path.exists(), "the idle daemon should have exited and removed its socket"
    log = log_path_for(path)  # under $XDG_STATE_HOME, which conftest.py points at a temporary directory
    assert "idle for 2 s; exiting" in log.read_text()
    assert log.stat().st_mode & 0o777 == 0o600 and log.parent.stat().st_mode & 0o777 == 0o700


@pytest.mark.chromium
def test_status_says_when_browse_is_disabled_in_text_and_json(short_tmp):
    cfg = short_tmp / "c.toml"
    cfg.write_text("[browse]\nenabled = false\n")
    path = short_tmp / "wf.sock"
    env = {"WEBFETCH_SOCKET": str(path), "WEBFETCH_CONFIG": str(cfg)}
    assert run_cli("start", env=env).returncode == 0  # a status starts none
    try:
        text = run_cli("status", env=env)
        assert text.returncode == 0, text.stderr
        assert "\nbrowse:   disabled (browse.enabled = false in the config)\n" in text.stdout, text.stdout
        as_json = run_cli("status", "--json", env=env)
        assert as_json.returncode == 0, as_json.stderr
        assert json.loads(as_json.stdout)["browse_enabled"] is False
    finally:
        assert run_cli("stop", env=env).returncode == 0


@pytest.mark.chromium
def test_fetch_json_prints_frames(short_tmp, site):
    cfg = short_tmp / "c.toml"
    cfg.write_text("[fetch]\nallow_private = true\n[server]\nidle_exit_s = 1\n")
    r = run_cli("fetch", "--json", "--config", str(cfg), site.url("/data.json"),
                env={"WEBFETCH_SOCKET": str(short_tmp / "wf.sock")})
    assert r.returncode == 0, r.stderr
    frames = [json.loads(line) for line in r.stdout.splitlines()]
    assert frames[-1]["type"] == "result" and frames[-1]["extractor"] == "raw"
    assert all(f["type"] == "progress" for f in frames[:-1])


def _start_serve(path):
    proc = subprocess.Popen([sys.executable, "-m", "webfetch", "serve", "--socket", str(path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert path.exists(), "the daemon did not create its socket"
    chrome = []
    while not chrome and time.monotonic() < deadline:  # Chrome is the daemon's child
        chrome = children(proc.pid)
        time.sleep(0.05)
    assert chrome, "the daemon started no browser"
    return proc, chrome[0]


@pytest.mark.chromium
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_stop_the_daemon_and_its_browser(short_tmp, sig):
    path = short_tmp / "wf.sock"
    proc, chrome = _start_serve(path)
    proc.send_signal(sig)
    assert proc.wait(30) == 0, proc.stderr.read()
    assert not path.exists()
    assert gone([chrome])
    assert "shutting down" in proc.stderr.read()


@pytest.mark.chromium
def test_a_killed_daemon_takes_its_browser_with_it(short_tmp):
    path = short_tmp / "wf.sock"
    proc, chrome = _start_serve(path)
    time.sleep(12)  # longer than trio keeps an idle worker thread: the browser must survive that
    assert pid_alive(chrome)
    proc.kill()
    proc.wait(10)
    assert gone([chrome]), "Chrome outlived a SIGKILLed daemon"
    import glob
    import tempfile
    left = glob.glob(os.path.join(tempfile.gettempdir(), f"webfetch-*-{proc.pid}-*"))
    assert left  # a SIGKILLed daemon cleans nothing up itself ...
    again, chrome2 = _start_serve(path)  # ... the next one removes what it left
    try:
        deadline = time.monotonic() + 15
        while any(os.path.exists(d) for d in left) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(os.path.exists(d) for d in left)
    finally:
        again.terminate()
        again.wait(30)


@pytest.mark.chromium
def test_fetch_of_several_urls_prints_each_page_in_order_under_its_heading_and_says_which_failed(short_tmp, site):
    cfg = short_tmp / "c.toml"
    cfg.write_text("[fetch]\nallow_private = true\n[server]\nidle_exit_s = 2\n")
    closed = f"http://127.0.0.1:{free_port()}/"
    urls = [site.url("/article"), site.url("/missing-page"), closed, site.url("/notes.txt")]
    r = run_cli("fetch", "--config", str(cfg), *urls, env={"WEBFETCH_SOCKET": str(short_tmp / "wf.sock")})
    assert r.returncode == 1, r.stderr  # one URL or more failed; every page is printed all the same
    blocks = r.stdout.split("==> ")
    assert blocks[0] == "" and [b.split(" <==", 1)[0] for b in blocks[1:]] == [
        f"[{i + 1}/4] {u}" for i, u in enumerate(urls)]
    assert ARTICLE_TEXT[0] in blocks[1] and "Copyright" not in blocks[1]
    assert blocks[2] == f"[2/4] {urls[1]} <==\n\n" and blocks[3] == f"[3/4] {urls[2]} <==\n\n"
    assert blocks[4] == f"[4/4] {urls[3]} <==\nline one\nline two\n"
    assert f"webfetch: [2/4] {urls[1]}: http_error: " in r.stderr
    assert f"webfetch: [3/4] {urls[2]}: network_error: " in r.stderr


@pytest.mark.chromium
def test_a_closed_stdout_ends_the_cli_quietly_as_sigpipe_does_never_blaming_the_daemon(short_tmp, site):
    """`webfetch status | head -1`: the reader of stdout goes away. The CLI ends as a command killed by
    SIGPIPE (a shell shows 141), says nothing, and the daemon is not named as the culprit: on main, a
    flushed frame said `cannot talk to the daemon … Broken pipe` (exit 1) and a buffered status
    `Exception ignored … BrokenPipeError` (exit 120)."""
    from .test_service import serve, wait_until, write_config

    path, cfg = short_tmp / "wf.sock", write_config(short_tmp)
    daemon = serve(path, cfg)
    where = ["--socket", str(path), "--config", str(cfg)]  # this daemon's: no skew note on stderr
    try:
        wait_until("the socket", path.exists)
        url = site.url("/article")
        for args in (["status"], ["status", "--json"], ["fetch", "--json", "--fresh", url], ["fetch", url]):
            cli = subprocess.Popen([sys.executable, "-m", "webfetch", *args, *where],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            cli.stdout.close()  # before the CLI has written a byte: its first write finds no reader
            stderr = cli.stderr.read()
            assert (cli.wait(60), stderr) == (-signal.SIGPIPE, ""), args
        # a real pipe, its reader gone after one byte (a race on main: one run in four failed)
        cli = shlex.join([sys.executable, "-m", "webfetch", "fetch", "--json", "--fresh", url, *where])
        pipeline = f'{cli} 2>"$1" | head -c 1 >/dev/null; echo "${{PIPESTATUS[0]}}"'
        for _ in range(5):
            done = subprocess.run(["bash", "-c", pipeline, "bash", str(short_tmp / "err")], capture_output=True,
                                  text=True, timeout=60)
            assert (done.stdout.strip() in ("0", "141"), (short_tmp / "err").read_text()) == (True, ""), done.stdout
        assert run_cli("status", *where).returncode == 0, "the daemon serves on"
    finally:
        daemon.terminate()
        daemon.wait(30)


# ---- without pi: prompts fail, nothing else mentions it ------------------------------------------------

def _without_pi(short_tmp) -> dict[str, str]:
    """The environment of a user who never installed pi: no `pi` on PATH (Chrome named by WEBFETCH_CHROME,
    wherever the machine has it), no search keys, pi's own directory empty."""
    from webfetch.chrome.launch import find_chrome

    path = os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep)
                           if not os.access(os.path.join(d, "pi"), os.X_OK))
    return {"PATH": path, "WEBFETCH_CHROME": find_chrome() or "", "KAGI_API_KEY": "", "BRAVE_API_KEY": "",
            "PI_CODING_AGENT_DIR": str(short_tmp / "pi-agent"), "WEBFETCH_SOCKET": str(short_tmp / "wf.sock")}


@pytest.mark.chromium
def test_without_pi_a_long_page_is_its_first_page_a_prompt_fails_after_it_and_doctor_is_content(short_tmp, site):
    cfg = short_tmp / "c.toml"
    cfg.write_text("[fetch]\nallow_private = true\n")  # subagent.command is the default, pi
    env = _without_pi(short_tmp)
    try:
        raw = run_cli("fetch", "--config", str(cfg), "--raw", site.url("/large"), env=env)
        assert raw.returncode == 0 and len(raw.stdout) > 40_000, raw.stderr
        # no prompt, a page over one reply: its first page, as with --raw, and not a word about pi
        page = run_cli("fetch", "--config", str(cfg), site.url("/large"), env=env)
        assert page.returncode == 0 and page.stdout == raw.stdout
        assert page.stderr == raw.stderr and page.stderr.startswith("webfetch: "), page.stderr
        assert "continue with --offset" in page.stderr and "pi" not in page.stderr.replace("webfetch", "")
        # a prompt: the page still printed, then why there is no answer and how to get one; exit 1
        asked = run_cli("fetch", "--config", str(cfg), "--prompt", "What is the fox?", site.url("/large"), env=env)
        assert asked.returncode == 1 and asked.stdout == raw.stdout
        assert ("webfetch: note: the sub-agent CLI `pi` was not found; install pi (npm install -g "
                "@earendil-works/pi-coding-agent; it needs Node.js 22.19 or newer) or set subagent.command; here is "
                "the page's raw content instead\n") in asked.stderr, asked.stderr
        assert asked.stderr.endswith("webfetch: --prompt was not answered: the page itself is printed instead (the "
                                     "note above says why)\n"), asked.stderr
        doctor = run_cli("doctor", "--config", str(cfg), env=env, timeout=120)
        assert doctor.returncode == 0, doctor.stdout
        assert re.search(r"^info  sub-agent +not installed \(needed for prompts and summaries\): no `pi` on PATH\n"
                         r" +note: to ask pages questions \(--prompt\) and have long pages summarized, install pi "
                         r"\(npm install -g @earendil-works/pi-coding-agent;", doctor.stdout, re.M), doctor.stdout
        assert "FAIL" not in doctor.stdout and "sub-agent model" not in doctor.stdout
        assert doctor.stdout.endswith("\nall good\n")
    finally:
        run_cli("stop", "--config", str(cfg), env=env)


@pytest.mark.chromium
def test_a_batch_with_a_prompt_and_no_pi_prints_every_page_and_exits_1(short_tmp, site):
    cfg = short_tmp / "c.toml"
    cfg.write_text("[fetch]\nallow_private = true\n")
    env = _without_pi(short_tmp)
    try:
        r = run_cli("fetch", "--config", str(cfg), "--prompt", "Who?", site.url("/article"), site.url("/notes.txt"),
                    env=env)
        assert r.returncode == 1
        assert ARTICLE_TEXT[0] in r.stdout and "line one\nline two\n" in r.stdout
        assert r.stderr.count("webfetch: --prompt was not answered: the page itself is printed instead") == 2
    finally:
        run_cli("stop", "--config", str(cfg), env=env)


# ---- the CLI's words ------------------------------------------------------------------------------------

@pytest.mark.chromium
def test_errors_and_hints_name_the_clis_flags_and_the_wire_keeps_the_protocols_words(short_tmp, site):
    cfg = short_tmp / "c.toml"
    cfg.write_text("[fetch]\nallow_private = true\n[server]\nidle_exit_s = 5\n")
    env = {"WEBFETCH_SOCKET": str(short_tmp / "wf.sock")}
    hang = site.url("/hang")
    slow = run_cli("fetch", "--config", str(cfg), "--timeout", "1", hang, env=env)
    assert slow.returncode == 1
    assert slow.stderr == (f"webfetch: timeout: {hang} did not finish loading within 1 s; try again, or pass a "
                           f"larger --timeout if the site is slow\n")
    wire = run_cli("fetch", "--config", str(cfg), "--timeout", "1", "--json", hang, env=env)
    assert json.loads(wire.stdout.splitlines()[-1])["message"].endswith("pass a larger `timeout_s` if the site is slow")
    both = run_cli("fetch", "--config", str(cfg), "--find", "otters", "--offset", "5", site.url("/article"), env=env)
    assert both.returncode == 1
    assert both.stderr == ("webfetch: bad_request: --find searches the whole page, so it takes no --offset; fetch "
                           "with a passage's offset, without --find, to read on from it\n")


@pytest.mark.chromium
def test_max_chars_cuts_between_words_and_the_pages_join_to_the_whole(short_tmp, site):
    words = ("After forty years away, the otters are back in the river, and the survey counted eleven families "
             "along the lower reaches. ") * 12
    site.html("/one-paragraph", f"<html><head><title>Survey</title></head><body><article><h1>Survey</h1>"
                                f"<p>{words}</p></article></body></html>")
    cfg = short_tmp / "c.toml"
    cfg.write_text("[fetch]\nallow_private = true\n[server]\nidle_exit_s = 5\n")
    env = {"WEBFETCH_SOCKET": str(short_tmp / "wf.sock")}
    url = site.url("/one-paragraph")
    first = run_cli("fetch", "--config", str(cfg), "--max-chars", "300", url, env=env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.endswith(" \n") and len(first.stdout) <= 301  # a whole word, then the space after it
    offset = int(re.search(r"continue with --offset (\d+)\n", first.stderr).group(1))
    pages = []
    next_offset: int | None = 0
    while next_offset is not None:
        r = run_cli("fetch", "--config", str(cfg), "--max-chars", "300", "--offset", str(next_offset), "--json",
                    url, env=env)
        result = json.loads(r.stdout.splitlines()[-1])
        assert result["offset"] == next_offset and len(result["content"]) <= 300
        pages.append(result["content"])
        next_offset = result["next_offset"]
        if next_offset is not None:
            assert result["content"][-1] == " " and not result["content"][-2].isspace(), result["content"][-20:]
    assert len(pages[0]) == offset and first.stdout == pages[0] + "\n"
    whole = json.loads(run_cli("fetch", "--config", str(cfg), "--raw", "--json", url,
                               env=env).stdout.splitlines()[-1])["content"]
    assert "".join(pages) == whole and len(pages) > 4


# ---- the progress line on a terminal ------------------------------------------------------------------

@pytest.mark.chromium
def test_a_slow_page_shows_the_seconds_it_has_taken_on_a_terminal(short_tmp, site):
    import pty

    site.route("/three-seconds", lambda h: (time.sleep(3), h.reply(200, "text/html", "<html><head><title>Late"
                                                                   "</title></head><body><p>Worth the wait.</p>"
                                                                   "</body></html>")))
    cfg = short_tmp / "c.toml"
    cfg.write_text("[fetch]\nallow_private = true\n[server]\nidle_exit_s = 5\n")
    env = {**os.environ, "WEBFETCH_SOCKET": str(short_tmp / "wf.sock")}
    # the daemon first, so that the clock below counts the page, not the daemon's start
    assert run_cli("start", "--config", str(cfg), env=env).returncode == 0
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "webfetch", "fetch", "--config", str(cfg),
                             site.url("/three-seconds")], stdout=subprocess.PIPE, stderr=slave, text=True, env=env)
    os.close(slave)
    seen = b""
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the process closed the terminal
            break
        if not data:
            break
        seen += data
    os.close(master)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "Worth the wait." in out
    shown = seen.decode()
    seconds = [int(s) for s in re.findall(r"\((\d+) s\)", shown)]
    assert seconds and max(seconds) >= 2 and seconds == sorted(seconds), shown
    assert shown.endswith("\r\x1b[K"), shown  # the line is gone before the page is printed
