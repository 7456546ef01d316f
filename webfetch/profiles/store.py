"""Profiles: named, persistent browser state (cookies and each origin's localStorage) that fetch and browse
share, and the hosts each may be used for.

The one place that says what a profile may be used for (`Profile.allows`) and how one is stored. A
profile is a file `<name>.json` under `$XDG_DATA_HOME/webfetch/profiles` (0600 in a 0700 directory: it
holds session cookies, which are as good as a password), written atomically (a temporary file in the
same directory, fsynced, renamed over the old one), so a crash or a full disk leaves the old profile
whole. Its `state` is Playwright's `storageState` JSON as it is (`cookies`, `origins`), so a state a user
already has imports unchanged and ours opens in Playwright; webfetch's own fields sit beside it.

Cookie values never leave this module in words: `summary()` counts them, and errors name the profile,
the file and the key that is wrong, never a value.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import msgspec
from msgspec import Struct

from ..errors import WebfetchError
from ..trust import shell
from ..trust.private_files import write_private
from ..urls import ascii_host, host_listed

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
FORMAT = 1


class UnknownProfile(WebfetchError):
    code = "unknown_profile"


class ProfileError(WebfetchError):
    """A profile that cannot be read, written or used as asked; the message says what to do."""

    code = "profile_error"


class ProfileNotAllowed(WebfetchError):
    """A profile used for a host it does not list: a page read with a login can carry instructions, and
    a login must not be spent on hosts the user never chose."""

    code = "profile_not_allowed"


class Cookie(Struct, kw_only=True):
    """One cookie, as Playwright's storageState writes it."""

    name: str
    value: str
    domain: str                       # ".example.com" for the domain and its subdomains, else the host
    path: str = "/"
    expires: float = -1               # Unix seconds; -1: a session cookie
    httpOnly: bool = False            # noqa: N815 (Playwright's field names)
    secure: bool = False
    sameSite: Literal["Strict", "Lax", "None"] = "Lax"  # noqa: N815


class LocalStorageItem(Struct):
    name: str
    value: str


class OriginState(Struct, kw_only=True):
    origin: str                       # "https://example.com"
    localStorage: list[LocalStorageItem] = []  # noqa: N815


class StorageState(Struct, kw_only=True):
    """Playwright's storageState."""

    cookies: list[Cookie] = []
    origins: list[OriginState] = []


class Profile(Struct, kw_only=True):
    name: str
    hosts: list[str]                  # hosts it may be used for, each with its subdomains
    state: StorageState = msgspec.field(default_factory=StorageState)
    created: float = 0.0
    last_used: float | None = None
    format: int = FORMAT

    def allows(self, host: str) -> bool:
        """Whether this profile may be used on `host` (a listed host or a subdomain of one)."""
        return host_listed(host, self.hosts)

    def usable_state(self) -> StorageState:
        """What of the stored state may go into a browser: the live cookies whose domain is a listed host or
        below one (`cookie_listed`), and the listed hosts' localStorage. Chrome sends a cookie it holds
        wherever the page's requests go, so a cookie for another host must never be given to it: a
        `.corp.test` cookie given for `app.corp.test` would reach every script host under corp.test
        (`evil.corp.test`). A login window or a browse session also picked up a single sign-on provider's
        and trackers' cookies, and `allow --remove` leaves a host's cookies in the file: they stay stored,
        and go to Chrome once their host is listed. This is `allows` for what a browser would send."""
        live = merge_cookies([], self.state.cookies)  # expired ones dropped
        return StorageState(cookies=cookies_for_hosts(live, self.hosts),
                            origins=[o for o in self.state.origins if self.allows(urlsplit(o.origin).hostname or "")])

    def unbound(self, cookies: Sequence[Cookie]) -> list[Cookie]:
        """Those of `cookies` this profile may not hold for use: a domain it does not list (a write-back
        refuses them, naming their domains)."""
        return [c for c in cookies if not cookie_listed(c, self.hosts)]

    def refuse(self, host: str) -> ProfileNotAllowed:
        """The error for a request that would use this profile on a host it does not list."""
        return ProfileNotAllowed(
            f"profile {self.name!r} may be used for {', '.join(self.hosts) or 'no host yet'}, not for {host}: "
            f"a page read with a login can carry instructions, so a profile goes only where you send it. "
            f"To allow it: {shell.command('webfetch', 'profile', 'allow', self.name, host)}")

    def summary(self) -> ProfileSummary:
        """What may be shown about the profile: names and counts, never a cookie's value."""
        now = time.time()
        live = [c for c in self.state.cookies if c.expires < 0 or c.expires > now]
        return ProfileSummary(name=self.name, hosts=self.hosts, cookies=len(live),
                              origins=len(self.state.origins), last_used=self.last_used)


class ProfileSummary(Struct, kw_only=True):
    name: str
    hosts: list[str]
    cookies: int                      # live cookies (session cookies and those not yet expired)
    origins: int                      # origins with localStorage
    last_used: float | None


def check_name(name: str) -> str:
    """A profile name is a plain file name: letters, digits, '.', '_', '-', at most 64, not starting with
    a dot (no path separators, no '..', never empty)."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name) or ".." in name:
        raise ProfileError(f"{name!r} is not a profile name: use letters, digits, '.', '_' and '-' (at most 64, "
                           f"starting with a letter or digit), for example work-github")
    return name


def normalize_host(host: str) -> str:
    """A host as a user may type it for a profile (`GitHub.com`, `https://github.com/x`, `.example.com`,
    `example.com:8443`, `bücher.example`) as profiles list it and requests are matched: the bare name,
    lower case, punycode. A port is dropped: cookies are per host, not per port."""
    typed = host
    host = host.strip().lower().removeprefix("http://").removeprefix("https://").split("/", 1)[0]
    try:
        if any(c in host for c in " \t\\@"):
            raise ValueError
        parts = urlsplit("//" + host)
        _ = parts.port  # ValueError when what follows the ':' is not a port
        name = parts.hostname or ""  # drops the port, unbrackets an IPv6 address
        name = ascii_host(name.strip(".")) if name.strip(".") else ""
    except (ValueError, UnicodeError):
        name = ""
    if not name:
        raise ProfileError(f"{typed!r} is not a host name; give hosts like github.com or wiki.example.com")
    return name


def cookie_hosts(cookies: list[Cookie]) -> list[str]:
    """The hosts a set of cookies belongs to: an import's default host list."""
    return domains_of(cookies)


def headless_login(name: str, url: str, *, new: bool = True) -> str:
    """How to log in where no window can open: a browse session with the profile (`new`: making it), the
    sign-in form filled in it, its cookies saved (each command shell-quoted: the URL may be a server's choice)."""
    opening = shell.command('webfetch', 'browse', 'open', url, '--profile', name, *(['--new-profile'] if new else []))
    return f"`{opening}`, fill in the sign-in form with `webfetch browse fill`, then `webfetch browse save`"


def data_home() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share"))


def profiles_dir() -> Path:
    return data_home() / "webfetch" / "profiles"


_decoder = msgspec.json.Decoder(Profile)
_encoder = msgspec.json.Encoder()


class ProfileStore:
    """The profiles on disk. Every write is whole or not at all; reads never see half a file."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or profiles_dir()

    def path(self, name: str) -> Path:
        return self.root / f"{check_name(name)}.json"

    def exists(self, name: str) -> bool:
        return self.path(name).is_file()

    def load(self, name: str) -> Profile:
        path = self.path(name)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            known = ", ".join(self.names()) or "none yet"
            raise UnknownProfile(f"no profile named {name!r} (profiles: {known}); make one with "
                                 f"`{shell.command('webfetch', 'profile', 'login', name, 'URL')}` or "
                                 f"`{shell.command('webfetch', 'profile', 'import', name, 'FILE')}`") from None
        except OSError as e:
            raise ProfileError(f"cannot read profile {name!r} ({path}): {e.strerror}") from None
        try:
            return _decoder.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise ProfileError(f"profile {name!r} ({path}) is damaged ({_where(e)}); import it again") from None

    def names(self) -> list[str]:
        try:
            return sorted(p.stem for p in self.root.glob("*.json") if NAME_RE.fullmatch(p.stem))
        except OSError:
            return []

    def save(self, profile: Profile) -> None:
        """Write the profile atomically: 0600 in a 0700 directory."""
        path = self.path(profile.name)
        self._ensure_root()
        data = _encoder.encode(profile)
        try:
            write_private(path, data)
        except OSError as e:
            raise ProfileError(f"could not write profile {profile.name!r} to {path}: {e.strerror}; the profile "
                               f"is as it was") from None

    def delete(self, name: str) -> None:
        with self.locked():
            try:
                self.path(name).unlink()
            except FileNotFoundError:
                raise UnknownProfile(f"no profile named {name!r}") from None

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the store for a read-modify-write of a profile: the daemon writing a session's cookies back
        and a `webfetch profile` command changing the same profile are separate processes, and each writes
        the whole file, so without this one would silently undo the other. An advisory lock (flock) on the
        store's `.lock` (one for all profiles: their writes are rare and take milliseconds). It blocks, so
        the daemon takes it in a thread; the kernel drops it when the holder dies."""
        self._ensure_root()
        fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the last descriptor releases the lock

    def _ensure_root(self) -> None:
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)  # mkdir's mode is filtered by the umask, and an older dir may be wider


def _where(e: Exception) -> str:
    """msgspec's "Object missing required field `value` - at `$.cookies[0]`" as "... 'value' at cookies[0]"."""
    m = re.fullmatch(r"(.*) - at `\$\.?([^`]*)`", str(e))
    text, key = (m.group(1), m.group(2)) if m else (str(e), "")
    return text.replace("`", "'") + (f" at {key}" if key else "")


# --- import and export --------------------------------------------------------------------------

class _ImportedState(Struct, kw_only=True):
    """A storage state as an import reads it: `cookies` must be there (Playwright always writes it), so a file
    that is JSON but not a storage state (`{}`, a misspelt key) is refused rather than imported as nothing."""

    cookies: list[Cookie]
    origins: list[OriginState] = []


_state_decoder = msgspec.json.Decoder(_ImportedState)
_JSON_NAMES = {dict: "an object", list: "an array", str: "a string", int: "a number", float: "a number",
               bool: "a boolean", type(None): "null"}
STORAGE_STATE_SHAPE = 'a Playwright storage state is an object {"cookies": [...], "origins": [...]}'


def parse_storage_state(data: bytes, source: str) -> StorageState:
    """Playwright's storageState JSON; ProfileError naming the key that is wrong, or saying what the JSON is
    instead (an array, such as a cookie editor's export, or an object without `cookies`)."""
    try:
        state = _state_decoder.decode(data)
    except msgspec.ValidationError as e:
        raise ProfileError(f"{source}: not a Playwright storage state: {_shape_problem(data) or _where(e)}") from None
    except msgspec.DecodeError as e:
        raise ProfileError(f"{source}: not valid JSON ({e})") from None
    if not state.cookies and not state.origins:
        raise ProfileError(f"{source}: no cookies and no localStorage in it: nothing to import")
    return StorageState(cookies=state.cookies, origins=state.origins)


def _shape_problem(data: bytes) -> str | None:
    """What is wrong with valid JSON that is not a storage state as a whole (None: a key inside it is wrong, and
    msgspec's words say which): not an object, or an object without `cookies` (naming the keys it has: never a
    value)."""
    value = msgspec.json.decode(data)
    if not isinstance(value, dict):
        return f"the file is {_JSON_NAMES.get(type(value), 'JSON')}; {STORAGE_STATE_SHAPE}"
    if "cookies" not in value:
        keys = ", ".join(repr(k[:40]) for k in list(value)[:10])  # bounded: a file's keys are anyone's
        return (f"it has no 'cookies' list ({f'its keys: {keys}' if keys else 'it is an empty object'}); "
                f"{STORAGE_STATE_SHAPE}")
    return None


def parse_cookies_txt(text: str, source: str) -> StorageState:
    """A Netscape cookies.txt (what curl and the "export cookies" browser extensions write): per line
    domain, include-subdomains, path, secure, expiry, name, value, tab-separated; `#HttpOnly_` before the
    domain marks an HttpOnly cookie; other lines starting with '#' are comments."""
    cookies = []
    for number, line in enumerate(text.splitlines(), 1):
        http_only = line.startswith("#HttpOnly_")
        if http_only:
            line = line[len("#HttpOnly_"):]
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 7:
            raise ProfileError(f"{source}, line {number}: a cookies.txt line has 7 tab-separated fields (domain, "
                               f"subdomains, path, secure, expiry, name, value); this one has {len(fields)}")
        domain, subdomains, path, secure, expiry, name, value = fields
        if subdomains.upper() not in ("TRUE", "FALSE") or secure.upper() not in ("TRUE", "FALSE"):
            raise ProfileError(f"{source}, line {number}: the 2nd and 4th fields are TRUE or FALSE")
        try:
            expires = float(expiry)
        except ValueError:
            raise ProfileError(f"{source}, line {number}: the expiry (5th field) is not a number") from None
        if subdomains.upper() == "TRUE" and not domain.startswith("."):
            domain = "." + domain
        cookies.append(Cookie(name=name, value=value, domain=domain, path=path or "/",
                              expires=expires if expires > 0 else -1, httpOnly=http_only,
                              secure=secure.upper() == "TRUE"))
    if not cookies:
        raise ProfileError(f"{source}: no cookies in it (a cookies.txt has one cookie a line)")
    return StorageState(cookies=cookies)


def parse_state_file(data: bytes, source: str) -> StorageState:
    """A storage state (JSON) or a cookies.txt. JSON is what a `.json` file holds, what starts with `{` or
    `[`, or what parses as JSON: such a file is judged as a storage state, never told cookies.txt's rules."""
    if source.lower().endswith(".json") or data.lstrip()[:1] in (b"{", b"[") or _is_json(data):
        return parse_storage_state(data, source)
    try:
        return parse_cookies_txt(data.decode("utf-8"), source)
    except UnicodeDecodeError:
        raise ProfileError(f"{source}: neither a storage state (JSON) nor a cookies.txt (text)") from None


def _is_json(data: bytes) -> bool:
    if not data.strip():
        return False
    try:
        msgspec.json.decode(data)
    except msgspec.DecodeError:
        return False
    return True


def export_state(profile: Profile) -> bytes:
    """The profile's state as Playwright's storageState JSON."""
    return msgspec.json.format(msgspec.json.encode(profile.state), indent=2)


def merge_cookies(old: list[Cookie], new: list[Cookie]) -> list[Cookie]:
    """`old` with every cookie of `new` set over the one of the same name, domain and path (as a browser
    sets them); expired ones dropped."""
    now = time.time()
    merged = {(c.name, c.domain, c.path): c for c in old}
    merged.update({(c.name, c.domain, c.path): c for c in new})
    return [c for c in merged.values() if c.expires < 0 or c.expires > now]


# --- CDP's cookies ------------------------------------------------------------------------------


def to_cdp(cookie: Cookie) -> dict[str, object]:
    """A cookie as CDP's Storage.setCookies takes it (Network.CookieParam)."""
    param: dict[str, object] = {"name": cookie.name, "value": cookie.value, "domain": cookie.domain,
                                "path": cookie.path, "secure": cookie.secure, "httpOnly": cookie.httpOnly,
                                "sameSite": cookie.sameSite}
    if cookie.expires > 0:
        param["expires"] = cookie.expires
    return param


def from_cdp(cookie: dict[str, object]) -> Cookie:
    """A cookie as CDP's Storage.getCookies gives it (Network.Cookie); a session cookie's expiry is -1."""
    same_site = cookie.get("sameSite")
    expires = cookie.get("expires")
    return Cookie(name=str(cookie["name"]), value=str(cookie["value"]), domain=str(cookie["domain"]),
                  path=str(cookie.get("path") or "/"),
                  expires=-1 if cookie.get("session") or not isinstance(expires, (int, float)) or expires <= 0
                  else float(expires),
                  httpOnly=bool(cookie.get("httpOnly")), secure=bool(cookie.get("secure")),
                  sameSite=same_site if same_site in ("Strict", "Lax", "None") else "Lax")


def cookie_domain(cookie: Cookie) -> str:
    """The domain a cookie is for, as profiles list hosts: ".corp.test" (it and its subdomains) and a
    host-only "app.corp.test" are "corp.test" and "app.corp.test"."""
    return cookie.domain.lower().strip(".")


def cookie_listed(cookie: Cookie, hosts: list[str]) -> bool:
    """Whether `cookie` belongs to a profile bound to `hosts`: its domain is a listed host or below one. A
    cookie for a parent domain (".corp.test" for a profile bound to app.corp.test) only when that parent is
    listed itself, since Chrome would send it to every sibling host (evil.corp.test) too."""
    return host_listed(cookie_domain(cookie), hosts)


def cookies_for_hosts(cookies: list[Cookie], hosts: list[str]) -> list[Cookie]:
    """The cookies that belong to `hosts` (`cookie_listed`): what a profile gives a browser, and what an
    import or a login told which hosts to copy keeps."""
    return [c for c in cookies if cookie_listed(c, hosts)]


def domains_of(cookies: Sequence[Cookie]) -> list[str]:
    """The domains of `cookies`, sorted, each once: what a note may name (a domain is no secret; a value is)."""
    return sorted({cookie_domain(c) for c in cookies if cookie_domain(c)})


def merge_state(old: StorageState, new: StorageState) -> StorageState:
    """`old` with `new` imported over it: cookies as a browser sets them (merge_cookies), each origin's
    localStorage replaced by the new one's."""
    origins = {o.origin: o for o in old.origins}
    origins.update({o.origin: o for o in new.origins})
    return StorageState(cookies=merge_cookies(old.cookies, new.cookies), origins=list(origins.values()))
