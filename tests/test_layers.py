"""The layers of webfetch/, read from its imports (ast, every import in a module, function-level ones too):
the daemon (everything outside webfetch/frontends/) imports no frontend; the browse package has one door,
`from .browse import Browse` in daemon.py, and nothing outside it imports its modules; nothing imports the
CLI but `python -m webfetch`. Inside browse/, the shape issue 35 gave it: no class over 400 lines, and no
module touching another's private (underscore) names. And one CDP vocabulary: the Target and Browser domains
are spoken by the Chrome module alone. The wings (issue 35's third step): browse imports neither fetch/ nor
crawl/, fetch/ not browse/, parse/ no browser, CDP, fetch/, crawl/ or browse/ module; the core (protocol,
errors, urls, config, mime, paging) imports no wing; no module anywhere imports or reads another's underscore
names; at most 25 modules at the top level. A failure names each offending file and line."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import webfetch

PACKAGE = Path(webfetch.__file__).parent
FRONTENDS = "webfetch.frontends"
BROWSE = "webfetch.browse"
CLI = "webfetch.frontends.cli"
# `python -m webfetch` is the CLI's own entry, as the console script is: the one module that imports it
ENTRY = "webfetch.__main__"


def _modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own name, not `.__init__`)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ["webfetch", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[int, str]]:
    """(line, module) for each module `name` imports; `from X import y` counts X, and X.y where y is a
    module of X."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base_parts = package[:len(package) - node.level + 1] if node.level else []
            base = ".".join([*base_parts, *([node.module] if node.module else [])])
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{a.name}") for a in node.names if f"{base}.{a.name}" in MODULES]
    return found


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _where(name: str, line: int, target: str) -> str:
    return f"{MODULES[name].relative_to(PACKAGE.parent)}:{line} imports {target}"


def _offences(importer_ok, target_bad) -> list[str]:
    return [_where(name, line, target) for name, path in MODULES.items() if not importer_ok(name)
            for line, target in _imports(name, path) if target_bad(target)]


def test_the_walk_sees_the_imports_it_judges():
    """So that the rules below cannot pass by reading nothing: the imports they are about are found."""
    assert any(t == CLI for _, t in _imports(ENTRY, MODULES[ENTRY]))
    assert any(t == BROWSE for _, t in _imports("webfetch.daemon", MODULES["webfetch.daemon"]))
    assert any(_within(t, FRONTENDS) for name, path in MODULES.items() if _within(name, FRONTENDS)
               for _, t in _imports(name, path))


def test_nothing_in_the_daemon_imports_a_frontend():
    offences = _offences(lambda name: _within(name, FRONTENDS) or name == ENTRY,
                         lambda target: _within(target, FRONTENDS))
    assert not offences, "the daemon imports webfetch/frontends/ (only the reverse may be):\n" + "\n".join(offences)


def test_nothing_outside_the_browse_package_imports_its_modules():
    offences = _offences(lambda name: _within(name, BROWSE), lambda target: target.startswith(BROWSE + "."))
    assert not offences, ("webfetch.browse has one door, the package itself (`from .browse import Browse`):\n"
                          + "\n".join(offences))


def test_in_the_daemon_only_daemon_py_enters_the_browse_package():
    def may(name: str) -> bool:
        # the view's pages show browse sessions (issue 37): through the package's door, as daemon.py
        return _within(name, BROWSE) or _within(name, FRONTENDS) or _within(name, VIEW) or name == "webfetch.daemon"
    offences = _offences(may, lambda target: _within(target, BROWSE))
    assert not offences, ("only daemon.py starts the Browse actor; the rest of the daemon knows nothing of it:\n"
                          + "\n".join(offences))


def test_nothing_imports_the_cli():
    offences = _offences(lambda name: name in (ENTRY, CLI), lambda target: target == CLI)
    assert not offences, "nothing imports the CLI (webfetch/frontends/cli.py):\n" + "\n".join(offences)


# A class in browse/ holds one idea; past this it held several (BrowseTab had six in 710 lines).
CLASS_MAX_LINES = 400


def _browse_modules() -> dict[str, ast.Module]:
    return {name: ast.parse(path.read_text(), str(path)) for name, path in MODULES.items() if _within(name, BROWSE)}


def test_no_class_in_browse_is_over_400_lines():
    over = [f"{MODULES[name].relative_to(PACKAGE.parent)}:{node.lineno} class {node.name} is "
            f"{node.end_lineno - node.lineno + 1} lines"
            for name, tree in _browse_modules().items() for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > CLASS_MAX_LINES]
    assert not over, f"split these by idea (at most {CLASS_MAX_LINES} lines a class):\n" + "\n".join(over)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_browse_module_touches_another_ones_private_names():
    """`x._name` only on self, cls or a class of the same module; no `from .m import _name`: one module's
    parts talk to another's through its public names (the tab's parts read the tab through properties)."""
    offences = []
    for name, tree in _browse_modules().items():
        own = {"self", "cls"} | {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr) and not (
                    isinstance(node.value, ast.Name) and node.value.id in own):
                offences.append(f"{MODULES[name].relative_to(PACKAGE.parent)}:{node.lineno} reads .{node.attr}")
            elif isinstance(node, ast.ImportFrom):
                offences += [f"{MODULES[name].relative_to(PACKAGE.parent)}:{node.lineno} imports {a.name}"
                             for a in node.names if _private(a.name)]
    assert not offences, "another module's private names:\n" + "\n".join(offences)


# The Chrome wing (webfetch/chrome/: browser.py, cdp.py, transport.py, launch.py): the one place that speaks
# CDP's Target and Browser domains, whose handles (Browser, BrowserContext, PageTarget, Tab) the rest of
# webfetch, the profile tools included, drives browsers through.
# A method name as a whole string, or its domain alone ("Target." + name, f"Target.{name}"): a docstring or
# a message that mentions one is prose, not a CDP call.
TARGET_OR_BROWSER = re.compile(r"(Target|Browser)\.[A-Za-z]*")


def _in_chrome_module(path: Path) -> bool:
    return path.relative_to(PACKAGE).parts[0] == "chrome"


def _target_or_browser_names(path: Path) -> list[str]:
    """file:line name, for each string constant of `path` that is a Target or Browser CDP method name (or
    its domain); strings standing alone as statements (docstrings) are text."""
    tree = ast.parse(path.read_text(), str(path))
    prose = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    names = [node for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
             and id(node) not in prose and TARGET_OR_BROWSER.fullmatch(node.value)]
    return [f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.value!r}"
            for node in sorted(names, key=lambda node: node.lineno)]


def test_only_the_chrome_module_speaks_cdps_target_and_browser_domains():
    seen = [hit for path in MODULES.values() if _in_chrome_module(path) for hit in _target_or_browser_names(path)]
    assert any("'Target.attachToTarget'" in hit for hit in seen), "the scan finds the Chrome module's own calls"
    offences = [hit for path in MODULES.values() if not _in_chrome_module(path)
                for hit in _target_or_browser_names(path)]
    assert not offences, ("CDP's Target and Browser domains are the Chrome module's: use its handles (Browser, "
                          "BrowserContext, PageTarget, Tab) instead:\n" + "\n".join(offences))


# --- the wings (issue 35, "The house, third step") -------------------------------------------------------
# Each wing's __init__ docstring says what it may import and what it must not; these hold the rules that keep
# the fetch path, the browser and the parsers apart.
FETCH = "webfetch.fetch"
CRAWL = "webfetch.crawl"
PARSE = "webfetch.parse"
CHROME = "webfetch.chrome"
VIEW = "webfetch.view"
WINGS = (BROWSE, CHROME, CRAWL, FETCH, FRONTENDS, PARSE, "webfetch.profiles", "webfetch.subagent", "webfetch.trust",
         VIEW)
# The core: what every wing may import, and which imports none of them
CORE = ("webfetch.protocol", "webfetch.errors", "webfetch.urls", "webfetch.config", "webfetch.mime",
        "webfetch.paging")
# A browser or CDP: our Chrome wing, the scripts we run in pages, the websocket CDP travels over
BROWSER = (CHROME, "webfetch.page_scripts", "trio_websocket")
TOP_LEVEL_MAX = 25


def _in_any(module: str, packages: tuple[str, ...]) -> bool:
    return any(_within(module, p) for p in packages)


def _rule(inside: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    return _offences(lambda name: not _in_any(name, inside), lambda target: _in_any(target, forbidden))


def test_the_wings_are_there_and_each_says_its_rule():
    """So that the rules below cannot pass on a tree without the wings: each is a package whose docstring
    says what it may import and what it must not, and the imports the rules are about are found."""
    for wing in WINGS:
        doc = ast.get_docstring(ast.parse(MODULES[wing].read_text())) or ""
        if wing not in (BROWSE, FRONTENDS):
            assert "May import" in doc and "Must not import" in doc, f"{wing}'s __init__ docstring states no rule"
    assert any(t == "webfetch.mime" for _, t in _imports("webfetch.browse.tab", MODULES["webfetch.browse.tab"]))
    assert any(_within(t, PARSE) for _, t in _imports("webfetch.fetch.pipeline", MODULES["webfetch.fetch.pipeline"]))
    assert any(_within(t, CHROME) for _, t in _imports("webfetch.fetch.in_chrome", MODULES["webfetch.fetch.in_chrome"]))


def test_the_top_level_keeps_the_shell_the_actors_and_the_core_types():
    flat = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(flat) <= TOP_LEVEL_MAX, f"{len(flat)} modules at webfetch/'s top level (at most {TOP_LEVEL_MAX}): {flat}"


def test_browse_imports_neither_the_fetch_path_nor_crawl():
    offences = _rule((BROWSE,), (FETCH, CRAWL))
    assert not offences, "browse/ drives its own tabs; what it shares with fetch is in mime.py:\n" + "\n".join(offences)


def test_the_fetch_path_does_not_import_browse():
    offences = _rule((FETCH,), (BROWSE,))
    assert not offences, "fetch/ imports browse/:\n" + "\n".join(offences)


def test_the_parsers_import_no_browser_and_no_other_wing():
    offences = _rule((PARSE,), (*BROWSER, FETCH, CRAWL, BROWSE))
    assert not offences, ("parse/ runs in the parser workers on bytes and text: no browser, CDP, fetch/, crawl/ "
                          "or browse/:\n" + "\n".join(offences))


def test_the_view_imports_no_frontend_nor_the_fetch_path():
    """The view runs in the daemon: it reaches the daemon through `Viewed` (daemon.py imports it, not the
    reverse), MCP over HTTP is handed in by the CLI, and it shows fetches and crawls through the request log."""
    offences = _rule((VIEW,), (FRONTENDS, FETCH, CRAWL, PARSE, "webfetch.daemon"))
    assert not offences, "webfetch/view/ imports what it must not:\n" + "\n".join(offences)


def test_the_trust_rules_import_no_other_wing():
    offences = _rule(("webfetch.trust",), tuple(w for w in WINGS if w != "webfetch.trust"))
    assert not offences, ("trust/ is what the daemon and the frontends apply alike; it imports no other wing:\n"
                          + "\n".join(offences))


def test_the_core_imports_no_wing():
    offences = _offences(lambda name: name not in CORE, lambda target: _in_any(target, WINGS))
    assert not offences, ("protocol, errors, urls, config, mime and paging import no wing:\n"
                          + "\n".join(offences))


def _imported_modules(name: str, tree: ast.Module) -> set[str]:
    """The local names `name` binds to modules of ours (`from . import find`, `import webfetch.x as y`)."""
    bound = set()
    path = MODULES[name]
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base_parts = package[:len(package) - node.level + 1] if node.level else []
            base = ".".join([*base_parts, *([node.module] if node.module else [])])
            bound |= {a.asname or a.name for a in node.names if f"{base}.{a.name}" in MODULES}
        elif isinstance(node, ast.Import):
            bound |= {a.asname for a in node.names if a.asname and a.name in MODULES}
    return bound


def test_no_module_uses_another_ones_private_names():
    """`from .m import _name` or `m._name` on a module of ours: one module talks to another through its
    public names (the http transport imported render's `_charset`, `_first_lines` and `_mime` once)."""
    offences = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        modules = _imported_modules(name, tree)
        where = path.relative_to(PACKAGE.parent)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                offences += [f"{where}:{node.lineno} imports {a.name}" for a in node.names if _private(a.name)]
            elif (isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name)
                  and node.value.id in modules):
                offences.append(f"{where}:{node.lineno} reads {node.value.id}.{node.attr}")
    assert not offences, "another module's private names:\n" + "\n".join(offences)
