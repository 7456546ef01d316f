"""Profiles in use (issue 27, items 2, 3, 5, 6): a login made in a browse session serves fetches after a
daemon restart, a page read with a profile is cached apart, a session the site refreshes stays alive, the
host list holds, two users of one profile never undo each other's changes, and no cookie value reaches
a log, a progress frame or an error. Real Chromium against tests/support/login_app.py (127.0.0.1 and
127.0.0.2 are two hosts), the end state checked on its server and in the profile files."""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import stat
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from webfetch.config import BrowserConfig, FetchConfig, log_path_for
from webfetch.disk_cache import DiskCache, StoredPage, decode_entry, default_directory
from webfetch.dns import resolve
from webfetch.fetch.pipeline import Page, login_hint
from webfetch.profiles.store import Cookie, LocalStorageItem, OriginState, Profile, ProfileStore, StorageState
from webfetch.profiles.use import apply_changes

from .support.client import run_cli
from .support.daemon import TRANSPORT_NOTES, Harness, make_config
from .support.login_app import MEMBER_TEXT, LoginApp
from .test_browse import Browser, ref
from .test_hostile import CHROME_LNA_OFF


@pytest.fixture
def app():
    a = LoginApp().start()
    yield a
    a.stop()


@pytest.fixture
def data_home(tmp_path, monkeypatch):
    """The profiles live under a temporary $XDG_DATA_HOME, never the user's."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return tmp_path / "data" / "webfetch" / "profiles"


@asynccontextmanager
async def running_daemon(sock: Path):
    """A daemon that stops when the block ends as `webfetch stop` stops it (as SIGTERM does)."""
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            h = await Harness.start(nursery, sock, make_config())
            yield h
            assert (await h.request({"id": "stop", "op": "stop"}))["type"] == "result"


def sid_of(data_home: Path, name: str) -> str | None:
    cookies = json.loads((data_home / f"{name}.json").read_text())["state"]["cookies"]
    return next((c["value"] for c in cookies if c["name"] == "sid"), None)


def save_profile(name: str, token: str, hosts: tuple[str, ...] = ("127.0.0.1",)) -> Profile:
    profile = Profile(name=name, hosts=list(hosts), state=StorageState(cookies=[
        Cookie(name="sid", value=token, domain="127.0.0.1", path="/", httpOnly=True)]))
    ProfileStore().save(profile)
    return profile


def member_page(r: dict[str, Any]) -> bool:
    return r["type"] == "result" and MEMBER_TEXT in r["content"] and "login_wall" not in r["flags"]


# --- pure -------------------------------------------------------------------------------------------


def _c(name: str, value: str) -> Cookie:
    return Cookie(name=name, value=value, domain="example.com")


def test_only_what_a_context_changed_is_written_over_the_profile():
    current = [_c("sid", "from-other-session"), _c("theme", "dark"), _c("gone", "x"), _c("other", "kept")]
    before = [_c("sid", "old"), _c("theme", "dark"), _c("gone", "x")]
    after = [_c("sid", "old"), _c("theme", "light"), _c("new", "1")]
    merged = {c.name: c.value for c in apply_changes(current, before, after)}
    # sid untouched here, so another writer's refresh stays; theme changed; gone deleted; new set; other kept
    assert merged == {"sid": "from-other-session", "theme": "light", "new": "1", "other": "kept"}


def test_a_login_wall_says_how_to_get_past_it():
    page = Page(url="https://wiki.example.com/x", final_url="https://wiki.example.com/login?next=/x", status=200,
                content_type="text/html", title="Sign in", markdown="", extractor=None, truncated=False,
                redirect_url=None, flags=("login_wall",))
    assert login_hint(page, None) == (
        "to read it signed in, the user logs in once with `webfetch profile login wiki.example.com "
        "'https://wiki.example.com/login?next=/x'` (a browser window opens for them; where none can open, it prints "
        "the address of a page of webfetch's local view to log in through; or "
        "`webfetch browse open 'https://wiki.example.com/login?next=/x' --profile wiki.example.com --new-profile`, "
        "fill in the sign-in form with `webfetch browse fill`, then `webfetch browse save`; or `webfetch profile "
        "import wiki.example.com FILE` with exported cookies), then fetch with profile 'wiki.example.com' (CLI: "
        "--profile wiki.example.com)")
    assert login_hint(page, "work") == (
        "profile work did not get past the sign-in at wiki.example.com: its login may have expired or been signed "
        "out. Ask the user to log in again with `webfetch profile login work 'https://wiki.example.com/login?next=/x'` "
        "(where no window can open, it prints the address of a page of webfetch's local view to log in through; or "
        "`webfetch browse open 'https://wiki.example.com/login?next=/x' --profile work`, "
        "fill in the sign-in form with `webfetch browse fill`, then `webfetch browse save`), then fetch again with "
        "profile work")
    sso = Page(url="https://a.example/x", final_url="https://a.example/x", status=302, content_type=None,
               title=None, markdown="", extractor=None, truncated=False,
               redirect_url="https://sso.example.org/login?r=1")
    assert "`webfetch profile login sso.example.org 'https://sso.example.org/login?r=1'`" in login_hint(sso, None)
    assert login_hint(Page(url="u", final_url="u", status=200, content_type=None, title=None, markdown="x",
                           extractor=None, truncated=False, redirect_url=None), None) is None


# --- with Chromium ------------------------------------------------------------------------------------


@pytest.mark.chromium
async def test_a_browse_login_serves_fetches_after_a_restart_and_is_cached_apart(app, data_home, short_tmp, caplog):
    caplog.set_level(logging.DEBUG)
    progress: list[dict[str, Any]] = []
    async with running_daemon(short_tmp / "a.sock") as h:
        b = Browser(await h.client())
        page = await b.ok("open", url=app.url("/login"), profile="club", create=True)
        snap = page["snapshot"]
        await b.ok("fill", ref=ref(snap, '- textbox "Username"'), text="ann")
        await b.ok("fill", ref=ref(snap, '- textbox "Password"'), text="hunter2", submit=True)
        assert "Signed in as ann" in (await b.ok("read"))["content"]
        await b.ok("close")
    token = sid_of(data_home, "club")
    assert token is not None and app.sessions[token] == "ann"  # the login the server made, kept
    # the profile was made by the session, for the host it opened; 0600 in 0700
    assert json.loads((data_home / "club.json").read_text())["hosts"] == ["127.0.0.1"]
    assert stat.S_IMODE(os.stat(data_home).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(data_home / "club.json").st_mode) == 0o600

    async with running_daemon(short_tmp / "b.sock") as h:  # a new daemon, the same profiles
        c = await h.client()
        signed_in = await c.request({"id": 1, "op": "fetch", "url": app.url(), "profile": "club"}, progress)
        assert member_page(signed_in) and not signed_in["cached"], signed_in
        anonymous = await c.request({"id": 2, "op": "fetch", "url": app.url()}, progress)
        assert anonymous["type"] == "result" and not anonymous["cached"]  # the member page is not served
        assert "login_wall" in anonymous["flags"] and MEMBER_TEXT not in anonymous["content"]
        assert (f"to read it signed in, the user logs in once with `webfetch profile login 127.0.0.1 "
                f"{app.url()}`") in " ".join(anonymous["notes"])
        assert (f"where none can open, it prints the address of a page of webfetch's local view to log in through; "
                f"or `webfetch browse open {app.url()} --profile 127.0.0.1 --new-profile`, fill "
                f"in the sign-in form with `webfetch browse fill`, then `webfetch browse save`") in \
            anonymous["notes"][-1]
        again = await c.request({"id": 3, "op": "fetch", "url": app.url(), "profile": "club"}, progress)
        assert member_page(again) and again["cached"]
        other = await c.request({"id": 4, "op": "fetch", "url": app.url(), "profile": "other"})
        assert other["code"] == "unknown_profile"  # never another profile's cached page
        assert "login_wall" in (await c.request({"id": 5, "op": "fetch", "url": app.url()}))["flags"]
    member_hits = [hit for hit in app.hits if hit[1] == "/members"]
    assert [t for _, _, t in member_hits[-2:]] == [token, None]  # the server saw one with it, one without
    # the value never reaches the log or a progress frame
    assert token not in caplog.text and token not in json.dumps(progress)


@pytest.mark.chromium
async def test_a_session_the_site_refreshes_stays_alive(app, data_home, daemon):
    old = app.login("ann")
    save_profile("club", old)
    r = await daemon.fetch(app.url("/refresh"), profile="club")
    assert member_page(r), r
    # the first reason Chrome loaded the page: the profile, unless the suite runs on the chrome transport
    assert r["notes"][0] == (TRANSPORT_NOTES or ["loaded in Chrome: the cookies of profile club live in Chrome"])[0]
    new = sid_of(data_home, "club")
    assert new != old and app.sessions.get(new) == "ann" and old not in app.sessions
    # the next fetch sends the refreshed cookie
    assert member_page(await daemon.fetch(app.url("/account"), profile="club"))
    assert [hit for hit in app.hits if hit[1] == "/account"] == [("127.0.0.1", "/account", new)]
    profile = json.loads((data_home / "club.json").read_text())
    assert profile["last_used"] is not None


@pytest.mark.chromium
async def test_the_host_list_and_bad_names_leave_every_profile_as_it_was(app, data_home, daemon):
    save_profile("club", app.login("ann"))
    before = (data_home / "club.json").read_bytes()
    r = await daemon.fetch(app.url(host="127.0.0.2"), profile="club")
    assert r["type"] == "error" and r["code"] == "profile_not_allowed"
    assert r["message"] == (
        "profile 'club' may be used for 127.0.0.1, not for 127.0.0.2: a page read with a login can carry "
        "instructions, so a profile goes only where you send it. To allow it: webfetch profile allow club 127.0.0.2")
    b = Browser(await daemon.client())
    assert (await b("open", url=app.url(host="127.0.0.2"), profile="club"))["code"] == "profile_not_allowed"
    assert not [hit for hit in app.hits if hit[0] == "127.0.0.2"]  # nothing was sent there
    assert (await daemon.fetch(app.url(), profile="nobody"))["message"].startswith(
        "no profile named 'nobody' (profiles: club); make one with `webfetch profile login nobody URL`")
    for bad in ("../club", "a/b", ""):
        r = await daemon.fetch(app.url(), profile=bad)
        assert r["code"] == "profile_error" and "is not a profile name" in r["message"], (bad, r)
    assert (data_home / "club.json").read_bytes() == before
    assert sorted(p.name for p in data_home.iterdir()) == ["club.json"]


@pytest.mark.chromium
async def test_a_misspelt_profile_is_refused_and_only_create_makes_one(app, data_home, daemon):
    """A typo in a session's profile would start an empty profile, and the login the user meant go unused:
    it is unknown_profile listing the profiles, and no file or session is made, unless the open asks to
    create it (the browser tool's `create`, the CLI's --new-profile)."""
    save_profile("club", app.login("ann"))
    b = Browser(await daemon.client())
    r = await b("open", url=app.url("/members"), profile="cluub")
    assert (r["type"], r["code"]) == ("error", "unknown_profile")
    assert r["message"] == ("no profile named 'cluub' (profiles: club); to start a new, empty one for 127.0.0.1, "
                            "open with `create: true`")
    assert sorted(p.name for p in data_home.iterdir()) == ["club.json"]
    assert (await b("snapshot"))["message"] == "no page is open in browse session 's1': call open with a url first"
    r = await b("open", url=app.url("/members"), create=True)
    assert (r["code"], r["message"]) == ("bad_request", "`create: true` starts a new profile on the open that names "
                                                        "it: give `profile` with it")
    # an existing profile with create is that profile, logins and all
    await b.ok("open", url=app.url("/members"), profile="club", create=True)
    assert "Signed in as ann" in (await b.ok("read"))["content"]
    await b.ok("close")
    await b.ok("open", url=app.url("/login"), profile="cluub", create=True)
    await b.ok("close")
    made = json.loads((data_home / "cluub.json").read_text())
    assert made["hosts"] == ["127.0.0.1"] and made["state"]["cookies"] == []


@pytest.mark.chromium
async def test_two_sessions_and_a_fetch_on_one_profile(app, data_home, short_tmp):
    """A fetch uses the profile as last saved; each session writes only what it changed, over the file as
    it is then, so a session that changed nothing never undoes another's refresh; a session open when the
    daemon stops is written back."""
    first = app.login("ann")
    save_profile("club", first)
    async with running_daemon(short_tmp / "a.sock") as h:
        a, b = Browser(await h.client(), "a"), Browser(await h.client(), "b")
        await b.ok("open", url=app.url("/members"), profile="club")
        await a.ok("open", url=app.url("/refresh"), profile="club")  # the server kills `first`
        second = next(t for t in app.sessions if t != first)
        during = await h.fetch(app.url(), profile="club")
        assert "login_wall" in during["flags"]  # the file still holds `first`, which the server ended
        assert ("profile club did not get past the sign-in at 127.0.0.1: its login may have expired or been "
                "signed out") in " ".join(during["notes"])
        saved = await a.ok("save")
        assert saved["notes"] == ["saved the session's cookies to profile 'club'; a fetch with that profile "
                                  "uses them now"]
        assert sid_of(data_home, "club") == second
        assert member_page(await h.fetch(app.url(), profile="club", fresh=True))
        await b.ok("close")  # b never changed sid: `second` stays
        assert sid_of(data_home, "club") == second
        assert (await b("save"))["code"] == "no_such_tab"
        await a.ok("nav", to="reload")  # /refresh again: a third token, written when the daemon stops
        third = next(t for t in app.sessions if t not in (first, second))
    assert sid_of(data_home, "club") == third


@pytest.mark.chromium
async def test_a_session_keeps_the_profile_it_started_with(app, data_home, daemon):
    save_profile("club", app.login("ann"))
    b = Browser(await daemon.client())
    await b.ok("open", url=app.url("/whoami"))
    r = await b("open", url=app.url(), profile="club")
    assert r["code"] == "bad_request" and r["message"] == (
        "browse session 's1' was started without a profile; a session keeps the profile it started with: close "
        "it first, or use another session")
    assert (await b("save"))["code"] == "bad_request"


@pytest.mark.chromium
async def test_local_storage_goes_in_and_comes_back(app, data_home, daemon):
    """The /store page shows what localStorage held for its origin, then sets its own greeting."""
    origin = app.url("").rstrip("/")
    other = app.url("", host="127.0.0.2").rstrip("/")
    profile = Profile(name="club", hosts=["127.0.0.1"], state=StorageState(origins=[
        OriginState(origin=origin, localStorage=[LocalStorageItem("greeting", "hi from the profile")]),
        OriginState(origin=other, localStorage=[LocalStorageItem("greeting", "not for this host")])]))
    ProfileStore().save(profile)
    fetched = await daemon.fetch(app.url("/store"), profile="club", raw=True)
    assert "hi from the profile" in fetched["content"] and "nothing" not in fetched["content"], fetched
    b = Browser(await daemon.client())
    page = await b.ok("open", url=app.url("/store"), profile="club")
    shown = (await b.ok("read"))["content"]
    assert "hi from the profile" in shown and "nothing" not in shown, page
    await b.ok("close")
    origins = {o["origin"]: o["localStorage"] for o in
               json.loads((data_home / "club.json").read_text())["state"]["origins"]}
    assert origins == {origin: [{"name": "greeting", "value": f"hello from 127.0.0.1:{app.port}"}],
                       other: [{"name": "greeting", "value": "not for this host"}]}


@pytest.mark.chromium
async def test_a_tab_that_held_a_profile_is_never_recycled(app, data_home, start_daemon):
    """A text body ends a fetch before any document commits, which lets an anonymous tab go back to the
    pool; a tab that held a profile's cookies is disposed of instead. (Chrome's tabs are the subject: the
    anonymous fetches load in Chrome whatever the suite's transport.)"""
    daemon = await start_daemon(make_config(transport="chrome"))
    chrome = daemon.daemon.chrome
    token = app.login("ann")
    save_profile("club", token)
    with trio.fail_after(20):
        # Until the pool is full and no tab waits to be disposed of: only a disposal wakes the refill, so
        # from here the pool changes only by what the fetches below take and give back, in order.
        while (len(chrome.idle_tabs) < daemon.daemon.config.browser.context_pool
               or chrome.spare is None
               or sum(t["attached"] for t in await daemon.page_targets()) != len(chrome.idle_tabs) + 1):
            await trio.sleep(0.05)  # (Chrome's own first tab is the one target not attached; the +1 is the
            # browse spare's page)
    assert (await daemon.fetch(app.url("/whoami?1")))["content"].strip() == "anonymous"
    with trio.fail_after(20):
        while not chrome.idle_tabs or chrome.idle_tabs[-1].uses != 1:
            await trio.sleep(0.02)  # the closer puts the recycled tab back after the answer
    recycled = chrome.idle_tabs[-1].target_id  # the next one handed out
    assert (await daemon.fetch(app.url("/whoami?2"), profile="club"))["content"].strip() == "ann"
    with trio.fail_after(20):
        while recycled in {t["targetId"] for t in await daemon.page_targets()}:
            await trio.sleep(0.05)  # disposed of, not put back
    assert recycled not in {t.target_id for t in chrome.idle_tabs}
    assert (await daemon.fetch(app.url("/whoami?3")))["content"].strip() == "anonymous"
    assert [t for _, path, t in app.hits if path == "/whoami"] == [None, token, None]


@pytest.mark.chromium
def test_the_cli_fetches_and_browses_with_a_profile_and_its_log_holds_no_value(app, data_home, short_tmp):
    token = app.login("ann")
    save_profile("club", token)
    cfg = short_tmp / "c.toml"
    cfg.write_text("[fetch]\nallow_private = true\n")
    path = short_tmp / "wf.sock"
    env = {"WEBFETCH_SOCKET": str(path)}  # $XDG_DATA_HOME (data_home) is inherited
    try:
        r = run_cli("fetch", "--config", str(cfg), "--profile", "club", app.url(), env=env)
        assert r.returncode == 0 and MEMBER_TEXT in r.stdout, r.stderr
        r = run_cli("fetch", "--config", str(cfg), "--profile", "club", app.url(host="127.0.0.2"), env=env)
        assert r.returncode == 1 and r.stderr.startswith("webfetch: profile_not_allowed: profile 'club' may be "
                                                         "used for 127.0.0.1, not for 127.0.0.2")
        r = run_cli("browse", "--config", str(cfg), "open", app.url("/refresh"), "--profile", "club", env=env)
        assert r.returncode == 0 and "Members — " in r.stdout, r.stderr  # the member page, not the sign-in
        r = run_cli("status", "--config", str(cfg), env=env)
        assert f"cli: 1 tab(s), {app.url('/refresh')}" in r.stdout and ", profile club\n" in r.stdout, r.stdout
        assert run_cli("browse", "--config", str(cfg), "save", env=env).returncode == 0
        refreshed = sid_of(data_home, "club")
        assert refreshed not in (None, token) and app.sessions[refreshed] == "ann"
        assert run_cli("browse", "--config", str(cfg), "close", env=env).returncode == 0
    finally:
        run_cli("stop", "--config", str(cfg), env=env)
    log = log_path_for(path).read_text()
    assert "op=fetch" in log and "op=browse" in log, log  # it logged the requests
    assert token not in log and refreshed not in log


# --- a profile's cookies stay on its hosts (issue 34, item 6) ---------------------------------------------

CORP = "app.corp.test"     # the host a profile is bound to
SIBLING = "evil.corp.test"  # another host of the same site, whose script a page of CORP loads


async def corp_resolver(host: str) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """corp.test and every name under it is this machine (the login app listens there); the rest as usual."""
    if host == "corp.test" or host.endswith(".corp.test"):
        return [ipaddress.ip_address("127.0.0.1")]
    return await resolve(host)


def corp_profile(token: str, hosts: list[str]) -> None:
    """A profile bound to `hosts` holding a session cookie for the parent domain, as a site that signs in
    once for all its hosts sets it."""
    ProfileStore().save(Profile(name="corp", hosts=hosts, state=StorageState(cookies=[
        Cookie(name="sid", value=token, domain=".corp.test", path="/", httpOnly=True)])))


def sent_to(app: LoginApp, host: str, path: str) -> list[str | None]:
    return [token for h, p, token in app.hits if (h, p) == (host, path)]


@pytest.mark.chromium
async def test_a_parent_domain_cookie_reaches_no_sibling_host_unless_the_parent_is_listed(app, data_home,
                                                                                          start_daemon):
    """Fetch and browse alike. (A fetch with a profile loads in Chrome whatever fetch.transport says: the
    http transport never holds a profile's cookies. Rendered always here, so that the page's script is
    asked for before the fetch answers.)"""
    token = app.login("ann")
    corp_profile(token, [CORP])
    daemon = await start_daemon(make_config(fetch=FetchConfig(allow_private=True, render="always"),
                                            browser=BrowserConfig(args=CHROME_LNA_OFF)), resolver=corp_resolver)
    page = app.url(f"/embeds?from={SIBLING}", host=CORP)
    r = await daemon.fetch(page, profile="corp")
    assert r["type"] == "result" and "Embeds" in r["content"], r
    b = Browser(await daemon.client())
    await b.ok("open", url=page, profile="corp")
    await b.ok("close")
    # the page was read and its sibling's script asked for, twice: never with the parent domain's cookie, and
    # the bound host did not get it either (a cookie the profile may not give is not given at all)
    assert sent_to(app, SIBLING, "/whoami") == [None, None], app.hits
    assert sent_to(app, CORP, "/embeds") == [None, None], app.hits
    # listed, the parent is the user's choice: the cookie goes wherever Chrome sends it
    corp_profile(token, [CORP, "corp.test"])
    assert (await daemon.fetch(page, profile="corp", fresh=True))["type"] == "result"
    assert sent_to(app, SIBLING, "/whoami")[2:] == [token] and sent_to(app, CORP, "/embeds")[2:] == [token]


@pytest.mark.chromium
async def test_a_write_back_refuses_cookies_for_domains_outside_the_binding(app, data_home, start_daemon):
    ProfileStore().save(Profile(name="corp", hosts=[CORP]))
    daemon = await start_daemon(make_config(browser=BrowserConfig(args=CHROME_LNA_OFF)), resolver=corp_resolver)
    # the page sets `theme` for the parent domain corp.test, and a host-only `lang`
    r = await daemon.fetch(app.url("/set-cookies?domain=corp.test", host=CORP), profile="corp")
    note = ("profile corp: 1 cookie the pages set for corp.test was not saved, as the profile is not bound to "
            "that domain (to keep such cookies: webfetch profile allow corp corp.test)")
    assert note in r["notes"], r
    saved = json.loads((data_home / "corp.json").read_text())["state"]["cookies"]
    assert [(c["name"], c["domain"]) for c in saved] == [("lang", CORP)]
    b = Browser(await daemon.client())
    await b.ok("open", url=app.url("/set-cookies?domain=corp.test&again=1", host=CORP), profile="corp")
    assert (await b.ok("save"))["notes"] == [
        "saved the session's cookies to profile 'corp'; a fetch with that profile uses them now", note]
    assert (await b.ok("close")).get("notes") is None  # told once: nothing changed since the save
    saved = json.loads((data_home / "corp.json").read_text())["state"]["cookies"]
    assert [(c["name"], c["domain"]) for c in saved] == [("lang", CORP)]
    assert "dark" not in json.dumps(r)  # a refused cookie's value is never shown


@pytest.mark.chromium
async def test_deleting_a_profile_deletes_the_pages_read_with_it(app, data_home, start_daemon, short_tmp, cache_home):
    token = app.login("ann")
    save_profile("club", token)
    daemon = await start_daemon()
    assert member_page(await daemon.fetch(app.url(), profile="club"))
    assert (await daemon.fetch(app.url("/whoami")))["type"] == "result"  # an anonymous page: it stays
    pages = cache_home / "webfetch" / "pages"
    assert len(daemon.daemon.cache) == 2 and len(list(pages.iterdir())) == 2
    env = {"WEBFETCH_SOCKET": str(short_tmp / "wf.sock")}  # the daemon above; $XDG_DATA_HOME is inherited
    done = await trio.to_thread.run_sync(lambda: run_cli("profile", "delete", "club", env=env))
    assert (done.returncode, done.stderr) == (0, "webfetch: profile club deleted, and its 1 cached page\n")
    assert len(daemon.daemon.cache) == 1 and len(list(pages.iterdir())) == 1
    # a profile of the same name made anew is not served the old one's page
    save_profile("club", "not-a-session")
    r = await daemon.fetch(app.url(), profile="club")
    assert r["type"] == "result" and "login_wall" in r["flags"], r


def test_with_no_daemon_deleting_a_profile_deletes_its_pages_on_disk(data_home, short_tmp, cache_home):
    disk = DiskCache(default_directory(), 1 << 20)
    for key in ("https://a.test/x\nprofile=club", "https://a.test/x", "https://a.test/y\nprofile=club2"):
        disk._write(key, StoredPage(key, 1.0, b"page"))
    save_profile("club", "t")
    env = {"WEBFETCH_SOCKET": str(short_tmp / "none.sock")}
    done = run_cli("profile", "delete", "club", env=env)
    assert (done.returncode, done.stderr) == (0, "webfetch: profile club deleted, and its 1 cached page\n")
    assert sorted(decode_entry(p.read_bytes()).key for p in default_directory().iterdir()) == [
        "https://a.test/x", "https://a.test/y\nprofile=club2"]
