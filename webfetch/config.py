"""Configuration: TOML at ~/.config/webfetch/config.toml (or --config); every key optional.

Unknown keys and wrong types are rejected with a message naming the key and its line, at start and on
`webfetch reload` (which keeps the running config then). `RESTART_KEYS` names what a reload cannot change.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

import msgspec
from msgspec import Meta, Struct

from .errors import ConfigError
from .protocol import Thinking
from .urls import parse_local, parse_user_host

Positive = Annotated[float, Meta(gt=0)]
NonNegative = Annotated[float, Meta(ge=0)]
PositiveInt = Annotated[int, Meta(ge=1)]


class ServerConfig(Struct, forbid_unknown_fields=True, kw_only=True):
    socket: str | None = None          # default: PROTOCOL.md's path rules
    max_line_bytes: PositiveInt = 1 << 20
    idle_exit_s: NonNegative = 900.0   # for a daemon the CLI started on demand; 0 = never


class BrowserConfig(Struct, forbid_unknown_fields=True, kw_only=True):
    executable: str | None = None
    endpoint: str | None = None        # ws:// URL of an existing browser: nothing is launched (its token or
                                       # password is masked wherever the URL is shown: redact.py)
    args: list[str] = []
    settle_s: NonNegative = 2.0        # cap on waiting for JavaScript to finish after the DOM is there
    context_pool: Annotated[int, Meta(ge=0, le=64)] = 2
    max_renders: Annotated[int, Meta(ge=1, le=256)] | None = None  # default: default_max_renders()
    block_resources: list[str] = msgspec.field(default_factory=lambda: ["Image", "Media", "Font", "Stylesheet"])


def default_max_renders(cpus: int | None = None) -> int:
    """Pages loading at once when the config does not say: four per CPU (a render mostly waits on the
    network), at least 4, at most 16; 8 on a 2-core machine."""
    return min(16, max(4, 4 * (cpus or os.cpu_count() or 1)))


class FetchConfig(Struct, forbid_unknown_fields=True, kw_only=True):
    timeout_s: Positive = 30.0
    # auto: run the page's scripts only when the server's HTML does not already hold the content;
    # always: run them for every page and keep the better of the two extractions.
    render: Literal["auto", "always"] = "auto"
    # http: the main document by webfetch's own HTTP client with Chrome's fingerprint (fetch/over_http.py), Chrome
    # only to render a page that needs it; chrome: every main document through Chrome, as before
    transport: Literal["http", "chrome"] = "http"
    max_bytes: PositiveInt = 10 * 1000 * 1000
    allow_private: bool = False
    allow_hosts: list[str] = []
    page_chars: PositiveInt = 50_000
    page_lines: PositiveInt = 2_000


class CacheConfig(Struct, forbid_unknown_fields=True, kw_only=True):
    ttl_s: Positive = 900.0
    sweep_s: Positive = 300.0
    max_bytes: PositiveInt = 256 * 1024 * 1024
    # pages kept on disk (cache_home()/webfetch/pages) so that a restarted daemon is served from there;
    # 0 keeps none
    disk_max_bytes: Annotated[int, Meta(ge=0)] = 512 * 1024 * 1024


class ExtractConfig(Struct, forbid_unknown_fields=True, kw_only=True):
    workers: Annotated[int, Meta(ge=1, le=64)] | None = None  # parser processes (extractions at once); 2
    worker_idle_s: Positive = 300.0   # an unused worker process exits after this long
    # The old name of `workers` (when extraction ran in threads), still read so that a config file
    # written then keeps working: it counts when `workers` is not given.
    threads: Annotated[int, Meta(ge=1, le=64)] | None = None

    def worker_count(self) -> int:
        return self.workers or self.threads or 2


class SubagentConfig(Struct, forbid_unknown_fields=True, kw_only=True):
    command: str = "pi"                # a pi-compatible CLI: `--mode rpc` and/or `--mode json`
    timeout_s: Positive = 120.0
    max_input_chars: PositiveInt = 400_000  # more of a page than this is cut before the model sees it
    max_concurrent: Annotated[int, Meta(ge=1, le=64)] = 4  # pi processes at once; more wait their turn
    # The model when a request names none (MCP clients never send theirs); pi's web-fetch.json still wins.
    model: Annotated[str, Meta(pattern=r"^[^/\s]+/\S+$")] | None = None  # provider/id
    thinking: Thinking | None = None  # goes with `model`
    # rpc: warm `pi --mode rpc` workers (a prompt costs no start-up); json: a new `pi --mode json` per
    # prompt, also the fallback when a worker cannot be started
    mode: Literal["rpc", "json"] = "rpc"
    worker_requests: PositiveInt = 50  # a worker is retired after this many requests
    worker_idle_s: Positive = 300.0    # ... or after this long unused


class SearchConfig(Struct, forbid_unknown_fields=True, kw_only=True):
    backend: Literal["kagi", "brave", "searxng"] | None = None  # default: the first one configured
    kagi_url: str = "https://kagi.com"
    brave_url: str = "https://api.search.brave.com"
    searxng_url: str | None = None
    kagi_api_key: str | None = None    # KAGI_API_KEY wins when set
    brave_api_key: str | None = None   # BRAVE_API_KEY wins when set
    limit: Annotated[int, Meta(ge=1, le=20)] = 10
    timeout_s: Positive = 15.0
    cache_s: Positive = 300.0


class BrowseConfig(Struct, forbid_unknown_fields=True, kw_only=True):
    enabled: bool = True
    idle_s: Positive = 600.0           # a session without an action for this long is closed
    max_sessions: Annotated[int, Meta(ge=1, le=256)] = 16
    snapshot_chars: Annotated[int, Meta(ge=500)] = 12_000  # inline snapshot cap; `offset` pages on
    nav_timeout_s: Positive = 30.0     # a navigation's load, at most
    settle_s: Positive = 3.0           # after an action: its requests and DOM changes, at most this long
    # `upload` reads files only under the client's working directory and these (browse/uploads.py)
    upload_roots: list[str] = []
    upload_dotfiles: bool = False      # may an upload read a dotfile, or a file in a dot-directory?
    # where each session's downloads are saved ("": $XDG_CACHE_HOME/webfetch/downloads; browse/downloads.py)
    downloads_dir: str = ""
    # the user's dev servers: loopback `host:port` (or `host:*`) that browse sessions, and only they, may
    # reach; the host as the URL types it (urls.parse_local)
    allow_local: list[str] = []
    network_log: bool = True           # keep each session's requests for the network, request and har actions
    # network, request and har show secrets (redact.py's rule: credential headers, secret URL parameters and
    # body fields) as <redacted>; false shows one's own app's. The log, errors and status mask them anyway.
    redact_secrets: bool = True
    # while a person holds a session's browser (took it over in the view), an agent's action waits this long
    # for them to hand it back, then fails with user_has_control
    user_wait_s: Positive = 120.0
    # record each session (recordings.py: frames, actions, console, requests) never, always, or keep the
    # recording only when an action failed; `record` on open decides for its session
    record: Literal["never", "on_error", "always"] = "never"
    record_max_bytes: Annotated[int, Meta(ge=100_000)] = 64 << 20      # one recording, at most
    recordings_max_bytes: Annotated[int, Meta(ge=100_000)] = 512 << 20  # all of them; the oldest go first

    def __post_init__(self) -> None:
        for entry in self.allow_local:
            parse_local(entry)  # its ValueError is msgspec's validation error, which names the key and line


class UserBrowserConfig(Struct, forbid_unknown_fields=True, kw_only=True):
    """The person's own running browser (chrome/user_browser.py), off until `hosts` lists a site."""

    # "auto": the DevToolsActivePort file of a running Chrome, Chromium, Beta, Canary, Edge or Brave in its
    # usual user-data directory; else http://127.0.0.1:PORT, ws://127.0.0.1:PORT/devtools/browser/…, or a
    # user-data directory (its DevToolsActivePort)
    endpoint: str = "auto"
    # the sites the agent may use the person's browser for: a listed host and its subdomains (the rule of a
    # profile's binding, urls.host_listed), or `host:port` for that port alone; a host on this machine only
    # with its port (urls.parse_user_host); empty: the feature is off
    hosts: list[str] = []

    def __post_init__(self) -> None:
        self.hosts = [h.strip().lower().rstrip(".") for h in self.hosts if h.strip().strip(".")]
        for entry in self.hosts:
            parse_user_host(entry)  # its ValueError is msgspec's validation error, which names the key and line

    @property
    def enabled(self) -> bool:
        return bool(self.hosts)


class CrawlConfig(Struct, forbid_unknown_fields=True, kw_only=True):
    ignore_robots: bool = False        # crawl and map obey robots.txt unless this is set (a fetch never reads it)
    per_host: Annotated[int, Meta(ge=1, le=64)] = 4   # a crawl's connections to one host at once, at most
    timeout_s: Positive = 300.0        # a whole crawl or map, unless the request gives its own
    max_errors: PositiveInt = 20       # pages that fail before a crawl stops with `errors`
    max_retry_after_s: Positive = 60.0  # a 429's Retry-After is waited up to this long, else the page fails
    # characters of page content in one crawl result, all pages together (each gets an equal share); the
    # rest of each page is read from the cache with `fetch` and `offset`, so a crawl's memory stays bounded
    result_chars: PositiveInt = 5_000_000


class ViewConfig(Struct, forbid_unknown_fields=True, kw_only=True):
    # the daemon's local web page and MCP over HTTP (webfetch/view/): off unless enabled here or turned on
    # by `webfetch view`; on loopback only, behind the token
    enabled: bool = False
    port: Annotated[int, Meta(ge=0, le=65535)] = 0  # 0: a free port picked at start


class Config(Struct, forbid_unknown_fields=True, kw_only=True):
    server: ServerConfig = msgspec.field(default_factory=ServerConfig)
    browser: BrowserConfig = msgspec.field(default_factory=BrowserConfig)
    fetch: FetchConfig = msgspec.field(default_factory=FetchConfig)
    cache: CacheConfig = msgspec.field(default_factory=CacheConfig)
    extract: ExtractConfig = msgspec.field(default_factory=ExtractConfig)
    subagent: SubagentConfig = msgspec.field(default_factory=SubagentConfig)
    search: SearchConfig = msgspec.field(default_factory=SearchConfig)
    browse: BrowseConfig = msgspec.field(default_factory=BrowseConfig)
    crawl: CrawlConfig = msgspec.field(default_factory=CrawlConfig)
    view: ViewConfig = msgspec.field(default_factory=ViewConfig)
    user_browser: UserBrowserConfig = msgspec.field(default_factory=UserBrowserConfig)


def config_home() -> Path:
    """$XDG_CONFIG_HOME, else ~/.config: where our config and the systemd user units live."""
    return Path(os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config"))


def default_config_path() -> Path:
    return config_home() / "webfetch" / "config.toml"


class ConfigSource(Struct, frozen=True, kw_only=True):
    """Which config a daemon runs: the file (None: no file, all defaults) and a digest of its bytes, so a
    client can tell that the file it would read is not what the daemon read."""

    path: str | None
    digest: str | None


DEFAULTS = ConfigSource(path=None, digest=None)


def load_config(path: str | os.PathLike[str] | None = None) -> Config:
    """Read the config file (--config, else WEBFETCH_CONFIG, else the default path); a missing default file
    means all defaults, a missing named file is an error."""
    return load_config_and_source(path)[0]


def load_config_and_source(path: str | os.PathLike[str] | None = None) -> tuple[Config, ConfigSource]:
    """`load_config`, and which file it read (with the digest of the bytes it parsed)."""
    p, explicit = _config_file(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        if explicit:
            raise ConfigError(f"config file {p} does not exist") from None
        return Config(), DEFAULTS
    except OSError as e:
        raise ConfigError(f"cannot read config file {p}: {e.strerror}") from None
    return parse_config(data, source=str(p)), ConfigSource(path=str(p.absolute()), digest=config_digest(data))


def _config_file(path: str | os.PathLike[str] | None) -> tuple[Path, bool]:
    """The file to read (--config, else WEBFETCH_CONFIG, else the default path), and whether it was named."""
    if path is None:
        path = os.environ.get("WEBFETCH_CONFIG") or None
    return (Path(path), True) if path is not None else (default_config_path(), False)


def config_for_socket(path: str | os.PathLike[str] | None = None) -> Config:
    """For a client whose config file does not load: the defaults, with the file's `server.socket` when the
    file is TOML that sets it to a string (a wrong type elsewhere, an unknown key): the socket a daemon
    that read the file before listens on."""
    try:
        table = msgspec.toml.decode(_config_file(path)[0].read_bytes())
        socket = table.get("server", {}).get("socket")
    except (OSError, msgspec.DecodeError, AttributeError):
        return Config()
    return Config(server=ServerConfig(socket=socket)) if isinstance(socket, str) else Config()


def config_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def parse_config(data: bytes | str, source: str = "config") -> Config:
    try:
        return msgspec.toml.decode(data, type=Config)
    except msgspec.ValidationError as e:
        # msgspec says e.g. "Object contains unknown field `colour` - at `$.browser`": name the key plainly,
        # and the line that sets it, which msgspec does not give for a decoded value.
        message, key = _toml_path(str(e))
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        line = _line_of(text, key) if key else None
        raise ConfigError(f"{source}: {f'line {line}: ' if line else ''}{message}") from None
    except msgspec.DecodeError as e:
        # TOML's syntax errors end "(at line 3, column 7)": the line goes first, as for a key
        m = re.fullmatch(r"(.*) \(at (line \d+), (column \d+)\)", str(e))
        where, what = (f"{m.group(2)}: ", f"{m.group(1)} ({m.group(3)})") if m else ("", str(e))
        raise ConfigError(f"{source}: {where}not valid TOML: {what}") from None


def _toml_path(msg: str) -> tuple[str, str | None]:
    """A validation error in our words, and the key it is about."""
    m = re.fullmatch(r"Object contains unknown field `([^`]+)`(?: - at `\$\.?([^`]*)`)?", msg)
    if m:
        key = f"{m.group(2)}.{m.group(1)}" if m.group(2) else m.group(1)
        return f"unknown key `{key}`; docs/CONFIG.md lists the keys webfetch knows", key
    m = re.fullmatch(r"(.*) - at `\$\.([^`]*)`", msg)
    if m:
        return f"key `{m.group(2)}`: {m.group(1)}", m.group(2)
    return msg, None


_TABLE = re.compile(r"\[\s*([A-Za-z0-9_.\- ]+?)\s*\]\s*(#.*)?")
_ASSIGN = re.compile(r"([A-Za-z0-9_.\- ]+?)\s*=")


def _line_of(text: str, key: str) -> int | None:
    """The line of `text` that sets `key` (`fetch.allow_hosts`, `fetch.allow_hosts[1]`) or opens it as a
    table; None when it is written in a way this does not follow (quoted keys, inline tables)."""
    wanted = re.sub(r"\[\d+\]", "", key).split(".")
    table: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        m = _TABLE.fullmatch(line.strip())
        if m:
            table = [part.strip() for part in m.group(1).split(".")]
            if table == wanted:
                return number
            continue
        m = _ASSIGN.match(line.strip())
        if m and table + [part.strip() for part in m.group(1).split(".")] == wanted:
            return number
    return None


# What a reload cannot change in a running daemon, by key or by section: the socket it listens on, the
# browser's launch (its executable, endpoint and flags, and the tab pool sized at start), the parser
# processes and the sub-agent's workers. `webfetch restart` applies them.
RESTART_KEYS = ("server", "browser.executable", "browser.endpoint", "browser.args", "browser.context_pool",
                "browser.max_renders", "extract", "subagent", "view.port", "user_browser")


def needs_restart(key: str) -> bool:
    return any(key == k or key.startswith(k + ".") for k in RESTART_KEYS)


def changed_keys(old: Config, new: Config) -> list[str]:
    """The keys (`section.key`) whose values differ between two configs, in the order of the Config."""
    return [f"{section}.{name}" for section in old.__struct_fields__
            for name in getattr(old, section).__struct_fields__
            if getattr(getattr(old, section), name) != getattr(getattr(new, section), name)]


def keep_running(old: Config, new: Config, keys: list[str]) -> Config:
    """`new`, with `keys` (`section.key`) as they are in `old`: the config a reload puts in force when some
    of what changed needs a restart."""
    sections: dict[str, dict[str, object]] = {}
    for key in keys:
        section, name = key.split(".", 1)
        sections.setdefault(section, {})[name] = getattr(getattr(old, section), name)
    return msgspec.structs.replace(new, **{section: msgspec.structs.replace(getattr(new, section), **fields)
                                           for section, fields in sections.items()})


def default_socket_path(env: Mapping[str, str] = os.environ, run_user: Path = Path("/run/user")) -> Path:
    """PROTOCOL.md: $XDG_RUNTIME_DIR/webfetch/webfetch.sock, else /run/user/<uid>/webfetch/webfetch.sock when
    that directory exists, else /tmp/webfetch-<uid>/webfetch.sock. The middle rule is for clients started
    with a minimal environment (MCP SDKs start stdio servers without XDG_RUNTIME_DIR): they must find the
    daemon a login shell's client started, not start a second one under /tmp."""
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "webfetch" / "webfetch.sock"
    own = run_user / str(os.getuid())
    if own.is_dir():
        return own / "webfetch" / "webfetch.sock"
    return Path(f"/tmp/webfetch-{os.getuid()}") / "webfetch.sock"


def cache_home() -> Path:
    """$XDG_CACHE_HOME, else ~/.cache: where pages are kept on disk (webfetch/pages under it)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"))


def state_home() -> Path:
    """$XDG_STATE_HOME, else ~/.local/state: where a daemon started in the background logs."""
    return Path(os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state"))


def log_path_for(socket: Path) -> Path:
    """The log of a daemon a client starts in the background: one file per socket under the state
    directory (webfetch.log for the default socket), so two daemons never share or rotate one file."""
    directory = state_home() / "webfetch"
    if socket == default_socket_path():
        return directory / "webfetch.log"
    return directory / f"webfetch-{hashlib.sha256(str(socket).encode()).hexdigest()[:8]}.log"


def socket_path(config: Config, override: str | None = None) -> Path:
    """--socket beats WEBFETCH_SOCKET beats the config file beats the default."""
    for candidate in (override, os.environ.get("WEBFETCH_SOCKET"), config.server.socket):
        if candidate:
            return Path(os.path.expanduser(candidate))
    return default_socket_path()
