"""The CLI says what a request waits on the person for, on stderr, when its output is not a terminal either:
a script or a log otherwise shows a command standing still for minutes with no word of why (real processes:
a daemon, the CLI, and a "browser" whose DevTools handshake waits for the person's approval)."""

from collections.abc import Iterator

import pytest

from .support.client import run_cli
from .support.daemon import ServedDaemon
from .support.waiting_browser import user_browser_config, waiting_browser


@pytest.fixture
def daemon(short_tmp) -> Iterator[ServedDaemon]:
    with waiting_browser() as endpoint:
        d = ServedDaemon(short_tmp, user_browser_config(endpoint))
        try:
            d.wait_ready(60)
            yield d
        finally:
            d.proc.terminate()
            d.proc.wait(20)
            d.log.close()


@pytest.mark.chromium
@pytest.mark.parametrize("command", [
    ("browse", "open", "https://docs.example/", "--user-browser", "--session", "s"),
    ("fetch", "https://docs.example/", "--user-browser"),
], ids=["browse", "fetch"])
def test_a_wait_for_the_persons_approval_is_said_on_stderr_then_the_error(daemon, command):
    r = run_cli(*command, env={"WEBFETCH_SOCKET": str(daemon.sock), "WEBFETCH_CONFIG": str(daemon.tmp / "config.toml")})
    assert r.returncode == 1, r
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert lines[0] == ("webfetch: waiting for you: allow the connection in your browser (it asks once; webfetch "
                        "keeps the connection)"), r.stderr
    assert lines[1].startswith("webfetch: user_browser_unapproved: your browser has not allowed webfetch's "
                               "connection within 3 s"), r.stderr
