"""A crawl's `include` and `exclude` patterns: a glob matched against a URL's path and query (`*` crosses `/`),
or a Python regular expression between slashes, searched in them (PROTOCOL.md).

They are a tool argument the model chooses, and a regular expression can backtrack for ever (`/(a+)+$/`
against a path of forty a's and a `!`) while `re` holds the GIL with no timeout. So a pattern is compiled in
the daemon (`check`: a bad one is a bad_request before anything is loaded) and matched in a parser worker
process (`admitted`, through Extractor.matching), a page's links or a sitemap's URLs in one job, where the
crawl's deadline kills the worker, as it does for `find`'s regular expressions. Globs go with them: one job
for all of a batch's patterns, and a glob of many `*` against a long path is not free either."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable

from .errors import BadRequest


def _compiled(text: str, name: str) -> Callable[[str], bool]:
    """`/regex/` searched in the path and query, else a glob matched against all of them."""
    if len(text) >= 2 and text.startswith("/") and text.endswith("/"):
        try:
            regex = re.compile(text[1:-1])
        except re.error as e:
            raise BadRequest(f"`{name}` pattern {text!r} is not a valid regular expression: {e}; write a glob "
                             f"such as /docs/* or a regular expression between slashes") from None
        return lambda target: regex.search(target) is not None
    return lambda target: fnmatch.fnmatchcase(target, text)


def check(include: list[str], exclude: list[str]) -> None:
    """BadRequest for the first pattern that does not compile, naming it and whether it is an include."""
    for pattern in include:
        _compiled(pattern, "include")
    for pattern in exclude:
        _compiled(pattern, "exclude")


def admitted(include: tuple[str, ...], exclude: tuple[str, ...], targets: list[str]) -> list[int]:
    """The indexes of `targets` (paths with their query) that match an `include` pattern, if any are given,
    and no `exclude` pattern. Runs in a worker process: this is where a pattern may take for ever."""
    wanted = [_compiled(p, "include") for p in include]
    unwanted = [_compiled(p, "exclude") for p in exclude]
    return [i for i, target in enumerate(targets)
            if (not wanted or any(match(target) for match in wanted)) and not any(match(target) for match in unwanted)]
