"""The CLI says what a request waits on the person for, on stderr, when its output is not a terminal either:
a script or a log otherwise shows a command standing still for minutes with no word of why (real processes:
a daemon, the CLI, and a "browser" whose DevTools handshake waits for the person's approval)."""

import socket
import threading
from collections.abc import Iterator

import pytest

from .support.client import run_cli
from .support.daemon import ServedDaemon


@pytest.fixture
def waiting_browser() -> Iterator[int]:
    """A port that accepts a DevTools connection and answers nothing: Chrome 144+ asking the person."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for s in [*held, listener]:
            s.close()


@pytest.fixture
def daemon(short_tmp, waiting_browser) -> Iterator[ServedDaemon]:
    d = ServedDaemon(short_tmp, f'[user_browser]\nendpoint = "ws://127.0.0.1:{waiting_browser}/devtools/browser/w"\n'
                                'hosts = ["docs.example"]\n[browse]\nnav_timeout_s = 3\n')
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
    ("fetch", "https://docs.example/", "--user-browser", "--timeout", "3"),
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
