"""Worker processes for the parsers fed untrusted documents (HTML through lxml, PDFs through PDFium).

Why processes and not threads: these parsers are C code. lxml under two threads crashed a daemon once
(a general protection fault in libc's strlen, in an `extract_html` thread, while another extracted too;
trafilatura's own tracker has the same crash, adbar/trafilatura#840 and #925). The cause, reproduced: a
thread takes its libxml2 string dictionary from the first parser it uses, trafilatura parses with one
module-level parser, so all threads share one dictionary, which libxml2 does not lock, and parses, tree
copies and XPath add names to it at once (8 crashes in 77 short 4-thread runs over the corpora, none
single-threaded). PDFium is not thread-safe at all. A crash in a worker process costs that one page one
retry, never the daemon and every other client's request. And the GIL made two extraction threads no
faster than one (46.5 ms a page either way, 26-27 ms with two processes, measured side by side on corpus
pages), so processes also give the daemon its second core. A cancel kills the worker at once, where an
abandoned thread ran to its end.

trio-parallel (MIT/Apache-2.0) runs the processes: a trio-native pool (a cancel reaches the worker, a dead
worker is an exception, idle workers retire) where multiprocessing's own pools block the event loop.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
from collections.abc import Callable
from typing import TypeVar, cast

import trio
import trio_parallel

from ..errors import ExtractionFailed

log = logging.getLogger("webfetch.workers")

T = TypeVar("T")

# Jobs a worker process serves before it is replaced: whatever a parser keeps between documents (caches,
# fragmented heaps) cannot grow without bound in a daemon that runs for weeks.
JOBS_PER_WORKER = 500
# A worker that died on a page gets one more try in a fresh process: the crashes seen were races and heap
# damage, not a page that always crashes; a page that does gets its error after the second death.
ATTEMPTS = 2

_jobs_done = 0  # in a worker process: jobs served so far


def _retire() -> bool:
    """Runs in the worker after each job (trio-parallel's `retire` hook)."""
    global _jobs_done
    _jobs_done += 1
    return _jobs_done >= JOBS_PER_WORKER


# Signals sent to the daemon's whole process group (a terminal's Ctrl-C, `systemctl stop` with
# KillMode=control-group, `kill -- -PGID`) reach the workers too. They are the daemon's to act on: a worker
# that died of one first made the daemon's orderly shutdown fail ("Graceful shutdown failed: 2 nonzero
# exit codes") and exit 1, so systemd marked every stop a failure. The daemon ends its workers itself.
# (A worker still starting, before this hook runs, dies of such a signal; its job is tried again.)
DAEMON_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _start_worker(preload: Callable[[], object] | None) -> None:
    """Runs first in each worker process (trio-parallel's `init` hook): the daemon's signals ignored, then
    `preload` (the parsers' imports), so that a new worker's first job, not only the warmed ones', finds
    them loaded."""
    for signum in DAEMON_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    if preload is not None:
        preload()


def _ready() -> int:
    """A job that only proves the worker is up (its imports done), for warming the pool."""
    return os.getpid()


class Workers:
    """At most `count` worker processes, started spawn-fresh (a fork of the threaded daemon would copy its
    locks mid-use), kept while in use and for `idle_s` after, each replaced after JOBS_PER_WORKER jobs."""

    def __init__(self, count: int, idle_s: float = 300.0, preload: Callable[[], object] | None = None) -> None:
        """`preload` runs in each worker as it starts (importable, no arguments): the imports its jobs
        need, which the daemon's own process never makes (its start would wait for them)."""
        self.count = count
        self.idle_s = idle_s
        self.preload = preload
        self.limiter = trio.CapacityLimiter(count)
        self._context: trio_parallel.WorkerContext | None = None
        self._started = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The actor: owns the worker processes until cancelled, then ends them (a job still running is
        killed with its request)."""
        try:
            async with trio_parallel.open_worker_context(
                    idle_timeout=self.idle_s, init=functools.partial(_start_worker, self.preload), retire=_retire,
                    grace_period=2.0) as context:
                await self._serve(context, task_status)
        except trio_parallel.BrokenWorkerError as e:
            # A worker that had to be killed at shutdown (busy past the grace period, or killed from
            # outside): the daemon is stopping anyway, and its exit status must say it stopped cleanly.
            log.warning("a parser worker process did not end cleanly at shutdown: %s", e)

    async def _serve(self, context: trio_parallel.WorkerContext, task_status: trio.TaskStatus[None]) -> None:
        self._context = context
        self._started.set()
        task_status.started()
        try:
            # Warm the pool in the background: the first fetch should not pay for a Python start
            # and the parsers' imports (`preload`, ~0.4 s), and the daemon's readiness should not wait for it.
            async with trio.open_nursery() as nursery:
                for _ in range(self.count):
                    nursery.start_soon(self._warm)
            await trio.sleep_forever()
        finally:
            self._context = None

    async def _warm(self) -> None:
        try:
            await self.call(_ready)
        except Exception as e:  # a request that needs a worker reports why; the daemon serves on
            log.warning("could not start a parser worker process: %s", e)

    async def call(self, fn: Callable[..., T], *args: object) -> T:
        """`fn(*args)` in a worker process (fn importable, args and result picklable). A cancel kills the
        worker; a worker that dies is replaced and the job retried once, then ExtractionFailed."""
        await self._started.wait()
        context = self._context
        if context is None:
            raise trio.ClosedResourceError("the worker processes are shut down")
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return cast(T, await context.run_sync(fn, *args, kill_on_cancel=True, limiter=self.limiter))
            except trio_parallel.BrokenWorkerError as e:
                how = _how_it_died(e)
                log.warning("a worker process died running %s (%s), attempt %d of %d", _job_name(fn), how,
                            attempt, ATTEMPTS)
        raise ExtractionFailed(
            f"the parser crashed on this document twice ({how}); the daemon is fine and serves other "
            "requests, but this copy of the page cannot be read: try another copy of its content (a print "
            "or AMP version, the PDF)")


def _job_name(fn: Callable[..., object]) -> str:
    """The function's name, through a functools.partial (whose repr would carry the whole page)."""
    return str(getattr(fn, "__name__", None) or getattr(getattr(fn, "func", None), "__name__", "a job"))


def _how_it_died(e: trio_parallel.BrokenWorkerError) -> str:
    """'killed by SIGSEGV' or 'exit status 1', from the worker process the error carries."""
    proc = next((a for a in e.args if hasattr(a, "exitcode")), None)
    code = getattr(proc, "exitcode", None)
    if code is None:
        return "worker process lost"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"
