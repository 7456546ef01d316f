"""Commands webfetch suggests are safe to paste (webfetch/trust/shell.py): a login wall's hint names the sign-in URL
the server chose, and a hostile one (`?next=$(touch pwned)`, backticks, `;`, a quote, a newline) is one
argument of the command, which runs nothing when a shell reads it."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from webfetch.fetch.pipeline import Page, login_hint
from webfetch.profiles.store import Profile
from webfetch.trust import shell

# what a server could put in a redirect: each would run a command if pasted unquoted
HOSTILE = "/login?next=$(touch${IFS}pwned1)&b=`touch${IFS}pwned2`;touch${IFS}pwned3&c='q'|touch${IFS}pwned4"


def commands(note: str) -> list[str]:
    """The `webfetch …` commands a note shows, each as the code span holds it."""
    return re.findall(r"`(webfetch [^`]*)`", note)


def pasted(command: str, where: Path) -> list[str]:
    """The arguments bash gives the command when it is pasted (its command word swapped for printf, so
    that nothing else runs), in `where`."""
    done = subprocess.run(["bash", "-c", "printf '%s\\0' " + command.split(" ", 1)[1]], cwd=where,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\0")[:-1]


@pytest.mark.parametrize("url", [
    "https://sso.example.org" + HOSTILE,
    "https://sso.example.org/login?next=a\nb&n=$(id)",  # a newline (no HTTP header carries one; a page's URL may)
    "https://sso.example.org/login?q=it's;id&p=%27",
])
def test_the_login_hint_quotes_the_servers_url_and_pasting_it_runs_nothing(url, tmp_path):
    page = Page(url="https://a.example/x", final_url="https://a.example/x", status=302, content_type=None,
                title=None, markdown="", extractor=None, truncated=False, redirect_url=url)
    for profile in (None, "work"):
        note = login_hint(page, profile)
        assert note is not None
        login = commands(note)[0]
        name = profile or "sso.example.org"
        encoded = shell.url_arg(url)
        assert shlex.split(login) == ["webfetch", "profile", "login", name, encoded]
        assert pasted(login, tmp_path) == ["profile", "login", name, encoded]
        # the headless way names the same URL: one argument too
        headless = commands(note)[1]
        new = ["--new-profile"] if profile is None else []
        assert shlex.split(headless) == ["webfetch", "browse", "open", encoded, "--profile", name, *new]
        assert pasted(headless, tmp_path) == ["browse", "open", encoded, "--profile", name, *new]
    assert list(tmp_path.iterdir()) == [], "nothing ran"
    assert "`" not in encoded and "\n" not in encoded, "the code span stays whole"


def test_a_plain_url_is_shown_as_it_is():
    page = Page(url="https://a.example/x", final_url="https://a.example/x", status=302, content_type=None,
                title=None, markdown="", extractor=None, truncated=False,
                redirect_url="https://sso.example.org/login?r=1&next=/x")
    assert commands(login_hint(page, None) or "")[0] == \
        "webfetch profile login sso.example.org 'https://sso.example.org/login?r=1&next=/x'"


async def test_a_hostile_location_header_gives_a_hint_that_runs_nothing(start_daemon, site, tmp_path):
    site.route("/members", lambda h: h.redirect(302, site.url(HOSTILE, "localhost")))
    h = await start_daemon()
    frame = await h.fetch(site.url("/members"))
    assert frame["kind"] == "redirect", frame
    target = frame["redirect_url"]
    assert "$(touch${IFS}pwned1)" in target and "`touch" in target, target  # the server's URL as it came
    [hint] = [n for n in frame["notes"] if "profile login" in n]
    login = commands(hint)[0]
    assert shlex.split(login) == ["webfetch", "profile", "login", "localhost", shell.url_arg(target)]
    assert pasted(login, tmp_path) == ["profile", "login", "localhost", shell.url_arg(target)]
    for other in commands(hint)[1:]:
        pasted(other, tmp_path)
    assert list(tmp_path.iterdir()) == [], "nothing ran"


def test_a_profiles_refusal_names_a_command_that_runs_nothing(tmp_path):
    profile = Profile(name="work", hosts=["example.com"])
    message = profile.refuse("a$(touch pwned).example").message
    command = message.split("To allow it: ", 1)[1]
    assert shlex.split(command) == ["webfetch", "profile", "allow", "work", "a$(touch pwned).example"]
    assert pasted(command, tmp_path) == ["profile", "allow", "work", "a$(touch pwned).example"]
    assert list(tmp_path.iterdir()) == []
