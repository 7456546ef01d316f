"""The daemon: start order (actors, then the socket), request dispatch, signals, reload and idle exit."""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import signal
import socket
import stat
import time
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import trio
from msgspec.structs import replace

from . import PROTOCOL_VERSION, __version__, redact
from .browse import Browse
from .cache import Cache, read_with
from .chrome.browser import Chrome
from .chrome.user_browser import UserBrowser
from .config import (
    DEFAULTS,
    Config,
    ConfigSource,
    changed_keys,
    keep_running,
    load_config_and_source,
    needs_restart,
)
from .crawl.crawler import Crawler
from .disk_cache import DiskCache, default_directory
from .dns import Resolver
from .errors import BrowserUnavailable, ConfigError, ViewUnavailable, WebfetchError
from .fetch.batch import fetch_batch
from .fetch.in_chrome import FETCH_TAB
from .fetch.pipeline import Pipeline, memory_entry_bytes, page_size
from .parse.extractor import Extractor
from .profiles.use import ProfileUse
from .protocol import (
    BrowseRequest,
    BrowserStatus,
    CacheClearRequest,
    CacheClearResult,
    CacheStatus,
    CrawlRequest,
    DaemonInfo,
    FetchRequest,
    Frame,
    MapRequest,
    ReloadRequest,
    ReloadResult,
    ReportProgress,
    Request,
    RequestId,
    RequestsStatus,
    SearchRequest,
    SendFrame,
    StatusRequest,
    StatusResult,
    StopRequest,
    StopResult,
    SubagentStatus,
    UserBrowserStatus,
    ViewRequest,
    ViewResult,
)
from .search import Search
from .server import Server
from .subagent.agent import Subagent
from .systemd import ActivationError, Notifier, listen_socket
from .trust.socket_trust import UntrustedSocket, make_directory
from .urls import AddressPolicy, PolicyHolder
from .view.server import Mounted, View

log = logging.getLogger("webfetch.daemon")

SHUTDOWN_GRACE_S = 2.0


class DaemonError(Exception):
    """The daemon cannot start (socket in use, directory unsafe); the message says what to do."""


def bind_socket(path: Path) -> socket.socket:
    """A listening Unix socket at `path` (directory 0700 when made here; an existing one must be ours and
    writable by no one else, socket_trust.check_directory; socket 0600). A stale socket file left by a dead
    daemon is replaced; a live daemon's is not."""
    try:
        make_directory(path)  # socket_trust: the rule every client checks before it sends a byte
    except UntrustedSocket as e:
        raise DaemonError(e.for_daemon()) from None
    except NotADirectoryError as e:
        raise DaemonError(str(e)) from None
    if path.exists() or path.is_symlink():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise DaemonError(f"{path} exists and is not a socket; remove it or choose another --socket")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except OSError as e:
            if e.errno not in (errno.ECONNREFUSED, errno.ENOENT):
                raise DaemonError(f"cannot check the existing socket {path}: {e.strerror}") from None
            path.unlink(missing_ok=True)  # nobody listens: a dead daemon's leftover
        else:
            raise DaemonError(f"another webfetch daemon is already listening on {path}; use it, stop it "
                              f"first, or pass --socket to run a second one elsewhere")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # the socket is born 0600: no window in which others could connect
    try:
        sock.bind(str(path))
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(1024)  # 200 clients connecting at once must not be refused
    return sock


class Daemon:
    def __init__(self, config: Config, notifier: Notifier | None = None, resolver: Resolver | None = None, *,
                 source: ConfigSource = DEFAULTS, log_path: Path | None = None,
                 view_mounts: Sequence[Mounted] = ()) -> None:
        self.config = config
        self.notifier = notifier
        self.source = source
        self.log_path = log_path
        self.started = time.monotonic()
        self.started_at = datetime.now(UTC).isoformat(timespec="seconds")
        self.socket_path: str | None = None
        self.socket_activated = False
        self.exit_when_idle = False
        self._serving: trio.CancelScope | None = None
        self.needs_restart: list[str] = []  # what the file changes that a reload could not apply
        # One holder that everything applying the address policy reads at use, so a reload swaps it once.
        self.policy = PolicyHolder(AddressPolicy.from_config(config.fetch.allow_private, config.fetch.allow_hosts,
                                                             resolver))
        # browse sessions' policy: the same, and the loopback ports browse.allow_local lists
        self.browse_policy = PolicyHolder(self.policy.current.for_browse(config.browse.allow_local))
        self.chrome = Chrome(config.browser, self.policy, FETCH_TAB, browse_policy=self.browse_policy,
                             browse_spare=config.browse.enabled)
        self.cache: Cache[bytes] = Cache(config.cache.ttl_s, config.cache.sweep_s, config.cache.max_bytes,
                                        page_size, memory_entry_bytes(config.cache))
        # the pages the next daemon finds (cache.disk_max_bytes = 0: none), in the cache directory as the
        # daemon started with it
        self.disk = DiskCache(default_directory(), config.cache.disk_max_bytes, config.cache.sweep_s)
        self.extractor = Extractor(config.extract.worker_count(), config.extract.worker_idle_s)
        # their messages name the file this daemon read (a --config one too), not the default path
        self.subagent = Subagent(config.subagent, config_file=source.path)
        self.search = Search(config.search, config_file=source.path)
        # one for fetch and browse, whose per-profile lock keeps their writes to a profile apart
        self.profiles = ProfileUse()
        # the person's own browser ([user_browser]): one connection, made at the first request that needs it
        self.user_browser = UserBrowser(config.user_browser)
        self.pipeline = Pipeline(config, self.policy, self.chrome, self.cache, self.extractor, self.subagent,
                                 self.profiles, self.disk, self.user_browser)
        self.browse = Browse(config, self.chrome, self.extractor, self.browse_policy, self.profiles,
                             self.user_browser)
        self.crawler = Crawler(config, self.policy, self.pipeline, self.extractor, self._proxy_url)
        self.server = Server(self.handle, config.server.max_line_bytes)
        # the local web page (off unless view.enabled or the view op); `view_mounts`: parts the CLI hands in
        # (MCP over HTTP is a frontend, which the daemon cannot import)
        self.view = View(self, view_mounts)
        self.user_browser.view_port = lambda: self.view.port  # never reached by a page in the person's browser

    async def _proxy_url(self) -> str | None:
        """The address-policy proxy's URL for fetch's requests, once it listens (it starts within moments of
        the daemon: a crawl asked for before then waits for it); None when pages go without it."""
        proxy = self.chrome.proxy
        if proxy is None:
            return None
        await proxy.listening.wait()
        return proxy.url

    async def handle(self, req: Request, rid: RequestId, progress: ReportProgress, send: SendFrame) -> Frame:
        if isinstance(req, FetchRequest) and req.urls is not None:
            return replace(await fetch_batch(self.pipeline, req, rid, progress, send), id=rid)
        if isinstance(req, FetchRequest):
            return replace(await self.pipeline.fetch(req, progress), id=rid)
        if isinstance(req, BrowseRequest):
            return await self.browse.handle(req, rid, progress)
        if isinstance(req, StatusRequest):
            return self.status(rid)
        if isinstance(req, SearchRequest):
            return replace(await self.search.search(req, progress), id=rid)
        if isinstance(req, CrawlRequest):
            return replace(await self.crawler.crawl(req, progress, rid, send), id=rid)
        if isinstance(req, MapRequest):
            return replace(await self.crawler.map(req, progress), id=rid)
        if isinstance(req, StopRequest):
            return self.stop(rid)
        if isinstance(req, ReloadRequest):
            return replace(self.reload(), id=rid)
        if isinstance(req, CacheClearRequest):
            return await self.clear_cache(rid, req.profile)
        if isinstance(req, ViewRequest):
            return await self.open_view(rid)
        raise WebfetchError(f"unhandled request {type(req).__name__}")

    def stop(self, rid: RequestId) -> StopResult:
        """Stop serving as SIGTERM does; this request's answer goes out before the connections close."""
        log.info("stop requested by a client; shutting down")
        if self._serving is not None:
            self._serving.cancel()
        return StopResult(id=rid, pid=os.getpid(), in_flight=self.server.in_flight - 1,
                          browse_sessions=len(self.browse.sessions), socket_activated=self.socket_activated)

    async def clear_cache(self, rid: RequestId, profile: str | None = None) -> CacheClearResult:
        """Forget every page, in memory and on disk (loads under way still answer their callers, and are
        kept); with `profile`, the pages read with that profile (it was deleted: what its login showed goes
        with it; a load with it under way is not kept)."""
        if profile is not None:
            entries = self.cache.forget(read_with(profile))
            files, size = await self.disk.forget(read_with(profile))
            log.info("cache: %d pages of a deleted profile forgotten in memory, %d on disk", entries, files)
            return CacheClearResult(id=rid, entries=entries, disk_entries=files, disk_bytes=size)
        entries = len(self.cache)
        self.cache.clear()
        files, size = await self.disk.clear()
        log.info("cache cleared: %d pages in memory, %d on disk (%d bytes)", entries, files, size)
        return CacheClearResult(id=rid, entries=entries, disk_entries=files, disk_bytes=size)

    async def open_view(self, rid: RequestId) -> ViewResult:
        """The local web page's URL with its token; the front door opened first when it is closed."""
        try:
            started = await self.view.open()
        except OSError as e:
            raise ViewUnavailable(f"cannot open the view on loopback port {self.config.view.port}: {e.strerror or e}; "
                                f"free the port or set another view.port (0 picks one) and restart") from None
        url = self.view.new_url()
        assert url is not None and self.view.port is not None and self.view.token is not None
        if started:
            log.info("view: opened by a client on %s", ", ".join(self.view.addresses))
        return ViewResult(id=rid, url=url, port=self.view.port, addresses=self.view.addresses,
                          started=started, token_file=str(self.view.token.path))

    def reload(self) -> ReloadResult:
        """Read the config file again (the one the daemon started with; with none, the default path if it
        now exists) and apply what can change while running, at once and with no await, so each request
        sees the old config or the new one. A file that does not parse changes nothing: ConfigError."""
        try:
            config, source = load_config_and_source(self.source.path)
        except ConfigError as e:
            log.warning("reload: %s; still running the config it had", e.message)
            raise ConfigError(f"{e.message}; the daemon still runs the config it had") from None
        changed = changed_keys(self.config, config)
        restart = [k for k in changed if needs_restart(k)]
        applied = [k for k in changed if k not in restart]
        self._apply(keep_running(self.config, config, restart), {k.split(".")[0] for k in applied})
        self.source, self.needs_restart = source, restart
        log.info("reloaded %s: %s%s", source.path or "the defaults (no config file)",
                 f"applied {', '.join(applied)}" if applied else "nothing to apply",
                 f"; needs `webfetch restart`: {', '.join(restart)}" if restart else "")
        return ReloadResult(id=None, config=source.path, config_digest=source.digest, changed=changed,
                            applied=applied, needs_restart=restart)

    def _apply(self, config: Config, sections: set[str]) -> None:
        """Put `config` in force: each actor takes its own part through its `reconfigure`."""
        if config.fetch.allow_private != self.config.fetch.allow_private or \
                config.fetch.allow_hosts != self.config.fetch.allow_hosts:
            # the resolver stays: its cache, and a test's scripted one
            self.policy.current = AddressPolicy.from_config(config.fetch.allow_private, config.fetch.allow_hosts,
                                                            self.policy.current.resolver)
            # a cache hit is served without asking the policy (entries exist only for URLs that passed it),
            # so pages of a host the new policy refuses must go with the old one
            self.cache.clear()
        if self.policy.current.for_browse(config.browse.allow_local) != self.browse_policy.current:
            self.browse_policy.current = self.policy.current.for_browse(config.browse.allow_local)
        if "cache" in sections:
            self.cache.reconfigure(config.cache.ttl_s, config.cache.sweep_s, config.cache.max_bytes,
                                   memory_entry_bytes(config.cache))
            self.disk.reconfigure(config.cache.disk_max_bytes, config.cache.sweep_s)
        if "search" in sections:
            self.search.reconfigure(config.search)
        self.pipeline.reconfigure(config)
        self.browse.reconfigure(config)
        self.crawler.reconfigure(config)
        self.config = config
        self.view.reconfigure(config)

    def identity(self) -> DaemonInfo:
        return DaemonInfo(pid=os.getpid(), started_at=self.started_at, socket=self.socket_path,
                          socket_activated=self.socket_activated, exit_when_idle=self.exit_when_idle,
                          config=self.source.path, config_digest=self.source.digest,
                          log=str(self.log_path) if self.log_path else None, needs_restart=self.needs_restart)

    def status(self, rid: RequestId) -> StatusResult:
        """The daemon's state; the browser endpoint's token or password, and any secret a problem's URL
        carries, masked (redact.py: status is shown to whoever asks, and pasted into bug reports)."""
        c = self.chrome
        endpoint = self.config.browser.endpoint
        return StatusResult(
            id=rid, version=__version__, protocol=PROTOCOL_VERSION,
            uptime_s=round(time.monotonic() - self.started, 3),
            browser=BrowserStatus(state=c.state, version=c.version,
                                  executable=None if endpoint else c.executable,
                                  endpoint=redact.url(endpoint) if endpoint else None),
            cache=CacheStatus(**self.cache.statistics(), **self.disk.statistics(),
                              disk_dir=str(self.disk.directory) if self.disk.enabled else None,
                              disk_max_bytes=self.disk.max_bytes),
            # not counting this status request: an idle daemon reports 0
            requests=RequestsStatus(in_flight=self.server.in_flight - 1, served=self.server.served),
            subagent=SubagentStatus(command=self.subagent.command or self.config.subagent.command,
                                    available=self.subagent.available, version=self.subagent.version),
            search=self.search.configured,
            problems=[redact.text(p) for p in [*c.problems, *self.subagent.problems, *self.user_browser.problems]],
            browse=self.browse.statistics(), browse_enabled=self.config.browse.enabled,
            browse_allow_local=self.config.browse.allow_local, daemon=self.identity(),
            view=self.view.base,
            user_browser=UserBrowserStatus(state=self.user_browser.state,
                                           detail=redact.text(self.user_browser.describe()),
                                           hosts=self.user_browser.config.hosts))

    async def run(self, sock: socket.socket, *, exit_when_idle: bool = False,
                  signals: AsyncIterator[int] | None = None,
                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve on `sock` until a signal arrives on `signals` (or idle exit, or cancellation).
        Actors start first, then the socket, while Chrome is still starting; a signal during start-up stops
        it just as cleanly."""
        listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
        self.exit_when_idle = exit_when_idle
        if self.socket_path is None and not self.socket_activated:
            self.socket_path = str(sock.getsockname())
        async with trio.open_nursery() as nursery:
            with trio.CancelScope() as serving:
                self._serving = serving
                if signals is not None:
                    nursery.start_soon(self._stop_on_signal, signals, serving)
                await nursery.start(self.extractor.run)
                # Chrome starts beside the server, not before it: its launch is most of a second, and
                # `status`, a cache hit or a browse session's first call need not wait for it (a request
                # that needs the browser waits in `wait_browser`, as it does during a restart).
                nursery.start_soon(self.chrome.run)
                await nursery.start(self.cache.run)
                await nursery.start(self.disk.run)
                await nursery.start(self.subagent.run)
                await nursery.start(self.search.run)
                await nursery.start(self.user_browser.run)
                await nursery.start(self.browse.run)
                await nursery.start(self.server.serve, listener)
                # the token lives beside the socket, in the directory made 0700 and checked for it
                await nursery.start(self.view.run, Path(str(sock.getsockname())).parent)
                nursery.start_soon(self._trim_when_idle)
                log.info("webfetch %s listening on %s (browser: %s)", __version__, sock.getsockname(),
                         self.chrome.state)
                if self.notifier is not None:
                    nursery.start_soon(self._report_to_systemd, self.notifier)
                task_status.started()
                if exit_when_idle and self.config.server.idle_exit_s > 0:
                    await self._wait_idle(self.config.server.idle_exit_s)
                    log.info("idle for %g s; exiting", self.config.server.idle_exit_s)
                else:
                    await trio.sleep_forever()
            if self.notifier is not None:
                self.notifier.send("STOPPING=1", "STATUS=stopping")
            await listener.aclose()
            await self._shutdown()
            self.pipeline.close()  # the main documents' idle connections (fetch/over_http.py's pool)
            await self.browse.close_all()  # before Chrome goes: open sessions write their profiles back
            nursery.cancel_scope.cancel()

    def status_line(self) -> str:
        """One line for `systemctl status`: the state, or the first problem."""
        problems = self.chrome.problems
        if problems:
            return f"serving, but: {redact.text(problems[0])}"
        entries = self.cache.statistics()["entries"]
        return (f"{'ready' if self.chrome.state == 'ready' else 'browser ' + self.chrome.state}, "
                f"{entries} cached page{'' if entries == 1 else 's'}, {self.server.in_flight} in flight")

    async def _report_to_systemd(self, notifier: Notifier) -> None:
        """READY=1 once the socket listens and the browser can render, or is known not to be able to (the
        daemon still answers `status` with the problem, which beats a unit that fails to start);
        then STATUS= whenever the line changes."""
        try:
            await self.chrome.wait_browser()
        except BrowserUnavailable:
            pass
        notifier.send("READY=1", f"STATUS={self.status_line()}")
        while True:
            await trio.sleep(2.0)
            notifier.status(self.status_line())

    async def _stop_on_signal(self, signals: AsyncIterator[int], serving: trio.CancelScope) -> None:
        """SIGTERM or SIGINT stops serving (a second one while stopping changes nothing); SIGHUP reloads the
        config, as `webfetch reload` does (the log says what it applied)."""
        async for signum in signals:
            name = signal.Signals(signum).name
            if signum == signal.SIGHUP:
                # Also what a closing terminal sends: it must not end a daemon that other clients use.
                log.info("received SIGHUP; reloading the config")
                try:
                    self.reload()
                except ConfigError:
                    pass  # reload logged it; the old config runs on
            elif serving.cancel_called:
                log.info("received %s; already shutting down", name)
            else:
                log.info("received %s; shutting down", name)
                serving.cancel()

    async def _wait_idle(self, idle_s: float) -> None:
        while True:
            await trio.sleep(min(idle_s, 5.0))
            # an open browse session is work in progress: it ends by its own idle time (browse.idle_s)
            # ... and so is a person watching the view (its live feed open)
            busy = self.server.connections or self.server.in_flight or self.browse.sessions or self.view.watchers
            if not busy and trio.current_time() - self.server.last_activity >= idle_s:
                return

    async def _trim_when_idle(self) -> None:
        """Give the C heap's free pages back to the system once requests stop for TRIM_IDLE_S (see
        trim_malloc): once per busy spell, never while a request runs."""
        while True:
            await self.server.wait_some_requests()
            # Asleep until the quiet time would end, then checked: waking at each request's start and end
            # instead costs every request two task switches (a cache hit is a fraction of a millisecond).
            while True:
                await self.server.wait_no_requests()
                await trio.sleep_until(self.server.last_request_end + TRIM_IDLE_S)
                if not self.server.in_flight and \
                        trio.current_time() >= self.server.last_request_end + TRIM_IDLE_S:
                    break
            started = time.perf_counter()
            freed = trim_malloc()
            log.debug("idle: malloc_trim gave back %d KiB in %.1f ms", freed // 1024,
                      (time.perf_counter() - started) * 1000)

    async def _shutdown(self) -> None:
        """In-flight requests get a short grace period; the rest end with `shutting_down`."""
        with trio.move_on_after(SHUTDOWN_GRACE_S):
            await self.server.wait_no_requests()
        self.server.shutdown()
        with trio.move_on_after(1.0):
            await self.server.wait_no_requests()
            await self.server.wait_flushed()  # the `shutting_down` frames reach their clients


# glibc's mallopt parameters: the number of malloc arenas, and the size from which a block is mapped alone.
_M_ARENA_MAX = -8
_M_MMAP_THRESHOLD = -3
MALLOC_ARENAS = 2
# A block this large or larger (a page's HTML, markdown, packed entry or frame) is mapped on its own and given
# back to the system when freed. glibc's default starts at 128 KiB but rises to the size of each large block
# freed, up to 32 MiB: after the first 10 MB page, every later one was carved from the heap, whose freed
# holes a busy daemon keeps (it trims only when idle). Measured on a streamed crawl of 32 pages of 10 MB
# (bin/bench_crawl.py's site): the daemon's peak RSS above idle +253 and +263 MiB with glibc's default,
# +202 and +202 MiB with this.
MMAP_THRESHOLD = 1024 * 1024


def limit_malloc_arenas() -> None:
    """Big blocks mapped alone (MMAP_THRESHOLD), and the daemon's threads sharing two malloc arenas instead of
    glibc's up to 8 per core: each thread that extracts a page, resolves a name or reads a file would
    otherwise get an arena of its own, and fragments of freed pages kept in many arenas make the RSS creep.
    Measured with bin/bench_memory (1 000 mixed fetches): RSS after 200 -> after 1 000 fetches 163 -> 247 MiB
    by default, 131 -> 158 MiB with two arenas (the cache holding 5.6 MiB of it). A no-op where the C library
    is not glibc."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_ARENA_MAX, MALLOC_ARENAS)
    mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)


# Seconds without a request in flight before the daemon trims its C heap.
TRIM_IDLE_S = 2.0


def trim_malloc() -> int:
    """Return the free pages of glibc's heaps to the system (malloc_trim(0)); the bytes of RSS given back.
    Pages read, pickled, encoded and decoded whole leave megabytes of freed memory between live blocks,
    which glibc keeps: bin/bench_memory's soak found 11-17 MiB free in the heap after each stretch of
    fetches (mallinfo2), and with the trim the daemon's RSS less the cache after 2 000 fetches is 1.06x
    that after 200 (1.13x without). A no-op returning 0 where the C library is not glibc."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return 0
    before = _rss_bytes()
    trim(0)
    return max(0, before - _rss_bytes())


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


# SIGTERM and SIGINT stop the daemon; SIGHUP is caught so that it does not: it reloads the config.
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


async def serve(config: Config, path: Path, *, exit_when_idle: bool = False, source: ConfigSource = DEFAULTS,
                log_path: Path | None = None, view_mounts: Sequence[Mounted] = ()) -> None:
    """The daemon as `webfetch serve` runs it: SIGTERM and SIGINT stop it cleanly from the first moment,
    SIGHUP reloads the config. Under systemd socket activation it serves the socket it was given (and leaves
    the file to systemd); otherwise it creates its own at `path` and removes it at exit. `source` and
    `log_path` are what `status` reports of the config it read and where it logs."""
    # A signal still pending when the receiver closes is delivered again to the handler it finds then: a
    # second SIGTERM (systemd's stop and a terminal's Ctrl-C signal the whole process group, and people
    # press Ctrl-C twice) would kill the daemon that had just stopped cleanly, with status -15. Ignored.
    previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in SIGNALS}
    try:
        with trio.open_signal_receiver(*SIGNALS) as signals:
            notifier = Notifier()
            try:
                daemon = Daemon(config, notifier, source=source, log_path=log_path, view_mounts=view_mounts)
                await _serve_on(daemon, path, exit_when_idle, signals)
            finally:
                notifier.close()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


async def _serve_on(daemon: Daemon, path: Path, exit_when_idle: bool, signals: AsyncIterator[int]) -> None:
    try:
        inherited = listen_socket()
    except ActivationError as e:
        raise DaemonError(str(e)) from None
    if inherited is not None:
        log.info("socket activation: serving the socket systemd passed (%s)", inherited.getsockname())
        daemon.socket_activated = True
        sock, ours = inherited, None
    else:
        sock = bind_socket(path)
        daemon.socket_path = str(path)
        ours = os.stat(path).st_ino
    # Plain system calls on purpose: the clean-up below runs in a cancelled scope, where an await cannot.
    try:
        await daemon.run(sock, exit_when_idle=exit_when_idle, signals=signals)
    finally:
        sock.close()
        try:
            if ours is not None and os.stat(path).st_ino == ours:  # not another daemon's socket since
                os.unlink(path)
        except FileNotFoundError:
            pass
        log.info("stopped")
