"""A "browser" whose DevTools handshake waits for the person's approval (as Chrome 144+ asks them): a loopback
port that accepts connections and answers nothing, for as long as the test runs."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def waiting_browser() -> Iterator[str]:
    """The ws:// endpoint of a browser that never says yes (for `user_browser.endpoint`)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"ws://127.0.0.1:{listener.getsockname()[1]}/devtools/browser/waiting"
    finally:
        stop.set()
        thread.join()
        for s in [*held, listener]:
            s.close()


def user_browser_config(endpoint: str, host: str = "docs.example", wait_s: int = 3) -> str:
    """TOML: the person's browser at `endpoint`, `host` listed, browse's and fetch's waits `wait_s`."""
    return (f'[user_browser]\nendpoint = "{endpoint}"\nhosts = ["{host}"]\n'
            f"[browse]\nnav_timeout_s = {wait_s}\n[fetch]\ntimeout_s = {wait_s}\n")
