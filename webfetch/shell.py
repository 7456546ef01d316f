"""Commands webfetch suggests (in a note, a hint, an error) are safe to paste: `command` shell-quotes each
argument, so that a value a server chose (a redirect's `?next=$(id>x)`) or a user typed is one argument
and runs nothing.

A URL argument is percent-encoded first where RFC 3986 never has a raw character (a backtick, a space, a
quote mark, a newline, non-ASCII): it means the same to a server, and a backtick left raw would end the
Markdown code span the command is shown in (a reader copying the span would get half a command)."""

from __future__ import annotations

import shlex
from urllib.parse import quote

# RFC 3986's reserved and unreserved characters, and `%` (an escape already made): kept as they are
_URL_SAFE = ":/?#[]@!$&'()*+,;=-._~%"


def command(*argv: str) -> str:
    """The command line that runs `argv`, each argument quoted for a POSIX shell where it needs it."""
    return shlex.join(url_arg(a) if "://" in a else a for a in argv)


def url_arg(url: str) -> str:
    """`url` with what a URL never holds raw percent-encoded (UTF-8), the rest as it is."""
    return quote(url, safe=_URL_SAFE)
