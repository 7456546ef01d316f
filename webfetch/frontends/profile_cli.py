"""`webfetch profile`: make, widen, show, export and delete profiles (webfetch/profiles/store.py).

These work on the profile files themselves, with no daemon: the daemon reads a profile from disk each
time a request uses one. Exit status 2 is a command line that cannot be right (a name that is not a plain
name, a host that is not a host), 1 anything else that failed; either way every profile is as it was.

Importing into a profile that exists merges into it (a browser's rules: a cookie replaces the one of the
same name, domain and path; an origin's localStorage replaces that origin's), so cookies for a second site
can be added to one profile; `--replace` starts the profile over. The host list only grows by an import:
by `--hosts` when given, else by the hosts of the cookies imported.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import msgspec

from ..errors import WebfetchError
from ..profiles.store import (
    Profile,
    ProfileError,
    ProfileStore,
    ProfileSummary,
    StorageState,
    UnknownProfile,
    check_name,
    cookie_hosts,
    cookies_for_hosts,
    domains_of,
    export_state,
    merge_state,
    normalize_host,
    parse_state_file,
)
from ..trust import shell
from ..trust.private_files import write_private
from ..urls import host_listed
from .command import Needs, handles


class UsageError(WebfetchError):
    """A command line that cannot be right: exit status 2."""

    code = "bad_request"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("profile", help="logged-in browser state (cookies, localStorage) for fetch and browse",
                       description="Profiles hold a login (cookies and localStorage) that fetch and browse can "
                                   "use with --profile NAME, each only on the hosts it lists. They are files under "
                                   "$XDG_DATA_HOME/webfetch/profiles (default ~/.local/share), readable by you "
                                   "alone; no daemon is needed to change them.")
    # profiles are files: no config, no daemon (but a login without a display, which runs in the daemon's view)
    handles(p, lambda inv: run(inv.args, socket=inv.path), Needs.NOTHING)
    ps = p.add_subparsers(dest="profile_command", required=True, metavar="COMMAND")
    q = ps.add_parser("list", help="the profiles: hosts, live cookies, origins, last use (never a value)")
    q.add_argument("--json", action="store_true", help="as a JSON array")
    q = ps.add_parser("login", help="open a Chromium window on URL to log in; its state is saved when you close it")
    q.add_argument("name")
    q.add_argument("url")
    q.add_argument("--hosts", help="comma-separated hosts it may be used for, each with its subdomains (default: "
                                   "the URL's host; the other hosts that set cookies are named, with the "
                                   "`profile allow` that adds one)")
    q = ps.add_parser("import", help="a Playwright storageState JSON or a cookies.txt, or the cookies of a Chrome "
                                     "running with remote debugging (--from-browser)")
    q.add_argument("name")
    q.add_argument("file", nargs="?", help="storageState JSON or Netscape cookies.txt ('-': stdin)")
    q.add_argument("--from-browser", metavar="ENDPOINT",
                   help="a Chrome's DevTools: http://127.0.0.1:9222 (its --remote-debugging-port) or a ws:// URL")
    q.add_argument("--hosts", help="comma-separated: import only these hosts' cookies (subdomains included), "
                                    "and let the profile be used on them (needed with --from-browser)")
    q.add_argument("--replace", action="store_true", help="start the profile over instead of merging into it")
    q = ps.add_parser("export", help="the profile's state as Playwright storageState JSON (it holds the logins)")
    q.add_argument("name")
    q.add_argument("file", nargs="?", help="write it here, readable by you alone (default: stdout)")
    q = ps.add_parser("allow", help="let a profile be used on more hosts (each with its subdomains)")
    q.add_argument("name")
    q.add_argument("hosts", nargs="+", metavar="HOST")
    q.add_argument("--remove", action="store_true", help="take these hosts off the list instead")
    q = ps.add_parser("delete", help="delete a profile, the logins it holds and the pages read with it")
    q.add_argument("name")


def run(args: argparse.Namespace, store: ProfileStore | None = None, socket: Path | None = None) -> int:
    """Run one `webfetch profile` command; errors are printed, their exit status returned. `socket`: the
    daemon's, for a login without a display."""
    args.daemon_socket = socket
    commands: dict[str, Callable[[ProfileStore, argparse.Namespace], int]] = {
        "list": _list, "login": _login, "import": _import, "export": _export, "allow": _allow, "delete": _delete}
    try:
        if getattr(args, "name", None) is not None:
            try:
                check_name(args.name)
            except ProfileError as e:
                raise UsageError(e.message) from None
        return commands[args.profile_command](store or ProfileStore(), args)
    except UsageError as e:
        print(f"webfetch: {e.message}", file=sys.stderr)
        return 2
    except WebfetchError as e:
        print(f"webfetch: {e.message}", file=sys.stderr)
        return 1


def _hosts(text: str | None) -> list[str] | None:
    if text is None:
        return None
    try:
        hosts = [normalize_host(h) for h in text.split(",") if h.strip()]
    except ProfileError as e:
        raise UsageError(e.message) from None
    if not hosts:
        raise UsageError("--hosts names no host; give them comma-separated, like github.com,gitlab.com")
    return list(dict.fromkeys(hosts))


def _existing(store: ProfileStore, name: str, replace: bool = False) -> Profile | None:
    if replace or not store.exists(name):
        return None
    return store.load(name)  # a damaged one is an error here: merging into it would lose it


def _store_state(store: ProfileStore, name: str, state: StorageState, hosts: list[str],
                 replace: bool = False) -> Profile:
    """Save `state` as profile `name` (merged into it unless `replace`), its hosts widened by `hosts`."""
    with store.locked():
        old = _existing(store, name, replace)
        if old is None:
            profile = Profile(name=name, hosts=sorted(set(hosts)), state=state, created=time.time())
        else:
            profile = msgspec.structs.replace(old, hosts=sorted(set(old.hosts) | set(hosts)),
                                              state=merge_state(old.state, state))
        store.save(profile)
    return profile


def _saved(profile: Profile, added: int) -> None:
    s = profile.summary()
    print(f"webfetch: profile {profile.name}: {_n(added, 'cookie')} imported; it holds {_n(s.cookies, 'cookie')} "
          f"and localStorage for {_n(s.origins, 'origin')}, and may be used for {', '.join(s.hosts) or 'no host'}",
          file=sys.stderr)


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _import(store: ProfileStore, args: argparse.Namespace) -> int:
    hosts = _hosts(args.hosts)
    if args.from_browser and args.file:
        raise UsageError("give a FILE or --from-browser ENDPOINT, not both")
    if args.from_browser:
        if hosts is None:
            raise UsageError("--from-browser needs --hosts H,...: the hosts whose cookies to copy (a browser "
                             "holds the logins of every site you use)")
        state = _from_browser(args.from_browser, hosts)
        if not state.cookies:
            raise ProfileError(f"the browser at {args.from_browser} has no cookies for {', '.join(hosts)}: log in "
                               f"to them in that browser first; profile {args.name} is as it was")
    elif args.file:
        state = _from_file(args.file, args.name, hosts)
    else:
        raise UsageError("import from a FILE (storageState JSON or cookies.txt) or --from-browser ENDPOINT")
    profile = _store_state(store, args.name, state, hosts or cookie_hosts(state.cookies), args.replace)
    _saved(profile, len(state.cookies))
    return 0


def _from_file(path: str, name: str, hosts: list[str] | None) -> StorageState:
    state = parse_state_file(_read_file(path), "stdin" if path == "-" else path)
    if hosts is None:
        return state
    state = StorageState(cookies=cookies_for_hosts(state.cookies, hosts),
                         origins=[o for o in state.origins
                                  if host_listed(urlsplit(o.origin).hostname or "", hosts)])
    if not state.cookies and not state.origins:
        raise ProfileError(f"{path} has no cookies for {', '.join(hosts)}; profile {name} is as it was")
    return state


def _read_file(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise ProfileError(f"cannot read {path}: {e.strerror}") from None


def _from_browser(endpoint: str, hosts: list[str]) -> StorageState:
    import trio

    from ..chrome.browser import Browser
    from ..chrome.cdp import CDPClosed, CDPError, open_cdp
    from .profile_browser import START_HINT, browser_ws_url, read_state

    async def read() -> StorageState:
        ws_url = await browser_ws_url(endpoint)
        try:
            async with open_cdp(ws_url) as conn:
                state = await read_state(await Browser.over(conn), lambda host: host_listed(host, hosts))
        except CDPClosed as e:
            raise ProfileError(f"the browser at {endpoint} refused the DevTools connection ({e}); {START_HINT}") \
                from None
        except CDPError as e:
            raise ProfileError(f"the browser at {endpoint} would not give its cookies ({e}); is it a Chrome or "
                               f"Chromium?") from None
        return StorageState(cookies=cookies_for_hosts(state.cookies, hosts), origins=state.origins)

    return trio.run(read)


def _login(store: ProfileStore, args: argparse.Namespace) -> int:
    import trio

    from .profile_login import login_window, no_display_error

    hosts = _hosts(args.hosts)
    parts = urlsplit(args.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{args.url!r} is not an http(s) URL; give the site's sign-in page, like "
                         f"https://github.com/login")
    error = no_display_error(args.name, args.url)
    if error is not None and args.daemon_socket is None:
        raise error
    _existing(store, args.name)  # a damaged profile fails before the person spends a login on it
    if error is not None:  # no window can open: the login runs in the daemon's headless Chrome, through its view
        from .profile_view_login import view_login
        if hosts:
            raise UsageError("--hosts is for a login in a window; without a display the profile is made for the "
                             "URL's host (add others with `webfetch profile allow`)")
        return view_login(args.daemon_socket, args.name, args.url, store)
    state = trio.run(login_window, args.url, _configured_chrome())
    if not state.cookies:
        raise ProfileError(f"the window closed with no cookies set, so there was no login to save; profile "
                           f"{args.name} is as it was")
    everything = state.cookies
    if hosts:  # the single sign-on provider's and trackers' cookies stay out, as on an import
        state = StorageState(cookies=cookies_for_hosts(state.cookies, hosts), origins=state.origins)
    # bound to the URL's host alone unless told: a login also collects the cookies of every host its pages
    # reached, and a profile goes only where the user sends it
    profile = _store_state(store, args.name, state, hosts or [normalize_host(parts.hostname)])
    _saved(profile, len(state.cookies))
    others = domains_of(profile.unbound(everything))
    if others:
        _other_hosts(args.name, others, hosts)
    return 0


def _other_hosts(name: str, others: list[str], hosts: list[str] | None) -> None:
    """Tell of the hosts that set cookies during a login which the profile is not bound to (a single sign-on
    provider, a tracker, the site's parent domain), and how to add one: a profile goes only where it is sent."""
    if hosts:
        again = ",".join([*hosts, *others])
        print(f"webfetch: the login also set cookies for {', '.join(others)}, which --hosts does not list, so they "
              f"were not kept; to keep them, log in again with {shell.command('--hosts', again)}", file=sys.stderr)
        return
    commands = "".join(f"\n  {shell.command('webfetch', 'profile', 'allow', name, h)}" for h in others)
    print(f"webfetch: the login also set cookies for {', '.join(others)} (a sign-on provider, a tracker, or the "
          f"site's parent domain); the profile keeps them, but no page gets them until the profile may be used "
          f"there. To allow one:{commands}\n(or log in with --hosts naming every host the profile is for)",
          file=sys.stderr)


def _configured_chrome() -> str | None:
    """browser.executable from the config, when it can be read (a profile command never needs the rest)."""
    from ..config import load_config_and_source
    from ..errors import ConfigError

    try:
        return load_config_and_source(None)[0].browser.executable
    except ConfigError:
        return None


def _export(store: ProfileStore, args: argparse.Namespace) -> int:
    data = export_state(store.load(args.name))
    if args.file is None:
        sys.stdout.buffer.write(data + b"\n")
        return 0
    target = Path(args.file)
    try:
        write_private(target, data + b"\n")  # 0600: the file holds the logins
    except OSError as e:
        raise ProfileError(f"could not write {target}: {e.strerror}") from None
    print(f"webfetch: profile {args.name} written to {target} (Playwright storageState; it holds the logins, "
          f"keep it private)", file=sys.stderr)
    return 0


def _allow(store: ProfileStore, args: argparse.Namespace) -> int:
    hosts = _hosts(",".join(args.hosts)) or []
    with store.locked():
        profile = store.load(args.name)
        if args.remove:
            missing = [h for h in hosts if h not in profile.hosts]
            if missing:
                raise ProfileError(f"profile {args.name} does not list {', '.join(missing)} (it lists "
                                   f"{', '.join(profile.hosts) or 'no host'})")
            new = [h for h in profile.hosts if h not in hosts]
        else:
            new = sorted(set(profile.hosts) | set(hosts))
        store.save(msgspec.structs.replace(profile, hosts=new))
    print(f"webfetch: profile {args.name} may be used for {', '.join(new) or 'no host'}", file=sys.stderr)
    return 0


def _delete(store: ProfileStore, args: argparse.Namespace) -> int:
    store.delete(args.name)
    pages = _forget_pages(args.name)
    print(f"webfetch: profile {args.name} deleted{pages}", file=sys.stderr)
    return 0


def _forget_pages(name: str) -> str:
    """The pages read with a deleted profile go too (what its login showed): the running daemon forgets them
    in memory and on disk (the `cache_clear` op with the profile); with none running, their files are
    deleted here. What went, for the message."""
    from ..cache import read_with
    from ..config import Config, load_config_and_source, socket_path
    from ..disk_cache import DiskCache, default_directory
    from ..errors import ConfigError
    from .client import Client, ClientError

    try:
        config = load_config_and_source(None)[0]
    except ConfigError:
        config = Config()
    path = socket_path(config)
    try:
        with Client(path, autostart=False, timeout=30) as client:
            answer = list(client.request("cache_clear", profile=name))[-1]
    except ClientError:
        files, _ = DiskCache(default_directory(), 1).forget_now(read_with(name))
        return f", and its {_n(files, 'cached page')}" if files else ""
    if answer.get("type") != "result":
        raise ProfileError(f"profile {name} is deleted, but the daemon on {path} did not forget the pages read "
                           f"with it ({answer.get('code')}: {answer.get('message')}); `webfetch cache clear` "
                           f"forgets every page")
    forgotten = max(answer["entries"], answer["disk_entries"])
    return f", and its {_n(forgotten, 'cached page')}" if forgotten else ""


def _list(store: ProfileStore, args: argparse.Namespace) -> int:
    summaries: list[ProfileSummary] = []
    damaged: list[tuple[str, str]] = []
    for name in store.names():
        try:
            summaries.append(store.load(name).summary())
        except (ProfileError, UnknownProfile) as e:  # one damaged file does not hide the others
            damaged.append((name, e.message))
    if args.json:
        rows = [msgspec.to_builtins(s) for s in summaries] + [{"name": n, "error": m} for n, m in damaged]
        sys.stdout.write(msgspec.json.encode(rows).decode() + "\n")
        return 0
    if not summaries and not damaged:
        print("no profiles yet; make one with `webfetch profile login NAME URL` or `webfetch profile import NAME "
              "FILE`", file=sys.stderr)
    for s in summaries:
        used = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.last_used)) if s.last_used else "never"
        print(f"{s.name}  hosts: {', '.join(s.hosts) or '-'}  cookies: {s.cookies}  origins: {s.origins}  "
              f"last used: {used}")
    for name, message in damaged:
        print(f"{name}  {message}")
    return 0
