"""bin/bench's live-view rows (issue 37, item 8): what watching and recording a browse session cost.

On the local app of the tests (tests/support/browse_app.py), each phase in a new session of one `webfetch
serve` process: sign in, then click and fill by turns, every action timed at the client (socket round trip
included), p50 and p95:
  v1. no watcher, no recording (what every session pays: nothing new runs);
  v2. a watcher on the session's page: a websocket client of the view's `/session/NAME/live`, as the page's is;
  v3. the session recorded (`record: true`), no watcher.
Then what the frames cost while something moves: a page that paints every frame (the worst case, the
screencast's 5 frames a second), watched for `--animate-s` seconds: the frames' bytes a minute at the watcher,
and the CPU seconds a minute of the daemon and of its Chrome, against the same page unwatched; and the same
page recorded: the recording's bytes a minute (frames at most two a second). The machine's load average is
printed beside the rows: on a shared machine the p50s move with it.

Standalone: `.venv/bin/python bin/bench_view.py --rounds 10`."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bin"))

import trio  # noqa: E402
import trio_websocket  # noqa: E402
from bench_common import start_daemon  # noqa: E402

from tests.support import procs  # noqa: E402
from tests.support.browse_app import App  # noqa: E402
from tests.support.daemon import ServedDaemon  # noqa: E402
from tests.support.site import Site  # noqa: E402
from webfetch.frontends.client import Client  # noqa: E402

ANIMATED = """<!doctype html><html><head><title>Spinner</title></head><body>
<div id="n" style="font-size:80px">0</div>
<script>let n = 0; (function tick() { document.getElementById('n').textContent = ++n; requestAnimationFrame(tick); })();
</script></body></html>"""


def ref(snapshot: str, start: str) -> str:
    line = next(x for x in snapshot.splitlines() if x.lstrip().startswith(start))
    found = re.search(r"ref=(e\d+)", line)
    assert found is not None
    return found.group(1)


def act(c: Client, session: str, action: str, **fields: Any) -> tuple[dict, float]:
    started = time.perf_counter()
    frame = list(c.request("browse", session=session, action=action, **fields))[-1]
    if frame.get("type") != "result":
        raise SystemExit(f"browse {action} failed: {frame}")
    return frame, time.perf_counter() - started


class Watcher:
    """A websocket client of a session's page in a thread of its own: the bytes and frames it received."""

    def __init__(self, view_url: str, session: str) -> None:
        base, token = view_url.split("/?token=")
        self.url = base.replace("http://", "ws://") + f"/session/{session}/live"
        self.origin = base
        self.cookie = self._cookie(view_url)
        self.bytes = 0
        self.frames = 0
        self.ready = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: trio.run(self._run), daemon=True)

    @staticmethod
    def _cookie(view_url: str) -> str:
        """The door's cookie, as a browser gets it: the token URL answers with Set-Cookie and a redirect."""
        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args: Any) -> None:
                return None
        try:
            urllib.request.build_opener(NoRedirect).open(view_url)
        except urllib.error.HTTPError as e:
            return str(e.headers["set-cookie"]).split(";")[0]
        raise SystemExit("the view did not answer its token URL with a cookie")

    def __enter__(self) -> Watcher:
        self._thread.start()
        if not self.ready.wait(30):
            raise SystemExit("the watcher did not connect")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    async def _run(self) -> None:
        async with trio_websocket.open_websocket_url(
                self.url, extra_headers=[("Cookie", self.cookie), ("Origin", self.origin)],
                max_message_size=8 << 20) as ws:
            self.ready.set()
            while not self._stop.is_set():
                with trio.move_on_after(0.2):
                    message = await ws.get_message()
                    self.bytes += len(message)
                    if '"frame":' in message[:200]:
                        self.frames += 1


def actions(c: Client, app: App, session: str, rounds: int, record: bool = False) -> list[float]:
    page, _ = act(c, session, "open", url=app.url("/login"), **({"record": True} if record else {}))
    act(c, session, "click", ref=ref(page["snapshot"], '- button "Accept cookies"'))
    act(c, session, "fill", ref=ref(page["snapshot"], '- textbox "Username"'), text="ann")
    dash, _ = act(c, session, "fill", ref=ref(page["snapshot"], '- textbox "Password"'), text="hunter2", submit=True)
    size, nick = ref(dash["snapshot"], '- combobox "Size"'), ref(dash["snapshot"], '- textbox "Nickname"')
    times = []
    for i in range(rounds):
        times.append(act(c, session, "click", ref=size)[1])
        times.append(act(c, session, "fill", ref=nick, text=f"name {i}")[1])
    return times


def cpu(daemon: ServedDaemon) -> tuple[float, float]:
    """CPU seconds so far of the daemon (with its workers) and of its Chrome (renderers included)."""
    sides = [procs.cpu_seconds(daemon.proc.pid, reaped_children=True), 0.0]
    for child in procs.children(daemon.proc.pid):
        side = 1 if procs.is_chrome(child) else 0
        sides[side] += sum(procs.cpu_seconds(p, reaped_children=True) for p in [child, *procs.descendants(child)])
    return sides[0], sides[1]


def per_minute(value: float, seconds: float) -> float:
    return value * 60 / seconds


def view_rows(daemon: ServedDaemon, rounds: int, animate_s: float, state: Path) -> None:
    app, site = App(), Site().start()
    site.html("/spin", ANIMATED)
    try:
        with Client(daemon.sock, autostart=False) as c:
            view = list(c.request("view"))[-1]
            if view.get("type") != "result":
                raise SystemExit(f"view failed: {view}")
            plain = actions(c, app, "plain", rounds)
            act(c, "plain", "close")
            act(c, "w2", "open", url=app.url("/login"))  # the session is there for the watcher to join
            with Watcher(view["url"], "w2") as w:
                watched_times = actions(c, app, "w2", rounds)
                action_bytes, action_frames = w.bytes, w.frames
            act(c, "w2", "close")
            recorded = actions(c, app, "rec", rounds, record=True)
            act(c, "rec", "close")

            # the animated page: unwatched, watched, recorded
            act(c, "spin", "open", url=site.url("/spin"))
            before, t0 = cpu(daemon), time.monotonic()
            time.sleep(animate_s)
            idle = [b - a for a, b in zip(before, cpu(daemon), strict=True)]
            idle_s = time.monotonic() - t0
            with Watcher(view["url"], "spin") as w:
                before, t0 = cpu(daemon), time.monotonic()
                time.sleep(animate_s)
                busy = [b - a for a, b in zip(before, cpu(daemon), strict=True)]
                busy_s = time.monotonic() - t0
                spin_bytes, spin_frames = w.bytes, w.frames
            act(c, "spin", "close")
            act(c, "spinrec", "open", url=site.url("/spin"), record=True)
            time.sleep(animate_s)
            act(c, "spinrec", "close")
            time.sleep(1)  # the writer's last lines
            files = sorted((state / "webfetch" / "recordings").glob("spinrec-*.jsonl"))
            rec_bytes = files[-1].stat().st_size if files else 0
    finally:
        app.stop()
        site.stop()

    load = os.getloadavg()
    print(f"\nlive view (issue 37 item 8; {rounds * 2} actions a row, click and fill by turns; "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores)")
    print(f"{'row':58} {'p50':>9} {'p95':>9}")
    for name, times in (("v1. browse actions, no watcher, no recording", plain),
                        ("v2. ... a watcher on the session's page", watched_times),
                        ("v3. ... the session recorded, no watcher", recorded)):
        p50 = statistics.median(times)
        p95 = sorted(times)[max(0, int(len(times) * 0.95) - 1)]
        print(f"{name:58} {p50 * 1000:8.1f}ms {p95 * 1000:8.1f}ms")
    print(f"v4. frames to the watcher during v2: {action_frames} frames, "
          f"{per_minute(action_bytes, max(sum(watched_times), 1e-3)) / 1e6:.2f} MB a minute of actions")
    print(f"v5. a page painting every frame, watched {animate_s:g} s: {per_minute(spin_frames, busy_s):.0f} frames and "
          f"{per_minute(spin_bytes, busy_s) / 1e6:.2f} MB a minute; CPU a minute: daemon "
          f"{per_minute(busy[0], busy_s):.1f} s (unwatched {per_minute(idle[0], idle_s):.1f} s), Chrome "
          f"{per_minute(busy[1], busy_s):.1f} s (unwatched {per_minute(idle[1], idle_s):.1f} s)")
    print(f"v6. the same page recorded {animate_s:g} s: the recording {rec_bytes:,} bytes, "
          f"{per_minute(rec_bytes, animate_s) / 1e6:.2f} MB a minute")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=10, help="click+fill pairs per row (default 10)")
    ap.add_argument("--animate-s", type=float, default=10.0, help="seconds of the animated page per row")
    args = ap.parse_args()
    run(args.rounds, args.animate_s)


def run(rounds: int, animate_s: float) -> None:
    """The rows, on a daemon of their own (its recordings in a state directory of its own)."""
    tmp = Path(tempfile.mkdtemp(prefix="wf-bench-view-"))
    state = tmp / "state"
    daemon = start_daemon(tmp, env={**os.environ, "XDG_STATE_HOME": str(state), "XDG_CACHE_HOME": str(tmp / "c")})
    try:
        view_rows(daemon, rounds, animate_s, state)
    finally:
        daemon.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
