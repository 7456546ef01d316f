"""robots.txt as RFC 9309 reads it: the group for our agent (else `*`), the longest matching rule wins, an
Allow wins a tie, `*` and `$` in paths. Written here rather than taken from urllib.robotparser, which
matches plain prefixes only (no `*` or `$`, which most large sites' files use), lets the first matching rule
win instead of the longest (so `Allow: /docs/public` under `Disallow: /docs` is lost when it comes after
it), and reads the file itself with urllib (blocking, outside the address policy)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import unquote

# The product token a robots.txt group names to address webfetch; `*` groups apply otherwise.
AGENT = "webfetch"
# RFC 9309 §2.5: a crawler must read at least 500 KiB of the file; what follows is ignored.
MAX_ROBOTS_BYTES = 500 * 1024


@dataclass(frozen=True)
class Rule:
    allow: bool
    path: str                 # as written, percent-decoded except for `/`
    pattern: re.Pattern[str]


@dataclass(frozen=True)
class Robots:
    """The rules that apply to webfetch on one host, and the sitemaps the file names."""

    rules: tuple[Rule, ...] = ()
    sitemaps: tuple[str, ...] = field(default=())
    disallow_all: bool = False  # the file could not be read for a server error: RFC 9309 says assume so

    def allowed(self, path_and_query: str) -> bool:
        """Whether `path_and_query` (`/docs/a?x=1`) may be crawled: the longest matching rule decides."""
        if self.disallow_all:
            return False
        target = _normal(path_and_query or "/")
        best: Rule | None = None
        for rule in self.rules:
            if rule.pattern.match(target) and (best is None or len(rule.path) > len(best.path)
                                               or (len(rule.path) == len(best.path) and rule.allow)):
                best = rule
        return best is None or best.allow


ALLOW_ALL = Robots()
DISALLOW_ALL = Robots(disallow_all=True)


def parse_robots(text: str, agent: str = AGENT) -> Robots:
    """The rules of the group that names `agent` (all such groups merged), else of the `*` groups."""
    groups: list[tuple[list[str], list[Rule]]] = []
    sitemaps: list[str] = []
    for key, value in _lines(text):
        if key == "sitemap":
            sitemaps.append(value)
        elif key == "user-agent":
            if not groups or groups[-1][1]:   # a user-agent line after rules starts a new group
                groups.append(([], []))
            groups[-1][0].append(value.lower())
        elif groups and value:  # `Disallow:` with nothing allows everything: no rule
            groups[-1][1].append(_rule(key == "allow", value))
    wanted = agent.lower()
    named = [rules for agents, rules in groups if wanted in agents]
    chosen = named or [rules for agents, rules in groups if "*" in agents]
    return Robots(tuple(r for rules in chosen for r in rules), tuple(sitemaps))


def _lines(text: str) -> list[tuple[str, str]]:
    """The file's `key: value` lines that robots.txt defines, comments and blanks dropped, keys lowercased."""
    found = []
    for raw in text[:MAX_ROBOTS_BYTES].splitlines():
        key, sep, value = raw.split("#", 1)[0].partition(":")
        key, value = key.strip().lower(), value.strip()
        if sep and key in ("sitemap", "user-agent", "allow", "disallow") and (value or key != "sitemap"):
            found.append((key, value))
    return found


def _rule(allow: bool, path: str) -> Rule:
    path = _normal(path if path.startswith(("/", "*")) else "/" + path)
    anchored = path.endswith("$")
    body = path[:-1] if anchored else path
    regex = ".*".join(re.escape(part) for part in body.split("*")) + ("$" if anchored else "")
    return Rule(allow, path, re.compile(regex, re.S))


def _normal(path: str) -> str:
    """Percent-encoding compared decoded (`%7E` is `~`), except an encoded `/`, which is not a separator."""
    return "%2F".join(unquote(part) for part in re.split("%2[fF]", path))
