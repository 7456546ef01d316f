"""robots.txt as RFC 9309 reads it: the group for our agent (else `*`), the longest matching rule wins, an
Allow wins a tie, `*` and `$` in paths. Written here rather than taken from urllib.robotparser, which
matches plain prefixes only (no `*` or `$`, which most large sites' files use), lets the first matching rule
win instead of the longest (so `Allow: /docs/public` under `Disallow: /docs` is lost when it comes after
it), and reads the file itself with urllib (blocking, outside the address policy).

A rule is the site's text, matched against every URL a crawl meets, in the event loop. So it is never a
regular expression (`*` as `.*` backtracks: `Disallow: /*a*a…*a*b` against a long URL ran for ever and froze
the daemon) but its literal pieces, found left to right (`urls.wildcard_match`, which browse's routes share):
a `*` may take as little as it likes, so the leftmost place for each piece is as good as any, and the whole
match is linear in the URL and the rule. Rules are found by their first piece (`Robots._by_start`): a URL is
matched against the rules whose leading literal it starts with, not against the whole file. The file is read up to
MAX_ROBOTS_BYTES (RFC 9309's minimum), and a group of more than MAX_RULES rules is taken as disallowing
everything (`why` says so): more rules than any real site writes, and each one costs every URL a look."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from urllib.parse import unquote

from ..urls import wildcard_match

# The product token a robots.txt group names to address webfetch; `*` groups apply otherwise.
AGENT = "webfetch"
# RFC 9309 §2.5: a crawler must read at least 500 KiB of the file; what follows is ignored.
MAX_ROBOTS_BYTES = 500 * 1024
# Rules in the group that applies to webfetch: more, and the file is taken as disallowing everything.
MAX_RULES = 10_000


@dataclass(frozen=True)
class Rule:
    allow: bool
    path: str                 # as written, percent-decoded except for `/`
    pieces: tuple[str, ...]   # the literal text between the `*`s (the path without a final `$`, split)
    anchored: bool            # it ended with `$`: the URL must end where the rule does

    def matches(self, target: str) -> bool:
        """Whether the rule matches `target` from its start, in linear time (urls.wildcard_match)."""
        return wildcard_match(self.pieces, target, self.anchored)


@dataclass(frozen=True)
class Robots:
    """The rules that apply to webfetch on one host, and the sitemaps the file names."""

    rules: tuple[Rule, ...] = ()
    sitemaps: tuple[str, ...] = field(default=())
    # the file could not be read (a server error, no answer, a body that cannot be inflated) or has more rules
    # than MAX_RULES: RFC 9309 says to assume everything is disallowed; `why` says which
    disallow_all: bool = False
    why: str = ""
    cut: bool = False         # the file was longer than MAX_ROBOTS_BYTES: the rest was ignored
    # the rules by their first piece, and the lengths of those pieces, shortest first
    by_start: dict[str, list[Rule]] = field(init=False, repr=False, compare=False)
    start_lengths: list[int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_start: defaultdict[str, list[Rule]] = defaultdict(list)
        for rule in self.rules:
            by_start[rule.pieces[0]].append(rule)
        object.__setattr__(self, "by_start", dict(by_start))  # frozen: set once, here
        object.__setattr__(self, "start_lengths", sorted({len(s) for s in by_start}))

    def allowed(self, path_and_query: str) -> bool:
        """Whether `path_and_query` (`/docs/a?x=1`) may be crawled: the longest matching rule decides."""
        if self.disallow_all:
            return False
        target = _normal(path_and_query or "/")
        best: Rule | None = None
        for length in self.start_lengths:
            if length > len(target):
                break
            for rule in self.by_start.get(target[:length], ()):
                if rule.matches(target) and (best is None or len(rule.path) > len(best.path)
                                             or (len(rule.path) == len(best.path) and rule.allow)):
                    best = rule
        return best is None or best.allow


ALLOW_ALL = Robots()


def disallow_all(why: str) -> Robots:
    return Robots(disallow_all=True, why=why)


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
    chosen = _group(groups, agent.lower())
    if len(chosen) > MAX_RULES:
        return Robots(sitemaps=tuple(sitemaps), disallow_all=True,
                      why=f"it has {len(chosen)} rules for webfetch, more than the {MAX_RULES} it reads")
    return Robots(tuple(chosen), tuple(sitemaps))


def _group(groups: list[tuple[list[str], list[Rule]]], agent: str) -> list[Rule]:
    """The rules of every group naming `agent`, else of every `*` group."""
    named = [rules for agents, rules in groups if agent in agents]
    return [r for rules in (named or [rules for agents, rules in groups if "*" in agents]) for r in rules]


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
    return Rule(allow, path, tuple(body.split("*")), anchored)


def _normal(path: str) -> str:
    """Percent-encoding compared decoded (`%7E` is `~`), except an encoded `/`, which is not a separator."""
    return "%2F".join(unquote(part) for part in re.split("%2[fF]", path))
