"""The `webfetch` command: serve, fetch, search, crawl, map, status, stop, restart, logs, pi, service, doctor,
mcp, profile."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..config import DEFAULTS, Config, ConfigSource, load_config_and_source, socket_path
from ..errors import ConfigError
from ..socket_trust import UntrustedSocket

if TYPE_CHECKING:
    from .client import Client
from ..protocol import MAX_BATCH_URLS, THINKING_LEVELS


def thinking_level(text: str) -> str:
    """A thinking level as pi names them: a known one, or a lowercase word a newer pi may have added."""
    if not re.fullmatch(r"[a-z][a-z0-9_-]{0,31}", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a thinking level; pi's are {', '.join(THINKING_LEVELS)}")
    return text

MCP_DESCRIPTION = """\
An MCP server on stdin/stdout: web_fetch, web_search (when a search backend is configured) and
agent_browser (when browse.enabled) for an MCP client, each call forwarded to the webfetch daemon,
which is started when none listens. Your MCP client runs it; you do not. For example:

  claude mcp add -s user webfetch -- webfetch mcp
  codex mcp add webfetch -- webfetch mcp

The README's MCP section has the entries for Cursor, VS Code and GUI clients (an absolute path)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="webfetch", description="Web pages as clean markdown, for coding agents.")
    parser.add_argument("--version", action="version", version=f"webfetch {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--socket", help="the daemon's Unix socket (default: PROTOCOL.md's path)")
        p.add_argument("--config", help="config file (default ~/.config/webfetch/config.toml)")

    p = sub.add_parser("serve", help="run the daemon in the foreground")
    common(p)
    p.add_argument("--exit-when-idle", action="store_true",
                   help="exit after server.idle_exit_s without clients (used when the CLI starts it)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.add_argument("--log-file", help="log to this file (rotated at 1 MiB, 3 kept) instead of stderr")

    p = sub.add_parser("fetch", help="print a page's main content as markdown (several URLs: each page in turn)")
    common(p)
    p.add_argument("url", nargs="+", metavar="URL",
                   help=f"the page; several (up to {MAX_BATCH_URLS}) are fetched at once and printed in order, "
                        f"each under a `==> [i/n] URL <==` line")
    p.add_argument("--offset", type=int, help="start at this character of the content")
    p.add_argument("--max-chars", type=int, help="at most this many characters")
    p.add_argument("--fresh", action="store_true", help="ignore the cache and load the page again")
    p.add_argument("--raw", action="store_true", help="the raw markdown, never a summary")
    p.add_argument("--profile", metavar="NAME", help="read the page signed in, with this profile's cookies "
                                                     "(webfetch profile list)")
    p.add_argument("--timeout", type=float, help="seconds to wait for the page (default 30)")
    p.add_argument("--prompt", help="a question about the page: the sub-agent answers it from the page")
    p.add_argument("--find", metavar="PATTERN",
                   help='only the passages that match: words (all of them, any case; "a phrase" in quotes) or '
                        "a regular expression written /…/ (flags i, m, s after it), each with its offset")
    p.add_argument("--model", help="the sub-agent's model as provider/id (pi's web-fetch.json wins)")
    p.add_argument("--thinking", type=thinking_level, metavar="LEVEL",
                   help=f"the sub-agent's thinking level: {', '.join(THINKING_LEVELS)} (a newer pi's own level "
                        f"passes through)")
    p.add_argument("--json", action="store_true", help="print the protocol's frames as JSON lines")

    p = sub.add_parser("search", help="search the web (Kagi, Brave or SearXNG, as configured)")
    common(p)
    p.add_argument("query", nargs="+", help="what to search for")
    p.add_argument("--limit", type=int, help="how many results (default 10, at most 20)")
    p.add_argument("--backend", choices=["kagi", "brave", "searxng"], help="this backend, not the default one")
    p.add_argument("--json", action="store_true", help="print the protocol's frames as JSON lines")

    from . import browse_cli, crawl_cli

    browse_cli.add_parser(sub, common)
    crawl_cli.add_parsers(sub, common)

    from . import profile_cli

    profile_cli.add_parser(sub)

    p = sub.add_parser("status", help="show the daemon's state")
    common(p)
    p.add_argument("--json", action="store_true", help="print the status frame as JSON")

    p = sub.add_parser("stop", help="stop the running daemon (requests in flight end with shutting_down)")
    common(p)
    p = sub.add_parser("restart", help="stop the running daemon and start one with the current config")
    common(p)
    p = sub.add_parser("reload", help="make the running daemon read its config file again and apply what can "
                                      "change while it runs (as SIGHUP does); says what needs a restart")
    common(p)
    p = sub.add_parser("cache", help="empty the page cache, in the daemon's memory and on disk")
    common(p)
    p.add_argument("action", choices=["clear"], help="clear: forget every cached page (the next fetch of each "
                                                     "loads it again)")
    p = sub.add_parser("logs", help="show the log of the daemon (a file, or systemd's journal)")
    common(p)
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines until Ctrl-C")

    p = sub.add_parser("pi", help="add the web_fetch tool to the pi coding agent, or remove it")
    common(p)
    p.add_argument("action", choices=["install", "uninstall"],
                   help="install: copy the extension into $PI_CODING_AGENT_DIR or ~/.pi/agent (extensions/webfetch)")

    p = sub.add_parser("service", help="run webfetch as a systemd user service (socket-activated), or stop that")
    p.add_argument("action", choices=["install", "uninstall"],
                   help="install: write the units to ~/.config/systemd/user and enable webfetch.socket")

    p = sub.add_parser("doctor", help="check everything webfetch needs; each problem with its fix")
    common(p)

    p = sub.add_parser("mcp", help="an MCP server on stdin/stdout with the daemon's tools (for Claude Code, Codex…)",
                       description=MCP_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    common(p)
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"],
                   help="logs go to stderr; stdout carries only the protocol")

    args = parser.parse_args(argv)
    if args.command == "service":  # needs no config: the units use the default socket path
        from . import service

        return service.install() if args.action == "install" else service.uninstall()
    if args.command == "profile":  # profiles are files: no config, no daemon
        return profile_cli.run(args)
    try:
        config, source = load_config_and_source(args.config)
    except ConfigError as e:
        if args.command == "mcp":  # the client would show only "Connection closed": tell the model instead
            from . import mcp_server

            return mcp_server.main(socket_path(Config(), args.socket), args.config, args.log_level,
                                   config_error=f"webfetch cannot start: {e}; fix the config file, then restart "
                                                f"the MCP server (or the client)")
        if args.command != "reload":
            print(f"webfetch: {e}", file=sys.stderr)
            return 2
        # the daemon reads its file itself and names what is wrong in it; here only the socket is needed
        config, source = Config(), DEFAULTS
    path = socket_path(config, args.socket)
    try:
        return _dispatch(args, config, source, path)
    except UntrustedSocket as e:  # before a byte was sent: the message names the path, its owner, the fix
        print(f"webfetch: {e}", file=sys.stderr)
        return 1


def _dispatch(args: argparse.Namespace, config: Config, source: ConfigSource, path: Path) -> int:
    """The commands that need the config and the socket path."""
    if args.command == "serve":
        return _serve(config, source, path, args)
    if args.command in ("stop", "restart", "reload", "logs", "cache"):
        return _operate(args, path)
    if args.command == "doctor":
        from . import doctor

        return doctor.run(config, path)
    if args.command == "mcp":
        from . import mcp_server

        return mcp_server.main(path, args.config, args.log_level)
    if args.command == "pi":
        from . import pi_install

        return pi_install.main(args.action, config, args.socket)
    return _client_command(args, path, source)


def _operate(args: argparse.Namespace, path: Path) -> int:
    """The commands that operate the daemon a user already has (webfetch/frontends/operate.py)."""
    from . import operate

    if args.command == "cache":
        return operate.clear_cache(path)
    if args.command == "stop":
        return operate.stop(path)[0]
    if args.command == "reload":
        return operate.reload(path)
    if args.command == "restart":
        return operate.restart(path, args.config)
    return operate.show_logs(path, args.follow)


def _serve(config: Config, source: ConfigSource, path: Path, args: argparse.Namespace) -> int:
    import trio

    from ..daemon import DaemonError, limit_malloc_arenas, serve
    from .logs import log_to_file, log_to_stderr

    limit_malloc_arenas()  # before any thread exists
    log_path = Path(args.log_file).absolute() if args.log_file else None
    if log_path is not None:
        log_to_file(log_path, args.log_level)
    else:
        log_to_stderr(args.log_level)
    try:
        trio.run(lambda: serve(config, path, exit_when_idle=args.exit_when_idle, source=source, log_path=log_path))
    except DaemonError as e:
        print(f"webfetch: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


def _client_command(args: argparse.Namespace, path: Path, source: ConfigSource) -> int:
    from .client import Client, ClientError
    from .skew import reconcile

    if args.command in ("crawl", "map"):
        from . import crawl_cli

        if not crawl_cli.ready(args):  # before a daemon is asked (or started) for anything
            return 2

    note = None if args.command == "status" else reconcile(path, source)  # status shows it itself
    if note is not None:
        print(f"webfetch: {note}", file=sys.stderr)
    try:
        with Client(path, config=args.config) as client:
            if args.command == "fetch":
                return _fetch(client, args)
            if args.command == "search":
                return _search(client, args)
            if args.command == "browse":
                from . import browse_cli

                return browse_cli.run(client, args)
            if args.command in ("crawl", "map"):
                from . import crawl_cli

                return crawl_cli.run(client, args)
            return _status(client, args, source)
    except ClientError as e:
        print(f"webfetch: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"webfetch: cannot talk to the daemon on {path}: {e}", file=sys.stderr)
        return 1


def _fetch(client: Client, args: argparse.Namespace) -> int:
    show_progress = sys.stderr.isatty() and not args.json
    target: dict[str, Any] = {"url": args.url[0]} if len(args.url) == 1 else {"urls": args.url}
    batch = _BatchPrinter(len(args.url))
    for frame in client.request("fetch", **target, offset=args.offset, max_chars=args.max_chars,
                                fresh=args.fresh or None, raw=args.raw or None, timeout_s=args.timeout,
                                prompt=args.prompt, model=args.model, thinking=args.thinking, find=args.find,
                                profile=args.profile):
        if args.json:
            print(json.dumps(frame, ensure_ascii=False), flush=True)
        kind = frame.get("type")
        if kind == "progress":
            if show_progress:
                print(f"\r\x1b[K{frame.get('stage')}: {frame.get('message')}", end="", file=sys.stderr, flush=True)
            continue
        if show_progress:
            print("\r\x1b[K", end="", file=sys.stderr, flush=True)
        if kind == "error":
            if not args.json:
                print(f"webfetch: {frame.get('code')}: {frame.get('message')}", file=sys.stderr)
            return 1
        _show(frame, batch, printing=not args.json)
    return 1 if batch.failed else 0


def _show(frame: dict[str, Any], batch: _BatchPrinter, printing: bool) -> None:
    """A result or a batch's page: the page when its turn comes; a batch's own result adds nothing to them."""
    if frame.get("type") == "page":
        batch.add(frame, printing)
    elif printing and frame.get("kind") != "batch":
        _print_result(frame)


class _BatchPrinter:
    """A batch's pages on stdout in the order given, each as soon as every page before it has arrived."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.waiting: dict[int, dict[str, Any]] = {}
        self.printed = 0
        self.failed = 0

    def add(self, frame: dict[str, Any], printing: bool) -> None:
        self.failed += "error" in frame
        self.waiting[int(frame.get("index", 0))] = frame
        while self.printed in self.waiting:
            page = self.waiting.pop(self.printed)
            self.printed += 1
            if printing:
                self._print(page)

    def _print(self, page: dict[str, Any]) -> None:
        if self.printed > 1:
            print()
        print(f"==> [{self.printed}/{self.total}] {page.get('url')} <==", flush=True)
        error = page.get("error")
        if error is not None:
            print(f"webfetch: [{self.printed}/{self.total}] {page.get('url')}: {error.get('code')}: "
                  f"{error.get('message')}", file=sys.stderr, flush=True)
            return
        _print_result(page)
        sys.stdout.flush()


def _print_result(frame: dict[str, Any]) -> None:
    """A fetch's content on stdout; its flags, notes and where to continue on stderr."""
    content = frame.get("content", "")
    print(content, end="" if content.endswith("\n") else "\n")
    if frame.get("flags"):
        print(f"webfetch: flags: {', '.join(frame['flags'])} (read the notes before using this content)",
              file=sys.stderr)
    for note in frame.get("notes", []):
        print(f"webfetch: note: {note}", file=sys.stderr)
    if frame.get("next_offset") is not None:
        print(f"webfetch: {frame['total_chars']} characters in all; continue with --offset "
              f"{frame['next_offset']}", file=sys.stderr)


def _search(client: Client, args: argparse.Namespace) -> int:
    for frame in client.request("search", query=" ".join(args.query), limit=args.limit, backend=args.backend):
        if args.json:
            print(json.dumps(frame, ensure_ascii=False), flush=True)
        if frame.get("type") == "error":
            if not args.json:
                print(f"webfetch: {frame.get('code')}: {frame.get('message')}", file=sys.stderr)
            return 1
        if frame.get("type") == "result" and not args.json:
            print(frame["content"])
    return 0


def _browse_state(status: dict[str, Any]) -> str:
    """The browse line of `webfetch status`: whether the op serves, then its open sessions one a line."""
    if not status.get("browse_enabled", True):  # a daemon older than the field serves browse
        return "disabled (browse.enabled = false in the config)"
    sessions = status.get("browse") or []
    local = status.get("browse_allow_local") or []
    reach = f", may reach {', '.join(local)} (browse.allow_local)" if local else ""
    return f"enabled{reach}, {len(sessions)} session{'' if len(sessions) == 1 else 's'}" + "".join(
        f"\n          {s['session']}: {s['tabs']} tab(s), {s['url']}, idle {s['idle_s']:.0f} s{_with_profile(s)}"
        for s in sessions)


def _with_profile(session: dict[str, Any]) -> str:
    return f", profile {session['profile']}" if session.get("profile") else ""


def _daemon_lines(d: dict[str, Any]) -> str:
    """Which daemon answered: pid, start, socket, config and log (issue 26's trap: an old config or version)."""
    socket = "systemd's socket (socket activation)" if d["socket_activated"] else d["socket"]
    config = f"{d['config']} (sha256 {d['config_digest']})" if d.get("config") else "none (all defaults)"
    log = d.get("log") or ("systemd's journal" if d["socket_activated"] else "stderr")
    started = "started by a client, exits when idle" if d["exit_when_idle"] else "runs until stopped"
    pending = d.get("needs_restart") or []
    restart = f"\nrestart:  the config changes {', '.join(pending)}: `webfetch restart` applies them" if pending else ""
    return (f"daemon:   pid {d['pid']}, since {d['started_at']}, {started}\n"
            f"socket:   {socket}\nconfig:   {config}{restart}\nlog:      {log}")


def _disk_line(cache: dict[str, Any]) -> str:
    """The disk cache's part of `webfetch status` (a daemon older than it sends none of these fields)."""
    if not cache.get("disk_dir"):
        return "no pages kept on disk (cache.disk_max_bytes = 0)"
    mib = 1024 * 1024
    return (f"{cache.get('disk_entries', 0)} pages, {cache.get('disk_bytes', 0) / mib:.1f} of "
            f"{cache.get('disk_max_bytes', 0) / mib:.0f} MiB, in {cache['disk_dir']}")


def _status(client: Client, args: argparse.Namespace, source: ConfigSource) -> int:
    from .skew import difference

    for frame in client.request("status"):
        if frame.get("type") == "error":
            print(f"webfetch: {frame.get('code')}: {frame.get('message')}", file=sys.stderr)
            return 1
        if frame.get("type") != "result":
            continue
        if args.json:
            print(json.dumps(frame, indent=2))
            return 0
        b, c, r = frame["browser"], frame["cache"], frame["requests"]
        print(f"webfetch {frame['version']} (protocol {frame['protocol']}), up {frame['uptime_s']:.0f} s")
        if frame.get("daemon"):
            print(_daemon_lines(frame["daemon"]))
        print(f"browser:  {b['state']}  {b.get('version') or ''}  {b.get('executable') or b.get('endpoint') or ''}")
        print(f"cache:    {c['entries']} pages, {c['bytes']} bytes, {c['hits']} hits, {c['misses']} misses")
        print(f"disk:     {_disk_line(c)}")
        print(f"requests: {r['in_flight']} in flight, {r['served']} served")
        print(f"search:   {', '.join(frame.get('search') or []) or 'no backend configured'}")
        print(f"browse:   {_browse_state(frame)}")
        for problem in frame.get("problems", []):
            print(f"problem:  {problem}")
        what = difference(frame, source)
        if what is not None:
            print(f"note:     this daemon {what}; `webfetch restart` gives you one that runs this command's")
        return 1 if frame.get("problems") else 0
    return 1
