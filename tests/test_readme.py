"""The README as a person reads it (issue 36): short enough to read, its CLI table complete, its links whole.

The commands and flags are read from the real argparse parser (`webfetch.frontends.cli.main` is stopped at
its `parse_args`), so a command or flag added without its line in README.md and docs/CLI.md fails here, as
does a config key without its row in docs/CONFIG.md, or a relative link (and its #anchor, as GitHub makes
them from headings) in README.md or docs/*.md that leads nowhere. And docs/ARCHITECTURE.md stays a map
(issue 35): at most 250 lines, every file it names in backticks there. No daemon, no Chromium.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from webfetch.config import Config, needs_restart
from webfetch.frontends import cli

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_LINES = 400
FIRST_SCREEN = 45  # lines: what a terminal or GitHub's page shows before any scrolling


class _Parsed(BaseException):  # BaseException: no `except Exception` in main may swallow it
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def _real_parser(monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    """The parser `webfetch` builds, taken at the moment it would parse a command line."""
    def stop(self: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        raise _Parsed(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", stop)
    with pytest.raises(_Parsed) as caught:
        cli.main(["status"])
    return caught.value.parser


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {name: sub for action in parser._actions if isinstance(action, argparse._SubParsersAction)
            for name, sub in action.choices.items()}


def _words(parser: argparse.ArgumentParser) -> list[str]:
    """What may follow a command on its line: its nested subcommands and its positionals' fixed choices
    (`cache clear`, `pi install`, `browse open`…)."""
    words = list(_subcommands(parser))
    for action in parser._actions:
        if not action.option_strings and action.choices and not isinstance(action, argparse._SubParsersAction):
            words += [str(c) for c in action.choices]
    return words


def _flags(parser: argparse.ArgumentParser) -> list[str]:
    return [flag for action in parser._actions for flag in action.option_strings
            if flag not in ("-h", "--help") and (flag.startswith("--") or len(action.option_strings) == 1)]


def _prose(text: str) -> str:
    """Markdown without its fenced code blocks (a `# comment` in a shell block is not a heading)."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return "\n".join(out)


def _cells(row: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip().strip("|"))]


def _cli_table_rows() -> list[str]:
    """The first cell of each row of README's CLI table (rows that start with `webfetch …`)."""
    return [_cells(line)[0] for line in _prose(README.read_text()).splitlines()
            if line.startswith("| `webfetch ")]


def test_readme_is_at_most_400_lines() -> None:
    lines = README.read_text().count("\n")
    assert lines <= MAX_LINES, (f"README.md is {lines} lines; at most {MAX_LINES}: move reference text into "
                                f"docs/ (CLI.md, CONFIG.md, BROWSE.md, BENCHMARKS.md…) and link it")


def test_first_screen_runs_the_main_job_and_the_tests_and_says_where_the_config_lives() -> None:
    first = "\n".join(README.read_text().splitlines()[:FIRST_SCREEN])
    for needed in ("bin/webfetch fetch ", "bin/test", "~/.config/webfetch/config.toml"):
        assert needed in first, f"README's first {FIRST_SCREEN} lines do not show {needed!r}"


def test_readme_carries_no_measurement_records() -> None:
    """Commit hashes and load averages belong in docs/BENCHMARKS.md, not between the usage texts."""
    text = _prose(README.read_text())
    assert not re.search(r"load average", text, re.I), "README.md mentions a load average"
    hashes = re.findall(r"(?<![\w/.-])[0-9a-f]{7,40}(?![\w-])", text)
    assert not [h for h in hashes if re.search(r"[a-f]", h) and re.search(r"\d", h)], \
        f"README.md names commits: {hashes}"


def test_every_cli_command_and_subcommand_has_a_row_in_the_readme_table(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _cli_table_rows()
    assert rows, "README.md has no CLI table (rows starting with | `webfetch …)"
    missing = []
    for name, sub in _subcommands(_real_parser(monkeypatch)).items():
        mine = [r for r in rows if re.match(rf"`webfetch {re.escape(name)}(?![\w-])", r)]
        if not mine:
            missing.append(name)
            continue
        for word in _words(sub):
            if not any(re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", r) for r in mine):
                missing.append(f"{name} {word}")
    assert not missing, f"README.md's CLI table has no row for: {', '.join(missing)}"


def test_docs_cli_names_every_command_subcommand_and_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (DOCS / "CLI.md").read_text()
    missing = []

    def walk(prefix: str, parser: argparse.ArgumentParser) -> None:
        if prefix and f"webfetch {prefix}" not in text:
            missing.append(f"webfetch {prefix}")
        section = _section_of(text, prefix)
        for flag in _flags(parser):
            if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", section):
                missing.append(f"webfetch {prefix} {flag}".replace("  ", " "))
        for word in _words(parser):
            if word not in _subcommands(parser) and not re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", section):
                missing.append(f"webfetch {prefix} {word}")
        for name, sub in _subcommands(parser).items():
            walk(f"{prefix} {name}".strip(), sub)

    walk("", _real_parser(monkeypatch))
    assert not missing, f"docs/CLI.md does not describe: {', '.join(missing)}"


def _section_of(text: str, command: str) -> str:
    """The part of docs/CLI.md about `webfetch COMMAND` (its top-level command's `## webfetch …` section),
    so a flag is found where that command is described, not under another that shares its name; with the
    preamble before the first command's section, where the flags most commands share are described."""
    top = command.split(" ")[0] if command else ""
    if not top:
        return text
    m = re.search(rf"^## `webfetch {re.escape(top)}\b.*?(?=^## |\Z)", text, re.M | re.S)
    assert m, f"docs/CLI.md has no section headed ## `webfetch {top} …`"
    return text[:re.search(r"^## `webfetch ", text, re.M).start()] + m.group(0)


def test_docs_config_has_a_row_for_every_key_saying_reload_or_restart() -> None:
    rows = {}
    for line in (DOCS / "CONFIG.md").read_text().splitlines():
        m = re.match(r"\| `([a-z_]+\.[a-z_]+)` \|", line)
        if m:
            rows[m.group(1)] = _cells(line)
    keys = [f"{section}.{name}" for section in Config.__struct_fields__
            for name in getattr(Config(), section).__struct_fields__]
    assert not [k for k in keys if k not in rows], \
        f"docs/CONFIG.md has no row for: {[k for k in keys if k not in rows]}"
    assert not [k for k in rows if k not in keys], \
        f"docs/CONFIG.md has rows for keys webfetch does not know: {[k for k in rows if k not in keys]}"
    wrong = [k for k in keys if rows[k][2].startswith("restart") != needs_restart(k)]
    assert not wrong, (f"docs/CONFIG.md says reload/restart wrongly for {wrong} (config.RESTART_KEYS is what "
                       f"a reload cannot change)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercased, punctuation but `-` and `_` dropped, spaces to `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for line in _prose(path.read_text()).splitlines():
        m = re.match(r"#{1,6} (.*)", line)
        if m:
            base = _slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            anchors.add(base if n == 0 else f"{base}-{n}")
    return anchors


def test_every_relative_link_in_readme_and_docs_resolves() -> None:
    broken = []
    for page in [README, *sorted(DOCS.glob("*.md"))]:
        prose = re.sub(r"`[^`\n]*`", "", _prose(page.read_text()))  # inline code holds no links
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not ours to check
                continue
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            where = f"{page.relative_to(ROOT)}: ({target})"
            if not dest.exists():
                broken.append(f"{where}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{where}: no heading with that anchor in {dest.relative_to(ROOT)}")
    assert not broken, "broken links:\n" + "\n".join(broken)


ARCHITECTURE = DOCS / "ARCHITECTURE.md"
ARCHITECTURE_MAX_LINES = 250  # issue 35: a map, not a history
# where a path in ARCHITECTURE.md may be written from: the repository, the package, the frontends (whose
# `pi_extension/…`), the tests
_PATH_BASES = (ROOT, ROOT / "webfetch", ROOT / "webfetch" / "frontends", ROOT / "tests")
_FILE_NAME = re.compile(r"[\w./-]+\.(?:py|ts|mjs|json|md|toml)\b")


def _named_files(text: str) -> list[str]:
    """Every file name or path written in backticks (`fetch/pipeline.py`, `tools.json`, `tests/test_x.py`)."""
    return [name for code in re.findall(r"`([^`\n]+)`", text) for name in _FILE_NAME.findall(code)]


def test_architecture_is_a_map_of_at_most_250_lines() -> None:
    lines = len(ARCHITECTURE.read_text().splitlines())
    assert lines <= ARCHITECTURE_MAX_LINES, (f"docs/ARCHITECTURE.md has {lines} lines (at most "
                                             f"{ARCHITECTURE_MAX_LINES}): a map; history goes in commit messages")


def test_every_file_architecture_names_exists() -> None:
    """A module moved or renamed leaves the map pointing nowhere: a path (`wing/x.py`) must resolve from
    the repository, webfetch/, webfetch/frontends/ or tests/; a bare name (`x.py`) must be some file's."""
    known = {p.name for top in ("webfetch", "tests", "bin", "docs") for p in (ROOT / top).rglob("*")
             if "node_modules" not in p.parts} | {p.name for p in ROOT.iterdir()}
    names = _named_files(ARCHITECTURE.read_text())
    assert len(names) > 100, "the map names its modules in backticks; the walk found too few"
    missing = sorted({n for n in names if not (any((base / n).is_file() for base in _PATH_BASES) if "/" in n
                                               else n in known)})
    assert not missing, f"docs/ARCHITECTURE.md names files that do not exist: {missing}"


def _toml_blocks(text: str) -> list[str]:
    """The TOML the README has a reader write: its ```toml blocks and its `cat >> config.toml <<'EOF'` bodies."""
    blocks = re.findall(r"```toml\n(.*?)```", text, re.S)
    return blocks + re.findall(r"config\.toml <<'EOF'\n(.*?)\nEOF\n", text, re.S)


async def test_the_readmes_address_policy_is_what_the_policy_does() -> None:
    """README says: after the first-five-minutes config (fetch.allow_hosts), 127.0.0.1 is open to fetch and
    browse alike; browse.allow_local opens a dev server's port to browse sessions alone, fetch still refused.
    The policy, read from the README's own config lines, must do just that (doctor and the errors are held to
    it by tests/test_browse_local.py)."""
    from webfetch.config import parse_config
    from webfetch.errors import BlockedUrl
    from webfetch.urls import AddressPolicy, admit_host

    text = README.read_text()
    assert "Browse follows the same address policy as fetch: after step 2, `127.0.0.1` is open to both." in text
    assert "To open your\ndev server to browse sessions alone (`fetch` stays refused)" in text
    [step2] = [b for b in _toml_blocks(text) if "allow_hosts" in b]
    [local] = [b for b in _toml_blocks(text) if "allow_local" in b]

    def policies(toml: str) -> tuple[AddressPolicy, AddressPolicy]:
        c = parse_config(toml)
        fetch = AddressPolicy.from_config(c.fetch.allow_private, c.fetch.allow_hosts)
        return fetch, fetch.for_browse(c.browse.allow_local)

    async def reaches(policy: AddressPolicy, host: str, port: int) -> bool:
        try:
            await admit_host(host, policy, port)
        except BlockedUrl:
            return False
        return True

    fetch, browse = policies(step2)
    for port in (8000, 3000, 5173):
        assert await reaches(fetch, "127.0.0.1", port) and await reaches(browse, "127.0.0.1", port)
    fetch, browse = policies(local)
    assert await reaches(browse, "127.0.0.1", 5173) and not await reaches(browse, "127.0.0.1", 8000)
    assert not await reaches(fetch, "127.0.0.1", 5173)
