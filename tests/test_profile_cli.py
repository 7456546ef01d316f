"""`webfetch profile` (frontends/profile_cli.py): the ways into a profile and the commands around it, on
real files under a temporary $XDG_DATA_HOME. What a user sees: the exit status, the exact message, the
file (its modes, its JSON), and every profile as it was after bad input, byte for byte. The imports from
a second real Chromium and the visible login window under Xvfb are at the end (marked chromium)."""

from __future__ import annotations

import glob
import http.server
import json
import os
import resource
import signal
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import trio

from webfetch.chrome.cdp import open_cdp
from webfetch.chrome.launch import find_chrome
from webfetch.frontends.cli import main

from .support.chromium import Chromium, devtools_port
from .support.login_app import LoginApp
from .support.site import QuietHTTPServer

VALUE = "s3cr3t-cookie-value"
STATE = {"cookies": [{"name": "sid", "value": VALUE, "domain": ".example.com", "path": "/", "expires": -1,
                      "httpOnly": True, "secure": True, "sameSite": "Lax"},
                     {"name": "t", "value": "other-value", "domain": "tracker.test", "path": "/",
                      "expires": -1, "httpOnly": False, "secure": False, "sameSite": "None"}],
         "origins": [{"origin": "https://app.example.com", "localStorage": [{"name": "k", "value": "v"}]}]}
COOKIES_TXT = ("# Netscape HTTP Cookie File\n"
               f"#HttpOnly_.example.com\tTRUE\t/\tTRUE\t0\tsid\t{VALUE}\n"
               "wiki.test\tFALSE\t/\tFALSE\t4102444800\tpref\tdark\n")
START_HINT = ("start Chrome with remote debugging and a profile directory of its own, for example "
              "`chromium --remote-debugging-port=9222 --user-data-dir=$HOME/.config/chromium-webfetch` "
              "(Chrome 136 and later ignore --remote-debugging-port on the default profile directory, so "
              "--user-data-dir is needed), log in there, then run this again")


@pytest.fixture
def data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("WEBFETCH_SOCKET", str(tmp_path / "no-daemon.sock"))  # `delete` asks no real daemon
    monkeypatch.chdir(tmp_path)
    return tmp_path / "data"


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["profile", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def profile_file(data_home: Path, name: str) -> Path:
    return data_home / "webfetch" / "profiles" / f"{name}.json"


def write(tmp: Path, name: str, text: str) -> str:
    (tmp / name).write_text(text)
    return str(tmp / name)


def test_import_of_a_storage_state_writes_a_private_profile_with_its_cookie_hosts(data_home, tmp_path, capsys):
    code, out, err = cli(capsys, "import", "work", write(tmp_path, "state.json", json.dumps(STATE)))
    assert (code, out) == (0, "")
    assert err == ("webfetch: profile work: 2 cookies imported; it holds 2 cookies and localStorage for 1 origin, "
                   "and may be used for example.com, tracker.test\n")
    path = profile_file(data_home, "work")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    saved = json.loads(path.read_bytes())
    assert saved["hosts"] == ["example.com", "tracker.test"] and saved["state"] == STATE
    code, out, err = cli(capsys, "export", "work")
    assert code == 0 and json.loads(out) == STATE, "export gives Playwright's storageState back as it came in"


def test_import_with_hosts_keeps_only_their_cookies_and_merges_into_the_profile(data_home, tmp_path, capsys):
    state = write(tmp_path, "state.json", json.dumps(STATE))
    assert cli(capsys, "import", "work", state, "--hosts", "example.com")[0] == 0
    saved = json.loads(profile_file(data_home, "work").read_bytes())
    assert saved["hosts"] == ["example.com"]
    assert [c["name"] for c in saved["state"]["cookies"]] == ["sid"] and len(saved["state"]["origins"]) == 1
    code, _, err = cli(capsys, "import", "work", write(tmp_path, "cookies.txt", COOKIES_TXT), "--hosts", "wiki.test")
    assert code == 0 and err.endswith("may be used for example.com, wiki.test\n")
    saved = json.loads(profile_file(data_home, "work").read_bytes())
    assert {c["name"] for c in saved["state"]["cookies"]} == {"sid", "pref"}, "merged: the first import stays"
    assert cli(capsys, "import", "work", write(tmp_path, "c2.txt", COOKIES_TXT), "--hosts", "wiki.test",
               "--replace")[0] == 0
    saved = json.loads(profile_file(data_home, "work").read_bytes())
    assert saved["hosts"] == ["wiki.test"] and [c["name"] for c in saved["state"]["cookies"]] == ["pref"]


def test_cookies_txt_import_list_allow_export_delete(data_home, tmp_path, capsys):
    assert cli(capsys, "import", "wiki", write(tmp_path, "cookies.txt", COOKIES_TXT))[0] == 0
    code, out, err = cli(capsys, "list")
    assert (code, out, err) == (0, "wiki  hosts: example.com, wiki.test  cookies: 2  origins: 0  last used: never\n",
                                "")
    code, _, err = cli(capsys, "allow", "wiki", "https://Docs.Example.ORG/path", "intra.test")
    assert (code, err) == (0, "webfetch: profile wiki may be used for docs.example.org, example.com, intra.test, "
                              "wiki.test\n")
    code, _, err = cli(capsys, "allow", "wiki", "intra.test", "--remove")
    assert (code, err) == (0, "webfetch: profile wiki may be used for docs.example.org, example.com, wiki.test\n")
    code, out, _ = cli(capsys, "list", "--json")
    assert json.loads(out) == [{"name": "wiki", "hosts": ["docs.example.org", "example.com", "wiki.test"],
                                "cookies": 2, "origins": 0, "last_used": None}]
    assert VALUE not in out
    exported = tmp_path / "out" / "wiki-state.json"
    exported.parent.mkdir()
    code, _, err = cli(capsys, "export", "wiki", str(exported))
    assert code == 0 and stat.S_IMODE(exported.stat().st_mode) == 0o600
    assert {c["name"] for c in json.loads(exported.read_bytes())["cookies"]} == {"sid", "pref"}
    assert os.listdir(exported.parent) == ["wiki-state.json"]
    assert cli(capsys, "delete", "wiki") == (0, "", "webfetch: profile wiki deleted\n")
    assert cli(capsys, "list") == (0, "", "no profiles yet; make one with `webfetch profile login NAME URL` or "
                                          "`webfetch profile import NAME FILE`\n")


def test_list_counts_live_cookies_and_shows_a_damaged_profile_beside_the_others(data_home, tmp_path, capsys):
    expired = {**STATE, "cookies": [*STATE["cookies"], {**STATE["cookies"][0], "name": "old", "expires": 1000.0}]}
    assert cli(capsys, "import", "a", write(tmp_path, "s.json", json.dumps(expired)))[0] == 0
    profile_file(data_home, "b").write_text("{")
    code, out, _ = cli(capsys, "list")
    assert code == 0
    assert out.splitlines()[0] == "a  hosts: example.com, tracker.test  cookies: 2  origins: 1  last used: never"
    assert out.splitlines()[1].startswith("b  profile 'b' (") and "is damaged" in out


# --- bad input: a clear error, and every profile as it was ----------------------------------------


@pytest.fixture
def existing(data_home, tmp_path, capsys):
    """A profile `work` on disk, and a check that its bytes (and the directory) are as they were."""
    assert cli(capsys, "import", "work", write(tmp_path, "good.json", json.dumps(STATE)))[0] == 0
    path = profile_file(data_home, "work")
    before = path.read_bytes()
    yield path
    assert path.read_bytes() == before
    assert sorted(os.listdir(path.parent)) == [".lock", "work.json"], "no temporary file left (the lock stays)"


BAD = [
    (["import", "../work", "good.json"], 2, "'../work' is not a profile name: use letters, digits, '.', '_' and '-' "
                                            "(at most 64, starting with a letter or digit), for example work-github"),
    (["import", "", "good.json"], 2, "'' is not a profile name: use letters, digits, '.', '_' and '-' (at most 64, "
                                     "starting with a letter or digit), for example work-github"),
    (["export", "a/b"], 2, "'a/b' is not a profile name: use letters, digits, '.', '_' and '-' (at most 64, "
                           "starting with a letter or digit), for example work-github"),
    (["export", "nope"], 1, "no profile named 'nope' (profiles: work); make one with `webfetch profile login nope "
                            "URL` or `webfetch profile import nope FILE`"),
    (["allow", "nope", "x.test"], 1, "no profile named 'nope' (profiles: work); make one with `webfetch profile "
                                     "login nope URL` or `webfetch profile import nope FILE`"),
    (["delete", "nope"], 1, "no profile named 'nope'"),
    (["allow", "work", "a b"], 2, "'a b' is not a host name; give hosts like github.com or wiki.example.com"),
    (["allow", "work", "x.test", "--remove"], 1, "profile work does not list x.test (it lists example.com, "
                                                 "tracker.test)"),
    (["import", "work", "missing.json"], 1, "cannot read missing.json: No such file or directory"),
    (["import", "work", "bad-key.json"], 1, "bad-key.json: not a Playwright storage state: Object missing required "
                                            "field 'value' at cookies[0]"),
    (["import", "work", "bad.json"], 1, "bad.json: not valid JSON (Input data was truncated)"),
    (["import", "work", "bad.txt"], 1, "bad.txt, line 2: a cookies.txt line has 7 tab-separated fields (domain, "
                                       "subdomains, path, secure, expiry, name, value); this one has 3"),
    (["import", "work", "good.json", "--hosts", "elsewhere.test"], 1, "good.json has no cookies for elsewhere.test; "
                                                                      "profile work is as it was"),
    (["import", "work", "good.json", "--hosts", ","], 2, "--hosts names no host; give them comma-separated, like "
                                                         "github.com,gitlab.com"),
    (["import", "work"], 2, "import from a FILE (storageState JSON or cookies.txt) or --from-browser ENDPOINT"),
    (["import", "work", "--from-browser", "http://127.0.0.1:9222"], 2,
     "--from-browser needs --hosts H,...: the hosts whose cookies to copy (a browser holds the logins of every "
     "site you use)"),
    (["import", "work", "--from-browser", "nonsense", "--hosts", "a.test"], 1,
     "'http://nonsense' is not a DevTools endpoint: give http://127.0.0.1:9222 (the port of "
     "--remote-debugging-port) or the browser's ws://… URL"),
    (["login", "work", "ftp://x.test/"], 2, "'ftp://x.test/' is not an http(s) URL; give the site's sign-in page, "
                                            "like https://github.com/login"),
]


@pytest.mark.parametrize("args,code,message", BAD, ids=[" ".join(a) for a, _, _ in BAD])
def test_bad_input_is_a_clear_error_and_leaves_the_profile_as_it_was(existing, tmp_path, capsys, args, code,
                                                                     message):
    write(tmp_path, "bad-key.json", json.dumps({"cookies": [{"name": "a", "domain": "x.test"}]}))
    write(tmp_path, "bad.json", '{"cookies": [')
    write(tmp_path, "bad.txt", "# comment\nx.test\tTRUE\t/\n")
    assert cli(capsys, *args) == (code, "", f"webfetch: {message}\n")


def test_a_full_disk_leaves_the_profile_whole(existing, data_home, tmp_path):
    # A file size limit makes the write fail as a full disk does (EFBIG rather than ENOSPC), in the same
    # place: the temporary file, before it replaces the profile.
    big = {"cookies": [{**STATE["cookies"][0], "name": f"c{i}"} for i in range(2000)]}
    source = write(tmp_path, "big.json", json.dumps(big))

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    done = subprocess.run([sys.executable, "-m", "webfetch", "profile", "import", "work", source],
                          capture_output=True, text=True, timeout=60, preexec_fn=limit,
                          env={**os.environ, "XDG_DATA_HOME": str(data_home)})
    assert done.returncode == 1
    assert done.stderr == (f"webfetch: could not write profile 'work' to {profile_file(data_home, 'work')}: File too "
                           f"large; the profile is as it was\n")


SHAPE = 'a Playwright storage state is an object {"cookies": [...], "origins": [...]}'
NOT_A_STATE = [
    ("empty.json", "{}", "empty.json: not a Playwright storage state: it has no 'cookies' list (it is an empty "
                         f"object); {SHAPE}"),
    ("typo.json", '{"cookie": []}', "typo.json: not a Playwright storage state: it has no 'cookies' list (its "
                                    f"keys: 'cookie'); {SHAPE}"),
    ("string.json", '{"cookies": "x"}', "string.json: not a Playwright storage state: Expected 'array', got 'str' "
                                        "at cookies"),
    # an array (a cookie editor's export) is JSON, never judged by cookies.txt's rules; nor is a .json of text
    ("array", "[]", f"array: not a Playwright storage state: the file is an array; {SHAPE}"),
    ("text.json", "sid=1", "text.json: not valid JSON (JSON is malformed: invalid character (byte 0))"),
    ("nothing.json", '{"cookies": [], "origins": []}', "nothing.json: no cookies and no localStorage in it: nothing "
                                                       "to import"),
    ("cookies.txt", "", "cookies.txt: no cookies in it (a cookies.txt has one cookie a line)"),
]


@pytest.mark.parametrize("name,text,message", NOT_A_STATE, ids=[n for n, _, _ in NOT_A_STATE])
def test_an_import_of_a_file_that_is_not_a_login_is_refused_and_makes_no_profile(data_home, tmp_path, name, text,
                                                                                 message):
    source = write(tmp_path, name, text)
    done = subprocess.run([sys.executable, "-m", "webfetch", "profile", "import", "work", source],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "XDG_DATA_HOME": str(data_home)})
    assert (done.returncode, done.stdout, done.stderr) == (1, "", f"webfetch: {str(tmp_path)}/{message}\n")
    assert not profile_file(data_home, "work").exists()
    good = write(tmp_path, "good.json", json.dumps(STATE))  # the same command takes a storage state
    done = subprocess.run([sys.executable, "-m", "webfetch", "profile", "import", "work", good],
                          capture_output=True, text=True, timeout=60, env={**os.environ,
                                                                           "XDG_DATA_HOME": str(data_home)})
    assert done.returncode == 0, done.stderr
    assert json.loads(profile_file(data_home, "work").read_bytes())["state"] == STATE


# --- from a running Chrome ------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_endpoint_says_how_to_start_chrome(existing, capsys):
    port = free_port()
    assert cli(capsys, "import", "work", "--from-browser", f"http://127.0.0.1:{port}", "--hosts", "example.com") == (
        1, "", f"webfetch: cannot reach a browser's DevTools at http://127.0.0.1:{port} (Connection refused); "
               f"{START_HINT}\n")


class NotDevTools(http.server.BaseHTTPRequestHandler):
    """Answers /json/version as something that is not Chrome, and refuses websocket handshakes."""

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        status, body = {"/json/version": (200, b'{"Browser": "not chrome"}')}.get(self.path, (403, b"no"))
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def not_devtools():
    server = QuietHTTPServer(("127.0.0.1", 0), NotDevTools)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_an_endpoint_that_is_not_devtools_or_refuses_is_named(existing, not_devtools, capsys):
    base = f"http://127.0.0.1:{not_devtools}"
    assert cli(capsys, "import", "work", "--from-browser", base, "--hosts", "example.com") == (
        1, "", f"webfetch: {base}/json/version answered, but not as Chrome's DevTools do (no webSocketDebuggerUrl); "
               f"{START_HINT}\n")
    ws = f"ws://127.0.0.1:{not_devtools}/devtools/browser/x"
    assert cli(capsys, "import", "work", "--from-browser", ws, "--hosts", "example.com") == (
        1, "", f"webfetch: the browser at {ws} refused the DevTools connection (cannot connect to {ws}: the server "
               f"answered HTTP 403 to the websocket handshake); {START_HINT}\n")


SIGN_IN = ("document.getElementById('user').value = 'ada'; document.getElementById('password').value = 'hunter2'; "
           "document.querySelector('form').submit()")


async def sign_in(conn, session: str, app: LoginApp, host: str) -> None:
    """Submit the login app's form in the tab of `session` as a person would; wait for the members page."""
    await conn.call("Page.enable", {}, session)
    await conn.call("Page.navigate", {"url": app.url("/login", host)}, session)
    with trio.fail_after(15):
        while (await conn.call("Runtime.evaluate", {"expression": "document.readyState"}, session)
               )["result"]["value"] != "complete":
            await trio.sleep(0.1)
        await conn.call("Runtime.evaluate", {"expression": SIGN_IN}, session)
        while (await conn.call("Runtime.evaluate", {"expression": "location.pathname + document.readyState"},
                               session))["result"]["value"] != "/memberscomplete":
            await trio.sleep(0.1)


@pytest.mark.chromium
async def test_import_from_a_running_chromium_copies_the_listed_hosts_cookies(data_home, tmp_path):
    app = LoginApp().start()
    browser = Chromium(tmp_path / "users-chrome")
    try:
        with trio.fail_after(60):
            async with open_cdp(browser.ws_url) as conn:
                tab = await conn.call("Target.createTarget", {"url": "about:blank"})
                session = (await conn.call("Target.attachToTarget", {"targetId": tab["targetId"],
                                                                     "flatten": True}))["sessionId"]
                await sign_in(conn, session, app, "127.0.0.2")  # a second origin: not to be copied
                await sign_in(conn, session, app, "127.0.0.1")
                await conn.call("Page.navigate", {"url": app.url("/store")}, session)  # keeps localStorage
                await trio.sleep(1)
            done = await trio.to_thread.run_sync(lambda: subprocess.run(
                [sys.executable, "-m", "webfetch", "profile", "import", "mine", "--from-browser",
                 f"http://127.0.0.1:{browser.port}", "--hosts", "127.0.0.1"],
                capture_output=True, text=True, timeout=60, env={**os.environ, "XDG_DATA_HOME": str(data_home)}))
    finally:
        browser.stop()
        app.stop()
    assert done.returncode == 0, done.stderr
    assert done.stderr == ("webfetch: profile mine: 1 cookie imported; it holds 1 cookie and localStorage for "
                           "1 origin, and may be used for 127.0.0.1\n")
    tokens = {h[2] for h in app.hits if h[0] == "127.0.0.1" and h[2]}
    other = {h[2] for h in app.hits if h[0] == "127.0.0.2" and h[2]}
    assert len(tokens) == 1 and len(other) == 1
    for token in tokens | other:
        assert token not in done.stdout + done.stderr
    saved = json.loads(profile_file(data_home, "mine").read_bytes())
    assert saved["hosts"] == ["127.0.0.1"]
    assert saved["state"]["cookies"] == [{"name": "sid", "value": tokens.pop(), "domain": "127.0.0.1", "path": "/",
                                         "expires": -1, "httpOnly": True, "secure": False, "sameSite": "Lax"}]
    assert saved["state"]["origins"] == [{"origin": app.url(""), "localStorage": [
        {"name": "greeting", "value": f"hello from 127.0.0.1:{app.port}"}]}]
    assert stat.S_IMODE(profile_file(data_home, "mine").stat().st_mode) == 0o600


# --- the visible login window, under Xvfb ---------------------------------------------------------


@pytest.fixture
def xvfb():
    """An X server of our own; its display number is the one it picked (-displayfd)."""
    if not any(os.access(os.path.join(d, "Xvfb"), os.X_OK) for d in os.environ.get("PATH", "").split(os.pathsep)):
        pytest.skip("Xvfb is not installed (Debian: apt-get install xvfb; bin/test installs it)")
    read, write_end = os.pipe()
    proc = subprocess.Popen(["Xvfb", "-displayfd", str(write_end), "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
                            pass_fds=(write_end,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write_end)
    try:
        with os.fdopen(read) as f:
            display = f.readline().strip()
        assert display, "Xvfb did not start"
        yield f":{display}"
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.chromium
async def test_login_opens_a_visible_window_and_saves_the_login_when_it_closes(data_home, short_tmp, xvfb):
    app = LoginApp().start()
    tmp = short_tmp  # Chrome's singleton socket goes under TMPDIR, and a socket's path has at most 108 bytes
    # The person at the window is played over a DevTools port the test adds to Chromium's command line (a
    # wrapper given as the executable): webfetch drives the window over its pipe, with no port of its own.
    chromium = find_chrome()
    assert chromium is not None
    wrapper = tmp / "chromium-with-a-port"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp}/args-from-webfetch\n'
                       f'exec {chromium} --remote-debugging-port=0 "$@"\n')
    wrapper.chmod(0o755)
    env = {**os.environ, "DISPLAY": xvfb, "TMPDIR": str(tmp), "XDG_DATA_HOME": str(data_home),
           "WEBFETCH_CHROME": str(wrapper)}
    env.pop("WAYLAND_DISPLAY", None)
    out_path, err_path = tmp / "out", tmp / "err"
    with out_path.open("w") as out_file, err_path.open("w") as err_file:
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-m", "webfetch", "profile", "login", "site", app.url("/login")], env=env,
            stdout=out_file, stderr=err_file)
    try:
        with trio.fail_after(90):
            while not (found := glob.glob(str(tmp / "webfetch-login-*" / "profile" / "DevToolsActivePort"))):
                assert proc.poll() is None, err_path.read_text()
                await trio.sleep(0.1)
            _, ws_url = devtools_port(Path(found[0]).parent)
            async with open_cdp(ws_url) as conn:
                targets = (await conn.call("Target.getTargets"))["targetInfos"]
                page = next(t for t in targets if t["type"] == "page")
                assert page["url"] == app.url("/login"), "the window opens on the URL given"
                session = (await conn.call("Target.attachToTarget", {"targetId": page["targetId"],
                                                                     "flatten": True}))["sessionId"]
                await sign_in(conn, session, app, "127.0.0.2")  # a sign-on provider's host, say
                await sign_in(conn, session, app, "127.0.0.1")
                await trio.sleep(1.5)  # a person reads the page before closing the window
                await conn.call("Target.closeTarget", {"targetId": page["targetId"]})
            await proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            await proc.wait()
        app.stop()
    out, err = out_path.read_text(), err_path.read_text()
    assert proc.returncode == 0, err
    given = (tmp / "args-from-webfetch").read_text().splitlines()
    assert "--remote-debugging-pipe" in given and not [a for a in given if a.startswith("--remote-debugging-port")]
    assert out == ""
    assert err == ("webfetch: a Chromium window is open: log in there, then close the window (the login is saved "
                   "when it closes)\n"
                   "webfetch: profile site: 2 cookies imported; it holds 2 cookies and localStorage for 0 origins, "
                   "and may be used for 127.0.0.1\n"
                   "webfetch: the login also set cookies for 127.0.0.2 (a sign-on provider, a tracker, or the site's "
                   "parent domain); the profile keeps them, but no page gets them until the profile may be used "
                   "there. To allow one:\n  webfetch profile allow site 127.0.0.2\n"
                   "(or log in with --hosts naming every host the profile is for)\n")
    assert len(app.sessions) == 2 and not any(token in err for token in app.sessions)
    saved = json.loads(profile_file(data_home, "site").read_bytes())
    assert saved["hosts"] == ["127.0.0.1"], "bound to the URL's host alone"
    assert sorted((c["domain"], c["name"], c["httpOnly"]) for c in saved["state"]["cookies"]) == [
        ("127.0.0.1", "sid", True), ("127.0.0.2", "sid", True)]
    assert stat.S_IMODE(profile_file(data_home, "site").stat().st_mode) == 0o600
    assert not glob.glob(str(tmp / "webfetch-login-*")), "the window's user-data-dir is removed"
    assert not glob.glob(str(tmp / ".org.chromium.*")), "and Chrome's own files under TMPDIR"
