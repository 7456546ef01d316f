"""`webfetch fetch` and `webfetch search`: a page's markdown (or several pages, each in turn) and a search's
results on stdout; errors, flags, notes and progress on stderr."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..protocol import MAX_BATCH_URLS, THINKING_LEVELS
from .cli_words import cli_words
from .command import handles, with_daemon

if TYPE_CHECKING:
    from .client import Client


def thinking_level(text: str) -> str:
    """A thinking level as pi names them: a known one, or a lowercase word a newer pi may have added."""
    if not re.fullmatch(r"[a-z][a-z0-9_-]{0,31}", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a thinking level; pi's are {', '.join(THINKING_LEVELS)}")
    return text


# A --schema argument read from a file: a little more than the daemon takes, so its bad_request says the size
SCHEMA_FILE_MAX_BYTES = 128 * 1024


def json_schema(text: str) -> dict[str, Any]:
    """--schema: a file holding a JSON Schema, or the schema's JSON itself; the daemon checks the schema."""
    source = text
    if not text.lstrip().startswith("{"):
        try:
            with open(text, "rb") as f:
                source = f.read(SCHEMA_FILE_MAX_BYTES + 1).decode(errors="replace")
        except OSError as e:
            raise argparse.ArgumentTypeError(f"{text!r} is neither a file nor JSON ({e.strerror})") from None
        if len(source) > SCHEMA_FILE_MAX_BYTES:
            raise argparse.ArgumentTypeError(f"{text} is larger than {SCHEMA_FILE_MAX_BYTES} bytes") from None
    try:
        schema = json.loads(source)
    except (ValueError, RecursionError):
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is neither a file nor JSON" if source is text
                                         else f"{text} does not hold JSON") from None
    if not isinstance(schema, dict):
        raise argparse.ArgumentTypeError("a JSON Schema is a JSON object ({...})")
    return schema


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                common: Callable[[argparse.ArgumentParser], None]) -> None:
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
    p.add_argument("--user-browser", action="store_true", help="read the page signed in as you, with your own "
                                                               "running browser's cookies (user_browser.hosts)")
    p.add_argument("--keep-hidden", action="store_true",
                   help="keep the text the page hides from people (display:none, hidden, aria-hidden, off-screen "
                        "...), left out by default")
    p.add_argument("--timeout", type=float, help="seconds to wait for the page (default 30)")
    p.add_argument("--prompt", help="a question about the page: the sub-agent answers it from the page")
    p.add_argument("--schema", type=json_schema, metavar="FILE|JSON",
                   help="a JSON Schema (draft 2020-12), in a file or inline: the sub-agent answers with JSON that "
                        "validates against it, printed on stdout (with --prompt saying what to extract)")
    p.add_argument("--find", metavar="PATTERN",
                   help='only the passages that match: words (all of them, any case; "a phrase" in quotes) or '
                        "a regular expression written /…/ (flags i, m, s after it), each with its offset")
    p.add_argument("--model", help="the sub-agent's model as provider/id (pi's web-fetch.json wins)")
    p.add_argument("--thinking", type=thinking_level, metavar="LEVEL",
                   help=f"the sub-agent's thinking level: {', '.join(THINKING_LEVELS)} (a newer pi's own level "
                        f"passes through)")
    p.add_argument("--json", action="store_true", help="print the protocol's frames as JSON lines")
    handles(p, with_daemon(_fetch))

    p = sub.add_parser("search", help="search the web (Kagi, Brave or SearXNG, as configured)")
    common(p)
    p.add_argument("query", nargs="+", help="what to search for")
    p.add_argument("--limit", type=int, help="how many results (default 10, at most 20)")
    p.add_argument("--backend", choices=["kagi", "brave", "searxng"], help="this backend, not the default one")
    p.add_argument("--json", action="store_true", help="print the protocol's frames as JSON lines")
    handles(p, with_daemon(_search))


def _fetch(client: Client, args: argparse.Namespace) -> int:
    from .progress_line import PersonWaits, ProgressLine

    target: dict[str, Any] = {"url": args.url[0]} if len(args.url) == 1 else {"urls": args.url}
    asked = "--schema" if args.schema is not None else "--prompt" if args.prompt is not None else None
    batch = _BatchPrinter(len(args.url), asked)
    frames = client.request("fetch", **target, **_reading(args))
    waits = PersonWaits()
    with ProgressLine() as progress:
        for frame in frames:
            if args.json:
                print(json.dumps(frame, ensure_ascii=False), flush=True)
            kind = frame.get("type")
            if kind == "progress":
                if frame.get("stage") == "person" and not args.json:
                    progress.clear()   # the line in place would be drawn over the sentence
                    waits.see(frame)
                if sys.stderr.isatty() and not args.json:
                    progress.show(f"{frame.get('stage')}: {frame.get('message')}")
                continue
            progress.clear()
            if kind == "error":
                if not args.json:
                    print(f"webfetch: {frame.get('code')}: {cli_words(str(frame.get('message')))}", file=sys.stderr)
                return 1
            _show(frame, batch, printing=not args.json)
    return 1 if batch.failed else 0


def _reading(args: argparse.Namespace) -> dict[str, Any]:
    """The request's fields from the flags: how the pages are read and what is asked of them."""
    return {"offset": args.offset, "max_chars": args.max_chars, "fresh": args.fresh or None,
            "raw": args.raw or None, "timeout_s": args.timeout, "prompt": args.prompt, "schema": args.schema,
            "model": args.model, "thinking": args.thinking, "find": args.find, "profile": args.profile,
            "browser": "user" if args.user_browser else None, "hidden": "keep" if args.keep_hidden else None}


def _show(frame: dict[str, Any], batch: _BatchPrinter, printing: bool) -> None:
    """A result or a batch's page: the page when its turn comes; a batch's own result adds nothing to them."""
    if frame.get("type") == "page":
        batch.add(frame, printing)
    elif frame.get("kind") != "batch":
        batch.failed += batch.unanswered(frame)
        if printing:
            _print_result(frame, batch.asked)


class _BatchPrinter:
    """A batch's pages on stdout in the order given, each as soon as every page before it has arrived."""

    def __init__(self, total: int, asked: str | None) -> None:
        self.total = total
        self.asked = asked  # --prompt or --schema, when asked: a page instead of an answer is a failure
        self.waiting: dict[int, dict[str, Any]] = {}
        self.printed = 0
        self.failed = 0

    def unanswered(self, frame: dict[str, Any]) -> bool:
        return self.asked is not None and frame.get("kind") == "page"

    def add(self, frame: dict[str, Any], printing: bool) -> None:
        self.failed += "error" in frame or self.unanswered(frame)
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
                  f"{cli_words(str(error.get('message')))}", file=sys.stderr, flush=True)
            return
        _print_result(page, self.asked)
        sys.stdout.flush()


def _print_result(frame: dict[str, Any], asked: str | None = None) -> None:
    """A fetch's content on stdout (a `data` result's JSON); its flags, notes and where to continue on stderr;
    and, when a prompt or schema (`asked`) got the page instead of an answer, that it was not answered (the
    notes above that line say why)."""
    content = frame.get("content", "")
    print(content, end="" if content.endswith("\n") else "\n")
    if frame.get("flags"):
        print(f"webfetch: flags: {', '.join(frame['flags'])} (read the notes before using this content)",
              file=sys.stderr)
    for note in frame.get("notes", []):
        print(f"webfetch: note: {cli_words(note)}", file=sys.stderr)
    if frame.get("next_offset") is not None:
        print(f"webfetch: {frame['total_chars']} characters in all; continue with --offset "
              f"{frame['next_offset']}", file=sys.stderr)
    if asked is not None and frame.get("kind") == "page":
        print(f"webfetch: {asked} was not answered: the page itself is printed instead (the note above says "
              "why)", file=sys.stderr)


def _search(client: Client, args: argparse.Namespace) -> int:
    for frame in client.request("search", query=" ".join(args.query), limit=args.limit, backend=args.backend):
        if args.json:
            print(json.dumps(frame, ensure_ascii=False), flush=True)
        if frame.get("type") == "error":
            if not args.json:
                print(f"webfetch: {frame.get('code')}: {cli_words(str(frame.get('message')))}", file=sys.stderr)
            return 1
        if frame.get("type") == "result" and not args.json:
            print(frame["content"])
    return 0
