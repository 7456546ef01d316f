"""`webfetch crawl` and `webfetch map`: a site as local markdown files for an agent, or its URLs one a line.
Progress goes to stderr. A crawl asks the daemon to `stream` its pages: each page arrives whole in its own
frame and is written (or printed) at once, each file whole or not at all, so that neither the daemon nor
this process holds the site (the result's `content` is only each page's share); the index comes last."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .cli_words import cli_words
from .command import Invocation, handles, with_daemon

if TYPE_CHECKING:
    from .client import Client

INDEX_JSON = "_index.json"
INDEX_MD = "_index.md"
_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+-]+")
MAX_SEGMENT = 100


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                common: Callable[[argparse.ArgumentParser], None]) -> None:
    def scope(p: argparse.ArgumentParser, limit: str) -> None:
        common(p)
        p.add_argument("url", help="the start URL: its host, under its directory, is the scope")
        p.add_argument("--limit", type=int, help=limit)
        p.add_argument("--depth", type=int, help="links followed from the start URL, at most (default 3)")
        p.add_argument("--include", action="append", metavar="PATTERN",
                       help="only URLs whose path matches: a glob (/docs/api/*) or /regex/; repeatable")
        p.add_argument("--exclude", action="append", metavar="PATTERN", help="leave out URLs whose path matches")
        p.add_argument("--timeout", type=float, help="seconds for the whole run (default crawl.timeout_s, 300)")
        p.add_argument("--fresh", action="store_true", help="load every page again, not from the cache")
        p.add_argument("--json", action="store_true", help="print the protocol's frames as JSON lines")

    p = sub.add_parser("crawl", help="a site's pages as markdown (within the start URL's host and directory)")
    scope(p, "pages, at most (default 20, at most 500)")
    p.add_argument("--out", metavar="DIR", help="write one markdown file per page, mirroring the URL paths, plus "
                                                f"{INDEX_MD} and {INDEX_JSON}")
    handles(p, _checked)
    p = sub.add_parser("map", help="a site's URLs, one a line: its sitemaps, then the links of its pages")
    scope(p, "URLs, at most (default 500)")
    handles(p, _checked)


def _checked(inv: Invocation) -> int:
    if not ready(inv.args):  # before a daemon is asked (or started) for anything
        return 2
    return with_daemon(run)(inv)


def run(client: Client, args: argparse.Namespace) -> int:
    out = Path(args.out) if getattr(args, "out", None) else None
    if out is not None and not out_ready(out):
        return 2
    fields = dict(url=args.url, limit=args.limit, depth=args.depth, include=args.include, exclude=args.exclude,
                  timeout_s=args.timeout, fresh=args.fresh or None)
    files = CrawlFiles(out) if out is not None else None
    if args.command == "crawl":
        fields["stream"] = True
    result = _result(client, args.command, fields, args.json, None if args.json else
                     files.page if files is not None else _print_page)
    if result is None:
        return 1
    if args.json:
        return 0
    if args.command == "map":
        for url in result["urls"]:
            print(url)
    elif files is not None:
        files.finish(result)
        print(f"webfetch: {_n(len(files.entries), 'page')} written to {out} (index: {files.out / INDEX_MD})",
              file=sys.stderr)
    _summary(result)
    return 0


def _print_page(page: dict[str, Any]) -> None:
    print(f"<!-- {page['url']} -->\n{page['content'].rstrip()}\n", flush=True)


def _result(client: Client, op: str, fields: dict[str, Any], as_json: bool,
            on_page: Callable[[dict[str, Any]], None] | None) -> dict[str, Any] | None:
    """The terminal frame (None: an error, said on stderr); each `page` frame to `on_page` as it comes."""
    tty = sys.stderr.isatty()
    for frame in client.request(op, **fields):
        if as_json:
            print(json.dumps(frame, ensure_ascii=False), flush=True)
        kind = frame.get("type")
        if kind == "progress":
            if not as_json:
                line = f"{frame.get('stage')}: {frame.get('message')}"
                print(f"\r\x1b[K{line}" if tty else line, end="" if tty else "\n", file=sys.stderr, flush=True)
            continue
        if tty and not as_json:
            print("\r\x1b[K", end="", file=sys.stderr, flush=True)
        if kind == "page":
            if on_page is not None:
                on_page(frame)
            continue
        if kind == "error":
            if not as_json:
                print(f"webfetch: {frame.get('code')}: {cli_words(str(frame.get('message')))}", file=sys.stderr)
            return None
        return frame
    return None


def _summary(result: dict[str, Any]) -> None:
    found = len(result.get("pages", result.get("urls", [])))
    print(f"webfetch: {_n(found, 'page' if 'pages' in result else 'URL')}, stopped: {result['stopped']}, "
          f"{result['queued']} queued, {len(result['failed'])} failed, robots.txt {result['robots']}",
          file=sys.stderr)
    for failure in result["failed"]:
        print(f"webfetch: failed: {failure['url']}: {failure['code']}: {cli_words(failure['message'])}",
              file=sys.stderr)
    for note in result.get("notes", []):
        print(f"webfetch: note: {cli_words(note)}", file=sys.stderr)


def ready(args: argparse.Namespace) -> bool:
    """Whether the command line can work (its patterns, its --out); if not, says why on stderr. Asked before
    a daemon is asked (or started) for anything."""
    if not patterns_ready(args.include or [], args.exclude or []):
        return False
    return not getattr(args, "out", None) or out_ready(Path(args.out))


def patterns_ready(include: list[str], exclude: list[str]) -> bool:
    """Whether the --include and --exclude patterns can work; if not, says why on stderr, as the daemon
    would refuse them (crawl_patterns.problem: compiled here, in the CLI's own process), in the flags' words."""
    from ..parse.crawl_patterns import problem

    trouble = problem(include, exclude)
    if trouble is not None:
        print(f"webfetch: bad_request: {cli_words(trouble)}", file=sys.stderr)
        return False
    return True


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def out_ready(out: Path) -> bool:
    """Whether the crawl can be written to `out`; if not, says why on stderr (before anything is fetched)."""
    problem = _unwritable(out)
    if problem is not None:
        print(f"webfetch: cannot write the crawl to {out}: {problem}; pass --out with a directory you can write",
              file=sys.stderr)
    return problem is None


def _unwritable(out: Path) -> str | None:
    """Why `out` cannot take the files (None: it can): made if missing, then written to and cleaned."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".webfetch-probe-"):
            pass
    except OSError as e:
        return e.strerror or str(e)
    return None


def page_file(url: str) -> Path:
    """The file a page goes to, mirroring its URL's path: `/docs/guide/` → docs/guide/index.md, `/a/b` →
    a/b.md, a query kept in the name (`cal?month=2` → cal_month=2.md). Every segment is made safe: no `..`,
    no separators, no control characters, at most MAX_SEGMENT characters (a digest keeps long ones apart)."""
    parts = urlsplit(url)
    segments = [s for s in parts.path.split("/") if s]
    if parts.path.endswith("/") or not segments:
        segments.append("index")
    if parts.query:
        segments[-1] += "_" + parts.query
    safe = [_safe(s) for s in segments]
    safe[:-1] = [s + "_" if s.endswith(".md") else s for s in safe[:-1]]   # a directory never takes a page's name
    if safe[0] in (INDEX_JSON.removesuffix(".json"), INDEX_MD.removesuffix(".md")):
        safe[0] += "_"
    return Path(*safe[:-1], safe[-1] + ".md")


def _safe(segment: str) -> str:
    text = _UNSAFE.sub("_", segment).strip(".") or "_"
    if len(text) > MAX_SEGMENT:
        text = text[:MAX_SEGMENT - 9] + "-" + hashlib.sha256(segment.encode()).hexdigest()[:8]
    return text


class CrawlFiles:
    """A crawl written to `out` as it comes: each page's markdown in its own file the moment its (whole) page
    arrives, then, from the result, the index of them all (markdown and JSON)."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.taken: set[Path] = set()
        self.entries: list[dict[str, Any]] = []

    def page(self, page: dict[str, Any]) -> None:
        path = page_file(page["url"])
        n = 2
        while path in self.taken:  # two URLs that make one name (`a b` and `a_b`)
            path = path.with_name(f"{path.stem}-{n}.md")
            n += 1
        self.taken.add(path)
        _write(self.out / path, f"<!-- {page['url']} -->\n{page['content'].rstrip()}\n")
        self.entries.append({"file": str(path), "url": page["url"], "final_url": page["final_url"],
                             "title": page["title"], "chars": page["chars"], "flags": page["flags"],
                             "depth": page["depth"]})

    def finish(self, result: dict[str, Any]) -> None:
        index = {"url": result["url"], "stopped": result["stopped"], "queued": result["queued"],
                 "robots": result["robots"], "pages": self.entries, "failed": result["failed"],
                 "notes": [n for n in result["notes"] if "crawl.result_chars" not in n]}  # every file is whole
        _write(self.out / INDEX_JSON, json.dumps(index, indent=2, ensure_ascii=False) + "\n")
        _write(self.out / INDEX_MD, _index_md(index))


def write_crawl(out: Path, result: dict[str, Any]) -> None:
    """A result whose pages are whole, written as `CrawlFiles` writes a streamed crawl."""
    files = CrawlFiles(out)
    for page in result["pages"]:
        files.page(page)
    files.finish(result)


def _index_md(index: dict[str, Any]) -> str:
    lines = [f"# Crawl of {index['url']}", "",
             f"{len(index['pages'])} pages; stopped: {index['stopped']}; {index['queued']} queued; "
             f"{len(index['failed'])} failed; robots.txt {index['robots']}.", "",
             "| file | title | URL | chars | flags |", "|---|---|---|---|---|"]
    for e in index["pages"]:
        title = (e["title"] or "").replace("|", "\\|")
        lines.append(f"| [{e['file']}]({e['file']}) | {title} | {e['url']} | {e['chars']} | "
                     f"{', '.join(e['flags'])} |")
    if index["failed"]:
        lines += ["", "## Failed", ""] + [f"- {f['url']}: {f['code']}: {f['message']}" for f in index["failed"]]
    return "\n".join(lines) + "\n"


def _write(path: Path, text: str) -> None:
    """Whole or not at all: a temporary file beside it, renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".webfetch-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
