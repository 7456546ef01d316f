"""The one /proc reader of the tests and the bin/ scripts: which processes there are, which are whose
children, which are Chrome's, and what each costs (CPU, RSS, PSS). Every reader answers for a process that
is gone (or goes while it is read) with an empty or zero value instead of raising: the processes looked at
are a daemon's, which come and go as it works."""

from __future__ import annotations

import os
import time
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def stat(pid: int) -> list[str]:
    """/proc/PID/stat's fields after the command name (which may hold spaces and parentheses): [0] state,
    [1] ppid, [2] process group, [11:15] utime stime cutime cstime in clock ticks. Raises OSError once
    the process is gone."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def pids() -> list[int]:
    """Every process on the machine, for the questions the process tree cannot answer (a process group,
    a command line)."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def ppid(pid: int) -> int:
    """The parent of `pid`, -1 when it is gone."""
    try:
        return int(stat(pid)[1])
    except (OSError, IndexError, ValueError):
        return -1


def children(pid: int) -> list[int]:
    """The children of `pid` (zombies too, until reaped), from each of its threads' children list: no pass
    over all of /proc, which on a shared machine would make polling or 50 ms sampling itself a load."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for task in tasks:
        try:
            out += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
        except OSError:
            pass
    return out


def descendants(pid: int) -> list[int]:
    """Children, their children, and so on."""
    out, todo = [], [pid]
    while todo:
        found = children(todo.pop())
        out += found
        todo += found
    return out


def pid_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        return stat(pid)[0] != "Z"
    except (OSError, IndexError):
        return False


def reaped(pid: int) -> bool:
    """Gone from the process table: not running, and not left a zombie."""
    return not os.path.exists(f"/proc/{pid}")


def gone(pids: list[int], timeout: float = 10.0) -> bool:
    """True once none of `pids` is alive, False if one still is after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(pid_alive(p) for p in pids)


def cmdline(pid: int) -> list[bytes]:
    """The arguments a process was started with; [] once it is gone. Chrome's zygote children rewrite
    theirs as one string, so look inside the arguments rather than compare them."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def comm(pid: int) -> str:
    """The name a process gives itself (pi renames itself `pi`); "" once it is gone."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def environ(pid: int) -> dict[str, str]:
    """The environment a process was started with."""
    with open(f"/proc/{pid}/environ", "rb") as f:
        items = [kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv]
    return {k.decode(): v.decode(errors="replace") for k, v in items}


def is_chrome(pid: int) -> bool:
    """Whether the process runs a Chrome executable (browser, zygotes, renderers, utility processes, the
    crash handler): its executable's name holds "chrom"."""
    try:
        return "chrom" in Path(os.readlink(f"/proc/{pid}/exe")).name
    except OSError:
        return False


def renderers(pid: int) -> list[int]:
    """Chrome's renderer processes: those below its process `pid` started with --type=renderer."""
    return [p for p in descendants(pid) if any(b"--type=renderer" in arg for arg in cmdline(p))]


def parser_workers(pid: int) -> list[int]:
    """The parser worker processes (webfetch/workers.py) of the daemon in process `pid`: its children
    started by multiprocessing's spawn."""
    return [child for child in children(pid) if any(b"spawn_main" in arg for arg in cmdline(child))]


def devtools_url(daemon_pid: int) -> str | None:
    """The DevTools websocket of a daemon's browser, when its config gave Chrome a port of its own
    (daemon.DEVTOOLS_PORT_ARG in browser.args; webfetch itself opens none): Chrome writes its port and path
    to DevToolsActivePort in the profile named by --user-data-dir on its command line (the browser is the
    daemon's child that is Chrome)."""
    for pid in children(daemon_pid):
        if not is_chrome(pid):
            continue
        args = [a.decode(errors="replace") for a in cmdline(pid)]
        profile = next((a.split("=", 1)[1] for a in args if a.startswith("--user-data-dir=")), None)
        if profile and (Path(profile) / "DevToolsActivePort").exists():
            port, path = (Path(profile) / "DevToolsActivePort").read_text().split()[:2]
            return f"ws://127.0.0.1:{port}{path}"
    return None


def cpu_seconds(pid: int, *, reaped_children: bool = False) -> float:
    """CPU seconds (user + system) the process spent so far; with `reaped_children`, its children's that
    exited and were waited for too. 0.0 once it is gone."""
    try:
        fields = stat(pid)
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:15 if reaped_children else 13]) / CLOCK_TICKS


def status_field(pid: int, name: str) -> int:
    """A number from /proc/PID/status (VmRSS in kB, Threads); 0 once the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(name + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def pss_kb(pid: int) -> int:
    """Proportional set size: shared pages (Chrome's code, shared memory between its processes) are split
    among the processes that map them, so a sum over processes counts each page once, unlike RSS."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def open_fds(pid: int) -> int:
    """How many file descriptors the process holds open."""
    return len(os.listdir(f"/proc/{pid}/fd"))
