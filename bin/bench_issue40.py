"""Issue 40's browse and hit rows, a tree beside another in one run (interleaved, so a shared machine's load
falls on both), each with its limit and the machine's load average printed beside it:

- browse cold: a `webfetch serve` process started, then a browse `open` of the local app's sign-in page sent
  as soon as its socket answers; the time from the process's start to that `open`'s result (what an agent's
  first browse call waits for after starting the daemon), with the first `status` answer beside it;
- browse `snapshot` p50 on the warm daemon: the sign-in page, the dashboard (two frames), the 3 000-row table,
  and `find` over the table (each a new connection, as the CLI makes; times at the client);
- a cache hit on a new connection (lean client, bench_limit.lean_request) beside the socket limit, a bare
  trio server answering the same bytes (row 3l of bin/bench).

`.venv/bin/python bin/bench_issue40.py --against /tmp/base-tree --rounds 5` (the other tree: e.g.
`git archive main | tar -x -C /tmp/base-tree`; it runs with this tree's virtualenv)."""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bin"))

from bench_limit import SocketFloor, lean_request  # noqa: E402

from tests.support.browse_app import App  # noqa: E402

DEADLINE_S = 60.0


def load() -> str:
    return os.getloadavg().__repr__()


def request(sock: Path, obj: dict, timeout: float = DEADLINE_S) -> dict:
    """One request on a new connection: its terminal frame (ConnectionRefused/FileNotFound while the daemon
    is not listening yet)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(sock))
        s.sendall(json.dumps(obj).encode() + b"\n")
        buf = b""
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                raise RuntimeError(f"closed before an answer: {buf[-300:]!r}")
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                frame = json.loads(line)
                if frame.get("type") in ("result", "error"):
                    return frame


def ref(snapshot: str, start: str) -> str:
    line = next(x for x in snapshot.splitlines() if x.lstrip().startswith(start))
    found = re.search(r"ref=(e\d+)", line)
    assert found, line
    return found.group(1)


class Daemon:
    def __init__(self, tree: Path, tmp: Path) -> None:
        self.sock = tmp / "wf.sock"
        config = tmp / "config.toml"
        config.write_text('[fetch]\nallow_private = true\n[subagent]\ncommand = "/nonexistent/pi"\n')
        self.log = open(tmp / "daemon.log", "wb")  # noqa: SIM115
        self.started = time.perf_counter()
        level = os.environ.get("I40_LOG", "warning")
        self.proc = subprocess.Popen([sys.executable, "-m", "webfetch", "serve", "--socket", str(self.sock),
                                      "--config", str(config), "--log-level", level], stdout=self.log,
                                     stderr=self.log, cwd=tree,
                                     env={**os.environ, "PYTHONPATH": str(tree), "XDG_CACHE_HOME": str(tmp / "c")})

    def first(self, obj: dict) -> tuple[dict, float]:
        """`obj` sent as soon as the socket takes it: its answer, and the seconds since the process started."""
        while True:
            if time.perf_counter() - self.started > DEADLINE_S or self.proc.poll() is not None:
                raise SystemExit("the daemon did not answer")
            try:
                frame = request(self.sock, obj)
                return frame, time.perf_counter() - self.started
            except (FileNotFoundError, ConnectionRefusedError, ConnectionResetError):
                time.sleep(0.002)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


def one_round(tree: Path, app: App, times: dict[str, list[float]], snaps: int, cold_only: bool = False) -> None:
    with tempfile.TemporaryDirectory(prefix="wf-i40-") as tmp:
        d = Daemon(tree, Path(tmp))
        try:
            frame, t = d.first({"id": 1, "op": "browse", "session": "s", "action": "open", "url": app.url("/login")})
            assert frame["type"] == "result", frame
            times["browse cold: start to first open answered"].append(t)
            if cold_only:
                return
            page = frame["snapshot"]

            def act(**fields) -> dict:
                f = request(d.sock, {"id": 2, "op": "browse", "session": "s", **fields})
                assert f["type"] == "result", f
                return f

            def snap(row: str, **fields) -> None:
                for _ in range(snaps):
                    started = time.perf_counter()
                    act(action="snapshot", **fields)
                    times[row].append(time.perf_counter() - started)

            snap("snapshot p50: sign-in page")
            act(action="click", ref=ref(page, '- button "Accept cookies"'))
            act(action="fill", ref=ref(page, '- textbox "Username"'), text="ann")
            act(action="fill", ref=ref(page, '- textbox "Password"'), text="hunter2", submit=True)
            snap("snapshot p50: dashboard (2 frames)")
            act(action="open", url=app.url("/stock"))
            snap("snapshot p50: 3 000-row table")
            snap("snapshot p50: find on the table", find="Buy 2999")
            act(action="close")
            # the hit: one page fetched, then hits on new connections beside a bare trio server
            url = app.url("/later")
            line = json.dumps({"id": 1, "op": "fetch", "url": url}).encode() + b"\n"
            request(d.sock, {"id": 1, "op": "fetch", "url": url})
            hit, _ = lean_request(d.sock, line)
            assert hit["cached"], hit
            with SocketFloor(json.dumps(hit, ensure_ascii=False).encode() + b"\n") as bare:
                for _ in range(200):
                    times["cache hit, new connection"].append(lean_request(d.sock, line)[1])
                    times["limit: bare trio server"].append(bare.request(line))
        finally:
            d.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--snapshots", type=int, default=10, help="snapshots per page per round")
    ap.add_argument("--cold-only", action="store_true", help="only the cold start row (more rounds in the time)")
    args = ap.parse_args()
    trees = [("base", args.against.resolve()), ("change", ROOT)]
    times: dict[str, dict[str, list[float]]] = {label: defaultdict(list) for label, _ in trees}
    loads = []
    app = App()
    try:
        for n in range(args.rounds):
            for label, tree in trees:
                loads.append(os.getloadavg()[0])
                one_round(tree, app, times[label], args.snapshots, args.cold_only)
            print(f"round {n + 1}/{args.rounds} done, load {os.getloadavg()[0]:.2f}", flush=True)
    finally:
        app.stop()
    print(f"\nload average (1 min) during the run: {min(loads):.2f}-{max(loads):.2f}; {os.cpu_count()} cores")
    print(f"{'row (median / p95 ms)':44} {'base':>18} {'change':>18}")
    for row in times["base"]:
        cells = []
        for label, _ in trees:
            s = sorted(times[label][row])
            p95 = s[min(len(s) - 1, round(0.95 * (len(s) - 1)))]
            cells.append(f"{statistics.median(s) * 1000:8.3f} / {p95 * 1000:7.2f}")
        print(f"{row:44} {cells[0]:>18} {cells[1]:>18}", flush=True)
    # each round's pair ran back to back: their difference is less at the mercy of the load's swings
    cold = "browse cold: start to first open answered"
    pairs = [c - b for b, c in zip(times["base"][cold], times["change"][cold], strict=True)]
    print(f"{'browse cold, change - base, median of pairs':44} {statistics.median(pairs) * 1000:+18.0f} ms "
          f"({sum(p < 0 for p in pairs)} of {len(pairs)} pairs faster)", flush=True)


if __name__ == "__main__":
    main()
