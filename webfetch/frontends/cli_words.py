"""The daemon's errors and notes in the command line's words.

The daemon writes one message for every client, naming what to change in the protocol's words, a request
field in backticks (`` pass a larger `timeout_s` ``): right for a model calling web_fetch over MCP or in pi,
which passes that field. A person at the command line types a flag instead, so the CLI reads each message
through this table before printing it; the wire (and `--json`) keeps the daemon's words.
"""

from __future__ import annotations

import re

# protocol words as messages write them → what a person types for them (frontends/cli.py, browse_cli.py,
# crawl_cli.py define the flags)
CLI_WORDS = {
    "`timeout_s`": "--timeout",
    "`offset`": "--offset",
    "`max_chars`": "--max-chars",
    "`prompt`": "--prompt",
    "`find`": "--find",
    "`raw`": "--raw",
    "`fresh`": "--fresh",
    "`model`": "--model",
    "`thinking`": "--thinking",
    "`profile`": "--profile",
    "`create: true`": "--new-profile",
    "`include`": "--include",
    "`exclude`": "--exclude",
    "the `dialog` action (`accept` true or false)": "`webfetch browse dialog accept` (or `dismiss`)",
}

# the longest first, so that a phrase wins over a word inside it
_WORDS = re.compile("|".join(re.escape(k) for k in sorted(CLI_WORDS, key=len, reverse=True)))


def cli_words(message: str) -> str:
    """A daemon's message with each protocol word of CLI_WORDS as the command line spells it."""
    return _WORDS.sub(lambda m: CLI_WORDS[m.group(0)], message)
