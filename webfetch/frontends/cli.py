"""The `webfetch` command: serve, fetch, search, browse, crawl, map, profile, status, stop, restart, reload,
cache, logs, pi, service, doctor, mcp.

Each command's parser and handler live together (`command.handles`): the larger ones in a module of their
own (fetch_cli, browse_cli, crawl_cli, profile_cli, status_cli, operate), the few lines of the others here.
`main` builds the parser from them, loads the config each command needs, and calls its handler."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from .. import __version__
from ..config import DEFAULTS, Config, config_for_socket, load_config_and_source, socket_path
from ..errors import ConfigError
from ..trust.socket_trust import UntrustedSocket
from . import browse_cli, crawl_cli, fetch_cli, operate, profile_cli, status_cli, view_cli
from .command import Command, Invocation, Needs, handles

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from ..view.server import Mounted
    from ..view.viewed import Viewed

    Common = Callable[[argparse.ArgumentParser], None]
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]

MCP_DESCRIPTION = """\
An MCP server on stdin/stdout: web_fetch, web_search (when a search backend is configured) and
agent_browser (when browse.enabled) for an MCP client, each call forwarded to the webfetch daemon,
which is started when none listens. Your MCP client runs it; you do not. For example:

  claude mcp add -s user webfetch -- webfetch mcp
  codex mcp add webfetch -- webfetch mcp

The README's MCP section has the entries for Cursor, VS Code and GUI clients (an absolute path)."""


def common(p: argparse.ArgumentParser) -> None:
    """The options of every command that reads the config or talks to the daemon."""
    p.add_argument("--socket", help="the daemon's Unix socket (default: PROTOCOL.md's path)")
    p.add_argument("--config", help="config file (default ~/.config/webfetch/config.toml)")


def _add_serve(sub: SubParsers, common: Common) -> None:
    p = sub.add_parser("serve", help="run the daemon in the foreground")
    common(p)
    p.add_argument("--exit-when-idle", action="store_true",
                   help="exit after server.idle_exit_s without clients (used when the CLI starts it)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.add_argument("--log-file", help="log to this file (rotated at 1 MiB, 3 kept) instead of stderr")
    handles(p, _serve)


def _serve(inv: Invocation) -> int:
    import trio

    from ..daemon import DaemonError, limit_malloc_arenas, serve
    from .logs import log_to_file, log_to_stderr

    args = inv.args
    limit_malloc_arenas()  # before any thread exists
    log_path = Path(args.log_file).absolute() if args.log_file else None
    if log_path is not None:
        log_to_file(log_path, args.log_level)
    else:
        log_to_stderr(args.log_level)
    try:
        # MCP over HTTP on the view's front door: a frontend, handed in (the daemon imports none)
        mcp = _mcp_over_http(inv.path, args.config)
        trio.run(lambda: serve(inv.config, inv.path, exit_when_idle=args.exit_when_idle, source=inv.source,
                               log_path=log_path, view_mounts=[mcp]))
    except DaemonError as e:
        print(f"webfetch: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


def _mcp_over_http(socket: Path, config: str | None) -> Mounted:
    """mcp_http.mount, its module (the MCP SDK: a second or more of imports) loaded only when the view opens,
    in a thread: a daemon that never opens its view never pays for it, and the event loop never waits on it."""

    @asynccontextmanager
    async def mounted(daemon: Viewed) -> AsyncIterator[list[BaseRoute]]:
        import trio

        module = await trio.to_thread.run_sync(importlib.import_module, "webfetch.frontends.mcp_http")
        async with module.mount(socket, config)(daemon) as routes:
            yield routes

    return mounted


def _add_pi(sub: SubParsers, common: Common) -> None:
    p = sub.add_parser("pi", help="add the web_fetch tool to the pi coding agent, or remove it")
    common(p)
    p.add_argument("action", choices=["install", "uninstall"],
                   help="install: copy the extension into $PI_CODING_AGENT_DIR or ~/.pi/agent (extensions/webfetch)")
    handles(p, _pi)


def _pi(inv: Invocation) -> int:
    from . import pi_install

    return pi_install.main(inv.args.action, inv.config, inv.args.socket)


def _add_service(sub: SubParsers, common: Common) -> None:
    p = sub.add_parser("service", help="run webfetch as a systemd user service (socket-activated), or stop that")
    p.add_argument("action", choices=["install", "uninstall"],
                   help="install: write the units to ~/.config/systemd/user and enable webfetch.socket")
    handles(p, _service, Needs.NOTHING)  # the units use the default socket path


def _service(inv: Invocation) -> int:
    from . import service

    return service.install() if inv.args.action == "install" else service.uninstall()


def _add_doctor(sub: SubParsers, common: Common) -> None:
    p = sub.add_parser("doctor", help="check everything webfetch needs; each problem with its fix")
    common(p)
    handles(p, _doctor, Needs.ANY)  # a broken config file is one of the things it diagnoses


def _doctor(inv: Invocation) -> int:
    from . import doctor

    return doctor.run(inv)


def _add_mcp(sub: SubParsers, common: Common) -> None:
    p = sub.add_parser("mcp", help="an MCP server on stdin/stdout with the daemon's tools (for Claude Code, Codex…)",
                       description=MCP_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    common(p)
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"],
                   help="logs go to stderr; stdout carries only the protocol")
    handles(p, _mcp, Needs.ANY)


def _mcp(inv: Invocation) -> int:
    from . import mcp_server

    if inv.broken is not None:  # the client would show only "Connection closed": tell the model instead
        return mcp_server.main(inv.path, inv.args.config, inv.args.log_level,
                               config_error=f"webfetch cannot start: {inv.broken}; fix the config file, then "
                                            f"restart the MCP server (or the client)")
    return mcp_server.main(inv.path, inv.args.config, inv.args.log_level)


# The commands in the order `webfetch --help` lists them: each adds its parsers, with their handlers.
COMMANDS: tuple[Callable[[SubParsers, Common], None], ...] = (
    _add_serve, fetch_cli.add_parsers, browse_cli.add_parser, crawl_cli.add_parsers,
    lambda sub, common: profile_cli.add_parser(sub), status_cli.add_parser, operate.add_parsers, _add_pi,
    _add_service, _add_doctor, _add_mcp, view_cli.add_parser)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="webfetch", description="Web pages as clean markdown, for coding agents.")
    root.add_argument("--version", action="version", version=f"webfetch {__version__}")
    sub = root.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub, common)
    return root


def main(argv: list[str] | None = None) -> int:
    try:
        try:
            code = _run(argv)
        finally:  # what is still buffered (argparse's --help too): a reader gone shows here, not at exit
            sys.stdout.flush()
    except BrokenPipeError:
        _end_for_closed_stdout()
    return code


def _end_for_closed_stdout() -> NoReturn:
    """Our stdout's reader went away (`webfetch status | head -1`): end as a command killed by SIGPIPE does
    (git does the same), quietly and with the status a shell shows as 141, never with an error about the
    daemon. stdout goes to /dev/null first, as Python's docs advise, so that nothing flushed after this
    fails again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # Python ignores it, so that writes raise instead
    os.kill(os.getpid(), signal.SIGPIPE)
    raise SystemExit(128 + signal.SIGPIPE)  # not reached: the signal ends the process


def _run(argv: list[str] | None) -> int:
    args = parser().parse_args(argv)
    command: Command = args.command_handler
    if command.needs is Needs.NOTHING:
        return command.run(Invocation(args, Config(), DEFAULTS, socket_path(Config())))
    broken = None
    try:
        config, source = load_config_and_source(args.config)
    except ConfigError as e:
        if command.needs is Needs.CONFIG:
            print(f"webfetch: {e}", file=sys.stderr)
            return 2
        config, source, broken = config_for_socket(args.config), DEFAULTS, e
    path = socket_path(config, args.socket)
    try:
        return command.run(Invocation(args, config, source, path, broken))
    except UntrustedSocket as e:  # before a byte was sent: the message names the path, its owner, the fix
        print(f"webfetch: {e}", file=sys.stderr)
        return 1
