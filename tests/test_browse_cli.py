"""`webfetch browse` as a person types it, against a daemon the CLI starts (real processes)."""

import re
import time

import pytest

from .support.browse_app import App
from .support.client import run_cli


@pytest.fixture
def app():
    a = App()
    yield a
    a.stop()


@pytest.mark.chromium
def test_a_session_by_hand_open_fill_click_read(short_tmp, app):
    cfg = short_tmp / "c.toml"
    cfg.write_text("[fetch]\nallow_private = true\n[server]\nidle_exit_s = 3\n")
    path = short_tmp / "wf.sock"
    env = {"WEBFETCH_SOCKET": str(path), "WEBFETCH_CONFIG": str(cfg)}

    def browse(*args: str) -> str:
        r = run_cli("browse", *args, "--session", "by-hand", env=env)
        assert r.returncode == 0, r.stderr
        return r.stdout

    opened = browse("open", app.url("/login"))
    assert opened.startswith(f"[t1] Sign in — {app.url('/login')}\n")
    assert '- textbox "Password" [ref=e2]' in opened and '- button "Accept cookies" [ref=e4]' in opened
    covered = run_cli("browse", "click", "e3", "--session", "by-hand", env=env)
    assert covered.returncode == 1 and covered.stderr.startswith("webfetch: covered: e3 (button \"Sign in\"")
    browse("click", "e4")
    assert "value: ann" in browse("fill", "e1", "ann")
    dashboard = browse("fill", "e2", "hunter2", "--submit")
    assert "value: •••" in dashboard and "[t1] Dashboard" in dashboard
    assert "Signed in as **ann**" in browse("read")
    shot = short_tmp / "shot.png"
    assert f"{shot}: 1280x800 PNG" in browse("screenshot", "-o", str(shot))
    assert shot.read_bytes().startswith(b"\x89PNG")
    assert shot.stat().st_mode & 0o777 == 0o600, "a page shown signed in is the user's alone, as a PDF is"
    # an explicit file that is there is refused, as pdf and har refuse one, unless --overwrite
    shot.write_bytes(b"the user's own picture")
    again = run_cli("browse", "screenshot", "-o", str(shot), "--session", "by-hand", env=env)
    assert (again.returncode, again.stdout) == (1, "")
    assert again.stderr == (f"webfetch: file_exists: {shot} exists already; pass --overwrite to replace it, or give "
                            f"another file\n")
    assert shot.read_bytes() == b"the user's own picture"
    assert f"{shot}: 1280x800 PNG" in browse("screenshot", "-o", str(shot), "--overwrite")
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_mode & 0o777 == 0o600
    status = run_cli("status", env=env)
    assert "browse:   enabled, 1 session\n" in status.stdout and "by-hand: 1 tab(s)" in status.stdout
    doctor = run_cli("doctor", env=env, timeout=120)
    assert f"1 browse session(s) open; by-hand (1 tab(s) at {app.url('/app')}" in doctor.stdout, doctor.stdout
    assert "session by-hand closed" in browse("close")
    usage = run_cli("browse", "fill", "e1", "--session", "by-hand", env=env)
    assert usage.returncode == 2 and "browse fill needs the text" in usage.stderr
    deadline = time.monotonic() + 30
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not path.exists()


def test_viewport_and_pdf_from_the_command_line(tmp_path, monkeypatch):
    import argparse

    from webfetch.frontends.browse_cli import add_parser, request_fields

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"), lambda p: None)
    monkeypatch.chdir(tmp_path)
    fields = request_fields(parser.parse_args(["browse", "viewport", "390x844", "--mobile", "--session", "s"]))
    assert fields == {"session": "s", "action": "viewport", "width": 390, "height": 844, "mobile": True,
                      "cwd": str(tmp_path)}  # the working directory goes with every action (upload reads under it)
    fields = request_fields(parser.parse_args(["browse", "pdf", "-o", "out.pdf", "--session", "s"]))
    assert fields["path"] == str(tmp_path / "out.pdf"), "the daemon gets an absolute path"
    fields = request_fields(parser.parse_args(["browse", "open", "http://localhost:3000/", "--size", "800x600"]))
    assert (fields["width"], fields["height"]) == (800, 600) and "mobile" not in fields
    with pytest.raises(ValueError, match="WIDTHxHEIGHT"):
        request_fields(parser.parse_args(["browse", "viewport", "wide"]))


def test_a_screenshot_without_a_file_never_replaces_the_last_one(tmp_path, monkeypatch, capsys):
    import argparse
    import base64

    from webfetch.frontends.browse_cli import _print_result

    monkeypatch.chdir(tmp_path)
    frame = {"action": "screenshot", "image": base64.b64encode(b"\x89PNG first").decode(), "width": 10, "height": 20,
             "page": {"tab": "t1", "url": "http://127.0.0.1/", "title": ""}}
    args = argparse.Namespace(output=None, overwrite=False)
    _print_result(frame, args)
    _print_result({**frame, "image": base64.b64encode(b"\x89PNG second").decode()}, args)
    assert capsys.readouterr().out == "browse-t1.png: 10x20 PNG\nbrowse-t1-2.png: 10x20 PNG\n"
    assert (tmp_path / "browse-t1.png").read_bytes() == b"\x89PNG first"
    assert (tmp_path / "browse-t1-2.png").read_bytes() == b"\x89PNG second"
    assert {p.stat().st_mode & 0o777 for p in tmp_path.iterdir()} == {0o600}


@pytest.mark.chromium
def test_an_open_dialog_is_answered_with_the_command_the_error_names(short_tmp, site):
    site.html("/confirm", "<html><head><title>Danger</title></head><body><button onclick=\"document.body.append("
                          "confirm('Delete everything?') ? 'deleted' : 'kept')\">Delete all</button></body></html>")
    cfg = short_tmp / "c.toml"
    cfg.write_text("[fetch]\nallow_private = true\n[server]\nidle_exit_s = 3\n")
    env = {"WEBFETCH_SOCKET": str(short_tmp / "wf.sock"), "WEBFETCH_CONFIG": str(cfg)}

    def browse(*args: str):
        return run_cli("browse", *args, "--session", "dialogs", env=env)

    try:
        opened = browse("open", site.url("/confirm"))
        assert opened.returncode == 0, opened.stderr
        ref = re.search(r'- button "Delete all" \[ref=(e\d+)\]', opened.stdout).group(1)
        clicked = browse("click", ref)
        assert "dialog (confirm): Delete everything?  — answer it: webfetch browse dialog accept|dismiss" in \
            clicked.stdout, clicked.stdout
        blocked = browse("snapshot")
        assert blocked.returncode == 1
        assert blocked.stderr == ("webfetch: dialog_open: a confirm dialog is open on t1 ('Delete everything?'); "
                                  "answer it with `webfetch browse dialog accept` (or `dismiss`) before anything else "
                                  "on this tab\n")
        answered = browse("dialog", "dismiss")
        assert answered.returncode == 0 and "kept" in answered.stdout, answered.stdout + answered.stderr
    finally:
        browse("close")


@pytest.mark.chromium
def test_a_misspelt_profile_is_refused_and_new_profile_makes_one(short_tmp, app):
    from webfetch.profiles.store import Profile, ProfileStore

    cfg = short_tmp / "c.toml"
    cfg.write_text("[fetch]\nallow_private = true\n[server]\nidle_exit_s = 3\n")
    profiles = short_tmp / "data" / "webfetch" / "profiles"
    ProfileStore(profiles).save(Profile(name="work", hosts=["127.0.0.1"]))
    env = {"WEBFETCH_SOCKET": str(short_tmp / "wf.sock"), "WEBFETCH_CONFIG": str(cfg),
           "XDG_DATA_HOME": str(short_tmp / "data")}
    typo = run_cli("browse", "open", app.url("/login"), "--profile", "wrok", env=env)
    assert (typo.returncode, typo.stdout) == (1, "")
    assert typo.stderr == ("webfetch: unknown_profile: no profile named 'wrok' (profiles: work); to start a new, "
                           "empty one for 127.0.0.1, open with --new-profile\n")  # the daemon's words in the CLI's
    assert sorted(p.name for p in profiles.glob("*.json")) == ["work.json"]  # nothing made for the typo
    alone = run_cli("browse", "open", app.url("/login"), "--new-profile", env=env)
    assert alone.returncode == 2 and alone.stderr.startswith(
        "webfetch: browse open --new-profile makes the profile --profile NAME names; give both\n")
    made = run_cli("browse", "open", app.url("/login"), "--profile", "wrok", "--new-profile", env=env)
    assert made.returncode == 0 and made.stdout.startswith(f"[t1] Sign in — {app.url('/login')}\n"), made.stderr
    assert run_cli("browse", "close", env=env).returncode == 0
    assert run_cli("stop", env=env).returncode == 0
    assert sorted(p.name for p in profiles.glob("*.json")) == ["work.json", "wrok.json"]
    assert ProfileStore(profiles).load("wrok").hosts == ["127.0.0.1"]


@pytest.mark.chromium
def test_routes_offline_and_emulate_by_hand(short_tmp):
    from .support.states_app import StatesApp

    cfg = short_tmp / "c.toml"
    cfg.write_text("[fetch]\nallow_private = true\n[server]\nidle_exit_s = 3\n")
    env = {"WEBFETCH_SOCKET": str(short_tmp / "wf.sock"), "WEBFETCH_CONFIG": str(cfg)}

    def browse(*args: str) -> str:
        r = run_cli("browse", *args, "--session", "states", env=env)
        assert r.returncode == 0, r.stderr
        return r.stdout

    with StatesApp() as app:
        set_ = browse("route", "*/api/items", "500", "--body", '{"error": "down"}', "--header",
                      "Content-Type: application/json", "--times", "1")
        assert set_ == ("route 1: */api/items → 500, 17 B application/json (answered 0, 1 more time); it answers "
                        "the session's requests from now on (1 route set)\n")
        browse("open", app.url("/"))
        browse("wait", "--text", "Error: the server answered 500")  # the page's first load met the route
        assert app.hits("/api/items") == []
        assert browse("routes") == "no routes set: every request goes to its server\n"
        assert "[forced: offline]" in browse("offline").splitlines()[1]  # after `value: offline`
        assert browse("offline", "off").startswith("value: online\n")
        shown = browse("emulate", "--timezone", "Asia/Tokyo", "--header", "X-Test: on")
        assert shown.startswith(f"emulating:\ntimezone Asia/Tokyo\nheader X-Test: on (to {app.url('')})\n"), shown
        refused = run_cli("browse", "emulate", "--header", "Cookie: a=b", "--session", "states", env=env)
        assert refused.returncode == 1 and refused.stderr.startswith("webfetch: bad_request: emulate does not send "
                                                                     "Cookie"), refused.stderr
        bad = run_cli("browse", "offline", "maybe", "--session", "states", env=env)
        assert bad.returncode == 2 and "browse offline takes on or off" in bad.stderr
        browse("close")
