"""The profile store (webfetch/profiles.py): names, files and their modes, the two import formats and
their errors, the host rule. Pure and fast: real files in a temporary directory."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys

import pytest

from webfetch.profiles import (
    Cookie,
    OriginState,
    Profile,
    ProfileError,
    ProfileNotAllowed,
    ProfileStore,
    StorageState,
    UnknownProfile,
    check_name,
    cookie_hosts,
    export_state,
    from_cdp,
    merge_cookies,
    normalize_host,
    parse_state_file,
    to_cdp,
)

STATE = {"cookies": [{"name": "sid", "value": "s3cr3t-value", "domain": ".example.com", "path": "/",
                      "expires": -1, "httpOnly": True, "secure": True, "sameSite": "Lax"}],
         "origins": [{"origin": "https://app.example.com", "localStorage": [{"name": "k", "value": "v"}]}]}


def test_a_saved_profile_is_0600_in_a_0700_directory_and_reads_back(tmp_path):
    store = ProfileStore(tmp_path / "profiles")
    state = parse_state_file(json.dumps(STATE).encode(), "state.json")
    store.save(Profile(name="work", hosts=cookie_hosts(state.cookies), state=state))
    path = tmp_path / "profiles" / "work.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    back = store.load("work")
    assert back.hosts == ["example.com"] and back.state == state
    assert json.loads(export_state(back)) == STATE, "Playwright's storageState, as it came in"
    assert store.names() == ["work"] and os.listdir(path.parent) == ["work.json"], "no temporary file left"


@pytest.mark.parametrize("name", ["", "..", "../x", "a/b", ".hidden", "x" * 65, "a b", "a..b"])
def test_a_name_that_is_not_a_plain_file_name_is_refused(name):
    with pytest.raises(ProfileError, match="is not a profile name"):
        check_name(name)


def test_an_unknown_profile_names_the_known_ones_and_how_to_make_one(tmp_path):
    store = ProfileStore(tmp_path)
    store.save(Profile(name="a", hosts=["a.test"]))
    with pytest.raises(UnknownProfile) as e:
        store.load("b")
    assert e.value.message == ("no profile named 'b' (profiles: a); make one with `webfetch profile login b URL` "
                               "or `webfetch profile import b FILE`")


def test_a_write_that_fails_leaves_the_old_profile_whole(tmp_path):
    """A disk that fills up mid-write, for real: the writer runs under a file-size limit (RLIMIT_FSIZE), so
    its write fails with EFBIG as it would with ENOSPC."""
    store = ProfileStore(tmp_path)
    store.save(Profile(name="a", hosts=["a.test"]))
    before = (tmp_path / "a.json").read_bytes()
    script = (
        "import resource, signal, sys\n"
        "from pathlib import Path\n"
        "from webfetch.profiles import Cookie, Profile, ProfileError, ProfileStore, StorageState\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))\n"
        "big = StorageState(cookies=[Cookie(name=f'c{i}', value='x' * 100, domain='a.test') for i in range(200)])\n"
        "try:\n"
        "    ProfileStore(Path(sys.argv[1])).save(Profile(name='a', hosts=['a.test'], state=big))\n"
        "except ProfileError as e:\n"
        "    print(e.message)\n")
    r = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.stdout.startswith("could not write profile 'a' to "), r
    assert r.stdout.endswith(": File too large; the profile is as it was\n"), r
    assert (tmp_path / "a.json").read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["a.json"], "the partial temporary file is removed"


def test_a_damaged_file_is_an_error_naming_the_profile_never_a_half_profile(tmp_path):
    store = ProfileStore(tmp_path)
    (tmp_path / "x.json").write_text('{"name": "x", "hosts": 3}')
    with pytest.raises(ProfileError, match=r"profile 'x' \(.*x.json\) is damaged .*hosts"):
        store.load("x")


def test_cookies_txt_imports_with_httponly_subdomains_and_session_cookies():
    text = ("# Netscape HTTP Cookie File\n"
            "#HttpOnly_.example.com\tTRUE\t/\tTRUE\t0\tsid\tabc\n"
            "wiki.example.org\tFALSE\t/w\tFALSE\t4102444800\tpref\tdark\n")
    state = parse_state_file(text.encode(), "cookies.txt")
    assert state.cookies == [
        Cookie(name="sid", value="abc", domain=".example.com", path="/", expires=-1, httpOnly=True, secure=True),
        Cookie(name="pref", value="dark", domain="wiki.example.org", path="/w", expires=4102444800.0)]
    assert cookie_hosts(state.cookies) == ["example.com", "wiki.example.org"]


@pytest.mark.parametrize(("text", "error"), [
    ("example.com\tTRUE\t/\tTRUE\t0\tsid\n", "cookies.txt, line 1: a cookies.txt line has 7 tab-separated fields"),
    ("# only a comment\n", "cookies.txt: no cookies in it"),
    ("example.com\tyes\t/\tTRUE\t0\ta\tb\n", "line 1: the 2nd and 4th fields are TRUE or FALSE"),
    ("example.com\tTRUE\t/\tTRUE\tsoon\ta\tb\n", "line 1: the expiry (5th field) is not a number"),
    ('{"cookies": [{"name": "a"}]}', "not a Playwright storage state: Object missing required field 'value' at "
                                     "cookies[0]"),
    ('{"cookies": ', "not valid JSON"),
])
def test_a_malformed_file_names_the_line_or_key(text, error):
    with pytest.raises(ProfileError) as e:
        parse_state_file(text.encode(), "cookies.txt")
    assert error in e.value.message
    assert "s3cr3t" not in e.value.message


def test_a_profile_goes_only_to_the_hosts_it_lists_and_says_how_to_allow_another():
    p = Profile(name="work", hosts=["example.com"])
    assert p.allows("example.com") and p.allows("wiki.example.com") and p.allows("WIKI.Example.com.")
    assert not p.allows("notexample.com") and not p.allows("example.com.evil.test")
    assert p.refuse("evil.test").message.endswith("To allow it: webfetch profile allow work evil.test")
    assert isinstance(p.refuse("evil.test"), ProfileNotAllowed)


@pytest.mark.parametrize("typed,listed", [
    ("GitHub.com", "github.com"), ("https://github.com/settings", "github.com"), (".example.com", "example.com"),
    ("example.com:8443", "example.com"), ("bücher.example", "xn--bcher-kva.example"), ("[::1]:8080", "::1")])
def test_a_host_is_listed_as_requests_name_it_whatever_way_it_was_typed(typed, listed):
    """Cookies are per host, not per port, and a request names a Unicode host in punycode: a profile
    listing `example.com:8443` or `bücher.example` as typed would never match one."""
    assert normalize_host(typed) == listed
    assert Profile(name="p", hosts=[normalize_host(typed)]).allows(listed)


def test_unicode_request_hosts_match_their_punycode_listing():
    assert Profile(name="p", hosts=["xn--bcher-kva.example"]).allows("shop.bücher.example")


@pytest.mark.parametrize("typed", ["a b", "user@example.com", "", "https://", "example.com:port"])
def test_what_is_not_a_host_is_refused_naming_it(typed):
    with pytest.raises(ProfileError, match="is not a host name; give hosts like github.com"):
        normalize_host(typed)


def test_summary_counts_and_never_shows_a_value():
    state = StorageState(cookies=[Cookie(name="a", value="s3cr3t", domain="x.test"),
                                  Cookie(name="old", value="v", domain="x.test", expires=1.0)])
    summary = Profile(name="p", hosts=["x.test"], state=state).summary()
    assert summary.cookies == 1 and "s3cr3t" not in repr(summary)


def test_cookies_round_trip_through_cdp_and_merge_as_a_browser_sets_them():
    c = Cookie(name="sid", value="v1", domain=".example.com", httpOnly=True, secure=True, sameSite="None")
    assert from_cdp({**to_cdp(c), "session": True, "expires": -1, "size": 5}) == c
    assert "expires" not in to_cdp(c)
    refreshed = Cookie(name="sid", value="v2", domain=".example.com", expires=4102444800.0)
    assert merge_cookies([c, Cookie(name="x", value="gone", domain="a.test", expires=1.0)], [refreshed]) == [refreshed]


def test_only_the_listed_hosts_cookies_and_storage_ever_go_into_a_browser():
    """Chrome sends a cookie it holds wherever a page's requests go: a profile whose file also holds a
    single sign-on provider's or a tracker's cookies (a login window picks them up) must not give them."""
    state = StorageState(
        cookies=[Cookie(name="sid", value="a", domain=".example.com"),
                 Cookie(name="w", value="b", domain="wiki.example.com"),
                 Cookie(name="sso", value="c", domain="login.idp.test"),
                 Cookie(name="old", value="d", domain="example.com", expires=1.0)],
        origins=[OriginState(origin="https://wiki.example.com"), OriginState(origin="https://idp.test")])
    usable = Profile(name="p", hosts=["example.com"], state=state).usable_state()
    assert [c.name for c in usable.cookies] == ["sid", "w"]
    assert [o.origin for o in usable.origins] == ["https://wiki.example.com"]


def test_a_parent_domain_cookie_goes_into_a_browser_only_when_the_parent_is_listed():
    """A `.corp.test` cookie in Chrome reaches every host under corp.test (a script from evil.corp.test on
    the page): a profile bound to app.corp.test gives its own host's and its subdomains' cookies only."""
    cookies = [Cookie(name="parent", value="1", domain=".corp.test"),
               Cookie(name="parent-host-only", value="2", domain="corp.test"),
               Cookie(name="own", value="3", domain="app.corp.test"),
               Cookie(name="own-domain", value="4", domain=".APP.corp.test."),
               Cookie(name="below", value="5", domain=".eu.app.corp.test"),
               Cookie(name="sibling", value="6", domain="evil.corp.test"),
               Cookie(name="lookalike", value="7", domain="xapp.corp.test")]
    bound = Profile(name="p", hosts=["app.corp.test"], state=StorageState(cookies=cookies))
    assert [c.name for c in bound.usable_state().cookies] == ["own", "own-domain", "below"]
    assert [c.name for c in bound.unbound(cookies)] == ["parent", "parent-host-only", "sibling", "lookalike"]
    listed = Profile(name="p", hosts=["app.corp.test", "corp.test"], state=StorageState(cookies=cookies))
    assert [c.name for c in listed.usable_state().cookies] == [c.name for c in cookies]


def test_a_profiled_page_and_an_anonymous_url_can_never_share_a_cache_key():
    from webfetch.pipeline import cache_key
    from webfetch.urls import AddressPolicy, likely_key

    work = Profile(name="work", hosts=["example.com"])
    profiled = cache_key(likely_key("https://example.com/x", AddressPolicy()), work)
    for crafted in ("https://example.com/x profile=work", "https://example.com/x\nprofile=work",
                    "https://example.com/x%0Aprofile=work"):
        assert cache_key(likely_key(crafted, AddressPolicy()), None) != profiled


def test_a_profile_command_waits_for_the_daemon_writing_the_same_profile(tmp_path):
    """The daemon writes a session's cookies back while `webfetch profile allow` changes the hosts: each
    reads, changes and writes the whole file, so one must wait for the other or its change is lost. Here
    the test is the daemon: it holds the profile's lock, reads it, lets the command start, then writes;
    both changes survive."""
    store = ProfileStore(tmp_path / "webfetch" / "profiles")  # where the command looks, given XDG_DATA_HOME
    store.save(Profile(name="club", hosts=["a.example"], state=StorageState(), created=1.0))
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path)}
    with store.locked():
        read = store.load("club")
        cli = subprocess.Popen([sys.executable, "-m", "webfetch", "profile", "allow", "club", "b.example"],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        with contextlib.suppress(subprocess.TimeoutExpired):
            cli.wait(timeout=5)  # without the lock the command is done by now, and the write below undoes it
        store.save(Profile(name="club", hosts=[*read.hosts, "c.example"], state=read.state, created=1.0))
    _, err = cli.communicate(timeout=60)
    assert cli.returncode == 0, err
    assert store.load("club").hosts == ["a.example", "b.example", "c.example"]
    assert stat.S_IMODE(os.stat(store.root / ".lock").st_mode) == 0o600
