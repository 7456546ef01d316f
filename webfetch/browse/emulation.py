"""What a browse session makes its pages believe about where they run, for an agent forcing its own app's
states: the network off (`offline`), and with `emulate` a position (the permission to read it granted), a
locale (navigator.language(s), Intl and the Accept-Language header), a time zone, the color scheme and
reduced motion, a user agent, and extra request headers for the app's own origin. One per session: every
tab it has or opens later gets it, and it goes with the session.

Extra headers go to the origins named (by default the origin of the page shown when they were set), never
everywhere: a header meant for one's own app (a test flag, an API key of a staging server) must not reach
every third party the page loads. forced.py adds them to each request of those origins; Chrome's own
Network.setExtraHTTPHeaders would send them to every host. Cookie and Authorization (and the other
credential headers, redact.SECRET_HEADERS) are refused: a session's logins are its profile's."""

from __future__ import annotations

import re
import zoneinfo
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .. import redact
from ..errors import BadRequest
from ..protocol import BrowseRequest
from .device import user_agent_params
from .routes import header_lines

if TYPE_CHECKING:  # the tab holds its session's emulation (through forced.py): no import at run time
    from ..chrome.browser import BrowserContext
    from .tab import BrowseTab

LOCALE = re.compile(r"[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8}){0,4}")
TIMEZONE = re.compile(r"[A-Za-z][A-Za-z0-9_+-]{0,30}(/[A-Za-z0-9_+-]{1,30}){0,2}")
MAX_ORIGINS = 10
EVERY_ORIGIN = "*"


def origin_of(url: str) -> str | None:
    """`scheme://host[:port]` of an http(s) URL, the default port left out; None for any other."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    default = 80 if parts.scheme == "http" else 443
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}" + (f":{port}" if port not in (None, default) else "")


@dataclass(frozen=True)
class Emulation:
    offline: bool = False
    geolocation: tuple[float, float] | None = None   # latitude, longitude
    locale: str | None = None
    timezone: str | None = None
    color_scheme: str | None = None
    reduced_motion: bool = False
    user_agent: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    header_origins: tuple[str, ...] = ()   # the origins the headers go to; EVERY_ORIGIN: all of them

    async def apply(self, tab: BrowseTab, mobile: bool, browser_version: str, default_agent: str) -> None:
        """Give `tab` all of it as it is now (a new tab, or every tab after a change); `mobile`: the session's
        device is a phone, whose user agent is kept unless one is set here."""
        # Chrome's network conditions: offline fails every request as the network would
        # (net::ERR_INTERNET_DISCONNECTED) and the page sees navigator.onLine false and its `offline` event
        await tab.call("Network.emulateNetworkConditions", {"offline": self.offline, "latency": 0,
                                                             "downloadThroughput": -1, "uploadThroughput": -1})
        lat_lon = self.geolocation
        await tab.call("Emulation.setGeolocationOverride",
                       {} if lat_lon is None else {"latitude": lat_lon[0], "longitude": lat_lon[1], "accuracy": 10})
        await tab.call("Emulation.setLocaleOverride", {})  # Chrome refuses a second override over a first
        if self.locale:
            await tab.call("Emulation.setLocaleOverride", {"locale": self.locale})
        await tab.call("Emulation.setTimezoneOverride", {"timezoneId": self.timezone or ""})
        await tab.call("Emulation.setEmulatedMedia", {"features": [
            {"name": "prefers-color-scheme", "value": self.color_scheme or ""},
            {"name": "prefers-reduced-motion", "value": "reduce" if self.reduced_motion else ""}]})
        agent = user_agent_params(mobile, browser_version)
        if self.user_agent or self.locale:
            agent["userAgent"] = self.user_agent or agent["userAgent"] or default_agent
            if self.user_agent:
                agent.pop("userAgentMetadata", None)  # a phone's client hints would contradict it
            if self.locale:  # navigator.language(s) and the Accept-Language header
                agent["acceptLanguage"] = self.locale
        await tab.call("Emulation.setUserAgentOverride", agent)

    async def grant(self, context: BrowserContext) -> None:
        """The session's permission to read the position: granted while one is emulated (a page's
        request is answered at once, as a user who allowed it would), else back to Chrome's own."""
        if self.geolocation is not None:
            await context.grant_permissions(["geolocation"])
        else:
            await context.reset_permissions()

    def headers_for(self, url: str) -> tuple[tuple[str, str], ...]:
        """The extra headers a request to `url` gets: the set ones when its origin is one they go to."""
        if not self.headers:
            return ()
        if EVERY_ORIGIN in self.header_origins or origin_of(url) in self.header_origins:
            return self.headers
        return ()

    def summary(self) -> list[str]:
        """What is set, in a few words each (the snapshot's first line)."""
        parts = ["offline"] if self.offline else []
        if self.geolocation is not None:
            parts.append(f"geolocation {self.geolocation[0]:g},{self.geolocation[1]:g}")
        parts += [f"{what} {value}" for what, value in (("locale", self.locale), ("timezone", self.timezone),
                                                         ("color scheme", self.color_scheme)) if value]
        if self.reduced_motion:
            parts.append("reduced motion")
        if self.user_agent:
            parts.append("user agent")
        if self.headers:
            parts.append(f"headers {', '.join(n for n, _ in self.headers)} to {self._to()}")
        return parts

    def described(self) -> str:
        """What is set, in full (emulate's reply): header values through redact.py's rule."""
        lines = [line for line in self.summary() if not line.startswith(("headers ", "user agent"))]
        if self.user_agent:
            lines.append(f"user agent {self.user_agent!r}")
        lines += [f"header {name}: {redact.header(name, value)} (to {self._to()})" for name, value in self.headers]
        return "\n".join(lines)

    def _to(self) -> str:
        return "every origin" if EVERY_ORIGIN in self.header_origins else " ".join(self.header_origins)


EMULATE_FIELDS = ("latitude", "longitude", "locale", "timezone", "color_scheme", "reduced_motion", "user_agent",
                  "headers", "header_origins")


def wants_emulation(req: BrowseRequest) -> bool:
    """Whether `emulate` is asked to change anything (else it shows what is set)."""
    return req.reset or any(getattr(req, name) is not None for name in EMULATE_FIELDS)


def requested(current: Emulation, req: BrowseRequest, page_url: str | None) -> Emulation:
    """`current` with what `emulate` asks (all of it back to nothing first with `reset`); `page_url`: the
    page shown, whose origin extra headers go to unless `header_origins` says otherwise. bad_request for a
    value that is not one."""
    base = Emulation(offline=current.offline) if req.reset else current
    changes: dict[str, Any] = {}
    if (req.latitude is None) != (req.longitude is None):
        raise BadRequest("emulate's geolocation is `latitude` and `longitude` together (48.8566 and 2.3522)")
    if req.latitude is not None and req.longitude is not None:
        changes["geolocation"] = (req.latitude, req.longitude)
    if req.locale is not None:
        if not LOCALE.fullmatch(req.locale):
            raise BadRequest(f"{req.locale[:40]!r} is not a locale: a language tag such as fr-FR, de or pt-BR")
        changes["locale"] = req.locale
    if req.timezone is not None:
        changes["timezone"] = _timezone(req.timezone)
    if req.color_scheme is not None:
        changes["color_scheme"] = req.color_scheme
    if req.reduced_motion is not None:
        changes["reduced_motion"] = req.reduced_motion
    if req.user_agent is not None:
        if not req.user_agent.isprintable():
            raise BadRequest("a user agent is one line of printable characters")
        changes["user_agent"] = req.user_agent
    if req.headers is not None or req.header_origins is not None:
        changes |= _headers(req, base, page_url)
    return replace(base, **changes)


def _timezone(name: str) -> str:
    if not TIMEZONE.fullmatch(name):
        raise BadRequest(f"{name[:60]!r} is not a time zone: an IANA name such as Europe/Paris or America/New_York")
    try:
        zoneinfo.ZoneInfo(name)
    except zoneinfo.ZoneInfoNotFoundError:
        if zoneinfo.available_timezones():  # else this system has no time zone database: Chrome's ICU judges
            raise BadRequest(f"{name!r} is not a time zone: an IANA name such as Europe/Paris or "
                             f"America/New_York") from None
    except ValueError:
        raise BadRequest(f"{name[:60]!r} is not a time zone: an IANA name such as Europe/Paris or "
                         f"America/New_York") from None
    return name


def _headers(req: BrowseRequest, base: Emulation, page_url: str | None) -> dict[str, Any]:
    lines = header_lines(req.headers, "emulate headers") if req.headers is not None else list(base.headers)
    secret = [name for name, _ in lines if name.lower() in redact.SECRET_HEADERS]
    if secret:
        raise BadRequest(f"emulate does not send {secret[0]}: a session's cookies and credentials are its "
                         f"profile's (open with a profile, logged in there)")
    origins = _origins(req.header_origins, base, page_url, bool(lines))
    return {"headers": tuple(lines), "header_origins": tuple(origins) if lines else ()}


def _origins(given: list[str] | None, base: Emulation, page_url: str | None, wanted: bool) -> list[str]:
    """The origins extra headers go to: those `given`, else those set before, else the page's own."""
    if given is None:
        if base.header_origins:
            return list(base.header_origins)
        page = origin_of(page_url or "")
        if page is None and wanted:
            raise BadRequest("extra headers go to the page's own origin, and no http(s) page is shown: open "
                             "your app first, or give `header_origins`")
        return [page] if page else []
    if len(given) > MAX_ORIGINS:
        raise BadRequest(f"at most {MAX_ORIGINS} header origins (or * for every one)")
    origins = []
    for one in given:
        origin = one if one == EVERY_ORIGIN else origin_of(one)
        if origin is None:
            raise BadRequest(f"{one[:80]!r} is not an origin: http(s)://host[:port], or * for every one")
        origins.append(origin)
    return origins
