"""`webfetch crawl` and `webfetch map`: a site as local markdown files for an agent, or its URLs one a line.
Progress goes to stderr; the files are written as the result arrives, each whole or not at all."""

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
    p = sub.add_parser("map", help="a site's URLs, one a line: its sitemaps, then the links of its pages")
    scope(p, "URLs, at most (default 500)")


def run(client: Client, args: argparse.Namespace) -> int:
    out = Path(args.out) if getattr(args, "out", None) else None
    if out is not None and not out_ready(out):
        return 2
    fields = dict(url=args.url, limit=args.limit, depth=args.depth, include=args.include, exclude=args.exclude,
                  timeout_s=args.timeout, fresh=args.fresh or None)
    result = _result(client, args.command, fields, args.json)
    if result is None:
        return 1
    if args.json:
        return 0
    if args.command == "map":
        for url in result["urls"]:
            print(url)
    elif out is not None:
        write_crawl(out, result)
        print(f"webfetch: {_n(len(result['pages']), 'page')} written to {out} (index: {out / INDEX_MD})",
              file=sys.stderr)
    else:
        for page in result["pages"]:
            print(f"<!-- {page['url']} -->\n{page['content'].rstrip()}\n")
    _summary(result)
    return 0


def _result(client: Client, op: str, fields: dict[str, Any], as_json: bool) -> dict[str, Any] | None:
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
        if kind == "error":
            if not as_json:
                print(f"webfetch: {frame.get('code')}: {frame.get('message')}", file=sys.stderr)
            return None
        return frame
    return None


def _summary(result: dict[str, Any]) -> None:
    found = len(result.get("pages", result.get("urls", [])))
    print(f"webfetch: {_n(found, 'page' if 'pages' in result else 'URL')}, stopped: {result['stopped']}, "
          f"{result['queued']} queued, {len(result['failed'])} failed, robots.txt {result['robots']}",
          file=sys.stderr)
    for failure in result["failed"]:
        print(f"webfetch: failed: {failure['url']}: {failure['code']}: {failure['message']}", file=sys.stderr)
    for note in result.get("notes", []):
        print(f"webfetch: note: {note}", file=sys.stderr)


def ready(args: argparse.Namespace) -> bool:
    """Whether the command line can work (its patterns, its --out); if not, says why on stderr. The CLI asks
    before a daemon is asked (or started) for anything."""
    if not patterns_ready(args.include or [], args.exclude or []):
        return False
    return not getattr(args, "out", None) or out_ready(Path(args.out))


def patterns_ready(include: list[str], exclude: list[str]) -> bool:
    """Whether the --include and --exclude patterns can work; if not, says why on stderr in the flags' own
    names (the daemon would refuse them too, in its fields' names), before anything is fetched."""
    from ..crawl_patterns import check
    from ..errors import BadRequest

    try:
        check(include, exclude, ("--include", "--exclude"))
    except BadRequest as e:
        print(f"webfetch: {e.code}: {e.message}", file=sys.stderr)
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


def write_crawl(out: Path, result: dict[str, Any]) -> None:
    """Each page's markdown in its own file, then the index of them all (markdown and JSON)."""
    taken: set[Path] = set()
    entries = []
    for page in result["pages"]:
        path = page_file(page["url"])
        n = 2
        while path in taken:  # two URLs that make one name (`a b` and `a_b`)
            path = path.with_name(f"{path.stem}-{n}.md")
            n += 1
        taken.add(path)
        _write(out / path, f"<!-- {page['url']} -->\n{page['content'].rstrip()}\n")
        entries.append({"file": str(path), "url": page["url"], "final_url": page["final_url"], "title": page["title"],
                        "chars": page["chars"], "flags": page["flags"], "depth": page["depth"]})
    index = {"url": result["url"], "stopped": result["stopped"], "queued": result["queued"],
             "robots": result["robots"], "pages": entries, "failed": result["failed"], "notes": result["notes"]}
    _write(out / INDEX_JSON, json.dumps(index, indent=2, ensure_ascii=False) + "\n")
    _write(out / INDEX_MD, _index_md(index))


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
