"""Warm `pi --mode rpc` workers for the sub-agent: one process per (model, thinking level), kept between
requests, so a prompt costs a model call instead of pi's start (~1-2.5 s of module loading).

A worker serves one request at a time. Between requests it gets a fresh session (`new_session`), so no
request sees another's page. A request that ends badly (cancelled, timed out, the process gone) kills its
worker and starts a replacement; a worker is also retired after `subagent.worker_requests` requests and
after `subagent.worker_idle_s` unused. Processes alive at once (busy, idle and starting) stay within
`subagent.max_concurrent`: an idle worker of another model makes room for a new one.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from typing import Any

import msgspec
import trio

from . import shell
from ._trio import pop_lines
from .config import SubagentConfig
from .procs import ChildProcess

log = logging.getLogger("webfetch.subagent")

KILL_GRACE_S = 5.0
# pi loads in 0.4 s (new) to 2.5 s (0.73 on a busy 2-core machine); beyond this it is not coming up
START_TIMEOUT_S = 30.0

Key = tuple[str, str | None]  # (model, thinking level)

_decode = msgspec.json.Decoder().decode


def decode_event(line: bytes) -> dict[str, Any] | None:
    """One line of pi's JSON output as an event; None for a blank line or anything pi printed that is not
    an event (both modes print one JSON object per line)."""
    line = line.strip()
    if not line:
        return None
    try:
        event = _decode(line)
    except msgspec.DecodeError:
        return None
    return event if isinstance(event, dict) else None


class WorkerFailed(Exception):
    """A worker could not be started or stopped answering; the message says why, in one line."""


class Worker:
    """One `pi --mode rpc` process and the unread part of its output."""

    def __init__(self, key: Key, proc: ChildProcess) -> None:
        self.key = key
        self.proc = proc
        self.requests = 0       # requests it has served: it is retired after subagent.worker_requests
        self._buf = bytearray()
        self._commands = 0
        self.taken = trio.Event()  # set when an idle worker is handed out (ends its idle timer)
        self.ready = trio.Event()  # set when its session reset is over, whichever way it went

    async def send(self, command: dict[str, Any]) -> str:
        """Write one command; its id, which the matching response carries."""
        assert self.proc.stdin is not None
        self._commands += 1
        cid = f"w{self._commands}"
        try:
            await self.proc.stdin.send_all(msgspec.json.encode({"id": cid, **command}) + b"\n")
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
            raise WorkerFailed(f"the sub-agent process is gone ({type(e).__name__})") from None
        return cid

    async def next_event(self) -> dict[str, Any] | None:
        """The next JSON object pi printed; None once its output ends (the process exited)."""
        assert self.proc.stdout is not None
        while True:
            for line in pop_lines(self._buf):
                event = decode_event(line)
                if event is not None:
                    return event
            try:
                data = await self.proc.stdout.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                return None
            self._buf += data

    async def command(self, command: dict[str, Any]) -> dict[str, Any]:
        """Send a command and wait for its response (events in between are dropped: no run is going on)."""
        cid = await self.send(command)
        while True:
            event = await self.next_event()
            if event is None:
                raise WorkerFailed(f"the sub-agent process exited (code {self.proc.poll()}) instead of answering "
                                   f"{command['type']}")
            if event.get("type") == "response" and event.get("id") == cid:
                if not event.get("success"):
                    raise WorkerFailed(f"the sub-agent refused {command['type']}: "
                                       f"{' '.join(str(event.get('error') or 'no reason given').split())[:200]}")
                return event


class WorkerPool:
    """Idle workers by key, and the processes counted against `max_concurrent`. Owned by the Subagent
    actor: `reaper` is its nursery, where workers are stopped, reset and replaced off the request's path."""

    def __init__(self, command: str, config: SubagentConfig, system_prompt: str, *, cwd: str,
                 env: dict[str, str], reaper: trio.Nursery) -> None:
        self.command = command
        self.config = config
        self.system_prompt = system_prompt
        self.cwd = cwd
        self.env = env
        self.reaper = reaper
        self.idle: dict[Key, list[Worker]] = {}
        self.resetting: dict[Key, list[Worker]] = {}
        self.live = 0           # processes alive or starting: busy + idle + replacements
        self.started = 0        # processes started so far (tests and the bench count them)

    def args(self, key: Key) -> list[str]:
        model, thinking = key
        args = [self.command, "--mode", "rpc", "--no-session", "--no-tools", "--no-extensions", "--no-skills",
                "--no-prompt-templates", "--no-context-files", "--offline", "--model", model]
        if thinking:
            args += ["--thinking", thinking]
        return args + ["--system-prompt", self.system_prompt]

    async def take(self, key: Key) -> Worker:
        """An idle worker for `key`, or a new one. WorkerFailed when none can be started."""
        while True:
            idle = self.idle.get(key)
            if idle:
                worker = idle.pop()
                worker.taken.set()
                return worker
            resetting = self.resetting.get(key)
            if not resetting:
                break
            # one is getting its fresh session (milliseconds): better than starting a process
            await resetting[0].ready.wait()
        await self._make_room()
        return await self._start(key)

    async def _make_room(self) -> None:
        """Retire idle workers (of other models: this one's has none idle) while a new process would exceed
        the cap; the longest idle of a model goes first."""
        while self.live >= self.config.max_concurrent:
            oldest = next((workers for workers in self.idle.values() if workers), None)
            if oldest is not None:
                worker = oldest.pop(0)
                worker.taken.set()
                self._stop(worker)
                continue
            resetting = next((workers for workers in self.resetting.values() if workers), None)
            if resetting is None:
                return  # only replacements starting: they count, but a request must not wait on them
            await resetting[0].ready.wait()

    async def _start(self, key: Key) -> Worker:
        try:
            proc = ChildProcess(self.args(key), pipes=True, cwd=self.cwd, stderr=subprocess.DEVNULL, env=self.env)
        except OSError as e:
            raise WorkerFailed(f"cannot start the sub-agent `{shell.command(self.command)}`: {e.strerror}") from None
        self.live += 1
        self.started += 1
        worker = Worker(key, proc)
        ok = False
        try:
            with trio.move_on_after(START_TIMEOUT_S) as waited:
                # Retry off: a failing model must fail in seconds, not after pi's retry loop. rpc mode has
                # the one switch old (0.73) and new pi both understand; it also proves the worker is up.
                await worker.command({"type": "set_auto_retry", "enabled": False})
                ok = True
            if waited.cancelled_caught:
                raise WorkerFailed(f"the sub-agent did not start within {START_TIMEOUT_S:g} s")
            return worker
        finally:
            if not ok:
                self._stop(worker)

    def give_back(self, worker: Worker) -> None:
        """A request is done with `worker`: reset its session and keep it, or retire it once it has served
        its share."""
        worker.requests += 1
        if worker.requests >= self.config.worker_requests:
            self._stop(worker)
        else:
            worker.ready = trio.Event()
            self.resetting.setdefault(worker.key, []).append(worker)
            self.reaper.start_soon(self._reset, worker)

    def discard(self, worker: Worker, *, replace: bool = True) -> None:
        """The request ended in the middle of a run: the process goes and a fresh one takes its place."""
        self._stop(worker)
        if replace and self.live < self.config.max_concurrent:
            self.reaper.start_soon(self._replace, worker.key)

    async def _reset(self, worker: Worker) -> None:
        try:
            with trio.fail_after(START_TIMEOUT_S):
                await worker.command({"type": "new_session"})
        except (WorkerFailed, trio.TooSlowError) as e:
            log.info("retiring a sub-agent worker that failed to reset: %s", e)
            self._stop(worker)
            worker.ready.set()
            return
        except trio.Cancelled:  # the daemon is stopping
            self._stop(worker)
            raise
        finally:
            self.resetting[worker.key].remove(worker)
        await self._keep_idle(worker)

    async def _replace(self, key: Key) -> None:
        try:
            worker = await self._start(key)
        except WorkerFailed as e:
            log.info("no replacement sub-agent worker for %s: %s", key[0], e)
            return
        await self._keep_idle(worker)

    async def _keep_idle(self, worker: Worker) -> None:
        worker.taken = trio.Event()
        self.idle.setdefault(worker.key, []).append(worker)
        worker.ready.set()  # after it is idle: a request waiting on its reset finds it there
        with trio.move_on_after(self.config.worker_idle_s):
            await worker.taken.wait()
            return
        # unused for worker_idle_s: its memory (~150 MB) is worth more than its warmth
        workers = self.idle.get(worker.key, [])
        if worker in workers:
            workers.remove(worker)
            self._stop(worker)

    def _stop(self, worker: Worker) -> None:
        self.live -= 1
        try:
            self.reaper.start_soon(worker.proc.aclose, KILL_GRACE_S)
        except RuntimeError:  # the actor's nursery has closed: no waiting any more, just the signal
            try:
                os.killpg(worker.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def close_all(self) -> None:
        for workers in self.idle.values():
            for worker in workers:
                worker.taken.set()
                self._stop(worker)
        self.idle.clear()
