"""bin/bench's start and stop rows (issue 28, item 7): a `webfetch serve` process timed from its start to its
first `status` answer and to its browser ready, and from a stop (the `stop` op, or SIGTERM) to the moment the
daemon and every process of its tree are gone (reaped) and its socket removed.

`--against DIR` runs the same rows on another source tree (e.g. `git archive main | tar -x -C DIR`) with
this tree's virtualenv, interleaved with this tree's runs so both sides see the same machine load:
`.venv/bin/python bin/bench_lifecycle.py --against /tmp/main-tree --rounds 3`."""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support import procs  # noqa: E402

POLL_S = 0.005         # how often the first status is tried: the row's resolution
WARM_S = 1.5           # a daemon stopped right after its start would be stopped while it still starts
DEADLINE_S = 60.0


@dataclass
class Run:
    first_answer: float
    chrome_ready: float
    stop: float
    left: list[int] = field(default_factory=list)  # processes of its tree alive after the stop
    socket_left: bool = False
    files_left: list[str] = field(default_factory=list)  # in its TMPDIR


def _status(path: Path) -> dict | None:
    """One `status` on a new connection; None while nothing answers there."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(DEADLINE_S)
            s.connect(str(path))
            s.sendall(b'{"id":"b","op":"status"}\n')
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    return None
                buf += chunk
            frame: dict = json.loads(buf)
            return frame
    except (FileNotFoundError, ConnectionRefusedError, ConnectionResetError):
        return None


def _tail(log: Path) -> str:
    """The daemon's last words (its log goes with the temporary directory)."""
    return " | ".join(log.read_text(errors="replace").splitlines()[-5:]) or "its log is empty"


def _stop_op(path: Path) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(DEADLINE_S)
        s.connect(str(path))
        s.sendall(b'{"id":"b","op":"stop"}\n')
        s.recv(65536)


def lifecycle(tree: Path, tmp: Path, how: str) -> Run:
    """One daemon of `tree`'s source: started, waited for, stopped by `how` ("op" or "SIGTERM")."""
    sock = tmp / "wf.sock"
    temp = tmp / "tmp"  # the daemon's TMPDIR: what it leaves there is left behind
    temp.mkdir()
    config = tmp / "config.toml"
    config.write_text('[subagent]\ncommand = "/nonexistent/pi"\n')  # no pi probe competing for the CPU
    with open(tmp / "daemon.log", "wb") as log:
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "webfetch", "serve", "--socket", str(sock), "--config",
                                 str(config), "--log-level", "warning"], stdout=log, stderr=log, cwd=tree,
                                env={**os.environ, "PYTHONPATH": str(tree), "TMPDIR": str(temp)})
        try:
            frame = None
            while frame is None:
                if time.perf_counter() - started > DEADLINE_S or proc.poll() is not None:
                    raise SystemExit(f"the daemon of {tree} did not answer: {_tail(tmp / 'daemon.log')}")
                time.sleep(POLL_S)
                frame = _status(sock)
            first = time.perf_counter() - started
            while frame["browser"]["state"] != "ready":
                if time.perf_counter() - started > DEADLINE_S:
                    raise SystemExit(f"the browser of {tree}'s daemon was not ready: {frame['problems']} "
                                     f"{_tail(tmp / 'daemon.log')}")
                time.sleep(POLL_S)
                frame = _status(sock) or frame
            ready = time.perf_counter() - started
            time.sleep(WARM_S)
            tree_pids = procs.descendants(proc.pid)
            stopping = time.perf_counter()
            if how == "op":
                _stop_op(sock)
            else:
                proc.send_signal(signal.SIGTERM)
            proc.wait(DEADLINE_S)
            procs.gone(tree_pids, DEADLINE_S)
            stopped = time.perf_counter() - stopping
            return Run(first, ready, stopped, [p for p in tree_pids if procs.pid_alive(p)], sock.exists(),
                       sorted(p.name for p in temp.iterdir()))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def lifecycle_rows(trees: list[tuple[str, Path]], rounds: int) -> None:
    """The rows, each tree's runs interleaved with the others' (the load of a shared machine changes)."""
    runs: dict[tuple[str, str], list[Run]] = {}
    for _ in range(rounds):
        for how in ("op", "SIGTERM"):
            for label, tree in trees:
                with tempfile.TemporaryDirectory(prefix="webfetch-lifecycle-") as tmp:
                    runs.setdefault((label, how), []).append(lifecycle(tree, Path(tmp), how))
    print(f"\nstart and stop, {rounds} runs each, median (min-max) ms: first `status` answered after the "
          f"process starts; browser ready; stop to the daemon, its Chrome and its workers reaped")
    print(f"{'tree':10} {'stopped by':10} {'first answer':>20} {'Chrome ready':>20} {'stop':>20}  left behind")
    for (label, how), rs in runs.items():
        def cell(xs: list[float]) -> str:
            return f"{statistics.median(xs) * 1000:6.0f} ({min(xs) * 1000:4.0f}-{max(xs) * 1000:4.0f})"
        files = [f for r in rs for f in r.files_left]
        left = [f"{sum(len(r.left) for r in rs)} processes", f"{sum(r.socket_left for r in rs)} sockets",
                f"{len(files)} in TMPDIR (e.g. {files[0] if files else ''})"]
        left = [x for x in left if not x.startswith("0 ")]
        print(f"{label:10} {how:10} {cell([r.first_answer for r in rs]):>20} {cell([r.chrome_ready for r in rs]):>20} "
              f"{cell([r.stop for r in rs]):>20}  {', '.join(left) or 'nothing'}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", type=Path, help="another source tree to measure side by side (labelled by its name)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    trees = [("this", ROOT)] + ([(args.against.name, args.against.resolve())] if args.against else [])
    lifecycle_rows(trees, args.rounds)


if __name__ == "__main__":
    main()
