"""A crawl's `include` and `exclude` patterns: a glob matched against a URL's path and query (`*` crosses `/`),
or a Python regular expression between slashes, searched in them (PROTOCOL.md).

They are a tool argument the model chooses, and a regular expression can backtrack for ever (`/(a+)+$/`
against a path of forty a's and a `!`) while `re` holds the GIL with no timeout, and even compiling one is
not free (`(?i)` over a class of all Unicode is ~12 ms a class). So a pattern is compiled in a parser worker
(`problem`, through Extractor.patterns_problem, under the request's deadline: a bad one is a bad_request
before anything is loaded) and matched in one too (`admitted`, through Extractor.matching), a page's links
or a sitemap's URLs in one job, where the crawl's deadline kills the worker, as it does for `find`'s regular
expressions. Globs go with them: one job for all of a batch's patterns, and a glob of many `*` against a long
path is not free either."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable

from ..errors import BadRequest


def _compiled(text: str, name: str) -> Callable[[str], bool]:
    """`/regex/` searched in the path and query, else a glob matched against all of them."""
    if _is_regex(text):
        try:
            regex = re.compile(text[1:-1])
        except re.error as e:
            raise BadRequest(f"`{name}` pattern {text!r} is not a valid regular expression: {e}; write a glob "
                             f"such as /docs/* or a regular expression between slashes") from None
        return lambda target: regex.search(target) is not None
    return lambda target: fnmatch.fnmatchcase(target, text)


def _is_regex(text: str) -> bool:
    return len(text) >= 2 and text.startswith("/") and text.endswith("/")


def glob_problem(text: str) -> str | None:
    """Why glob `text` can match no URL where its writer meant it to (None: it is well-formed). fnmatch says
    nothing of these: it takes an unclosed `[` as a literal bracket and a class of reversed ranges as
    matching nothing, and a pattern not starting where a path starts never matches, so each would filter
    every URL out without a word."""
    if text[:1] not in ("/", "*", "?", "["):
        return (f"can match no URL: it is matched against the path from its leading '/' (with the query); write "
                f"/{text.lstrip('./')} or *{text}")
    i = 0
    while (i := text.find("[", i)) != -1:
        j = i + 1
        j += text[j:j + 1] == "!"
        j += text[j:j + 1] == "]"   # a ']' first in a class is a member, not its end
        end = text.find("]", j)
        if end == -1:
            return (f"has a '[' (character {i + 1}) that is never closed: a class is [abc], a literal bracket "
                    f"[[]")
        members = text[i + 1:end].removeprefix("!")
        for k in range(len(members) - 2):
            if members[k + 1] == "-" and members[k] > members[k + 2]:
                return f"has a reversed range, {members[k:k + 3]} in [{text[i + 1:end]}], which matches nothing: " \
                       f"write it low-high"
        i = end + 1
    return None


def check_globs(include: list[str], exclude: list[str]) -> None:
    """BadRequest for the first glob that cannot match as meant (`glob_problem`), naming it and whether it is an
    include. Text work only, linear in the patterns: the daemon (and the CLI) may run it; regular expressions
    are compiled by `problem`, in a worker."""
    for patterns, name in ((include, "include"), (exclude, "exclude")):
        for pattern in patterns:
            trouble = None if _is_regex(pattern) else glob_problem(pattern)
            if trouble is not None:
                raise BadRequest(f"`{name}` pattern {pattern!r} {trouble}")


def problem(include: list[str], exclude: list[str]) -> str | None:
    """Why the patterns are refused (the first glob that cannot match as meant, or regular expression that does
    not compile), else None. Compiles them: for a parser worker (Extractor.patterns_problem)."""
    try:
        check_globs(include, exclude)
        for patterns, name in ((include, "include"), (exclude, "exclude")):
            for pattern in patterns:
                _compiled(pattern, name)
    except BadRequest as e:
        return e.message
    return None


def admitted(include: tuple[str, ...], exclude: tuple[str, ...], targets: list[str]) -> list[int]:
    """The indexes of `targets` (paths with their query) that match an `include` pattern, if any are given,
    and no `exclude` pattern. Runs in a worker process: this is where a pattern may take for ever."""
    wanted = [_compiled(p, "include") for p in include]
    unwanted = [_compiled(p, "exclude") for p in exclude]
    return [i for i, target in enumerate(targets)
            if (not wanted or any(match(target) for match in wanted)) and not any(match(target) for match in unwanted)]
