"""What every `webfetch` command is: a handler, and what it needs of the config file, set on its parser
beside its arguments (each command's parser and handler live in one module: fetch_cli, browse_cli,
crawl_cli, status_cli, operate, profile_cli…); `cli.main` loads the config each needs and calls it.

Also the run the commands share that talk to a daemon and start one when none listens (`with_daemon`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import Config, ConfigSource
from ..errors import ConfigError
from ..trust import shell

if TYPE_CHECKING:
    from .client import Client


class Needs(Enum):
    """What a command needs of the config file."""

    NOTHING = "nothing"    # no config and no socket: files of their own (profile, service)
    CONFIG = "config"      # it may start a daemon, which must read the file: a broken one ends the command (exit 2)
    ANY = "any"            # it works with what it can: a broken file gives it the defaults and the error


@dataclass(frozen=True)
class Invocation:
    """One run of a command: its arguments, the config and the file it came from, the daemon's socket.
    `broken` is the error of a config file that does not load (only for a command that Needs.ANY; then
    `config` is the defaults and `source` is DEFAULTS)."""

    args: argparse.Namespace
    config: Config
    source: ConfigSource
    path: Path
    broken: ConfigError | None = None


@dataclass(frozen=True)
class Command:
    run: Callable[[Invocation], int]
    needs: Needs = Needs.CONFIG


def handles(p: argparse.ArgumentParser, run: Callable[[Invocation], int], needs: Needs = Needs.CONFIG) -> None:
    """Make `run` the handler of the command `p` parses."""
    p.set_defaults(command_handler=Command(run, needs))


def command_line(inv: Invocation, *words: str) -> str:
    """`webfetch WORDS` with the --socket and --config this command was given, quoted to paste: the
    command a hint names reaches the same daemon."""
    argv = ["webfetch", *words]
    for option in ("socket", "config"):
        if getattr(inv.args, option, None):
            argv += [f"--{option}", getattr(inv.args, option)]
    return shell.command(*argv)


def broken_config(inv: Invocation) -> str | None:
    """What a command that works on with a broken config file says about it: the file and line at fault,
    and what the daemon does meanwhile; None when the file loads."""
    if inv.broken is None:
        return None
    return (f"the config file does not load: {inv.broken}; a running daemon keeps the config it has until the "
            f"file is fixed and `{command_line(inv, 'reload')}` reads it, and none can start until then")


def say_broken_config(inv: Invocation) -> None:
    note = broken_config(inv)
    if note is not None:
        print(f"webfetch: {note}", file=sys.stderr)


def with_daemon(handler: Callable[[Client, argparse.Namespace], int]) -> Callable[[Invocation], int]:
    """The handler of a command that asks a daemon: it reconciles a running daemon with this command's
    config (skew.py), starts one when none listens, and says why when none can be reached."""

    def run(inv: Invocation) -> int:
        from .client import Client, ClientError
        from .skew import reconcile

        note = reconcile(inv.path, inv.source)
        if note is not None:
            print(f"webfetch: {note}", file=sys.stderr)
        try:
            with Client(inv.path, config=inv.args.config) as client:
                return handler(client, inv.args)
        except ClientError as e:
            print(f"webfetch: {e}", file=sys.stderr)
            return 1
        except BrokenPipeError:  # our stdout's reader went away: cli.main ends quietly
            raise
        except OSError as e:  # a file of the command's own (crawl --out): the socket's errors are ClientErrors
            print(f"webfetch: {e}", file=sys.stderr)
            return 1

    return run
