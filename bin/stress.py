"""webfetch stress run (not part of the test suite): many concurrent clients, a mix of requests, optional
Chrome kills, against a real daemon serving pages from 127.0.0.1; then the same load again, to compare
resources after each run. Prints a report; `--json` also writes the figures to a file."""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time
import urllib.request
from collections import Counter, defaultdict
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import procs  # noqa: E402
from tests.support.client import LineClient  # noqa: E402
from tests.support.daemon import DEVTOOLS_PORT_ARG, ServedDaemon  # noqa: E402
from tests.support.fake_llm import FakeLLM  # noqa: E402
from tests.support.site import ARTICLE_TEXT, Site  # noqa: E402

PI = ROOT / "tests" / "node" / "node_modules" / ".bin" / "pi"
ANSWER = "The article is about structured concurrency."
# What each kind may end with; anything else counts as incorrect.
EXPECTED = {"hit": {"result"}, "cold": {"result"}, "prompt": {"result"}, "cancel": {"cancelled", "result"},
            "disconnect": {None}}


def start_daemon(tmp: Path, llm: FakeLLM, cache_kb: int | None = None) -> ServedDaemon:
    """A daemon whose sub-agent is the real pi answered by `llm`; not yet ready."""
    agent = tmp / "agent"
    agent.mkdir()
    (agent / "models.json").write_text(json.dumps(llm.models_json()))
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(agent), "TMPDIR": str(tmp)}
    # a DevTools port of its Chrome's own: the leak check counts Chrome's page targets from outside
    return ServedDaemon(tmp, f"[fetch]\nallow_private = true\ntimeout_s = 20\n"
                             f"[browser]\nargs = [{json.dumps(DEVTOOLS_PORT_ARG)}]\n[subagent]\n"
                             f"command = {json.dumps(str(PI))}\ntimeout_s = 60\n"
                             + (f"[cache]\nmax_bytes = {cache_kb * 1024}\n" if cache_kb else ""), env)


async def page_targets(port: int | None) -> int:
    if port is None:
        return -1

    def get() -> list:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            return json.load(r)
    return sum(1 for t in await trio.to_thread.run_sync(get) if t.get("type") == "page")


async def request(daemon: ServedDaemon, body: dict, deadline_s: float) -> dict | None:
    c = await LineClient.connect(daemon.sock)
    try:
        with trio.fail_after(deadline_s):
            return await c.request({"id": 1, **body})
    finally:
        await c.aclose()


async def status(daemon: ServedDaemon) -> dict:
    return await request(daemon, {"op": "status"}, 30)


async def one(daemon: ServedDaemon, site: Site, kind: str, n: int, rng: random.Random, deadline_s: float):
    """Run one request of `kind`; (kind, outcome, seconds, correct)."""
    started = time.monotonic()
    outcome, correct = None, False
    c = await LineClient.connect(daemon.sock)
    try:
        if kind == "hit":
            body = {"op": "fetch", "url": site.url(f"/article?warm={n % 20}")}
        elif kind == "cold":
            body = {"op": "fetch", "url": site.url(f"/article?cold={n}-{rng.random()}"), "timeout_s": 60}
        elif kind == "prompt":
            body = {"op": "fetch", "url": site.url(f"/article?warm={n % 20}"), "prompt": "What is it about?",
                    "model": "fake/fake-1"}
        else:  # cancel / disconnect: a page that holds its answer, given up on after a random moment
            body = {"op": "fetch", "url": site.url(f"/slow-article?x={n}-{rng.random()}")}
        await c.send({"id": 1, **body})
        if kind == "disconnect":
            await trio.sleep(rng.uniform(0.01, 0.5))
            await c.aclose()
            return kind, None, time.monotonic() - started, True
        if kind == "cancel":
            await trio.sleep(rng.uniform(0.01, 0.5))
            await c.send({"id": 2, "op": "cancel", "target": 1})
        with trio.fail_after(deadline_s):
            frame = await c.terminal(1)
        outcome = frame.get("code") if frame["type"] == "error" else "result"
        if kind in ("hit", "cold") and outcome == "result":
            correct = ARTICLE_TEXT[0] in frame["content"]
        elif kind == "prompt" and outcome == "result":
            correct = frame["kind"] == "answer" and frame["content"].strip() == ANSWER
        else:
            correct = outcome in EXPECTED[kind]
    except trio.TooSlowError:
        outcome = "HUNG"
    except (OSError, trio.BrokenResourceError) as e:
        outcome = f"connection:{type(e).__name__}"
    finally:
        await c.aclose()
    return kind, outcome, time.monotonic() - started, correct


async def load(daemon: ServedDaemon, site: Site, args, rng: random.Random, kill_chrome: bool) -> dict:
    mix = [("hit", args.hits), ("cold", args.cold), ("prompt", args.prompts), ("cancel", args.cancels),
           ("disconnect", args.disconnects)]
    kinds = [k for k, share in mix for _ in range(round(share * args.requests))]
    kinds += ["hit"] * (args.requests - len(kinds))
    rng.shuffle(kinds)
    del kinds[args.requests:]  # rounding the shares may give one or two too many
    queue = list(enumerate(kinds))
    results: list[tuple] = []
    peak = {"daemon_rss_kb": 0, "chrome_rss_kb": 0, "chrome_processes": 0, "cache_bytes": 0}
    kills = []

    async def client() -> None:
        while queue:
            n, kind = queue.pop()
            results.append(await one(daemon, site, kind, n, rng, args.deadline))
            await trio.sleep(rng.uniform(*args.think))  # an agent reads what it got before asking again

    async def sample(done: trio.Event) -> None:
        while not done.is_set():
            pids = daemon.chrome_pids()
            peak["daemon_rss_kb"] = max(peak["daemon_rss_kb"], procs.status_field(daemon.proc.pid, "VmRSS"))
            peak["chrome_rss_kb"] = max(peak["chrome_rss_kb"], sum(procs.status_field(p, "VmRSS") for p in pids))
            peak["chrome_processes"] = max(peak["chrome_processes"], len(pids))
            if args.cache_kb:  # the byte bound must hold while the load runs, not only afterwards
                with trio.move_on_after(5):
                    peak["cache_bytes"] = max(peak["cache_bytes"], (await status(daemon))["cache"]["bytes"])
            await trio.sleep(0.2)

    async def killer(done: trio.Event) -> None:
        while not done.is_set():
            await trio.sleep(rng.uniform(3, 8))
            pid = daemon.browser_pid()
            if pid is not None and not done.is_set():
                os.kill(pid, signal.SIGKILL)
                kills.append(time.monotonic())

    started = time.monotonic()
    done = trio.Event()
    async with trio.open_nursery() as outer:
        outer.start_soon(sample, done)
        if kill_chrome:
            outer.start_soon(killer, done)
        async with trio.open_nursery() as clients:
            for _ in range(args.clients):
                clients.start_soon(client)
        done.set()
    return {"results": results, "peak": peak, "seconds": time.monotonic() - started, "chrome_kills": len(kills)}


async def idle_snapshot(daemon: ServedDaemon) -> dict:
    await trio.sleep(3)  # closer task, pool refill, reaped processes
    s = await status(daemon)
    return {"daemon_rss_kb": procs.status_field(daemon.proc.pid, "VmRSS"), "fds": procs.open_fds(daemon.proc.pid),
            "children": len(procs.descendants(daemon.proc.pid)) - len(daemon.chrome_pids()),
            "chrome_processes": len(daemon.chrome_pids()), "page_targets": await page_targets(daemon.devtools_port()),
            "in_flight": s["requests"]["in_flight"], "cache_bytes": s["cache"]["bytes"],
            "cache_entries": s["cache"]["entries"]}


def percentiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        v = values[0] if values else float("nan")
        return v, v, v
    q = statistics.quantiles(values, n=100, method="inclusive")
    return q[49], q[94], q[98]


def report(name: str, run: dict) -> dict:
    by_kind: dict[str, list] = defaultdict(list)
    for kind, outcome, seconds, correct in run["results"]:
        by_kind[kind].append((outcome, seconds, correct))
    total = len(run["results"])
    correct = sum(1 for r in run["results"] if r[3])
    outcomes = Counter(r[1] for r in run["results"] if r[1] not in ("result", None))
    print(f"\n== {name}: {total} requests in {run['seconds']:.0f} s, {correct} correct ({100 * correct / total:.1f} %)"
          + (f", Chrome killed {run['chrome_kills']} times" if run["chrome_kills"] else ""))
    print(f"   errors by code: {dict(outcomes) or 'none'}")
    print("   kind        n    p50 ms   p95 ms   p99 ms   correct")
    figures = {}
    for kind in ("hit", "cold", "prompt", "cancel", "disconnect"):
        rows = by_kind.get(kind, [])
        if not rows:
            continue
        p50, p95, p99 = percentiles([s * 1000 for _, s, _ in rows])
        ok = sum(1 for *_, c in rows if c)
        figures[kind] = {"n": len(rows), "p50_ms": p50, "p95_ms": p95, "p99_ms": p99, "correct": ok}
        print(f"   {kind:<10} {len(rows):>4} {p50:>9.0f} {p95:>8.0f} {p99:>8.0f}   {ok}/{len(rows)}")
    p = run["peak"]
    print(f"   peak RSS: daemon {p['daemon_rss_kb'] / 1024:.0f} MB, Chrome {p['chrome_rss_kb'] / 1024:.0f} MB "
          f"({p['chrome_processes']} processes)"
          + (f"; peak cache {p['cache_bytes']} bytes" if p["cache_bytes"] else ""))
    return {"total": total, "correct": correct, "errors": dict(outcomes), "kinds": figures, "peak": p,
            "seconds": run["seconds"], "chrome_kills": run["chrome_kills"]}


async def main(args) -> int:
    rng = random.Random(args.seed)
    site = Site().start()
    site.stall.set()  # /slow-article answers at once unless a test holds it; the stress holds it
    llm = FakeLLM()
    llm.reply = lambda body: ANSWER
    tmp = Path(tempfile.mkdtemp(prefix="wf-stress-"))
    daemon = start_daemon(tmp, llm, args.cache_kb)
    out: dict = {"config": vars(args)}
    try:
        await trio.to_thread.run_sync(daemon.wait_ready, 60)
        site.stall.clear()  # from now on /slow-article holds its body: cancels and disconnects hit a live render
        for i in range(20):  # the pages cache hits and prompts use
            await request(daemon, {"op": "fetch", "url": site.url(f"/article?warm={i}")}, 60)
        baseline = await idle_snapshot(daemon)
        print(f"idle before: {baseline}")
        runs = []
        for i in range(2):
            run = await load(daemon, site, args, rng, kill_chrome=args.kill_chrome and i == 0)
            runs.append(report(f"run {i + 1}" + (" (with Chrome kills)" if args.kill_chrome and i == 0 else ""), run))
            runs[-1]["idle_after"] = await idle_snapshot(daemon)
            print(f"   idle after: {runs[-1]['idle_after']}")
        first, second = runs[0]["idle_after"]["daemon_rss_kb"], runs[1]["idle_after"]["daemon_rss_kb"]
        growth = (second - first) / first * 100
        print(f"\ndaemon RSS after run 1 {first / 1024:.0f} MB, after run 2 {second / 1024:.0f} MB: {growth:+.1f} %")
        out.update(baseline=baseline, runs=runs, rss_growth_pct=growth)
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=2))  # noqa: ASYNC240 - once, at the end
        hung = sum(r["errors"].get("HUNG", 0) for r in runs)
        over = args.cache_kb and any(r["peak"]["cache_bytes"] > args.cache_kb * 1024 for r in runs)
        if args.cache_kb:
            print(f"cache bound {args.cache_kb * 1024} bytes: " + ("EXCEEDED" if over else "held"))
        leaked = over or any(r["idle_after"]["page_targets"] > baseline["page_targets"] + 2 or
                     r["idle_after"]["children"] > baseline["children"] or r["idle_after"]["in_flight"]
                     for r in runs)
        return 1 if hung or leaked else 0
    finally:
        site.stall.set()
        daemon.stop()
        llm.stop()
        site.stop()
        shutil.rmtree(tmp, ignore_errors=True)  # the daemon's log, Chrome's profile, the fake pi home


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--hits", type=float, default=0.83, help="share of cache hits")
    ap.add_argument("--cold", type=float, default=0.03, help="share of cold fetches (unique URLs, 60 s deadline)")
    ap.add_argument("--prompts", type=float, default=0.01, help="share of prompts (fake model, real pi)")
    ap.add_argument("--cancels", type=float, default=0.065)
    ap.add_argument("--disconnects", type=float, default=0.065)
    ap.add_argument("--think", type=float, nargs=2, default=(1.0, 3.0), metavar=("MIN", "MAX"),
                    help="seconds each client waits between its requests")
    ap.add_argument("--deadline", type=float, default=90, help="a request still unanswered after this is HUNG")
    ap.add_argument("--kill-chrome", action="store_true", help="SIGKILL the browser every 3-8 s in the first run")
    ap.add_argument("--cache-kb", type=int, help="a small cache.max_bytes, to see the byte bound hold under load")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", help="also write the figures to this file")
    sys.exit(trio.run(main, ap.parse_args()))
