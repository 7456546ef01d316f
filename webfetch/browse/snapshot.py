"""A page as text for an agent: one line per control, heading or text, with stable refs (`e12`) to act on.

The walk runs in the page, in an isolated JavaScript world of each frame (the page's own scripts cannot
see or change it), because Chrome's accessibility tree is too slow for big pages: `getFullAXTree` took
1.5-1.9 s for a 3 000-row table here (36 000 nodes), the walk a small fraction of that. Roles and names
follow the accessibility rules closely enough for an agent (explicit role, then the element's own role;
aria-labelledby, aria-label, label, placeholder, title, then text content). Refs live in the world as a
ref -> element map, so the same element keeps its ref; a new document starts an empty world, and the
daemon knows every ref's document (worlds.py), so an old ref is `stale_ref`, never a guess.
Long runs of similar siblings are collapsed (`find` reaches them) and the walk has a node budget; a change
inside a collapsed run (a click that marks row 1 500 of a table) is followed by a MutationObserver in the
world and reported with the changed rows' own lines (`Snapshot.inside`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import page_scripts

WORLD_NAME = "webfetch-browse"
COLLAPSE_AT = 8       # a run of this many similar siblings is collapsed...
COLLAPSE_KEEP = 3     # ...to its first few and one line that counts the rest
NODE_BUDGET = 40_000  # elements visited per frame and snapshot

# What the settle asks of the page's own world (webfetch/js/pending.js, in every document of a browse tab
# before the page's scripts): the fetch/XHR begun since the action still pending, the animation frames the
# page asked for, whether it watches frame-time events, and a navigation it began. Two events carry the
# question and the answer between the worlds.
ASK_PENDING, PENDING_ANSWER = "webfetch-pending-ask", "webfetch-pending"
# named, so that the console can leave its frames out of the page's stacks (a fetch that failed passes
# through its wrapper)
PENDING_SCRIPT_URL = "webfetch-pending.js"
PENDING_JS = page_scripts.load("pending").call(ASK_PENDING, PENDING_ANSWER) + f"\n//# sourceURL={PENDING_SCRIPT_URL}"
# The walk and the ref map (webfetch/js/snapshot.js), installed once per document in the isolated world as
# `__wf`, the world's own global.
PAGE_JS = page_scripts.load("snapshot").call(COLLAPSE_AT, COLLAPSE_KEEP, ASK_PENDING, PENDING_ANSWER)


@dataclass
class Snapshot:
    lines: list[str]              # the requested view, indented, iframes' content inlined
    full: list[str] | None        # every line (full mode), when asked for beside an interactive view
    truncated: bool               # the node budget ran out
    title: str
    # of a whole snapshot: what changed inside collapsed runs since the last whole one (the changed rows'
    # lines under a line that says where), since no diff of `full` can see what it does not show
    inside: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def diff(old: list[str], new: list[str]) -> tuple[list[str], list[str]]:
    """Lines of `new` that `old` did not have (in order), and the refs `old` showed that `new` does not.
    Focus moving is not a change worth a line (every click moves it)."""
    seen: dict[str, int] = {}
    for line in old:
        seen[_unfocused(line)] = seen.get(_unfocused(line), 0) + 1
    added = []
    for line in new:
        key = _unfocused(line)
        if seen.get(key, 0) > 0:
            seen[key] -= 1
        else:
            added.append(line)
    new_refs = {r for line in new for r in _refs(line)}
    removed = [r for line in old for r in _refs(line) if r not in new_refs]
    return added, removed


def _unfocused(line: str) -> str:
    return line.replace("focused, ", "").replace(" [focused]", "")


def _refs(line: str) -> list[str]:
    at = line.find("ref=e")
    if at < 0:
        return []
    end = at + 4
    while end < len(line) and line[end] not in ",]":
        end += 1
    return [line[at + 4:end]]
