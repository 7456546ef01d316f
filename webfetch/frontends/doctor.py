"""`webfetch doctor`: read-only checks of everything webfetch needs, each failure with its fix.

Nothing is installed, started or changed: Chrome is launched once with a throwaway profile to prove it
runs, and the daemon is only asked for its status if one is already listening.
"""

from __future__ import annotations

import importlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import trio

from .. import redact
from ..config import Config
from ..errors import WebfetchError
from ..trust import shell
from ..trust.socket_trust import UntrustedSocket, check_directory
from .command import Invocation, command_line

# INFO: a part a user may go without (pi, for those who never prompt): said, never a problem
OK, INFO, WARN, FAIL = "ok", "info", "warn", "FAIL"
PACKAGES = ("trio", "trio_websocket", "msgspec", "trafilatura", "lxml_html_clean", "markdownify", "mcp",
            "pypdfium2")
TINY_PAGE = ("<html><head><title>Doctor</title></head><body><nav>Home | About</nav><article><h1>Doctor</h1>"
             "<p>The extractor keeps this sentence, which is the main content of a tiny page written for "
             "the doctor's check, and drops the navigation above it.</p></article></body></html>")


@dataclass
class Check:
    level: str
    name: str
    detail: str
    fix: str = ""


def check_packages() -> Check:
    missing, versions = [], []
    for name in PACKAGES:
        try:
            module = importlib.import_module(name)
        except Exception as e:  # a broken install raises more than ImportError
            missing.append(f"{name} ({type(e).__name__}: {e})")
            continue
        version = getattr(module, "__version__", None)
        versions.append(f"{name} {version}" if version else name)
    if missing:
        return Check(FAIL, "python packages", "cannot import " + ", ".join(missing),
                     "reinstall webfetch (pip install --force-reinstall webfetch, or rerun bin/webfetch, "
                     "which recreates .venv when pyproject.toml changes)")
    return Check(OK, "python packages", ", ".join(versions))


async def _browser_version(config: Config) -> str:
    from ..chrome.browser import browser_version
    from ..chrome.cdp import open_cdp
    from ..chrome.launch import find_chrome, launch_chrome

    with trio.fail_after(45):
        if config.browser.endpoint:
            async with open_cdp(config.browser.endpoint) as conn:
                return await browser_version(conn)
        executable = find_chrome(config.browser.executable)
        assert executable is not None
        async with launch_chrome(executable, config.browser.args) as (conn, _proc):
            return await browser_version(conn)


def check_chrome(config: Config) -> Check:
    from ..chrome.launch import INSTALL_HINT, find_chrome

    where = redact.url(config.browser.endpoint) if config.browser.endpoint else None  # its token: masked
    if not where:
        where = find_chrome(config.browser.executable)
        if where is None:
            named = config.browser.executable or os.environ.get("WEBFETCH_CHROME")
            detail = f"{named} does not exist or is not executable" if named else "no Chrome or Chromium on PATH"
            return Check(FAIL, "chrome", detail, INSTALL_HINT)
    try:
        version = trio.run(_browser_version, config)
    except Exception as e:
        return Check(FAIL, "chrome", f"{where} does not start: {redact.text(str(e))}",
                     "run it by hand with --headless to see why, or point browser.executable / browser.endpoint "
                     "in the config at a working Chrome")
    return Check(OK, "chrome", f"{version} ({where}, started headless and answered)")


def check_extractor() -> Check:
    from ..parse.extractor import extract_html

    try:
        md = extract_html(TINY_PAGE, "https://doctor.invalid/").markdown
    except Exception as e:
        return Check(FAIL, "extractor", f"trafilatura failed on a tiny page: {type(e).__name__}: {e}",
                     "reinstall trafilatura and lxml_html_clean (pip install --force-reinstall trafilatura "
                     "lxml_html_clean)")
    if "main content of a tiny page" not in md or "Home | About" in md:
        return Check(FAIL, "extractor", f"trafilatura returned unexpected text: {md[:120]!r}",
                     "check the installed trafilatura version (pip show trafilatura)")
    return Check(OK, "extractor", "trafilatura extracted a tiny page's main content")


def check_subagent(config: Config) -> Check:
    """pi, which answers prompts and summarizes long pages. Not installed is no problem for those who fetch,
    browse or crawl without a prompt; a command the config names that is not there is one."""
    from ..config import SubagentConfig
    from ..subagent.agent import INSTALL_HINT, Subagent

    command = Subagent(config.subagent).command  # found the way the daemon finds it
    fix = f"{INSTALL_HINT} in the config; without it prompts return raw pages instead of answers"
    if command is None and config.subagent.command == SubagentConfig().command:
        return Check(INFO, "sub-agent", "not installed (needed for prompts and summaries): no "
                     f"`{shell.command(config.subagent.command)}` on PATH",
                     f"to ask pages questions (--prompt) and have long pages summarized, {INSTALL_HINT} in the "
                     f"config")
    if command is None:
        return Check(FAIL, "sub-agent", f"`{shell.command(config.subagent.command)}` not found", fix)
    try:
        done = subprocess.run([command, "--version"], capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return Check(FAIL, "sub-agent", f"{command} --version failed: {e}", fix)
    version = (done.stdout or done.stderr).strip().splitlines()
    if done.returncode != 0:  # a new pi on Node.js 20 crashes at start, with Node's complaint
        said = (done.stdout + "\n" + done.stderr).strip().splitlines()
        return Check(FAIL, "sub-agent", f"{command} --version exited {done.returncode}: "
                     f"{said[-1] if said else ''}", fix)
    return Check(OK, "sub-agent", f"{command} {version[-1] if version else ''}".strip())


def check_subagent_model(config: Config) -> Check | None:
    """MCP clients send no model with a prompt: without one here, their prompts get pages, not answers.
    None when there is no sub-agent to give a model to (check_subagent says so)."""
    from ..subagent.agent import Subagent, model_settings, pi_agent_dir

    if Subagent(config.subagent).command is None:
        return None
    model, thinking = model_settings(config.subagent.model, config.subagent.thinking)
    if model is None:
        return Check(WARN, "sub-agent model", "none configured: prompts that name no model (every MCP client's, "
                     "`webfetch fetch --prompt` without --model) return the page instead of an answer",
                     f'set subagent.model = "provider/id" in the config, or {{"model": "provider/id"}} in '
                     f"{pi_agent_dir() / 'web-fetch.json'} (pi sends its own model anyway)")
    source = "web-fetch.json" if model != config.subagent.model else "subagent.model"
    return Check(OK, "sub-agent model", f"{model}{f' (thinking {thinking})' if thinking else ''} from {source}, "
                 f"for prompts that name no model")


def check_socket_dir(path: Path) -> Check:
    directory = path.parent
    probe = directory
    while not os.path.lexists(probe):  # a dangling link is there: someone's, judged below
        probe = probe.parent
    if probe != directory:
        if not os.access(probe, os.W_OK | os.X_OK):
            return Check(FAIL, "socket path", f"{directory} does not exist and {probe} is not writable",
                         "pass --socket or set WEBFETCH_SOCKET / server.socket to a path in a directory of yours")
        return Check(OK, "socket path", f"{path} (its directory will be created 0700)")
    try:
        check_directory(path)  # the rule every client and the daemon apply
    except UntrustedSocket as e:
        return Check(FAIL, "socket path", e.problem, e.remedy)
    except NotADirectoryError as e:
        return Check(FAIL, "socket path", str(e), "remove it, or pass --socket with a path in a directory of yours")
    if not os.access(directory, os.W_OK | os.X_OK):
        return Check(FAIL, "socket path", f"{directory} is not writable", f"chmod u+rwx {directory}")
    return Check(OK, "socket path", str(path))


def check_config(inv: Invocation) -> Check:
    """The config file: a daemon cannot start with one that does not load, and a running one keeps its
    config until a reload reads one that does."""
    if inv.broken is not None:
        return Check(FAIL, "config", f"{inv.broken} (the checks below use the defaults)",
                     f"fix that line (docs/CONFIG.md lists every key), then run `{command_line(inv, 'reload')}`: "
                     f"a running daemon keeps the config it has until then, and none can start")
    return Check(OK, "config", inv.source.path or "no config file (all defaults)")


def check_daemon(path: Path) -> list[Check]:
    from .client import Client, ClientError
    from .service import socket_unit_waiting

    if socket_unit_waiting(path):  # a connection would start it: systemd is asked instead
        return [Check(OK, "daemon", f"not started yet: systemd's webfetch.socket listens on {path} and starts "
                                    f"it on the first request")]
    try:
        with Client(path, autostart=False) as client:
            frames = list(client.request("status"))
    except UntrustedSocket as e:
        return [Check(FAIL, "daemon", e.problem, e.remedy)]
    except (ClientError, OSError):
        return [Check(WARN, "daemon", f"not running on {path}",
                      "`webfetch fetch`, the pi extension and the systemd socket start it "
                      "on first use; `webfetch serve` runs it in the foreground")]
    status = frames[-1]
    if status.get("type") != "result":
        return [Check(FAIL, "daemon", f"answered status with {status.get('code')}: {status.get('message')}",
                      "see its log: `webfetch logs`")]
    checks = [Check(OK, "daemon", f"webfetch {status['version']} on {path}, browser {status['browser']['state']}, "
                    f"{status['cache']['entries']} cached pages")]
    checks += [Check(FAIL, "daemon problem", p, "see above; restart the daemon once fixed") for p in status["problems"]]
    sessions = status.get("browse") or []
    checks.append(Check(OK, "browse", f"{len(sessions)} browse session(s) open" + "".join(
        f"; {s['session']} ({s['tabs']} tab(s) at {s['url']}, idle {s['idle_s']:.0f} s)" for s in sessions)))
    mine = status.get("user_browser")
    if mine and mine["state"] != "off":
        level = WARN if mine["state"] in ("failed", "gone", "waiting for approval") else OK
        checks.append(Check(level, "your browser", f"daemon: {mine['detail']}"))
    return checks


def policy_reach(config: Config) -> str:
    """What the address policy lets through, and to whom. fetch.allow_private and fetch.allow_hosts are the
    daemon's policy: fetch, crawl and browse sessions alike, every port of a listed host (urls.vet_host);
    browse.allow_local adds loopback ports for browse sessions only."""
    f = config.fetch
    if f.allow_private:
        return ("every address that is not public allowed but cloud metadata (fetch.allow_private): to "
                "fetch, crawl and browse sessions alike, on every port")
    allowed = ("every address that is not public refused (loopback, private, link-local, carrier-grade NAT, "
               "cloud metadata, …)")
    if f.allow_hosts:
        allowed += (f"; fetch, crawl and browse sessions may reach {', '.join(f.allow_hosts)} on every port "
                    f"(fetch.allow_hosts)")
    local = config.browse.allow_local
    if local:
        return allowed + f"; browse sessions only may also reach {', '.join(local)} (browse.allow_local)"
    return allowed + ("; browse sessions reach nothing more (browse.allow_local lists none)" if f.allow_hosts else
                      "; browse sessions reach no loopback port (browse.allow_local lists none)")


def check_address_policy(config: Config) -> Check:
    from ..chrome.browser import proxy_off_reason

    allowed = policy_reach(config)
    off = proxy_off_reason(config.browser)
    if off:
        return Check(WARN, "address policy", f"{allowed}; checked per request only, because {off}: "
                     f"a name that changes its answer after the check (DNS rebinding) is not caught",
                     "that outbound proxy resolves the names: let it refuse private addresses, or drop it")
    return Check(OK, "address policy", f"{allowed}; pages connect only through webfetch's proxy, to the "
                 f"addresses it checked")


def check_user_browser(config: Config) -> Check:
    """[user_browser]: off and why, or whether the person's browser is found (nothing is sent to it: a
    connection would ask the person to approve it)."""
    import trio

    from ..chrome.user_browser import find

    ub = config.user_browser
    if not ub.enabled:
        return Check(INFO, "your browser", "off: user_browser.hosts is empty, so the agent never uses your own "
                     "browser", "list the sites it may use it for in user_browser.hosts (docs/CONFIG.md)")
    try:
        found = trio.run(find, ub.endpoint)
    except WebfetchError as e:
        return Check(WARN, "your browser", f"for {', '.join(ub.hosts)}, but not found: {e.message}")
    return Check(OK, "your browser", f"found: {found.how}; for {', '.join(ub.hosts)} (`webfetch status` says "
                 f"whether it is connected or waiting for your approval)")


def check_search(config: Config) -> Check:
    from ..search import BACKENDS, NAMES, Search, how_to_configure

    search = Search(config.search)
    if not search.configured:
        return Check(WARN, "web search", "no backend configured; web_search answers search_unconfigured",
                     "; or ".join(how_to_configure(b, search.config_file) for b in BACKENDS)
                     + " (web_fetch works without it)")
    try:
        chosen = search.choose(None)
    except WebfetchError as e:
        return Check(FAIL, "web search", e.message, "set search.backend to a configured one, or configure it")
    return Check(OK, "web search", f"{NAMES[chosen]} (configured: {', '.join(NAMES[b] for b in search.configured)}; "
                 f"keys are not checked: a search costs credit)")


def run(inv: Invocation) -> int:
    config, path = inv.config, inv.path
    model = check_subagent_model(config)
    checks = [check_config(inv), check_packages(), check_chrome(config), check_extractor(), check_subagent(config),
              check_address_policy(config), check_user_browser(config), check_socket_dir(path), *check_daemon(path),
              check_search(config),
              *([model] if model else [])]
    width = max(len(c.name) for c in checks)
    for c in checks:
        print(f"{c.level:<4}  {c.name:<{width}}  {c.detail}")
        if c.fix and c.level != OK:
            print(f"{'':<4}  {'':<{width}}  {'fix' if c.level == FAIL else 'note'}: {c.fix}")
    failed = [c for c in checks if c.level == FAIL]
    print(f"\n{len(failed)} problem{'s' if len(failed) != 1 else ''} found" if failed else "\nall good")
    return 1 if failed else 0
